//! Tunnels that move to a binary upgrade's new process (issue 16). A tunnel runs until the
//! hand-over begins ([`handover_begun`]); then both copies stop at their safe point
//! (`super::run_until`), and the client's and the server's sockets go to the new process
//! with what each direction had read and not yet written (`floor::handover::Tunnel`). The
//! new process writes those bytes first and copies on, so neither side notices: no byte
//! is lost, repeated or reordered, and both TCP connections are the same ones. Only a
//! plain TCP client can move (a TLS session terminated here cannot: ADR 0016); a tunnel
//! that cannot move, or whose hand-over fails, goes on here until it ends.
//!
//! A tunnel's sockets stay where they are (the worker's io_uring, or epoll) while it runs;
//! at the pause, sockets on the ring leave it ([`leave_ring`]): a send in flight is
//! cancelled and what it had not sent goes back to the front of its direction's buffer, a
//! receive in flight is cancelled and what it had received goes to the end of its
//! direction's buffer, so the bare sockets and the buffers hold the whole tunnel.

use super::{run_until, Carried};
use crate::floor::buf::IoBuf;
use crate::floor::handover::{Moving, Tunnel};
use crate::floor::server::ServerRt;
use crate::floor::socket::Socket;
use crate::floor::stream::ClientStream;
use crate::floor::worker::Worker;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// A client end whose socket can be passed on as it is (plain TCP: no state of this
/// process's in the stream).
pub trait Movable {
    /// Whether it is plain TCP (on epoll or the ring): it can move once it left the ring.
    fn plain(&self) -> bool;
    /// The socket, when nothing but the socket holds the connection's state.
    fn movable(&self) -> Option<BorrowedFd<'_>>;
    /// Takes it off the ring, if it is there (`RingTcp::into_tokio`): bytes the ring
    /// received go to the end of `received`, bytes it had not sent to the front of `unsent`.
    fn settle(&mut self, received: &mut IoBuf, unsent: &mut IoBuf);
}

impl Movable for TcpStream {
    fn plain(&self) -> bool {
        true
    }
    fn movable(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }
    fn settle(&mut self, _: &mut IoBuf, _: &mut IoBuf) {}
}

impl Movable for ClientStream {
    fn plain(&self) -> bool {
        matches!(self, ClientStream::Plain(_) | ClientStream::Ring(_))
    }
    fn movable(&self) -> Option<BorrowedFd<'_>> {
        match self {
            ClientStream::Plain(s) => Some(s.as_fd()),
            // Only while the ring holds none of its bytes.
            ClientStream::Ring(r) => r.idle_fd(),
            ClientStream::Tls(_) | ClientStream::Piped(_) => None,
        }
    }
    fn settle(&mut self, received: &mut IoBuf, unsent: &mut IoBuf) {
        ClientStream::settle(self, received, unsent);
    }
}

impl Movable for Socket {
    fn plain(&self) -> bool {
        true
    }
    fn movable(&self) -> Option<BorrowedFd<'_>> {
        Socket::movable(self)
    }
    fn settle(&mut self, received: &mut IoBuf, unsent: &mut IoBuf) {
        Socket::settle(self, received, unsent);
    }
}

/// Where a tunnel came in, for the new process (and its logs).
#[derive(Clone, Copy)]
pub struct Origin<'a> {
    /// The listener (index in the snapshot).
    pub listener: usize,
    /// The client's address.
    pub peer: SocketAddr,
    /// `websocket`, `tls-passthrough`, `pop3`, `imap`, `smtp`.
    pub kind: &'a str,
    /// The server it goes to (counted as in flight there, in this process and the next).
    pub server: Option<&'a ServerRt>,
}

