//! A worker: one thread, one single-threaded tokio runtime, its own SO_REUSEPORT listening
//! sockets, connection pools, buffers and scheduler state (DESIGN.md §4). Nothing here is
//! shared with other workers except [`Shared`] (snapshot, counters, shutdown).

use crate::access_log::{AccessLog, Sink};
use crate::balancing::WorkerSchedulers;
use crate::buf::BufPool;
use crate::pool::Pools;
use crate::session;
use crate::snapshot::Snapshot;
use crate::stats::{Counter, Stats};
use arc_swap::ArcSwap;
use balance::Candidate;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// State shared by all workers and the control thread.
pub struct Shared {
    /// Current config generation.
    pub snapshot: ArcSwap<Snapshot>,
    /// Counters.
    pub stats: Stats,
    /// Client connections open, all workers.
    pub client_conns: AtomicUsize,
    /// Set once on SIGTERM / shutdown.
    pub shutting_down: AtomicBool,
    /// Woken once when `shutting_down` is set.
    pub shutdown_notify: Notify,
    /// Client addresses a `STICKY_IP` rule pinned to a server.
    pub sticky_ip: crate::sticky::StickyIp,
    /// The last server each client address used (pre-allocation).
    pub last_server: crate::prealloc::LastServer,
    /// Recipients SMTP servers refused after the switch had accepted them.
    pub smtp_refusals: crate::smtp::Refusals,
    /// TLS session IDs servers issued → server (passthrough listeners).
    pub tls_sessions: crate::tls_pass::TlsSessions,
    /// Bumped whenever the health control loop changes an effective weight: schedulers
    /// rebuild when it moves.
    pub weights_epoch: std::sync::atomic::AtomicU64,
    /// Per-listener traffic, in config order.
    pub listeners: Vec<crate::live::ListenerLive>,
    /// When the switch started.
    pub started: std::time::Instant,
    /// Held by whoever builds and stores a new snapshot (reload, admin edits, the health
    /// loop dropping servers that finished leaving), so no update is lost between them.
    pub snapshot_writer: std::sync::Mutex<()>,
}

impl Shared {
    /// Rebuilds the current snapshot from its own config (generation + 1): servers that
    /// finished leaving drop out. Rules and everything else carry over.
    pub fn rebuild_snapshot(&self) {
        let _writer = self.snapshot_writer.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.snapshot.load_full();
        let parts = crate::snapshot::ListenerParts {
            rules: current.listeners.iter().map(|l| l.rules.clone()).collect(),
            tls: current.listeners.iter().map(|l| l.tls.clone()).collect(),
        };
        let next = Snapshot::build(current.config.clone(), parts, Some(&current), current.generation + 1);
        self.snapshot.store(Arc::new(next));
    }
}

/// Per-worker state; lives in an `Rc` on the worker's thread.
pub struct Worker {
    /// Shared state.
    pub shared: Arc<Shared>,
    /// Idle server connections.
    pub pools: Pools,
    /// Connection buffers.
    pub bufs: BufPool,
    /// Per-request scratch space (heads, output buffer, server buffer).
    pub scratch: RefCell<Vec<session::Scratch>>,
    /// Scheduler per group (those not shared between workers).
    pub schedulers: RefCell<WorkerSchedulers>,
    /// Reused candidate list for picks.
    pub candidates: RefCell<Vec<Candidate>>,
    /// Access log (used when the snapshot says it is enabled).
    pub log: AccessLog,
    /// Rule evaluation scratch (used synchronously, never across an await).
    pub eval: RefCell<rules::EvalState>,
    /// Requests in progress on this worker.
    pub busy: Cell<usize>,
    /// Woken when shutdown starts (the accept loops stop).
    pub shutdown: Notify,
    /// Woken, during shutdown, whenever a request ends.
    pub busy_ended: Notify,
}

