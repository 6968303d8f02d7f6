//! A client connection: waits for each request, reads its head, hands it to the request
//! phases, and loops while both sides keep the connection alive. Requests are handled one at
//! a time in arrival order, so pipelined requests are answered in order even when they go to
//! different servers (seed 000 §4.5).

use crate::buf::IoBuf;
use crate::io::{read_some, IoFail};
use crate::request;
use crate::respond::Refusal;
use crate::snapshot::Snapshot;
use crate::stats::Counter;
use crate::worker::Worker;
use http1::{Parse, RequestHead, ResponseHead};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Per-request working space, recycled through the worker so requests do not allocate.
pub struct Scratch {
    /// The request head being handled.
    pub req: RequestHead,
    /// The response head being forwarded.
    pub resp: ResponseHead,
    /// The edited request head sent to the server (kept for retries).
    pub req_out: Vec<u8>,
    /// Output space for response heads and de-chunked bodies.
    pub resp_out: Vec<u8>,
    /// Buffer for bytes read from the server.
    pub sbuf: IoBuf,
    /// Method and target copied for the access log (the head's bytes are consumed early).
    pub method: String,
    /// See `method`.
    pub target: String,
    /// Label of the rule that decided (empty: none).
    pub rule: String,
    /// setHeader edits the rules decided on.
    pub set_headers: Vec<(String, String)>,
    /// Location of a rule's redirect.
    pub location: String,
    /// Body bytes read before routing (the rules needed them), raw as they will be forwarded.
    pub held: Vec<u8>,
    /// The same body, de-chunked, for the rules.
    pub payload: Vec<u8>,
    /// The whole body is in `held` (or there is none): the request can be replayed.
    pub body_complete: bool,
    /// The request's hash key for the group's scheduler (valid when `has_key`).
    pub key: Vec<u8>,
    /// Whether `key` holds this request's key.
    pub has_key: bool,
    /// What the group's session persistence found in the request.
    pub persist: crate::persist::PersistScratch,
    /// The client connection closes after this response (`connection_persistence = "close"`
    /// and the request changed server).
    pub close_after: bool,
}

impl Scratch {
    /// Forgets the previous request (and a body buffer a large body grew past 64 KiB, so a
    /// burst of large bodies does not pin its memory in the recycled scratch spaces).
    pub fn reset(&mut self) {
        if self.held.capacity() > 64 * 1024 {
            self.held = Vec::new();
            self.payload = Vec::new();
        }
        self.rule.clear();
        self.set_headers.clear();
        self.location.clear();
        self.held.clear();
        self.payload.clear();
        self.body_complete = false;
        self.has_key = false;
        self.close_after = false;
        self.persist.reset();
    }
}

/// The client side of a session.
pub struct Client {
    /// The socket (TLS-terminated or plain).
    pub stream: crate::stream::ClientStream,
    /// Its address.
    pub peer: SocketAddr,
    /// Bytes read and not yet handled; `None` while idle between requests.
    pub buf: Option<IoBuf>,
    /// What only some connections need, boxed so an idle connection does not carry it.
    pub pins: Option<Box<Pins>>,
}

/// Per-connection state of the features that use it.
#[derive(Default)]
pub struct Pins {
    /// Server this connection is pinned to by a `STICKY_IP_PORT` rule.
    pub sticky: Option<crate::sticky::Target>,
    /// Server (id) the previous request went to (`connection_persistence` other than
    /// `per_request`).
    pub last_server: Option<u64>,
    /// A server connection started at accept (`preallocate`), not yet used.
    pub prealloc: Option<crate::prealloc::Prealloc>,
}

impl Client {
    /// The connection's pins, created on first use.
    pub fn pins_mut(&mut self) -> &mut Pins {
        self.pins.get_or_insert_with(Default::default)
    }

    /// The `STICKY_IP_PORT` target, if a rule pinned this connection.
    pub fn sticky(&self) -> Option<crate::sticky::Target> {
        self.pins.as_ref().and_then(|p| p.sticky)
    }

    /// The server of the previous request, when it is tracked.
    pub fn last_server(&self) -> Option<u64> {
        self.pins.as_ref().and_then(|p| p.last_server)
    }

