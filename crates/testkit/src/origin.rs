//! The test origin: a listener, one task per connection, a record of every request,
//! and a kill switch. What it answers lives in `routes.rs`.

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::routes;
use crate::seen::Next;
pub use crate::seen::SeenRequest;
use crate::wire::{self, has_token, Body, Framing, Wire};

/// Bodies sent to `/sink` are counted in full but kept only up to this size.
const SINK_KEEP: usize = 1 << 20;

/// How long a closing connection keeps reading (and discarding) after its FIN, so that
/// unread pipelined bytes do not turn the close into a reset that destroys the answer.
const LINGER: Duration = Duration::from_millis(500);

/// A running test origin. Clones share the same server.
///
/// Dropping an `Origin` leaves it running until its runtime ends; [`Origin::kill`] stops it.
#[derive(Clone, Debug)]
pub struct Origin {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    name: String,
    requests: Mutex<Vec<SeenRequest>>,
    connections: AtomicUsize,
    killed: watch::Sender<bool>,
    /// A second handle on the listening socket, for `kill` to shut it from outside the
    /// accept task; `None` once killed.
    listener: Mutex<Option<socket2::Socket>>,
}

impl Origin {
    /// Starts an origin named `name` on 127.0.0.1:0 (spawned on the current tokio runtime).
    pub async fn start(name: &str) -> Origin {
        let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        Origin::start_on(name, any_port).await.expect("an origin can bind 127.0.0.1:0")
    }

    /// Starts an origin named `name` on `addr` (the demo uses fixed ports).
    pub async fn start_on(name: &str, addr: SocketAddr) -> io::Result<Origin> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let shared = Shared::new(name, socket2::SockRef::from(&listener).try_clone()?);
        tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(Origin { addr, shared })
    }

    /// Starts an origin named `name` that takes its connections as descriptors passed over
    /// the Unix socket `path` (`SCM_RIGHTS`, one byte per message, as `cswitch agent
    /// --pass-fd` sends them) instead of accepting them; `addr()` is then 0.0.0.0:0.
    pub async fn start_passed(name: &str, path: &std::path::Path) -> io::Result<Origin> {
        let _ = std::fs::remove_file(path);
        let listener = std::os::unix::net::UnixListener::bind(path)?;
        let shared = Shared::new(name, socket2::SockRef::from(&listener).try_clone()?);
        crate::passed::spawn(listener, tokio::runtime::Handle::current(), {
            let shared = Arc::clone(&shared);
            move |stream| {
                let id = shared.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(connection(stream, id, Arc::clone(&shared)));
            }
        })?;
        Ok(Origin { addr: SocketAddr::from(([0, 0, 0, 0], 0)), shared })
    }

    /// The name it puts in `X-Origin` and in its bodies.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request it has received, in arrival order.
    pub fn requests(&self) -> Vec<SeenRequest> {
        lock(&self.shared.requests).clone()
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Stops listening and resets every open connection: a killed server.
    ///
    /// When this returns, new connections are refused and no further response is sent;
    /// the resets go out as soon as each connection's task runs.
    pub fn kill(&self) {
        self.shared.killed.send_replace(true);
        if let Some(listener) = lock(&self.shared.listener).take() {
            // On Linux, shutting a listening socket stops it listening at once, which
            // dropping the accept task would only do once that task next runs.
            let _ = listener.shutdown(Shutdown::Both);
        }
    }
}

