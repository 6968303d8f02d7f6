//! Gives a restored client connection to the local web server: two `splice(2)` pumps
//! through pipes, so the bytes never enter user space (the kernel moves them from one
//! socket's buffer to the other's). A pump ends at EOF or error and half-closes the other
//! side; the relay is over when both have, and then calls the `on_end` it was given.

use rustix::pipe::{pipe, splice, SpliceFlags};
use std::io;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

/// Bytes moved per `splice` call (the pipe's default capacity is 64 KiB).
const CHUNK: usize = 64 * 1024;

/// Connects to `local` and relays `client` ⇄ local, on threads of their own: the control
/// thread that calls this must not wait for the local server's accept (a full listen
/// backlog costs a SYN retransmission, a second), or the next hand-off's READY would be
/// late. Logs and closes the client when the local server cannot be reached. `on_end` is
/// called on the relay's thread once the relay is over (both directions, or a failure).
pub(super) fn spawn(client: TcpStream, local: SocketAddr, idle: Duration, on_end: Box<dyn FnOnce() + Send>) {
    let started = std::thread::Builder::new().name("relay".into()).spawn(move || {
        relay(client, local, idle);
        on_end();
    });
    if started.is_err() {
        tracing::warn!("cannot start a relay thread; handed-off connection closed");
    }
}

fn relay(client: TcpStream, local: SocketAddr, idle: Duration) {
    if let Some(server) = connect(&client, local, idle) {
        both_ways(&client, &server);
    }
}

/// The connection to the local server for `client`, both ready to relay; `None` (logged)
/// when the local server cannot be reached.
pub(super) fn connect(client: &TcpStream, local: SocketAddr, idle: Duration) -> Option<TcpStream> {
    let server = match TcpStream::connect_timeout(&local, Duration::from_secs(2)) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(%local, error = %e, "local server unreachable; handed-off connection closed");
            return None;
        }
    };
    // Both ways: a response spliced in two writes (head, then body) would otherwise wait
    // for the client's delayed ACK (Nagle): 40 ms per keep-alive request.
    let _ = server.set_nodelay(true);
    let _ = client.set_nodelay(true);
    for s in [client, &server] {
        let _ = s.set_read_timeout(Some(idle));
    }
    Some(server)
}

/// Splices client → server here and server → client on a thread of its own; returns when
/// both are over.
pub(super) fn both_ways(client: &TcpStream, server: &TcpStream) {
    let pair = client.try_clone().and_then(|c| Ok((c, server.try_clone()?)));
    let Ok((client2, server2)) = pair else { return };
    let down = std::thread::Builder::new().name("relay-down".into()).spawn(move || pump(&server2, &client2));
    let Ok(down) = down else {
        tracing::warn!("cannot start a relay thread");
        return;
    };
    pump(client, server);
    let _ = down.join();
}

/// Moves bytes `from` → `to` until EOF or error, then half-closes `to`.
fn pump(from: &TcpStream, to: &TcpStream) {
    if let Err(e) = splice_all(from, to) {
        tracing::debug!(error = %e, "relay direction ended");
    }
    let _ = to.shutdown(Shutdown::Write);
}

fn splice_all(from: &TcpStream, to: &TcpStream) -> io::Result<()> {
    let (pipe_out, pipe_in) = pipe()?;
    loop {
        let n = splice(from, None, &pipe_in, None, CHUNK, SpliceFlags::MOVE)?;
        if n == 0 {
            return Ok(());
        }
        let mut left = n;
        while left > 0 {
            // No SPLICE_F_MORE: on a socket it corks the segment (up to 200 ms) waiting for
            // more, and the end of a response would wait for it.
            left -= splice(&pipe_out, None, to, None, left, SpliceFlags::MOVE)?;
        }
    }
}
