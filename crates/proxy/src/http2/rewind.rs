//! A stream whose first bytes were already read (by the HTTP/1.1 wing, which found the
//! HTTP/2 preface): reads give those bytes back first, then read the stream.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `inner`, with `read` (from `at` on) in front of what it reads.
pub struct Rewind<S> {
    read: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Rewind<S> {
    /// `inner`, whose first bytes `read` were read already.
    pub fn new(read: Vec<u8>, inner: S) -> Self {
        Rewind { read, at: 0, inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.at < this.read.len() {
            let n = (this.read.len() - this.at).min(buf.remaining());
            buf.put_slice(&this.read[this.at..this.at + n]);
            this.at += n;
            if this.at == this.read.len() {
                this.read = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::Rewind;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn gives_the_read_bytes_first_then_the_stream() {
        let (mut a, b) = tokio::io::duplex(64);
        tokio::io::AsyncWriteExt::write_all(&mut a, b" world").await.unwrap();
        drop(a);
        let mut r = Rewind::new(b"hello".to_vec(), b);
        let mut all = String::new();
        r.read_to_string(&mut all).await.unwrap();
        assert_eq!(all, "hello world");
    }
}