/// A tunnel ([`run_until`]), moved to a binary upgrade's new process when the hand-over begins
/// (then `moved` is set and the caller must leave both sockets alone: drop them, no
/// shutdown, no write).
pub async fn run<C: AsyncRead + AsyncWrite + Unpin + Movable>(
    worker: &Worker,
    from: Origin<'_>,
    client: &mut C,
    cbuf: &mut IoBuf,
    server: &mut Socket,
    sbuf: &mut IoBuf,
    idle: Duration,
) -> Carried {
    let mut total = Carried::default();
    let mut may_move = client.plain();
    loop {
        let pause = async {
            if may_move {
                handover_begun(worker).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        let (carried, paused) = run_until(client, cbuf, server, sbuf, idle, pause).await;
        total.up += carried.up;
        total.down += carried.down;
        if !paused {
            if !client.plain() {
                if let Some(handover) = worker.shared.handing_over() {
                    handover.note_tunnel_kept(); // it ended here during a hand-over
                }
            }
            return total;
        }
        leave_ring(client, cbuf, server, sbuf);
        match move_out(worker, from, client, cbuf, server, sbuf) {
            Ok(()) => {
                total.moved = true;
                return total;
            }
            // Not moved (counted and logged by the hand-over): it ends here.
            Err(()) => may_move = false,
        }
    }
}

/// Takes both sockets of a paused tunnel off the ring. The client's unsent bytes came from
/// the server (`sbuf`'s direction) and the server's from the client; what each received goes
/// after what its direction's buffer holds.
fn leave_ring<C: Movable>(client: &mut C, cbuf: &mut IoBuf, server: &mut Socket, sbuf: &mut IoBuf) {
    client.settle(cbuf, sbuf);
    Movable::settle(server, sbuf, cbuf);
}

/// Completes once this worker hands its connections to a binary upgrade's new process
/// (at once if it already has).
pub async fn handover_begun(worker: &Worker) {
    loop {
        let woken = worker.shutdown.notified();
        tokio::pin!(woken);
        // Registered before the check, so a hand-over signalled in between still wakes it.
        woken.as_mut().enable();
        if worker.shared.handing_over().is_some() {
            return;
        }
        woken.await;
    }
}

/// Passes the paused tunnel on: copies of both descriptors (this process's own go when
/// the caller drops the streams, which also takes them out of its epoll set), and the
/// buffered bytes, which are cleared here once they went.
fn move_out<C: Movable>(
    worker: &Worker,
    from: Origin<'_>,
    client: &C,
    cbuf: &mut IoBuf,
    server: &Socket,
    sbuf: &mut IoBuf,
) -> Result<(), ()> {
    let Some(handover) = worker.shared.handing_over() else { return Err(()) };
    let client_fd = client.movable().ok_or(())?;
    let dup = |fd: BorrowedFd<'_>| fd.try_clone_to_owned().map(std::net::TcpStream::from);
    let Some(server_fd) = server.movable() else {
        tracing::info!(peer = %from.peer, "tunnel not moved: the ring holds bytes of its server side; it ends here");
        return Err(());
    };
    let (stream, server) = match (dup(client_fd), dup(server_fd)) {
        (Ok(c), Ok(s)) => (c, s),
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!(peer = %from.peer, error = %e, "tunnel not moved: no descriptor to pass; it ends here");
            return Err(());
        }
    };
    let snap = worker.shared.snapshot.load();
    let listener = snap.listeners.get(from.listener).map(|l| l.name.clone());
    let server_name = from.server.and_then(|s| {
        let group = snap.group_of(s.id)?;
        Some((snap.groups[group].name.clone(), s.name.clone()))
    });
    let tunnel = Tunnel {
        server,
        to_server: cbuf.filled().to_vec(),
        to_client: sbuf.filled().to_vec(),
        kind: from.kind.to_string(),
        server_name,
    };
    let conn = Moving {
        stream,
        listener: listener.unwrap_or_default(),
        peer: from.peer,
        served: true,
        tunnel: Some(Box::new(tunnel)),
    };
    handover.pass(conn).map_err(drop)?;
    cbuf.clear();
    sbuf.clear();
    Ok(())
}

/// Bytes the new process starts a moved tunnel's direction with.
pub fn buffer_with(bytes: &[u8], size: usize) -> IoBuf {
    let mut buf = IoBuf::new(size.max(bytes.len()));
    buf.for_read().extend_from_slice(bytes);
    buf
}
