//! The rules' view of an HTTP request: the parsed head over the bytes it was read into,
//! plus the body buffered so far. Every accessor is a slice of bytes already in memory.
//! Used by the route phase, the hash keys, and `explain`.

use crate::floor::stream::ClientStream;
use http1::RequestHead;
use rules::Body;
use std::net::SocketAddr;
use tokio::net::TcpStream;

/// The rules' view of a request: the parsed head over the client buffer, plus the body
/// buffered so far. Every accessor is a slice of bytes already in memory.
pub struct HeadView<'a> {
    /// The head's bytes.
    pub head: &'a [u8],
    /// Its parse.
    pub req: &'a RequestHead,
    /// The client's address.
    pub src: SocketAddr,
    /// The address the client connected to.
    pub dst: Dst<'a>,
    /// The body buffered so far.
    pub body: Body<'a>,
}

/// The address a client connected to: asked of the kernel only when a rule reads
/// `dstip` / `dstport` (no syscall per request otherwise).
#[derive(Clone, Copy)]
pub enum Dst<'a> {
    /// The client's socket.
    Socket(&'a TcpStream),
    /// The client's socket, served by the ring.
    Ring(&'a crate::floor::uring::RingTcp),
    /// Known already (`explain`).
    Known(SocketAddr),
}

impl<'a> Dst<'a> {
    /// Where the client of `stream` connected: its socket, or the address a piped HTTP/2
    /// stream carries.
    pub fn of(stream: &'a ClientStream) -> Dst<'a> {
        if let Some(r) = stream.ring() {
            return Dst::Ring(r);
        }
        match stream.tcp() {
            Some(tcp) => Dst::Socket(tcp),
            None => Dst::Known(stream.known_local().unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))),
        }
    }
}

impl<'a> HeadView<'a> {
    /// The head only (no body read yet): what the schedulers' hash keys look at.
    pub fn head_only(head: &'a [u8], req: &'a RequestHead, src: SocketAddr, dst: Dst<'a>) -> Self {
        HeadView { head, req, src, dst, body: Body { bytes: &[], complete: false } }
    }
}

impl rules::Request for HeadView<'_> {
    fn src(&self) -> SocketAddr {
        self.src
    }

    fn dst(&self) -> SocketAddr {
        match self.dst {
            Dst::Known(addr) => addr,
            Dst::Socket(s) => s.local_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0))),
            Dst::Ring(r) => r.local_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0))),
        }
    }

    fn method(&self) -> &[u8] {
        self.req.method.slice(self.head)
    }

    fn target(&self) -> &[u8] {
        self.req.target.slice(self.head)
    }

    fn version(&self) -> &[u8] {
        match self.req.version {
            http1::Version::Http10 => b"HTTP/1.0",
            http1::Version::Http11 => b"HTTP/1.1",
        }
    }

    fn header(&self, name: &str) -> Option<&[u8]> {
        // An absolute-form target's authority is the Host (RFC 9112 §3.2.2): the server
        // gets it as Host, so the rules and the hash keys read it too.
        match self.req.authority {
            Some(authority) if name.eq_ignore_ascii_case("host") => Some(authority.slice(self.head)),
            _ => self.req.header(self.head, name),
        }
    }

    fn header_each<'a>(&'a self, name: &str, visit: &mut dyn FnMut(&'a [u8]) -> bool) {
        for h in &self.req.headers {
            if h.name.slice(self.head).eq_ignore_ascii_case(name.as_bytes())
                && visit(h.value.slice(self.head))
            {
                return;
            }
        }
    }

    fn body(&self) -> Body<'_> {
        Body { bytes: self.body.bytes, complete: self.body.complete }
    }
}