impl Shared {
    /// A fresh origin's state; `listener` is a second handle on its listening socket.
    fn new(name: &str, listener: socket2::Socket) -> Arc<Shared> {
        Arc::new(Shared {
            name: name.to_string(),
            requests: Mutex::new(Vec::new()),
            connections: AtomicUsize::new(0),
            killed: watch::channel(false).0,
            listener: Mutex::new(Some(listener)),
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut killed = shared.killed.subscribe();
    loop {
        let accepted = tokio::select! {
            biased;
            _ = killed.wait_for(|k| *k) => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                let id = shared.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(connection(stream, id, Arc::clone(&shared)));
            }
            // Out of descriptors or an aborted handshake: try again shortly.
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// How a connection ends.
enum End {
    /// Closed (or failed); dropping the stream is all that is left.
    Closed,
    /// Must be reset: close with `SO_LINGER` 0 so the peer gets an RST.
    Reset,
}

async fn connection(mut stream: TcpStream, id: usize, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let mut killed = shared.killed.subscribe();
    let mut buf = Vec::new();
    let wire = Wire { stream: &mut stream, buf: &mut buf };
    // Biased towards the kill switch so a killed origin never answers again, even when
    // a request is already waiting.
    let end = tokio::select! {
        biased;
        _ = killed.wait_for(|k| *k) => End::Reset,
        end = serve(wire, id, &shared) => end.unwrap_or(End::Closed),
    };
    if let End::Reset = end {
        let _ = stream.set_zero_linger();
    }
}

/// Answers requests on one connection, in order, until one of them ends it.
async fn serve(mut w: Wire<'_>, id: usize, shared: &Shared) -> io::Result<End> {
    loop {
        let Some(raw_head) = w.read_head().await? else {
            return Ok(End::Closed);
        };
        let Some((mut req, framing)) = parse_request(id, raw_head) else {
            return bad_request(w, &shared.name).await;
        };
        if framing != Framing::Empty && has_token(&req.headers, "expect", "100-continue") {
            w.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        }
        let keep = if req.path() == "/sink" { SINK_KEEP } else { usize::MAX };
        let mut body = Body::with_cap(keep);
        match w.read_body(framing, &mut body).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::InvalidData => return bad_request(w, &shared.name).await,
            Err(e) => return Err(e),
        }
        (req.body, req.body_len) = (body.data, body.len);
        lock(&shared.requests).push(req.clone());
        let keep_alive = wants_keep_alive(&req);
        match routes::respond(&mut w, &shared.name, &req, keep_alive).await? {
            Next::KeepAlive if keep_alive => {}
            Next::KeepAlive | Next::Close => return close_gracefully(w).await,
            Next::Reset => return Ok(End::Reset),
        }
    }
}

/// The request a head describes and how its body is framed; `None` if the head is not
/// HTTP/1.x or its body cannot be framed.
fn parse_request(conn_id: usize, raw_head: Vec<u8>) -> Option<(SeenRequest, Framing)> {
    let (start, headers) = wire::parse_head(&raw_head)?;
    let mut parts = start.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    let valid =
        parts.next().is_none() && !method.is_empty() && !target.is_empty() && version.starts_with("HTTP/1.");
    if !valid {
        return None;
    }
    let framing = wire::framing(&headers, true).ok()?;
    let req = SeenRequest {
        conn_id,
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
        raw_head,
        body: Vec::new(),
        body_len: 0,
    };
    Some((req, framing))
}

/// HTTP/1.1 keeps the connection unless told to close; HTTP/1.0 only if asked to keep it.
fn wants_keep_alive(req: &SeenRequest) -> bool {
    let close = has_token(&req.headers, "connection", "close");
    match req.version.as_str() {
        "HTTP/1.1" => !close,
        _ => !close && has_token(&req.headers, "connection", "keep-alive"),
    }
}

async fn bad_request(mut w: Wire<'_>, name: &str) -> io::Result<End> {
    let reply = format!(
        "HTTP/1.1 400 Bad Request\r\nX-Origin: {name}\r\nContent-Type: text/plain\r\n\
         Content-Length: 12\r\nConnection: close\r\n\r\nbad request\n"
    );
    w.write_all(reply.as_bytes()).await?;
    close_gracefully(w).await
}

/// Sends FIN, then reads and discards for a moment so that bytes the client had already
/// sent do not make the kernel answer them with an RST that could overtake the response.
async fn close_gracefully(mut w: Wire<'_>) -> io::Result<End> {
    w.stream.shutdown().await?;
    let drain = async {
        w.buf.clear();
        while w.fill().await? > 0 {
            w.buf.clear();
        }
        io::Result::Ok(())
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
    Ok(End::Closed)
}
