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
}

/// The client side of a session.
pub struct Client {
    /// The socket.
    pub stream: TcpStream,
    /// Its address.
    pub peer: SocketAddr,
    /// Bytes read and not yet handled; `None` while idle between requests.
    pub buf: Option<IoBuf>,
}

/// Keeps the session counts right however the session ends (including being dropped at
/// the end of the grace period).
struct SessionGuard(Rc<Worker>);

impl Drop for SessionGuard {
    fn drop(&mut self) {
        let w = &self.0;
        w.sessions.set(w.sessions.get() - 1);
        w.shared.client_conns.fetch_sub(1, Ordering::AcqRel);
        w.session_ended.notify_waiters();
    }
}

/// Serves one client connection to its end.
pub async fn serve(worker: Rc<Worker>, stream: TcpStream, peer: SocketAddr, listener: usize) {
    worker.sessions.set(worker.sessions.get() + 1);
    let _guard = SessionGuard(Rc::clone(&worker));
    let mut client = Client { stream, peer, buf: None };
    while wait_for_request(&worker, &mut client).await {
        let snap = worker.shared.snapshot.load_full();
        let mut scratch = take_scratch(&worker);
        let keep = request::handle(&worker, &snap, listener, &mut client, &mut scratch).await;
        worker.scratch.borrow_mut().push(scratch);
        if !keep {
            break;
        }
    }
    if let Some(buf) = client.buf.take() {
        worker.bufs.give(buf);
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
    })
}

/// Waits until the next request's first bytes are here. An idle connection gives its buffer
/// back while it waits. False: close (idle timeout, shutdown, or the client went away).
async fn wait_for_request(worker: &Worker, client: &mut Client) -> bool {
    if client.buf.as_ref().is_some_and(|b| !b.is_empty()) {
        return true; // pipelined bytes already here
    }
    if let Some(buf) = client.buf.take() {
        worker.bufs.give(buf);
    }
    let shutdown = worker.shutdown.notified();
    if worker.shutting_down() {
        return false;
    }
    let idle = worker.shared.snapshot.load().config.timeouts.client_idle;
    tokio::select! {
        r = tokio::time::timeout(idle, client.stream.readable()) => match r {
            Ok(Ok(())) => {
                client.buf = Some(worker.bufs.take());
                true
            }
            Ok(Err(_)) => false,
            Err(_) => {
                worker.shared.stats.inc(Counter::IdleTimeout);
                false
            }
        },
        _ = shutdown => false,
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
