//! Accepting for listeners whose connections the ring serves: the listening socket waits in
//! tokio's epoll as usual, but the sockets it accepts never join that epoll (tokio's accept
//! would register each one, and moving it to the ring would take it out again: two
//! `epoll_ctl` per connection for nothing).

use std::io;
use std::net::SocketAddr;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// A listening socket.
pub enum Listening {
    /// Its connections are served by tokio.
    Tokio(tokio::net::TcpListener),
    /// Its connections are served by the ring.
    Raw(AsyncFd<std::net::TcpListener>),
}

/// An accepted connection.
pub enum Accepted {
    /// In tokio's epoll.
    Tokio(tokio::net::TcpStream),
    /// In no epoll (blocking mode: only the ring does its I/O).
    Raw(std::net::TcpStream),
}

impl Listening {
    /// `listener` (non-blocking), its connections for the ring when `ring`.
    pub fn new(listener: std::net::TcpListener, ring: bool) -> io::Result<Listening> {
        if ring {
            // An owned listener moved into the `AsyncFd` stays open and the same while
            // registered, which is what tokio's deprecation of the safe constructor is about.
            #[allow(deprecated)]
            return AsyncFd::with_interest(listener, Interest::READABLE).map(Listening::Raw);
        }
        tokio::net::TcpListener::from_std(listener).map(Listening::Tokio)
    }

    /// The next connection.
    pub async fn accept(&self) -> io::Result<(Accepted, SocketAddr)> {
        match self {
            Listening::Tokio(l) => l.accept().await.map(|(s, peer)| (Accepted::Tokio(s), peer)),
            Listening::Raw(l) => {
                let (s, peer) = l.async_io(Interest::READABLE, |l| l.accept()).await?;
                Ok((Accepted::Raw(s), peer))
            }
        }
    }
}

impl Accepted {
    /// For tokio.
    pub fn into_tokio(self) -> io::Result<tokio::net::TcpStream> {
        match self {
            Accepted::Tokio(s) => Ok(s),
            Accepted::Raw(s) => {
                s.set_nonblocking(true)?;
                tokio::net::TcpStream::from_std(s)
            }
        }
    }

    /// For the ring.
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        match self {
            Accepted::Tokio(s) => s.into_std(),
            Accepted::Raw(s) => Ok(s),
        }
    }
}
