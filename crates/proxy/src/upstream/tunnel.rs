//! Upgraded connections (WebSocket and any other `Upgrade` the server accepts with 101)
//! become a byte tunnel: both directions copied until either side closes or the tunnel is
//! idle (no byte either way) for `tunnel_idle`.

use crate::floor::buf::IoBuf;
use crate::floor::io::write_all_parts;
use std::cell::Cell;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{timeout_at, Instant};

/// Bytes a tunnel carried, for the access log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Carried {
    /// Client → server.
    pub up: u64,
    /// Server → client.
    pub down: u64,
}

/// Copies both ways between `client` and `server`, starting with bytes already buffered
/// on either side, until one side closes or the tunnel idles out; what it carried each way
/// (the buffered bytes included).
pub async fn run<C: AsyncRead + AsyncWrite + Unpin>(
    client: &mut C,
    cbuf: &mut IoBuf,
    server: &mut TcpStream,
    sbuf: &mut IoBuf,
    idle: Duration,
) -> Carried {
    let last = Cell::new(Instant::now());
    let (up_bytes, down_bytes) = (Cell::new(0u64), Cell::new(0u64));
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut sr, mut sw) = server.split();
    let up = copy(&mut cr, &mut sw, cbuf, &last, idle, &up_bytes);
    let down = copy(&mut sr, &mut cw, sbuf, &last, idle, &down_bytes);
    tokio::pin!(up, down);
    let (mut up_done, mut down_done) = (false, false);
    while !(up_done && down_done) {
        tokio::select! {
            r = &mut up, if !up_done => { up_done = true; if r.is_err() { break; } }
            r = &mut down, if !down_done => { down_done = true; if r.is_err() { break; } }
        }
    }
    Carried { up: up_bytes.get(), down: down_bytes.get() }
}

/// One direction: forwards buffered bytes, then reads and forwards until EOF (then
/// half-closes the other side) or an error or the shared idle deadline.
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
        if !buf.is_empty() {
            let deadline = Instant::now() + idle;
            write_all_parts(w, &[buf.filled()], deadline)
                .await
                .map_err(|_| std::io::Error::other("tunnel write failed"))?;
            carried.set(carried.get() + buf.len() as u64);
            buf.clear();
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
