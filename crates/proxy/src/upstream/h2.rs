//! Phase "connect" for `server_protocol = "h2"` groups: a slot of the server (`maxconn`
//! counts its streams in flight, as it counts HTTP/1.1 requests), then the worker's
//! HTTP/2 connection to it (`floor::h2pool`), or a new one: TCP, then the HTTP/2 handshake
//! with prior knowledge (h2c; servers are reached in clear text), its driving task spawned
//! on the worker. A stream then waits, if need be, until the server's concurrent-stream
//! limit lets it open.

use crate::floor::failure::{Failure, Refusal};
use crate::floor::h2pool::Found;
use crate::floor::server::ServerRt;
use crate::floor::snapshot::Snapshot;
use crate::floor::stats::Counter;
use crate::floor::worker::Worker;
use crate::upstream::connect::NO_SERVER;
use crate::upstream::slots::{acquire_slot, ActiveGuard};
use bytes::Bytes;
use h2::client::SendRequest;
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

/// A server's HTTP/2 connection, ready for one more stream; dropping it releases the
/// slot and the in-flight count.
pub struct H2Upstream<'s> {
    /// The server.
    pub server: &'s ServerRt,
    /// The connection, with room for a stream.
    pub send: SendRequest<Bytes>,
    /// The connection was open already (another request opened it).
    pub reused: bool,
    _slot: Option<OwnedSemaphorePermit>,
    _active: ActiveGuard<'s>,
}

/// Takes a slot of server `index` of `group` and a stream on its HTTP/2 connection.
pub async fn connect<'s>(
    worker: &Worker,
    snap: &'s Snapshot,
    group: usize,
    index: usize,
) -> Result<H2Upstream<'s>, Failure> {
    let server = &**snap.group(group).servers.get(index).ok_or(Failure::internal(NO_SERVER))?;
    let slot = acquire_slot(server, snap, &worker.shared.stats).await?;
    let active = ActiveGuard::new(server);
    let (reused, send) = stream_on(worker, snap, server).await?;
    Ok(H2Upstream { server, send, reused, _slot: slot, _active: active })
}

/// A handle to `server`'s connection with room for one more stream: the worker's, or a
/// new one (opened by the first request that needs it; the others wait for it). True
/// when it was open already.
async fn stream_on(
    worker: &Worker,
    snap: &Snapshot,
    server: &ServerRt,
) -> Result<(bool, SendRequest<Bytes>), Failure> {
    let wait = snap.config.timeouts.server_response;
    let full = || Failure::server(Some(Refusal::new(504, "no HTTP/2 stream free in time")));
    // Bounded: a wait ends when the opening ends, and a second round finds its result.
    for _ in 0..3 {
        match worker.h2_pools.find(server.id) {
            Found::Ready(send) => match tokio::time::timeout(wait, send.ready()).await {
                Ok(Ok(send)) => {
                    worker.shared.stats.inc(Counter::PoolReuse);
                    return Ok((true, send));
                }
                Ok(Err(_)) => worker.h2_pools.forget(server.id), // gone: connect again
                Err(_) => return Err(full()),
            },
            Found::Wait(notify) => {
                let woken = notify.notified();
                let _ = tokio::time::timeout(snap.config.timeouts.server_connect, woken).await;
            }
            Found::Open(opening) => {
                let send = open(worker, snap, server).await?;
                opening.done(send.clone());
                return match tokio::time::timeout(wait, send.ready()).await {
                    Ok(Ok(send)) => Ok((false, send)),
                    _ => {
                        worker.h2_pools.forget(server.id);
                        Err(Failure::unanswered(false, false))
                    }
                };
            }
        }
    }
    Err(Failure::unanswered(false, true))
}

/// A new HTTP/2 connection to `server`: TCP connect and handshake within
/// `server_connect`; its task runs until the server or the switch ends it.
async fn open(worker: &Worker, snap: &Snapshot, server: &ServerRt) -> Result<SendRequest<Bytes>, Failure> {
    let stats = &worker.shared.stats;
    stats.inc(Counter::ServerConnects);
    let timeout = snap.config.timeouts.server_connect;
    let tcp = match tokio::time::timeout(timeout, TcpStream::connect(server.addr)).await {
        Ok(Ok(tcp)) => tcp,
        Ok(Err(_)) => {
            stats.inc(Counter::ConnectFailed);
            return Err(Failure::unreachable(Refusal::new(502, "could not connect to server")));
        }
        Err(_) => {
            stats.inc(Counter::ConnectTimeout);
            return Err(Failure::unreachable(Refusal::new(504, "server connect timed out")));
        }
    };
    let _ = tcp.set_nodelay(true);
    let mut builder = h2::client::Builder::new();
    // What one stream may hold here before the switch has passed it on (flow control
    // stops the server beyond it).
    builder.initial_window_size(STREAM_WINDOW).initial_connection_window_size(CONNECTION_WINDOW);
    let handshake = builder.handshake::<_, Bytes>(tcp);
    let (send, conn) = match tokio::time::timeout(timeout, handshake).await {
        Ok(Ok(pair)) => pair,
        Ok(Err(e)) => {
            tracing::warn!(server = %server.name, error = %e, "HTTP/2 handshake with server failed");
            return Err(Failure::unreachable(Refusal::new(502, "HTTP/2 handshake with server failed")));
        }
        Err(_) => return Err(Failure::unreachable(Refusal::new(504, "server connect timed out"))),
    };
    stats.inc(Counter::H2ServerConnections);
    let name = server.name.clone();
    tokio::task::spawn_local(async move {
        if let Err(e) = conn.await {
            tracing::info!(server = %name, error = %e, "HTTP/2 server connection ended");
        }
    });
    Ok(send)
}

/// Bytes of a response stream the server may send before the switch passes them on.
const STREAM_WINDOW: u32 = 64 * 1024;

/// Bytes of all the connection's streams together.
const CONNECTION_WINDOW: u32 = 1024 * 1024;
