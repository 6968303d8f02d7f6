//! The testbed's clients and TLS servers, blocking and small: an HTTP/1.1 request per
//! connection from a chosen client address (its local port says, through `lb`'s conntrack,
//! which node the connection went to), and TLS 1.2 servers with session-ID caches and
//! clients that resume (the peers of `common::tls12`, placed in the bed's namespaces).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use super::VIP;
use crate::common::tls12;
use rustls::ClientConfig;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// What one request got.
#[derive(Debug)]
pub struct Fetched {
    pub status: u16,
    /// `X-Origin`: the server that answered.
    pub origin: String,
    /// The first `Set-Cookie`'s `name=value`.
    pub set_cookie: Option<String>,
    /// The client's end of the connection.
    pub local: SocketAddrV4,
}

/// A TCP connection from `from` (port chosen by the kernel) to the VIP's `port`.
pub fn connect(from: Ipv4Addr, port: u16) -> io::Result<TcpStream> {
    let (socket, _) = bound(from)?;
    dial(socket, port)
}

/// [`connect`], with the client's end known even when the connection fails.
pub fn try_connect(from: Ipv4Addr, port: u16) -> (SocketAddrV4, io::Result<TcpStream>) {
    match bound(from) {
        Ok((socket, local)) => (local, dial(socket, port)),
        Err(e) => (SocketAddrV4::new(from, 0), Err(e)),
    }
}

/// A socket bound to `from` and a client port never used before in this process (20000
/// on), known before connecting: each connection is one entry of `lb`'s flow probe, even a
/// refused one, and no later connection can take its port.
fn bound(from: Ipv4Addr) -> io::Result<(socket2::Socket, SocketAddrV4)> {
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(20_000);
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    let port = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    assert!(port < 60_000, "the tests ran out of client ports");
    let local = SocketAddrV4::new(from, port);
    socket.bind(&SocketAddr::V4(local).into())?;
    Ok((socket, local))
}

fn dial(socket: socket2::Socket, port: u16) -> io::Result<TcpStream> {
    socket.connect_timeout(&SocketAddr::from((VIP, port)).into(), Duration::from_secs(3))?;
    let stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    Ok(stream)
}

/// `GET path` on a new connection from `from` to the VIP's `port`, with `cookie` if given:
/// the client's end of the connection, and the answer's status, origin and cookie.
pub fn try_get(
    from: Ipv4Addr,
    port: u16,
    path: &str,
    cookie: Option<&str>,
) -> (SocketAddrV4, io::Result<Fetched>) {
    let (socket, local) = match bound(from) {
        Ok(b) => b,
        Err(e) => return (SocketAddrV4::new(from, 0), Err(e)),
    };
    let exchange = || -> io::Result<Fetched> {
        let mut stream = dial(socket, port)?;
        let cookie = cookie.map_or(String::new(), |c| format!("Cookie: {c}\r\n"));
        let request = format!("GET {path} HTTP/1.1\r\nHost: shop\r\n{cookie}Connection: close\r\n\r\n");
        stream.write_all(request.as_bytes())?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer)?;
        let mut fetched = parse(&answer)?;
        fetched.local = local;
        Ok(fetched)
    };
    (local, exchange())
}

/// [`try_get`], its answer only.
pub fn get(from: Ipv4Addr, port: u16, path: &str, cookie: Option<&str>) -> io::Result<Fetched> {
    try_get(from, port, path, cookie).1
}

/// One request on an open keep-alive connection: the answer's origin (reads the head and
/// a `Content-Length` body).
pub fn ask(stream: &mut TcpStream, path: &str) -> io::Result<Fetched> {
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: shop\r\n\r\n").as_bytes())?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut head = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed mid-answer"));
        }
        head.extend_from_slice(line.as_bytes());
        if line == "\r\n" {
            break;
        }
    }
    let fetched = parse(&head)?;
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let length = text
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap_or(0));
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(fetched)
}

fn parse(answer: &[u8]) -> io::Result<Fetched> {
    let text = String::from_utf8_lossy(answer).to_string();
    let head = text.split("\r\n\r\n").next().unwrap_or("");
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("no status line: {text:?}")))?;
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    Ok(Fetched {
        status,
        origin: header("X-Origin").unwrap_or_default(),
        set_cookie: header("Set-Cookie").map(|v| v.split(';').next().unwrap_or("").to_string()),
        local: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
    })
}

/// A TLS 1.2 server on `at` (port 0) answering a line with its name; its own session-ID
/// cache, no tickets, so a session resumes on this server only. Stops accepting once
/// `stop` is set (its listener closed, so the bed's namespace goes with the bed).
pub fn tls_server(
    name: &'static str,
    at: SocketAddr,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> SocketAddr {
    let config = tls12::server_config();
    let listener = TcpListener::bind(at).unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                Err(_) => return,
            };
            stream.set_nonblocking(false).unwrap();
            let config = Arc::clone(&config);
            std::thread::spawn(move || tls12::answer_with_name(stream, config, name));
        }
    });
    addr
}

/// A TLS client's config with its own session cache (session IDs, TLS 1.2).
pub fn tls_client() -> Arc<ClientConfig> {
    tls12::client_config()
}

/// One TLS session through the VIP's TLS port: the server that answered, whether the
/// session was resumed, and the client's end of the connection.
pub fn tls_talk(config: &Arc<ClientConfig>) -> (String, bool, SocketAddrV4) {
    let (socket, local) = bound(Ipv4Addr::new(10, 201, 0, 10)).unwrap();
    let (answer, resumed) = tls12::talk_on(dial(socket, super::TLS).unwrap(), config);
    (answer, resumed, local)
}
