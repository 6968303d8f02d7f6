//! Upgraded connections (WebSocket and any other `Upgrade` the server accepts with 101)
//! become a byte tunnel: both directions copied until either side closes or the tunnel is
//! idle (no byte either way) for `tunnel_idle`. The copy can be paused at a safe point
//! ([`run_until`]): each direction's buffer then holds exactly the bytes it read and has not
//! written, and nothing else of the tunnel is in this process (bytes written are in the
//! kernel's send queues, bytes not yet read in its receive queues; both go with the
//! sockets). `moving` uses that to pass a tunnel to a binary upgrade's new process.

pub mod moving;

use crate::floor::buf::IoBuf;
use crate::floor::socket::Socket;
use std::cell::Cell;
use std::future::Future;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::{timeout_at, Instant};

/// Bytes a tunnel carried, for the access log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Carried {
    /// Client → server.
    pub up: u64,
    /// Server → client.
    pub down: u64,
    /// The tunnel went on in a binary upgrade's new process (these are the bytes carried
    /// here before it left).
    pub moved: bool,
}

/// Copies both ways between `client` and `server`, starting with bytes already buffered
/// on either side, until one side closes or the tunnel idles out; what it carried each way
/// (the buffered bytes included). Paused when `pause` completes: then (`true`) both copies
/// have stopped, `cbuf` holds what was read from the client and not yet written to the
/// server, `sbuf` the same the other way, and the sockets can go on elsewhere (a direction
/// that had ended reads end-of-file again there and ends the same way).
pub async fn run_until<C: AsyncRead + AsyncWrite + Unpin>(
    client: &mut C,
    cbuf: &mut IoBuf,
    server: &mut Socket,
    sbuf: &mut IoBuf,
    idle: Duration,
    pause: impl Future<Output = ()>,
) -> (Carried, bool) {
    let last = Cell::new(Instant::now());
    let (up_bytes, down_bytes) = (Cell::new(0u64), Cell::new(0u64));
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut sr, mut sw) = server.split();
    let up = copy(&mut cr, &mut sw, cbuf, &last, idle, &up_bytes);
    let down = copy(&mut sr, &mut cw, sbuf, &last, idle, &down_bytes);
    tokio::pin!(up, down, pause);
    let (mut up_done, mut down_done, mut paused) = (false, false, false);
    while !(up_done && down_done) {
        tokio::select! {
            // First: once paused, no copy may take another step.
            biased;
            () = &mut pause => { paused = true; break; }
            r = &mut up, if !up_done => { up_done = true; if r.is_err() { break; } }
            r = &mut down, if !down_done => { down_done = true; if r.is_err() { break; } }
        }
    }
    (Carried { up: up_bytes.get(), down: down_bytes.get(), moved: false }, paused)
}

/// One direction: forwards buffered bytes, then reads and forwards until EOF (then
/// half-closes the other side) or an error or the shared idle deadline. Cancel-safe at
/// every await: a write counts and drops from `buf` exactly what the socket took, and a
/// read adds to `buf` only what it read, so a dropped copy leaves in `buf` just the bytes
/// read and not yet written.
async fn copy<R, W>(
    r: &mut R,
    w: &mut W,
    buf: &mut IoBuf,
    last: &Cell<Instant>,
    idle: Duration,
    carried: &Cell<u64>,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    loop {
        let deadline = Instant::now() + idle;
        while !buf.is_empty() {
            let n = match timeout_at(deadline, w.write(buf.filled())).await {
                Err(_) => return Err(std::io::ErrorKind::TimedOut.into()),
                Ok(Ok(0)) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(Ok(n)) => n,
                Ok(Err(e)) => return Err(e),
            };
            carried.set(carried.get() + n as u64);
            buf.consume(n);
        }
        let deadline = last.get() + idle;
        // Empty here (written out above), so there is room to read into.
        match timeout_at(deadline, r.read_buf(buf.for_read())).await {
            Err(_) if last.get() + idle <= Instant::now() => return Err(std::io::ErrorKind::TimedOut.into()),
            Err(_) => continue, // the other direction was active: keep waiting
            Ok(Ok(0)) => {
                let _ = w.shutdown().await;
                return Ok(());
            }
            Ok(Ok(_)) => last.set(Instant::now()),
            Ok(Err(e)) => return Err(e),
        }
    }
}
