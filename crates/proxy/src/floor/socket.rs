//! A TCP socket: tokio's, or on a worker with a ring (`[global] io = "uring"`) one served by
//! the ring (`floor::uring`). Every connection to a server is one, and so is the socket under
//! a TLS session the switch terminates. Either reads and writes as the phases expect; a
//! pooled idle server connection answers "still usable?" without a syscall (the reactor's
//! readiness, or the ring's receive kept in flight while it waits in the pool).

use crate::floor::buf::IoBuf;
use crate::floor::uring::RingTcp;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A TCP socket.
pub enum Socket {
    /// Through tokio's epoll.
    Tcp(TcpStream),
    /// Through the worker's ring.
    Ring(RingTcp),
}

impl Socket {
    /// A new connection, moved into the ring when `ring` (the worker has one).
    pub fn new(stream: TcpStream, ring: bool) -> Socket {
        if ring {
            if let Ok(std) = stream.into_std() {
                return Socket::Ring(RingTcp::new(std));
            }
            // `into_std` failed: the socket is gone with it; the exchange fails on it.
            return Socket::Ring(RingTcp::closed());
        }
        Socket::Tcp(stream)
    }

    /// Whether reading now would not wait (the reactor's word for tokio's; see
    /// `RingTcp::has_bytes`).
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            Socket::Tcp(s) => s.poll_read_ready(cx),
            Socket::Ring(r) => r.poll_read_ready(cx),
        }
    }

    /// Independent read and write halves.
    pub fn split(&mut self) -> (SocketRead<'_>, SocketWrite<'_>) {
        match self {
            Socket::Tcp(s) => {
                let (r, w) = s.split();
                (SocketRead::Tcp(r), SocketWrite::Tcp(w))
            }
            Socket::Ring(r) => (SocketRead::Ring(&*r), SocketWrite::Ring(&*r)),
        }
    }

    /// A ring connection becomes a tokio one (a paused tunnel: see `RingTcp::into_tokio`):
    /// bytes the ring received go to the end of `received`, bytes it had not sent yet to the
    /// front of `unsent`.
    pub fn settle(&mut self, received: &mut IoBuf, unsent: &mut IoBuf) {
        if let Socket::Ring(r) = self {
            if let Ok(tcp) = r.take().into_tokio(received, unsent) {
                *self = Socket::Tcp(tcp);
            }
        }
    }

    /// The socket, when nothing but the socket holds the connection's bytes (a tunnel's
    /// move to a new process).
    pub fn movable(&self) -> Option<BorrowedFd<'_>> {
        match self {
            Socket::Tcp(s) => Some(s.as_fd()),
            Socket::Ring(r) => r.idle_fd(),
        }
    }

    /// Going idle into the pool: a ring connection keeps a receive in flight (it holds no
    /// buffer), so a close or stray bytes from the server show without a syscall.
    pub fn pooled(&self) {
        if let Socket::Ring(r) = self {
            let _ = r.poll_read_ready(&mut Context::from_waker(Waker::noop()));
        }
    }

    /// An idle connection is usable when it has nothing to read: readable means the server
    /// closed it (EOF/RST) or sent bytes nobody asked for. Only a connection marked
    /// readable is probed.
    pub fn still_open(&self) -> bool {
        match self {
            Socket::Ring(r) => !r.has_bytes(),
            Socket::Tcp(stream) => {
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

/// The read half of a [`Socket`].
pub enum SocketRead<'a> {
    /// Through epoll.
    Tcp(tokio::net::tcp::ReadHalf<'a>),
    /// Through the ring.
    Ring(&'a RingTcp),
}

/// The write half of a [`Socket`].
pub enum SocketWrite<'a> {
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

delegate_read!(Socket);
delegate_write!(Socket);
delegate_read!(SocketRead<'_>);
delegate_write!(SocketWrite<'_>);