    /// The pre-allocated connection, if it goes to `server`.
    pub fn take_prealloc(&mut self, server: u64) -> Option<crate::prealloc::Prealloc> {
        self.pins.as_mut()?.prealloc.take_if(|p| p.server == server)
    }

    /// The address the client connected to (asked of the kernel: only rules reading
    /// `dstip` / `dstport` need it).
    pub fn local(&self) -> SocketAddr {
        self.stream.tcp().local_addr().unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
    }
}

/// Keeps the open-connection count right however the session ends (including being
/// dropped with the worker's runtime at shutdown).
struct ConnGuard<'a>(&'a Worker, usize);

impl<'a> ConnGuard<'a> {
    fn new(worker: &'a Worker, listener: usize) -> Self {
        if let Some(l) = worker.shared.listeners.get(listener) {
            l.connections.fetch_add(1, Ordering::Relaxed);
        }
        ConnGuard(worker, listener)
    }
}

impl Drop for ConnGuard<'_> {
    fn drop(&mut self) {
        self.0.shared.client_conns.fetch_sub(1, Ordering::AcqRel);
        if let Some(l) = self.0.shared.listeners.get(self.1) {
            l.connections.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Counts a request in progress; shutdown waits for these (idle connections are simply
/// closed with the runtime: they have nothing in flight).
struct BusyGuard<'a>(&'a Worker);

impl<'a> BusyGuard<'a> {
    fn new(worker: &'a Worker) -> Self {
        worker.busy.set(worker.busy.get() + 1);
        BusyGuard(worker)
    }
}

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        let w = self.0;
        w.busy.set(w.busy.get() - 1);
        if w.shutting_down() {
            w.busy_ended.notify_waiters();
        }
    }
}

/// Serves one client connection to its end.
pub async fn serve(worker: Rc<Worker>, stream: TcpStream, peer: SocketAddr, listener: usize) {
    let _conn = ConnGuard::new(&worker, listener);
    let (protocol, acceptor) = {
        let snap = worker.shared.snapshot.load();
        let l = &snap.listeners[listener];
        (l.protocol, l.tls.clone())
    };
    match protocol {
        config::Protocol::Tls => {
            return crate::tls_pass::serve(Rc::clone(&worker), stream, peer, listener).await
        }
        config::Protocol::Smtp => {
            return crate::smtp::serve(Rc::clone(&worker), stream, peer, listener).await
        }
        config::Protocol::Pop3 | config::Protocol::Imap => {
            return crate::mail_login::serve(Rc::clone(&worker), stream, peer, listener).await
        }
        config::Protocol::Http => {}
    }
    let stream = match acceptor {
        None => crate::stream::ClientStream::Plain(stream),
        Some(acceptor) => match handshake(&worker, acceptor, stream, peer).await {
            Some(tls) => crate::stream::ClientStream::Tls(Box::new(tls)),
            None => return,
        },
    };
    let prealloc = crate::prealloc::start(&worker, &worker.shared.snapshot.load(), listener, peer);
    let pins = prealloc.map(|p| Box::new(Pins { prealloc: Some(p), ..Pins::default() }));
    let mut client = Client { stream, peer, buf: None, pins };
    while wait_for_request(&worker, &mut client).await {
        // Boxed: the request phases hold far more state than an idle connection needs, and
        // an unboxed future would reserve that space in every idle keep-alive connection.
        let keep = Box::pin(serve_one(&worker, listener, &mut client)).await;
        if !keep || worker.shutting_down() {
            break;
        }
    }
    if let Some(buf) = client.buf.take() {
        worker.bufs.give(buf);
    }
    if client.stream.is_tls() {
        // close_notify, so the client can tell the end from a truncation (a plain TCP
        // connection needs nothing more than the close itself).
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), client.stream.shutdown()).await;
    }
}

