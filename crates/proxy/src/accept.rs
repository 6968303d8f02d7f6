//! A worker thread's life: its runtime, one accept loop per listener with admission
//! control, the protocol dispatch of each accepted connection to its wing, the periodic
//! housekeeping, and the graceful end on shutdown.

use crate::floor::conns::{ConnState, Evicted, Slot, Watch};
use crate::floor::handover::Moving;
use crate::floor::shared::Shared;
use crate::floor::socket::Socket;
use crate::floor::stats::{Counter, Stats};
use crate::floor::stream::{handshake, ClientStream};
use crate::floor::uring::listen::Listening;
use crate::floor::worker::{Open, Worker};
use crate::observe::access_log::{self, LogOutput};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;

/// Runs one worker until shutdown completes. `listeners[i]` serves snapshot listener `i`.
/// `adopted` brings the connections a binary upgrade's old process hands over.
pub fn run(
    shared: Arc<Shared>,
    listeners: Vec<std::net::TcpListener>,
    log: Arc<LogOutput>,
    adopted: tokio::sync::mpsc::UnboundedReceiver<Moving>,
) {
    let ring = wants_ring(&shared) && install_ring(shared.snapshot.load().config.global.uring_multishot);
    let mut builder = tokio::runtime::Builder::new_current_thread();
    if ring {
        // What the tasks queued for the ring during a turn goes to the kernel before the
        // thread sleeps in epoll.
        builder.on_thread_park(crate::floor::uring::driver::flush);
    }
    let rt = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "worker runtime failed to start");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        access_log::install(log);
        let mut worker = Worker::new(shared);
        worker.ring = ring;
        let worker = Rc::new(worker);
        if ring {
            tokio::task::spawn_local(crate::floor::uring::reaper());
        }
        crate::handoff::worker::set(&worker);
        for (index, l) in listeners.into_iter().enumerate() {
            // Accepted sockets inherit TCP_NODELAY from their listener (Linux clones the
            // listener's options): set once here, not by a system call per connection.
            let _ = socket2::SockRef::from(&l).set_nodelay(true);
            match Listening::new(l, worker.ring_serves(index)) {
                Ok(l) => {
                    let accepting = Stats::on_listener(index, accept_loop(Rc::clone(&worker), l, index));
                    drop(tokio::task::spawn_local(accepting));
                }
                Err(e) => tracing::error!(error = %e, "listener registration failed"),
            }
        }
        tokio::task::spawn_local(housekeeping(Rc::clone(&worker)));
        tokio::task::spawn_local(resume_parked(Rc::clone(&worker)));
        tokio::task::spawn_local(crate::upgrade::adopt_loop(Rc::clone(&worker), adopted, spawn_http));
        wait_for_shutdown(&worker).await;
        access_log::flush();
    });
}

/// Whether the config asks for io_uring.
fn wants_ring(shared: &Shared) -> bool {
    shared.snapshot.load().config.global.io == config::IoModel::Uring
}

/// This worker thread's ring; `false` (logged) where the kernel refuses it: epoll serves.
fn install_ring(multishot: bool) -> bool {
    match crate::floor::uring::install(multishot) {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(error = %e, "io_uring unavailable, this worker uses epoll");
            false
        }
    }
}

async fn accept_loop(worker: Rc<Worker>, listener: Listening, index: usize) {
    loop {
        // Made before the check: a stop signalled in between still wakes it.
        let stop = worker.shutdown.notified();
        if worker.shutting_down() {
            return;
        }
        if worker.shared.handing_over().is_some() {
            // Also when the signal came while this loop was busy with a connection: a
            // connection accepted after a binary upgrade's hand-over would not be handed on.
            // The socket stays here in case the new process dies and it is taken back.
            stop.await;
            continue;
        }
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop => continue,
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
        let state: Slot = Rc::new(Watch::new());
        let open = Open::new(Rc::clone(&worker), index);
        if is_plain_http(&worker, index) {
            let stream = match worker.ring_serves(index) {
                true => match stream.into_std() {
                    Ok(s) => ClientStream::Ring(crate::floor::uring::RingTcp::new(s)),
                    Err(_) => continue,
                },
                false => match stream.into_tokio() {
                    Ok(s) => ClientStream::Plain(s),
                    Err(_) => continue,
                },
            };
            let client = crate::http::client(&open, stream, peer, Rc::clone(&state));
            spawn_http(&worker, open, client, state);
        } else if worker.ring_serves(index) {
            // TLS terminated over the ring (the handshake's state and its first bytes too).
            let Ok(stream) = stream.into_std() else { continue };
            spawn_tls_on_ring(&worker, open, stream, peer, state);
        } else {
            let Ok(stream) = stream.into_tokio() else { continue };
            let task = tokio::task::spawn_local(Stats::on_listener(
                index,
                dispatch(open, stream, peer, Rc::clone(&state)),
            ));
            worker.conns.add(state, task.abort_handle());
        }
    }
}

