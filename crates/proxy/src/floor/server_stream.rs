//! A connection to a server: a tokio socket, or on a worker with a ring (`[global] io =
//! "uring"`) one served by the ring (`floor::uring`). Either reads and writes as the phases
//! expect; a pooled idle one answers "still usable?" without a syscall (the reactor's
//! readiness, or the ring's receive kept in flight while it waits in the pool).

use crate::floor::buf::IoBuf;
use crate::floor::uring::RingTcp;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A connection to a server.
pub enum ServerStream {
    /// Through tokio's epoll.
    Tcp(TcpStream),
    /// Through the worker's ring.
    Ring(RingTcp),
}

impl ServerStream {
    /// A new connection, moved into the ring when `ring` (the worker has one).
    pub fn new(stream: TcpStream, ring: bool) -> ServerStream {
        if ring {
            if let Ok(std) = stream.into_std() {
                return ServerStream::Ring(RingTcp::new(std));
            }
            // `into_std` failed: the socket is gone with it; the exchange fails on it.
            return ServerStream::Ring(RingTcp::closed());
        }
        ServerStream::Tcp(stream)
    }

    /// Independent read and write halves.
    pub fn split(&mut self) -> (ServerRead<'_>, ServerWrite<'_>) {
        match self {
            ServerStream::Tcp(s) => {
                let (r, w) = s.split();
                (ServerRead::Tcp(r), ServerWrite::Tcp(w))
            }
            ServerStream::Ring(r) => (ServerRead::Ring(&*r), ServerWrite::Ring(&*r)),
        }
    }

    /// A ring connection becomes a tokio one (a tunnel begins: see `RingTcp::into_tokio`);
    /// bytes the ring held go to the end of `sbuf`.
    pub async fn settle(&mut self, sbuf: &mut IoBuf) {
        if let ServerStream::Ring(_) = self {
            let ServerStream::Ring(r) = std::mem::replace(self, ServerStream::Ring(RingTcp::closed())) else {
                return;
            };
            if let Ok(tcp) = r.into_tokio(sbuf).await {
                *self = ServerStream::Tcp(tcp);
            }
        }
    }

    /// The socket, when nothing but the socket holds the connection's bytes (a tunnel's
    /// move to a new process).
    pub fn movable(&self) -> Option<BorrowedFd<'_>> {
        match self {
            ServerStream::Tcp(s) => Some(s.as_fd()),
            ServerStream::Ring(r) => r.idle_fd(),
        }
    }

    /// Going idle into the pool: a ring connection keeps a receive in flight (it holds no
    /// buffer), so a close or stray bytes from the server show without a syscall.
    pub fn pooled(&self) {
        if let ServerStream::Ring(r) = self {
            let _ = r.poll_read_ready(&mut Context::from_waker(Waker::noop()));
        }
    }

    /// An idle connection is usable when it has nothing to read: readable means the server
    /// closed it (EOF/RST) or sent bytes nobody asked for. Only a connection marked
    /// readable is probed.
    pub fn still_open(&self) -> bool {
        match self {
            ServerStream::Ring(r) => !r.has_bytes(),
            ServerStream::Tcp(stream) => {
                let mut cx = Context::from_waker(Waker::noop());
                match stream.poll_read_ready(&mut cx) {
                    Poll::Pending => true,
                    Poll::Ready(Err(_)) => false,
                    Poll::Ready(Ok(())) => {
                        let mut probe = [0u8; 1];
                        matches!(stream.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
                    }
                }
            }
        }
    }
}

/// The read half of a [`ServerStream`].
pub enum ServerRead<'a> {
    /// Through epoll.
    Tcp(tokio::net::tcp::ReadHalf<'a>),
    /// Through the ring.
    Ring(&'a RingTcp),
}

/// The write half of a [`ServerStream`].
pub enum ServerWrite<'a> {
    /// Through epoll.
    Tcp(tokio::net::tcp::WriteHalf<'a>),
    /// Through the ring.
    Ring(&'a RingTcp),
}

macro_rules! delegate_read {
    ($ty:ty) => {
        impl AsyncRead for $ty {
            fn poll_read(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                buf: &mut ReadBuf<'_>,
            ) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    Self::Tcp(s) => Pin::new(s).poll_read(cx, buf),
                    Self::Ring(s) => Pin::new(s).poll_read(cx, buf),
                }
            }
        }
    };
}

macro_rules! delegate_write {
    ($ty:ty) => {
        impl AsyncWrite for $ty {
            fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    Self::Tcp(s) => Pin::new(s).poll_write(cx, buf),
                    Self::Ring(s) => Pin::new(s).poll_write(cx, buf),
                }
            }
            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    Self::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
                    Self::Ring(s) => Pin::new(s).poll_write_vectored(cx, bufs),
                }
            }
            fn is_write_vectored(&self) -> bool {
                true
            }
            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    Self::Tcp(s) => Pin::new(s).poll_flush(cx),
                    Self::Ring(s) => Pin::new(s).poll_flush(cx),
                }
            }
            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    Self::Tcp(s) => Pin::new(s).poll_shutdown(cx),
                    Self::Ring(s) => Pin::new(s).poll_shutdown(cx),
                }
            }
        }
    };
}

delegate_read!(ServerStream);
delegate_write!(ServerStream);
delegate_read!(ServerRead<'_>);
delegate_write!(ServerWrite<'_>);
