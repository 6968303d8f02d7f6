//! Phase "connect", and the choice before it. One step for every listener: choose a server
//! of the group (the one an entry chose while it is usable and untried, else the
//! scheduler's pick), take one of its `maxconn` slots, then an idle pooled connection, a
//! pre-allocated one, or a new connect. A failure is noted once ([`note_failure`]: passive
//! health, the tried set). Connection-level listeners (TLS passthrough, mail) retry
//! connect failures on other servers with [`pick_and_connect`]; the HTTP path has its own
//! loop because an exchange can fail too.

use crate::floor::failure::{Failure, Refusal};
use crate::floor::pool::Take;
use crate::floor::server::ServerRt;
use crate::floor::snapshot::Snapshot;
use crate::floor::socket::Socket;
use crate::floor::stats::Counter;
use crate::floor::worker::Worker;
use crate::upstream::passive;
use crate::upstream::pick;
use crate::upstream::prealloc::Prealloc;
use crate::upstream::slots::{acquire_slot, ActiveGuard, Tried};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

/// A connected server; dropping it releases its slot and its in-flight count.
pub struct Upstream<'s> {
    /// Index of the server in its group.
    pub index: usize,
    /// The server.
    pub server: &'s ServerRt,
    /// The connection.
    pub stream: Socket,
    /// It came from the idle pool.
    pub reused: bool,
    _slot: Option<OwnedSemaphorePermit>,
    _active: ActiveGuard<'s>,
}

/// The server to try next in `group`: `prefer` (a server id an entry chose) while it is
/// untried, else the scheduler's pick over the untried usable servers, fed `key`.
pub fn choose(
    worker: &Worker,
    snap: &Snapshot,
    group: usize,
    prefer: Option<u64>,
    tried: &Tried,
    key: Option<&[u8]>,
) -> Option<usize> {
    let g = snap.group(group);
    let preferred =
        prefer.and_then(|id| g.servers.iter().position(|s| s.id == id)).filter(|i| !tried.contains(*i));
    preferred.or_else(|| pick::pick(worker, snap, group, tried, key))
}

/// Takes a slot of server `index` of `group` and connects to it (reusing an idle pooled
/// connection `pool` allows — `None`: never — or `prealloc` when it goes to that server).
/// A new connection goes on the worker's ring when it has one.
pub async fn connect<'s>(
    worker: &Worker,
    snap: &'s Snapshot,
    group: usize,
    index: usize,
    pool: Option<Take>,
    prealloc: Option<Prealloc>,
) -> Result<Upstream<'s>, Failure> {
    connect_on(worker, snap, (group, index), pool, prealloc, worker.ring).await
}

/// [`connect`], a new connection on the ring only when `ring`.
async fn connect_on<'s>(
    worker: &Worker,
    snap: &'s Snapshot,
    (group, index): (usize, usize),
    pool: Option<Take>,
    prealloc: Option<Prealloc>,
    ring: bool,
) -> Result<Upstream<'s>, Failure> {
    let server = &**snap.group(group).servers.get(index).ok_or(Failure::internal(NO_SERVER))?;
    let slot = acquire_slot(server, snap, &worker.shared.stats).await?;
    let active = ActiveGuard::new(server);
    let (stream, reused) = open(worker, snap, server, (pool, prealloc), ring).await?;
    Ok(Upstream { index, server, stream, reused, _slot: slot, _active: active })
}

/// The refusal when no server of the group can be tried.
pub const NO_SERVER: Refusal = Refusal::new(503, "no server available");