/// Spawns a plain HTTP connection's task, without the dispatch layer: every byte of this
/// future is held by each silent connection (issue 17's 1 KiB target). Boxed because tokio
/// aligns a task's cell to 128 bytes: a pointer keeps the cell at 128, and the future goes
/// into an ordinary allocation of its own size.
pub(crate) fn spawn_http(worker: &Worker, open: Open, client: crate::http::Client, state: Slot) {
    let listener = open.listener();
    let task = tokio::task::spawn_local(Box::pin(Stats::on_listener(listener, serve_http(open, client))));
    worker.conns.add(state, task.abort_handle());
}

/// An HTTP connection: HTTP/1.x, unless it opens with the HTTP/2 preface on a listener
/// that takes it (then the `http2` wing serves it, with the bytes already read). The wing
/// is passed as a function item, which takes no room in the future every silent
/// connection holds (a wrapping future would hold a second copy of the HTTP/1.x one).
fn serve_http(open: Open, client: crate::http::Client) -> impl std::future::Future<Output = ()> {
    crate::http::serve(open, client, crate::http2::serve_after_preface)
}

/// Serves parked connections again when their sockets turn readable (the next request,
/// or the client's close), a batch at a time.
async fn resume_parked(worker: Rc<Worker>) {
    if !worker.parked.enabled() {
        return;
    }
    let fd = match worker.parked.watch() {
        Ok(fd) => fd,
        Err(e) => {
            // Nothing would wake a parked connection: park none.
            worker.parked.disable();
            tracing::warn!(error = %e, "parked connections cannot be watched; none will park");
            return;
        }
    };
    loop {
        let Ok(mut guard) = fd.readable().await else {
            worker.parked.disable();
            return;
        };
        let taken = worker.parked.take_ready(fd.get_ref(), |r| {
            let open = Open::resume(Rc::clone(&worker), r.listener as usize);
            if worker.shutting_down() {
                return; // closed, and uncounted with `open`
            }
            let state: Slot = Rc::new(Watch::with(ConnState::Idle));
            let ring = worker.ring_serves(r.listener as usize);
            if let Some(client) = crate::http::resume(r, Rc::clone(&state), ring) {
                spawn_http(&worker, open, client, state);
            }
        });
        if taken < crate::floor::parked::BATCH {
            guard.clear_ready();
        } else {
            drop(guard);
            tokio::task::yield_now().await;
        }
    }
}

/// Admission control at accept (seed 003 §2.2). At the connection limit, room is made by
/// closing this worker's oldest connection that has not sent a request (then its oldest
/// idle keep-alive one), so a flood of silent connections cannot lock clients out; with
/// none to close, the new connection is closed at once. Refusals are counted, and logged
/// at most once a second.
fn admit(worker: &Worker) -> bool {
    let shared = &worker.shared;
    let max = shared.snapshot.load().config.limits.max_client_connections;
    let open = shared.client_conns.fetch_add(1, Ordering::AcqRel);
    if open >= max {
        match evict_one(worker) {
            Some(Evicted::Fresh) => shared.stats.inc(Counter::EvictedFresh),
            Some(Evicted::Idle) => shared.stats.inc(Counter::EvictedIdle),
            None => {
                shared.client_conns.fetch_sub(1, Ordering::AcqRel);
                shared.stats.inc(Counter::RefusedConnLimit);
                log_refusal(worker, open, max);
                return false;
            }
        }
    }
    shared.stats.inc(Counter::Accepted);
    true
}

/// Closes the oldest connection that has not sent a complete request, else the parked
/// connection that has waited longest, else the oldest idle keep-alive one.
fn evict_one(worker: &Worker) -> Option<Evicted> {
    if worker.conns.evict(ConnState::Fresh) {
        Some(Evicted::Fresh)
    } else if worker.parked.evict_oldest() || worker.conns.evict(ConnState::Idle) {
        Some(Evicted::Idle)
    } else {
        None
    }
}

/// One WARN per second at most for refused connections, with how many there were.
fn log_refusal(worker: &Worker, open: usize, max: usize) {
    let now = std::time::Instant::now();
    let (last, count) = worker.refusals_logged.get();
    let count = count + 1;
    if last.is_some_and(|at| now.duration_since(at) < Duration::from_secs(1)) {
        worker.refusals_logged.set((last, count));
        return;
    }
    worker.refusals_logged.set((Some(now), 0));
    tracing::warn!(
        open,
        max,
        refused = count,
        "client connections refused: max_client_connections reached and none could be closed"
    );
}

/// Flushes the access log, closes connections that waited `client_idle` for a request,
/// asks those that waited `PARK_AFTER` to park, and, once a second, sweeps the pools and
/// frees the spare buffers and scratch spaces the load did not need.
async fn housekeeping(worker: Rc<Worker>) {
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut ticks = 0u32;
    loop {
        tick.tick().await;
        access_log::flush();
        let idle = worker.shared.snapshot.load().config.timeouts.client_idle;
        let expired = worker.conns.sweep(idle, crate::floor::parked::PARK_AFTER) + worker.parked.sweep(idle);
        for _ in 0..expired {
            worker.shared.stats.inc(Counter::IdleTimeout);
        }
        ticks = ticks.wrapping_add(1);
        if ticks.is_multiple_of(4) {
            worker.bufs.trim();
            crate::http::scratch::trim();
            crate::floor::uring::driver::trim();
            let snap = worker.shared.snapshot.load();
            let live = |id: u64| snap.groups.iter().any(|g| g.servers.iter().any(|s| s.id == id));
            worker.pools.sweep(snap.config.timeouts.pool_idle, live);
            worker.h2_pools.sweep(snap.config.timeouts.pool_idle, live);
        }
    }
}