/// The TLS handshake of a terminating listener, within `client_head`; failures are
/// counted and logged, and close the connection.
pub(crate) async fn handshake(
    worker: &Worker,
    acceptor: tokio_rustls::TlsAcceptor,
    stream: TcpStream,
    peer: SocketAddr,
) -> Option<tokio_rustls::server::TlsStream<TcpStream>> {
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

/// One request, on the snapshot current when it started.
async fn serve_one(worker: &Worker, listener: usize, client: &mut Client) -> bool {
    let _busy = BusyGuard::new(worker);
    let snap = worker.shared.snapshot.load_full();
    let mut scratch = take_scratch(worker);
    scratch.reset();
    let keep = request::handle(worker, &snap, listener, client, &mut scratch).await;
    give_scratch(worker, scratch);
    keep
}

/// Spare scratch spaces kept per worker; more are freed (a burst of concurrent requests
/// should not pin its peak memory forever).
const SCRATCH_KEEP: usize = 16;

fn give_scratch(worker: &Worker, scratch: Scratch) {
    let mut spare = worker.scratch.borrow_mut();
    if spare.len() < SCRATCH_KEEP {
        spare.push(scratch);
    }
}

fn take_scratch(worker: &Worker) -> Scratch {
    let recycled = worker.scratch.borrow_mut().pop();
    recycled.unwrap_or_else(|| Scratch {
        req: RequestHead::new(),
        resp: ResponseHead::new(),
        req_out: Vec::with_capacity(1024),
        resp_out: Vec::with_capacity(1024),
        sbuf: worker.bufs.take(),
        method: String::new(),
        target: String::new(),
        rule: String::new(),
        set_headers: Vec::new(),
        location: String::new(),
        held: Vec::new(),
        payload: Vec::new(),
        body_complete: false,
        key: Vec::new(),
        has_key: false,
        close_after: false,
        persist: Default::default(),
    })
}

/// Waits until the next request's first bytes are here. An idle connection gives its buffer
/// back while it waits, and holds nothing but this small future (the idle-memory bench
/// measures it). False: close (idle timeout, shutdown, or the client went away).
async fn wait_for_request(worker: &Worker, client: &mut Client) -> bool {
    if client.buf.as_ref().is_some_and(|b| !b.is_empty()) {
        return true; // pipelined bytes already here
    }
    if let Some(buf) = client.buf.take() {
        worker.bufs.give(buf);
    }
    let idle = worker.shared.snapshot.load().config.timeouts.client_idle;
    // `poll_read_ready` parks the waker in the socket's own registration; `readable()` would
    // add a waiter node to this future, which every idle connection would carry.
    let readable = std::future::poll_fn(|cx| client.stream.poll_read_ready(cx));
    match tokio::time::timeout(idle, readable).await {
        Ok(Ok(())) if !worker.shutting_down() => {
            client.buf = Some(worker.bufs.take());
            true
        }
        Ok(_) => false,
        Err(_) => {
            worker.shared.stats.inc(Counter::IdleTimeout);
            false
        }
    }
}

/// How reading a head ended when it did not produce one.
pub enum HeadFail {
    /// The client closed or reset: nothing to answer.
    Closed,
    /// Answer with this refusal, count it, close.
    Refuse(Refusal, Counter),
}

/// Reads until `scratch.req` holds a complete, valid head (phase "read head").
pub async fn read_head(
    snap: &Snapshot,
    client: &mut Client,
    req: &mut RequestHead,
    started: Instant,
) -> Result<(), HeadFail> {
    let deadline = started + snap.config.timeouts.client_head;
    let buf = client.buf.get_or_insert_with(|| IoBuf::new(snap.config.limits.buffer_bytes));
    loop {
        if !buf.is_empty() {
            match req.parse(buf.filled(), &snap.head_limits) {
                Ok(Parse::Complete) => return Ok(()),
                Ok(Parse::Partial) if buf.is_full() => {
                    return Err(refuse(431, "request header section too large", Counter::HeadTooLarge))
                }
                Ok(Parse::Partial) => {}
                Err(e) => return Err(refuse(e.status(), e.reason(), head_counter(e.status()))),
            }
        }
        match read_some(&mut client.stream, buf, deadline).await {
            Ok(0) | Err(IoFail::Io) => return Err(HeadFail::Closed),
            Ok(_) => {}
            Err(IoFail::Timeout) => {
                return Err(refuse(408, "request head not received in time", Counter::HeadTimeout))
            }
        }
    }
}

fn refuse(status: u16, reason: &'static str, counter: Counter) -> HeadFail {
    HeadFail::Refuse(Refusal::new(status, reason), counter)
}

fn head_counter(status: u16) -> Counter {
    match status {
        431 => Counter::HeadTooLarge,
        501 => Counter::NotImplemented,
        505 => Counter::BadVersion,
        _ => Counter::BadRequest,
    }
}
