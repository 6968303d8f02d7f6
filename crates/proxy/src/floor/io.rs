//! Small socket helpers shared by the phases: a read into an [`IoBuf`] and a vectored
//! write-all, both bounded by a deadline.

use crate::floor::buf::IoBuf;
use std::future::Future;
use std::io::{self, IoSlice};
use std::task::Poll;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::error::Elapsed;
use tokio::time::{timeout_at, Instant};

/// Why an I/O step failed.
#[derive(Debug)]
pub enum IoFail {
    /// The deadline passed.
    Timeout,
    /// The socket failed (reset, closed, ...).
    Io,
}

impl From<io::Error> for IoFail {
    fn from(_: io::Error) -> Self {
        IoFail::Io
    }
}

/// Reads once into `buf`'s spare room; returns bytes read (0 = EOF).
pub async fn read_some<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut IoBuf,
    deadline: Instant,
) -> Result<usize, IoFail> {
    if buf.free() == 0 {
        return Err(IoFail::Io);
    }
    let n = timeout_at(deadline, r.read_buf(buf.for_read())).await.map_err(|_| IoFail::Timeout)??;
    Ok(n)
}

/// Writes every byte of `parts`, in order, with as few syscalls as the socket allows.
pub async fn write_all_parts<W: AsyncWrite + Unpin>(
    w: &mut W,
    parts: &[&[u8]],
    deadline: Instant,
) -> Result<(), IoFail> {
    timeout_if_waiting(|| deadline, write_parts(w, parts)).await.map_err(|_| IoFail::Timeout)?
}

/// `work` bounded by `deadline`, whose timer is made only when `work` does not finish on
/// its first poll: most writes are taken whole at once, and a timer costs more than the
/// write of a short head (ADR 0023).
pub async fn timeout_if_waiting<F: Future>(
    deadline: impl FnOnce() -> Instant,
    work: F,
) -> Result<F::Output, Elapsed> {
    let mut work = std::pin::pin!(work);
    if let Poll::Ready(done) = std::future::poll_fn(|cx| Poll::Ready(work.as_mut().poll(cx))).await {
        return Ok(done);
    }
    timeout_at(deadline(), work).await
}

async fn write_parts<W: AsyncWrite + Unpin>(w: &mut W, parts: &[&[u8]]) -> Result<(), IoFail> {
    let mut first = 0;
    let mut offset = 0;
    while first < parts.len() {
        if parts[first].len() == offset {
            first += 1;
            offset = 0;
            continue;
        }
        // A vectored write only when a later non-empty part follows (a request without
        // body bytes is a plain write).
        let n = if parts[first + 1..].iter().all(|p| p.is_empty()) {
            w.write(&parts[first][offset..]).await?
        } else {
            let mut slices = [IoSlice::new(&[]); 4];
            slices[0] = IoSlice::new(&parts[first][offset..]);
            let mut n = 1;
            for p in parts[first + 1..].iter().filter(|p| !p.is_empty()).take(3) {
                slices[n] = IoSlice::new(p);
                n += 1;
            }
            w.write_vectored(&slices[..n]).await?
        };
        if n == 0 {
            return Err(IoFail::Io);
        }
        let (f, o) = advance_parts(parts, first, offset, n);
        first = f;
        offset = o;
    }
    Ok(())
}

/// Moves the (part, offset) cursor `n` bytes forward.
fn advance_parts(parts: &[&[u8]], mut first: usize, mut offset: usize, mut n: usize) -> (usize, usize) {
    while n > 0 && first < parts.len() {
        let left = parts[first].len() - offset;
        if n < left {
            return (first, offset + n);
        }
        n -= left;
        first += 1;
        offset = 0;
    }
    (first, offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_moves_across_parts() {
        let parts: [&[u8]; 3] = [b"abc", b"", b"defg"];
        assert_eq!(advance_parts(&parts, 0, 0, 2), (0, 2));
        assert_eq!(advance_parts(&parts, 0, 2, 1), (1, 0));
        assert_eq!(advance_parts(&parts, 0, 0, 5), (2, 2));
        assert_eq!(advance_parts(&parts, 0, 0, 7), (3, 0));
    }
}
