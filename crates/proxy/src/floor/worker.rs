//! Per-worker state: one worker is one thread with one single-threaded tokio runtime
//! (DESIGN.md §4), so everything here is used without a lock: idle server connections,
//! spare buffers, the worker's scheduler instances, rule evaluation scratch, and the
//! count of requests in progress that shutdown waits for. Wings keep their own per-worker
//! spares (HTTP scratch spaces, the access-log buffer) in thread-locals.

use crate::floor::buf::BufPool;
use crate::floor::h2pool::H2Pools;
use crate::floor::parked::Parked;
use crate::floor::pool::Pools;
use crate::floor::schedulers::WorkerSchedulers;
use crate::floor::shared::Shared;
use crate::floor::snapshot::Snapshot;
use balance::Candidate;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::Notify;

/// Per-worker state; lives in an `Rc` on the worker's thread.
pub struct Worker {
    /// Shared state.
    pub shared: Arc<Shared>,
    /// Idle server connections.
    pub pools: Pools,
    /// HTTP/2 connections to servers (`server_protocol = "h2"`), shared by streams.
    pub h2_pools: H2Pools,
    /// Connection buffers.
    pub bufs: BufPool,
    /// Scheduler per group (those not shared between workers).
    pub schedulers: RefCell<WorkerSchedulers>,
    /// Reused candidate list for picks.
    pub candidates: RefCell<Vec<Candidate>>,
    /// Rule evaluation scratch (used synchronously, never across an await).
    pub eval: RefCell<rules::EvalState>,
    /// The id the next client connection gets (owners of pooled server connections).
    pub next_client: Cell<u64>,
    /// This worker's client connections, for eviction under a flood.
    pub conns: crate::floor::conns::Conns,
    /// Keep-alive connections parked out of the runtime while they wait.
    pub parked: Parked,
    /// When a refused connection was last logged (refusals are logged at most once a
    /// second, with the count since).
    pub refusals_logged: Cell<(Option<std::time::Instant>, u64)>,
    /// Requests in progress on this worker.
    pub busy: Cell<usize>,
    /// Woken when shutdown starts (the accept loops stop).
    pub shutdown: Notify,
    /// Woken, during shutdown, whenever a request ends.
    pub busy_ended: Notify,
    /// This worker has an io_uring (`[global] io = "uring"`, and the kernel allowed it).
    pub ring: bool,
    /// The snapshot this worker's requests last started on (see [`Worker::snapshot`]).
    #[allow(clippy::redundant_allocation)] // the Rc is the point: a count only this thread writes
    current: RefCell<Rc<Arc<Snapshot>>>,
}

impl Worker {
    /// A worker's state, sized from the current snapshot's limits.
    pub fn new(shared: Arc<Shared>) -> Worker {
        let snap = shared.snapshot.load();
        let limits = &snap.config.limits;
        // A head must fit in one buffer, so the buffer is at least the head limit.
        let buf_size = limits.buffer_bytes.max(limits.max_head_bytes + 1);
        Worker {
            pools: Pools::new(limits.pool_idle_per_server),
            h2_pools: H2Pools::default(),
            bufs: BufPool::new(buf_size, 16),
            schedulers: RefCell::new(WorkerSchedulers::default()),
            candidates: RefCell::new(Vec::new()),
            eval: RefCell::new(rules::EvalState::new()),
            next_client: Cell::new(1),
            conns: Default::default(),
            parked: Parked::new(Arc::clone(&shared)),
            refusals_logged: Cell::new((None, 0)),
            busy: Cell::new(0),
            shutdown: Notify::new(),
            busy_ended: Notify::new(),
            ring: false,
            current: RefCell::new(Rc::new(shared.snapshot.load_full())),
            shared: Arc::clone(&shared),
        }
    }

