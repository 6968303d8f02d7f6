//! A client connection's byte stream: plain TCP, TLS terminated by the switch, or an
//! HTTP/2 stream piped in as one HTTP/1.1 request (`Piped`, made by the `http2` wing). The
//! request phases are written against `AsyncRead` / `AsyncWrite`, so they take either;
//! `split` gives independent halves (zero-cost for TCP; a shared lock for TLS, whose
//! reads and writes share one session state). `handshake` makes the TLS kind, for HTTP
//! listeners at accept and for mail listeners at STARTTLS.

use crate::floor::socket::Socket;
use crate::floor::stats::Counter;
use crate::floor::uring::RingTcp;
use crate::floor::worker::Worker;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::tcp::{ReadHalf as TcpRead, WriteHalf as TcpWrite};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// The client's stream.
pub enum ClientStream {
    /// Plain TCP.
    Plain(TcpStream),
    /// Plain TCP served by the worker's io_uring (`[global] io = "uring"`).
    Ring(RingTcp),
    /// TLS terminated here (boxed: the session state is large, most connections are plain),
    /// over tokio's socket or the ring's.
    Tls(Box<TlsStream<Socket>>),
    /// One HTTP/2 stream, as the HTTP/1.1 request phases see it (boxed: rare, and its
    /// facts are larger than a socket).
    Piped(Box<Piped>),
}

/// An HTTP/2 stream given to the HTTP/1.1 request phases: one end of an in-memory pipe
/// whose other end the `http2` wing writes the stream's request into (translated to
/// HTTP/1.1) and reads the answer from, with the facts of the real connection.
pub struct Piped {
    /// The phases' end of the pipe, on the connection's memory budget.
    pub io: crate::floor::pipe::PhasesEnd,
    /// The address the client connected to (`dstip`, `dstport`).
    pub local: SocketAddr,
    /// For a TLS connection: the server name the client sent and the TLS version.
    pub tls: Option<(std::rc::Rc<str>, &'static str)>,
}

impl AsyncRead for Piped {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Piped {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl ClientStream {
    /// The TCP socket underneath (`None` for a piped HTTP/2 stream).
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            ClientStream::Plain(s) => Some(s),
            ClientStream::Tls(s) => match s.get_ref().0 {
                Socket::Tcp(t) => Some(t),
                Socket::Ring(_) => None,
            },
            ClientStream::Piped(_) | ClientStream::Ring(_) => None,
        }
    }

    /// The socket underneath when the ring serves it (plain, or under TLS).
    pub fn ring(&self) -> Option<&RingTcp> {
        match self {
            ClientStream::Ring(r) => Some(r),
            ClientStream::Tls(s) => match s.get_ref().0 {
                Socket::Ring(r) => Some(r),
                Socket::Tcp(_) => None,
            },
            _ => None,
        }
    }