/// An idle pooled connection to the server, else `prealloc` (a connection to it started at
/// accept), else a new one (on the worker's ring when `ring`). Returns the stream and
/// whether it was reused.
async fn open(
    worker: &Worker,
    snap: &Snapshot,
    server: &ServerRt,
    (pool, prealloc): (Option<Take>, Option<Prealloc>),
    ring: bool,
) -> Result<(Socket, bool), Failure> {
    let stats = &worker.shared.stats;
    if let Some(which) = pool {
        let (stream, discarded) = worker.pools.take(server.id, which);
        if discarded > 0 {
            // Closed by the server, or readable: bytes nobody asked for must reach no one.
            (0..discarded).for_each(|_| stats.inc(Counter::PoolDiscarded));
            tracing::info!(server = %server.name, discarded, "idle pooled connections closed or sent bytes; dropped");
        }
        if let Some(stream) = stream {
            stats.inc(Counter::PoolReuse);
            return Ok((stream, true));
        }
    }
    if let Some(early) = prealloc.filter(|p| p.server == server.id) {
        if let Some(stream) = early.finish(snap.config.timeouts.server_connect).await {
            stats.inc(Counter::PreallocatedUsed);
            return Ok((Socket::new(stream, ring), false));
        }
    }
    stats.inc(Counter::ServerConnects);
    let timeout = snap.config.timeouts.server_connect;
    match tokio::time::timeout(timeout, TcpStream::connect(server.addr)).await {
        Ok(Ok(stream)) => {
            let _ = stream.set_nodelay(true);
            Ok((Socket::new(stream, ring), false))
        }
        Ok(Err(_)) => {
            stats.inc(Counter::ConnectFailed);
            Err(Failure::unreachable(Refusal::new(502, "could not connect to server")))
        }
        Err(_) => {
            stats.inc(Counter::ConnectTimeout);
            Err(Failure::unreachable(Refusal::new(504, "server connect timed out")))
        }
    }
}

/// Notes a failure of server `index`: passive health counts it and the request does not
/// try the server again — unless the failure is not the server's (a stale pooled
/// connection, the client, the switch's own limits).
pub fn note_failure(
    worker: &Worker,
    snap: &Snapshot,
    group: usize,
    index: usize,
    f: &Failure,
    tried: &mut Tried,
) {
    if !f.blames_server {
        return;
    }
    let g = snap.group(group);
    if let Some(server) = g.servers.get(index) {
        if let Some(r) = f.answer {
            tracing::warn!(server = %server.name, addr = %server.addr, reason = r.reason, "server failed");
        }
        passive::on_failure(g, server, &worker.shared.stats, &worker.shared.weights_epoch);
    }
    tried.insert(index);
}

/// Connects to a server of `group` for a connection-level listener: `prefer` first while
/// it is there, then the scheduler's picks (fed `key`), trying another server on a connect
/// failure up to `limits.retries` more times. The failure says why none was reached.
///
/// The connection stays on epoll, as these listeners' client sockets do: a TLS handshake
/// or a mail dialogue is a few small ping-pong exchanges, which batch poorly on the ring
/// (each costs a reaper cycle where epoll makes one plain read or write). Measured on TLS
/// passthrough, same binary: 1.10× HAProxy's CPU per connection with the server on the
/// ring, 1.00× with it on epoll (ADR 0024).
pub async fn pick_and_connect<'s>(
    worker: &Worker,
    snap: &'s Snapshot,
    group: usize,
    prefer: Option<u64>,
    key: Option<&[u8]>,
) -> Result<Upstream<'s>, Failure> {
    let stats = &worker.shared.stats;
    let mut tried = Tried::default();
    let mut last = Failure::internal(NO_SERVER);
    for attempt in 0..=snap.config.limits.retries {
        let Some(index) = choose(worker, snap, group, prefer, &tried, key) else {
            stats.inc(Counter::NoServer);
            tracing::warn!(group = %snap.group(group).name, "no usable server");
            return Err(last);
        };
        // Connection-level sessions never take (or leave) pooled connections.
        match connect_on(worker, snap, (group, index), None, None, false).await {
            Ok(up) => {
                passive::on_success(up.server);
                return Ok(up);
            }
            Err(f) => {
                note_failure(worker, snap, group, index, &f, &mut tried);
                if !f.may_retry(false) || attempt == snap.config.limits.retries {
                    return Err(f);
                }
                stats.inc(Counter::Retries);
                last = f;
            }
        }
    }
    Err(last)
}