    /// The current snapshot, for a request (or connection) to start on and keep until it
    /// ends. Held through a per-worker `Rc`: taking it writes nothing another worker reads.
    /// `ArcSwap::load_full` here bumped the snapshot's one shared count twice per request
    /// from every worker, its cache line (with the snapshot's first fields) bouncing between
    /// the cores (ADR 0025). A worker that serves nothing after a reload keeps the previous
    /// snapshot alive until its next request (memory only: nothing reads it).
    #[allow(clippy::redundant_allocation)] // one allocation per new snapshot, none per request
    pub fn snapshot(&self) -> Rc<Arc<Snapshot>> {
        let now = self.shared.snapshot.load();
        let mut current = self.current.borrow_mut();
        if !Arc::ptr_eq(&current, &now) {
            *current = Rc::new(arc_swap::Guard::into_inner(now));
        }
        Rc::clone(&current)
    }

    /// Whether connections of `listener` are served through the ring: HTTP (plain or TLS
    /// terminated here) on a two-way listener (a one-way hand-off needs the socket with no
    /// byte held in user space) on a worker that has one. TLS passthrough and mail stay on
    /// epoll: a connection's few ping-pong exchanges batch poorly, and passthrough measured
    /// 4 % dearer on the ring (ADR 0021).
    pub fn ring_serves(&self, listener: usize) -> bool {
        if !self.ring {
            return false;
        }
        let snap = self.shared.snapshot.load();
        let (l, c) = (&snap.listeners[listener], &snap.config.listeners[listener]);
        l.protocol == config::Protocol::Http && c.mode != config::Mode::OneWay
    }

    /// A new client connection's id (unique within this worker).
    pub fn client_id(&self) -> u64 {
        let id = self.next_client.get();
        self.next_client.set(id + 1);
        id
    }

    /// True once shutdown has begun.
    pub fn shutting_down(&self) -> bool {
        self.shared.shutting_down.load(Ordering::Acquire)
    }
}

/// Counts a request in progress; shutdown waits for these (idle connections are simply
/// closed with the runtime: they have nothing in flight).
pub struct BusyGuard<'a>(&'a Worker);

impl<'a> BusyGuard<'a> {
    /// Starts counting.
    pub fn new(worker: &'a Worker) -> Self {
        worker.busy.set(worker.busy.get() + 1);
        BusyGuard(worker)
    }
}

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        let w = self.0;
        w.busy.set(w.busy.get() - 1);
        if w.shutting_down() {
            w.busy_ended.notify_waiters();
        }
    }
}

/// An open client connection, counted while it lives: the process-wide count admission
/// reads and its listener's. Owned by the connection's task, so the counts stay right
/// however it ends (including an abort, or the worker's runtime dropping it at shutdown).
/// A parked connection's count is kept by the parked table ([`Open::park`],
/// [`Open::resume`]).
pub struct Open {
    /// The worker serving it.
    pub worker: Rc<Worker>,
    /// Its listener (index in the snapshot; four bytes: every connection's future holds it).
    listener: u32,
    /// Whether dropping it uncounts the connection (false once parked).
    counted: bool,
}

impl Open {
    /// Counts a connection admission already let in (it added to the process-wide count).
    pub fn new(worker: Rc<Worker>, listener: usize) -> Open {
        if let Some(l) = worker.shared.listeners.get(listener) {
            l.connections.fetch_add(1, Ordering::Relaxed);
        }
        Open { worker, listener: listener as u32, counted: true }
    }

    /// Its listener (index in the snapshot).
    pub fn listener(&self) -> usize {
        self.listener as usize
    }

    /// Takes over the count of a connection the parked table kept.
    pub fn resume(worker: Rc<Worker>, listener: usize) -> Open {
        Open { worker, listener: listener as u32, counted: true }
    }

    /// Hands the count to the parked table (which uncounts the connection if it closes it).
    pub fn park(mut self) {
        self.counted = false;
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if self.counted {
            uncount(&self.worker.shared, self.listener());
        }
    }
}

/// A client connection of `listener` has closed: out of the process-wide and listener counts.
pub fn uncount(shared: &Shared, listener: usize) {
    shared.client_conns.fetch_sub(1, Ordering::AcqRel);
    if let Some(l) = shared.listeners.get(listener) {
        l.connections.fetch_sub(1, Ordering::Relaxed);
    }
}