impl Worker {
    fn new(shared: Arc<Shared>, sink: Sink) -> Worker {
        let snap = shared.snapshot.load();
        let limits = &snap.config.limits;
        // A head must fit in one buffer, so the buffer is at least the head limit.
        let buf_size = limits.buffer_bytes.max(limits.max_head_bytes + 1);
        Worker {
            pools: Pools::new(limits.pool_idle_per_server),
            bufs: BufPool::new(buf_size, 16),
            scratch: RefCell::new(Vec::new()),
            schedulers: RefCell::new(WorkerSchedulers::default()),
            candidates: RefCell::new(Vec::new()),
            log: AccessLog::new(sink),
            eval: RefCell::new(rules::EvalState::new()),
            busy: Cell::new(0),
            shutdown: Notify::new(),
            busy_ended: Notify::new(),
            shared: Arc::clone(&shared),
        }
    }

    /// True once shutdown has begun.
    pub fn shutting_down(&self) -> bool {
        self.shared.shutting_down.load(Ordering::Acquire)
    }
}

/// Runs one worker until shutdown completes. `listeners[i]` serves snapshot listener `i`.
pub fn run(shared: Arc<Shared>, listeners: Vec<std::net::TcpListener>, sink: Sink) {
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "worker runtime failed to start");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        let worker = Rc::new(Worker::new(shared, sink));
        for (index, l) in listeners.into_iter().enumerate() {
            match TcpListener::from_std(l) {
                Ok(l) => drop(tokio::task::spawn_local(accept_loop(Rc::clone(&worker), l, index))),
                Err(e) => tracing::error!(error = %e, "listener registration failed"),
            }
        }
        tokio::task::spawn_local(housekeeping(Rc::clone(&worker)));
        wait_for_shutdown(&worker).await;
        worker.log.flush();
    });
}

async fn accept_loop(worker: Rc<Worker>, listener: TcpListener, index: usize) {
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = worker.shutdown.notified() => return,
        };
        let (stream, peer) = match accepted {
            Ok(pair) => pair,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        if !admit(&worker) {
            continue;
        }
        let _ = stream.set_nodelay(true);
        tokio::task::spawn_local(session::serve(Rc::clone(&worker), stream, peer, index));
    }
}

/// Admission control at accept (seed 003 §2.2): over the connection limit, close at once.
fn admit(worker: &Worker) -> bool {
    let shared = &worker.shared;
    let max = shared.snapshot.load().config.limits.max_client_connections;
    let open = shared.client_conns.fetch_add(1, Ordering::AcqRel);
    if open >= max {
        shared.client_conns.fetch_sub(1, Ordering::AcqRel);
        shared.stats.inc(Counter::RefusedConnLimit);
        tracing::warn!(open, max, "client connection refused: max_client_connections reached");
        return false;
    }
    shared.stats.inc(Counter::Accepted);
    true
}

/// Flushes the access log and sweeps the pools, periodically.
async fn housekeeping(worker: Rc<Worker>) {
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut ticks = 0u32;
    loop {
        tick.tick().await;
        worker.log.flush();
        ticks = ticks.wrapping_add(1);
        if ticks.is_multiple_of(4) {
            let snap = worker.shared.snapshot.load();
            let live = |id: u64| snap.groups.iter().any(|g| g.servers.iter().any(|s| s.id == id));
            worker.pools.sweep(snap.config.timeouts.pool_idle, live);
        }
    }
}

/// Waits for the shutdown signal, stops accepting, lets requests in progress finish within
/// the grace period, then returns: the runtime is dropped with every remaining session, which
/// closes idle keep-alive connections at once.
async fn wait_for_shutdown(worker: &Rc<Worker>) {
    loop {
        let notified = worker.shared.shutdown_notify.notified();
        if worker.shutting_down() {
            break;
        }
        notified.await;
    }
    worker.shutdown.notify_waiters();
    let grace = worker.shared.snapshot.load().config.global.grace_period;
    let drained = async {
        while worker.busy.get() > 0 {
            worker.busy_ended.notified().await;
        }
    };
    if tokio::time::timeout(grace, drained).await.is_err() {
        tracing::warn!(
            left = worker.busy.get(),
            "grace period over; closing connections with requests in progress"
        );
    }
}