/// Waits for the shutdown signal, stops accepting, lets requests in progress finish within
/// the grace period, then returns: the runtime is dropped with every remaining session, which
/// closes idle keep-alive connections at once (parked ones close when shutdown starts).
/// A binary upgrade's hand-over, signalled the same way, comes first (`upgrade`).
async fn wait_for_shutdown(worker: &Rc<Worker>) {
    let mut handed_over = false;
    loop {
        let notified = worker.shared.shutdown_notify.notified();
        if worker.shutting_down() {
            break;
        }
        let handing_over = worker.shared.handing_over().is_some();
        if handing_over != handed_over {
            handed_over = handing_over;
            if handing_over {
                crate::upgrade::hand_over(worker);
            } else {
                worker.shutdown.notify_waiters(); // taken back: the accept loops go on
                tracing::info!("the new process is gone: accepting again");
            }
        }
        notified.await;
    }
    worker.shutdown.notify_waiters();
    worker.parked.close_all();
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

/// Whether the listener speaks HTTP without TLS termination (the connection goes straight
/// to the HTTP wing).
fn is_plain_http(worker: &Worker, listener: usize) -> bool {
    let snap = worker.shared.snapshot.load();
    let l = &snap.listeners[listener];
    l.protocol == config::Protocol::Http && l.tls.is_none()
}

/// Hands a new connection to the wing of its listener's protocol (plain HTTP goes straight
/// there, see `accept_loop`), counted as open (per listener and in all) until the wing is
/// done with it.
async fn dispatch(open: Open, stream: TcpStream, peer: SocketAddr, state: Slot) {
    let (worker, listener) = (Rc::clone(&open.worker), open.listener());
    let (protocol, acceptor) = {
        let snap = worker.shared.snapshot.load();
        let l = &snap.listeners[listener];
        (l.protocol, l.tls.clone())
    };
    // Connection-level sessions are never evicted: only HTTP marks itself fresh or idle.
    if protocol != config::Protocol::Http {
        state.set(ConnState::Busy);
    }
    // The wings' futures are boxed: a connection's task holds only the one its protocol
    // needs, and a silent HTTP connection stays small (the other wings' state is larger).
    match protocol {
        config::Protocol::Tls => {
            Box::pin(crate::tls::passthrough::serve(Rc::clone(&worker), stream, peer, listener)).await
        }
        config::Protocol::Smtp => {
            Box::pin(crate::mail::smtp::serve(Rc::clone(&worker), stream, peer, listener)).await
        }
        config::Protocol::Pop3 | config::Protocol::Imap => {
            Box::pin(crate::mail::login::serve(Rc::clone(&worker), stream, peer, listener)).await
        }
        config::Protocol::Http => match acceptor {
            None => {
                let client = crate::http::client(&open, ClientStream::Plain(stream), peer, state);
                serve_http(open, client).await
            }
            Some(acceptor) => serve_tls(open, Socket::Tcp(stream), peer, state, acceptor).await,
        },
    }
}

/// A connection to a TLS-terminating HTTP listener: the handshake, then HTTP/2 (ALPN `h2`)
/// or HTTP/1.x, over tokio's socket or the ring's.
async fn serve_tls(
    open: Open,
    socket: Socket,
    peer: SocketAddr,
    state: Slot,
    acceptor: tokio_rustls::TlsAcceptor,
) {
    let worker = Rc::clone(&open.worker);
    let stream = match Box::pin(handshake(&worker, acceptor, socket, peer)).await {
        Some(tls) => ClientStream::Tls(Box::new(tls)),
        None => return,
    };
    if crate::http2::negotiated(&stream) {
        return Box::pin(crate::http2::serve(open, stream, peer, state)).await;
    }
    let client = crate::http::client(&open, stream, peer, state);
    serve_http(open, client).await
}

/// A TLS-terminating HTTP listener's connection that the ring serves.
fn spawn_tls_on_ring(
    worker: &Rc<Worker>,
    open: Open,
    stream: std::net::TcpStream,
    peer: SocketAddr,
    state: Slot,
) {
    let index = open.listener();
    let acceptor = worker.shared.snapshot.load().listeners[index].tls.clone();
    let Some(acceptor) = acceptor else { return };
    let socket = Socket::Ring(crate::floor::uring::RingTcp::new(stream));
    let task = tokio::task::spawn_local(Stats::on_listener(
        index,
        serve_tls(open, socket, peer, Rc::clone(&state), acceptor),
    ));
    worker.conns.add(state, task.abort_handle());
}