    /// The address the client connected to.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            ClientStream::Piped(p) => Some(p.local),
            other => match other.ring() {
                Some(r) => r.local_addr().ok(),
                None => other.tcp().and_then(|t| t.local_addr().ok()),
            },
        }
    }

    /// The address the client connected to, when it is known without asking the kernel
    /// (a piped HTTP/2 stream).
    pub fn known_local(&self) -> Option<SocketAddr> {
        match self {
            ClientStream::Piped(p) => Some(p.local),
            _ => None,
        }
    }

    /// A ring connection becomes a tokio one (a paused tunnel: see `RingTcp::into_tokio`):
    /// bytes the ring received go to the end of `received`, bytes it had not sent yet to the
    /// front of `unsent`.
    pub fn settle(&mut self, received: &mut crate::floor::buf::IoBuf, unsent: &mut crate::floor::buf::IoBuf) {
        if let ClientStream::Ring(r) = self {
            if let Ok(tcp) = r.take().into_tokio(received, unsent) {
                *self = ClientStream::Plain(tcp);
            }
        }
    }

    /// Whether this is an HTTP/2 stream piped into the HTTP/1.1 phases.
    pub fn is_piped(&self) -> bool {
        matches!(self, ClientStream::Piped(_))
    }

    /// Whether the client has closed its side (or reset): the socket reads end-of-file now.
    /// Asks the kernel only when the reactor says the socket is readable; bytes the client
    /// sent ahead (a pipelined request) are left where they are.
    pub fn peer_closed(&self) -> bool {
        if let Some(r) = self.ring() {
            return r.peer_closed();
        }
        // A piped stream's client is the HTTP/2 wing, which resets the stream itself.
        let Some(tcp) = self.tcp() else { return false };
        let mut cx = Context::from_waker(std::task::Waker::noop());
        if tcp.poll_read_ready(&mut cx).is_pending() {
            return false;
        }
        let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        match socket2::SockRef::from(tcp).peek(&mut probe) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() != io::ErrorKind::WouldBlock,
        }
    }

    /// Whether a read would not block now: bytes (or the end of the stream) are there, or
    /// TLS plaintext is buffered. A socket the reactor wrongly called readable has its
    /// readiness cleared, so the next wait really waits.
    pub fn has_bytes(&self) -> bool {
        if let ClientStream::Ring(r) = self {
            return r.has_bytes();
        }
        // TLS: readiness there counts buffered plaintext too (`poll_read_ready`).
        let (false, Some(tcp)) = (self.is_tls(), self.tcp()) else { return true };
        let peek = || {
            let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
            socket2::SockRef::from(tcp).peek(&mut probe)
        };
        !matches!(tcp.try_io(tokio::io::Interest::READABLE, peek), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// Whether the client has sent something not read yet (bytes in the socket, the end
    /// of the stream, or TLS plaintext the session holds): at a request boundary, the next
    /// request.
    pub fn request_waiting(&mut self) -> bool {
        if let ClientStream::Tls(s) = self {
            let (_, session) = s.get_mut();
            let buffered = session.process_new_packets().map(|state| state.plaintext_bytes_to_read() > 0);
            if !matches!(buffered, Ok(false)) {
                return true;
            }
        }
        if let Some(r) = self.ring() {
            return r.has_bytes();
        }
        let Some(tcp) = self.tcp() else { return false };
        let peek = || {
            let mut probe = [std::mem::MaybeUninit::<u8>::uninit(); 1];
            socket2::SockRef::from(tcp).peek(&mut probe)
        };
        !matches!(tcp.try_io(tokio::io::Interest::READABLE, peek), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// For a TLS connection: the server name the client sent (empty: none) and the
    /// negotiated version, for the access log.
    pub fn tls_facts(&self) -> Option<(&str, &'static str)> {
        if let ClientStream::Piped(p) = self {
            return p.tls.as_ref().map(|(sni, version)| (&**sni, *version));
        }
        let ClientStream::Tls(s) = self else { return None };
        let conn = s.get_ref().1;
        let version = match conn.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
            Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2",
            Some(_) => "other",
            None => "",
        };
        Some((conn.server_name().unwrap_or(""), version))
    }

    /// Whether the switch terminates TLS on this connection.
    pub fn is_tls(&self) -> bool {
        match self {
            ClientStream::Piped(p) => p.tls.is_some(),
            other => matches!(other, ClientStream::Tls(_)),
        }
    }

    /// Ready to read. For TLS this means the socket is readable or the session already
    /// holds decrypted bytes; a wake-up for a record that carries no data (an alert, a key
    /// update) makes the next read wait within the head timeout, which is harmless.
    pub fn poll_read_ready(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self {
            ClientStream::Plain(s) => s.poll_read_ready(cx),
            ClientStream::Ring(r) => r.poll_read_ready(cx),
            ClientStream::Tls(s) => {
                let (tcp, session) = s.get_mut();
                let buffered = session.process_new_packets().map(|state| state.plaintext_bytes_to_read() > 0);
                match buffered {
                    Ok(true) | Err(_) => Poll::Ready(Ok(())),
                    Ok(false) => tcp.poll_read_ready(cx),
                }
            }
            ClientStream::Piped(_) => Poll::Ready(Ok(())),
        }
    }

    /// STARTTLS / STLS: the TLS handshake on this plain stream with `acceptor` (the
    /// listener's certificates); `None` when there is none, the stream is TLS already, or
    /// the handshake failed (counted, logged): the connection then closes.
    pub async fn start_tls(
        self,
        worker: &Worker,
        acceptor: Option<tokio_rustls::TlsAcceptor>,
        peer: SocketAddr,
    ) -> Option<ClientStream> {
        let (ClientStream::Plain(tcp), Some(acceptor)) = (self, acceptor) else { return None };
        let tls = handshake(worker, acceptor, Socket::Tcp(tcp), peer).await?;
        Some(ClientStream::Tls(Box::new(tls)))
    }

    /// Independent read and write halves.
    pub fn split(&mut self) -> (ClientRead<'_>, ClientWrite<'_>) {
        match self {
            ClientStream::Plain(s) => {
                let (r, w) = s.split();
                (ClientRead::Plain(r), ClientWrite::Plain(w))
            }
            ClientStream::Ring(r) => (ClientRead::Ring(&*r), ClientWrite::Ring(&*r)),
            ClientStream::Tls(s) => {
                let (r, w) = tokio::io::split(&mut **s);
                (ClientRead::Tls(r), ClientWrite::Tls(w))
            }
            ClientStream::Piped(p) => {
                let (r, w) = p.io.split();
                (ClientRead::Piped(r), ClientWrite::Piped(w))
            }
        }
    }
}

/// A writer that can be told that the connection closes right after what it writes next
/// (an answer with `Connection: close`, a refusal, a TLS close_notify): on the ring those
/// writes are sent so that the FIN travels with the last bytes (`RingTcp::closing`).
/// Nothing elsewhere.
pub trait LastWrites {
    /// The writes that follow are the connection's last.
    fn last_writes(&self);
}

impl LastWrites for ClientStream {
    fn last_writes(&self) {
        match self {
            ClientStream::Ring(r) => r.closing(),
            ClientStream::Tls(t) => {
                if let Socket::Ring(r) = t.get_ref().0 {
                    r.closing();
                }
            }
            ClientStream::Plain(_) | ClientStream::Piped(_) => {}
        }
    }
}

impl LastWrites for ClientWrite<'_> {
    fn last_writes(&self) {
        // A TLS half cannot reach its socket: only plain TCP on the ring says it.
        if let ClientWrite::Ring(r) = self {
            r.closing();
        }
    }
}

/// The read half of a [`ClientStream`].
pub enum ClientRead<'a> {
    /// TCP.
    Plain(TcpRead<'a>),
    /// TCP through the ring.
    Ring(&'a RingTcp),
    /// TLS.
    Tls(ReadHalf<&'a mut TlsStream<Socket>>),
    /// A piped HTTP/2 stream (no lock between the halves: `floor::pipe`).
    Piped(crate::floor::pipe::Reader<'a>),
}

/// The write half of a [`ClientStream`].
pub enum ClientWrite<'a> {
    /// TCP.
    Plain(TcpWrite<'a>),
    /// TCP through the ring.
    Ring(&'a RingTcp),
    /// TLS.
    Tls(WriteHalf<&'a mut TlsStream<Socket>>),
    /// A piped HTTP/2 stream.
    Piped(crate::floor::pipe::Writer<'a>),
}

macro_rules! delegate_read {
    ($ty:ty, $($variant:ident),*) => {
        impl AsyncRead for $ty {
            fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_read(cx, buf),)*
                }
            }
        }
    };
}

macro_rules! delegate_write {
    ($ty:ty, $($variant:ident),*) => {
        impl AsyncWrite for $ty {
            fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_write(cx, buf),)*
                }
            }
            fn poll_write_vectored(
                self: Pin<&mut Self>,
                cx: &mut Context<'_>,
                bufs: &[io::IoSlice<'_>],
            ) -> Poll<io::Result<usize>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_write_vectored(cx, bufs),)*
                }
            }
            fn is_write_vectored(&self) -> bool {
                match self {
                    $(Self::$variant(s) => s.is_write_vectored(),)*
                }
            }
            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_flush(cx),)*
                }
            }
            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => Pin::new(s).poll_shutdown(cx),)*
                }
            }
        }
    };
}

delegate_read!(ClientStream, Plain, Ring, Tls, Piped);
delegate_write!(ClientStream, Plain, Ring, Tls, Piped);
delegate_read!(ClientRead<'_>, Plain, Ring, Tls, Piped);
delegate_write!(ClientWrite<'_>, Plain, Ring, Tls, Piped);

/// The TLS handshake of a terminating listener, within `client_head`; failures are
/// counted and logged, and close the connection.
pub async fn handshake(
    worker: &Worker,
    acceptor: tokio_rustls::TlsAcceptor,
    stream: Socket,
    peer: SocketAddr,
) -> Option<tokio_rustls::server::TlsStream<Socket>> {
    let limit = worker.shared.snapshot.load().config.timeouts.client_head;
    match tokio::time::timeout(limit, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(e)) => {
            worker.shared.stats.inc(Counter::TlsHandshakeFailed);
            tracing::info!(client = %peer, error = %e, "TLS handshake failed");
            None
        }
        Err(_) => {
            worker.shared.stats.inc(Counter::TlsHandshakeFailed);
            tracing::info!(client = %peer, "TLS handshake not done in time");
            None
        }
    }
}
