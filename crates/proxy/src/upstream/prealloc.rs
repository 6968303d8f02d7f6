//! Pre-allocation (seed 000 §3.2, seed 001 §II.B): a client address's next connection
//! starts a connection to the server that address used last, while its request is still
//! being read. If the route picks that server, the request leaves without a connect wait;
//! if not, the connection is simply not used (it is closed with the client connection).
//!
//! The connect is started by polling `TcpStream::connect` once at accept: that sends the
//! SYN, and the kernel completes the handshake while the request head arrives. Listeners
//! with `preallocate = false` (the default) pay nothing: no table lookup, no field set.

use crate::floor::snapshot::Snapshot;
use crate::floor::stats::Counter;
use crate::floor::worker::Worker;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::net::TcpStream;

type Connecting = Pin<Box<dyn Future<Output = io::Result<TcpStream>>>>;

/// A connection started ahead of the request.
pub struct Prealloc {
    /// The server it goes to.
    pub server: u64,
    state: State,
}

enum State {
    Connecting(Connecting),
    Done(io::Result<TcpStream>),
}

/// Starts a connection to the last server of `peer`'s address, when the listener asks for
/// it, the address is known, its server is still configured and this worker has no idle
/// connection to it already.
pub fn start(worker: &Worker, snap: &Snapshot, listener: usize, peer: SocketAddr) -> Option<Prealloc> {
    if !snap.listeners[listener].preallocate {
        return None;
    }
    let server = worker.shared.last_server.get(peer.ip())?;
    let addr = snap.groups.iter().flat_map(|g| g.servers.iter()).find(|s| s.id == server)?.addr;
    if worker.pools.has_idle(server) {
        return None;
    }
    let mut connecting: Connecting = Box::pin(TcpStream::connect(addr));
    // One poll issues the non-blocking connect (the SYN goes out now).
    let state = match connecting.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(result) => State::Done(result),
        Poll::Pending => State::Connecting(connecting),
    };
    worker.shared.stats.inc(Counter::Preallocated);
    Some(Prealloc { server, state })
}

impl Prealloc {
    /// The connection, once established (waiting at most `timeout` for the handshake).
    pub async fn finish(self, timeout: Duration) -> Option<TcpStream> {
        let stream = match self.state {
            State::Done(result) => result.ok()?,
            State::Connecting(fut) => tokio::time::timeout(timeout, fut).await.ok()?.ok()?,
        };
        let _ = stream.set_nodelay(true);
        Some(stream)
    }
}
