//! The HTTP/2 wing (issue 15): HTTP/2 from clients, through ALPN `h2` on TLS-terminating
//! listeners and with prior knowledge (the connection preface) on plain ones. The `h2`
//! crate speaks the protocol (frames, HPACK, flow control, its flood limits); this wing
//! makes each stream a request of its own that runs the HTTP/1.1 wing's phases unchanged
//! (rules, the one routing decision, persistence, pooled server connections, the switch's
//! answers, the access log and counters): the stream is translated to an HTTP/1.1 request,
//! checked against smuggling on the way (`request`), its head put in those phases' buffer
//! and its body piped in (`floor::stream::Piped` over `floor::pipe`), and the answer read
//! back and translated (`response`, `answer`).
//! Streams of one connection run concurrently and may go to different servers, within
//! the connection's memory bound (`floor::budget`).
//!
//! | part | file |
//! |---|---|
//! | the connection: handshake, settings, streams, idle end, shutdown | `mod.rs` |
//! | the connection's running streams (aborted when it ends) | `running.rs` |
//! | bytes read before the wing took over (the preface) | `rewind.rs` |
//! | one stream: the pipe, the request body, the answer | `stream.rs` |
//! | h2 request → HTTP/1.1 head, with the smuggling checks | `request.rs` |
//! | HTTP/1.1 response → h2 response (trailers included) | `response.rs` (the head: `answer.rs`) |
//! | gRPC calls: recognised, refusals as gRPC statuses | `grpc.rs` |
//!
//! Why a pipe into the HTTP/1.1 phases rather than phases of its own: `docs/adr/`
//! (HTTP/2 streams through the HTTP/1.1 phases).

mod answer;
mod grpc;
mod request;
mod response;
mod rewind;
mod running;
mod stream;

use crate::floor::boxed::pinned;
use crate::floor::budget::Budget;
use crate::floor::clock;
use crate::floor::conns::{ConnState, Slot};
use crate::floor::stats::{Counter, Stats};
use crate::floor::stream::ClientStream;
use crate::floor::worker::{BusyGuard, Open, Worker};
use crate::http::Client;
use rewind::Rewind;
use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// Streams a client may open and reset before the switch has answered them, before the
/// connection is closed with ENHANCE_YOUR_CALM (rapid reset, CVE-2023-44487).
const MAX_PENDING_RESETS: usize = 20;

/// Streams the switch may reset for a client's errors before it closes the connection.
const MAX_ERROR_RESETS: usize = 100;

/// Streams a client may open while its connection is at its memory bound (each refused)
/// before the connection is closed with ENHANCE_YOUR_CALM.
const MAX_MEMORY_REFUSALS: usize = 20;

/// Whether the TLS handshake chose HTTP/2 (ALPN `h2`).
pub fn negotiated(stream: &ClientStream) -> bool {
    let ClientStream::Tls(tls) = stream else { return false };
    tls.get_ref().1.alpn_protocol() == Some(b"h2")
}

/// Serves an HTTP/2 connection whose TLS handshake chose `h2`.
pub async fn serve(open: Open, stream: ClientStream, peer: SocketAddr, state: Slot) {
    let conn = Conn::new(&open, &stream, peer, state);
    run(&open, conn, stream).await;
}

/// Serves a connection the HTTP/1.1 wing found opening with the HTTP/2 preface: what it
/// read is given to the `h2` crate first.
pub async fn serve_after_preface(open: Open, mut client: Client) {
    let read = client.buf.take().map(|b| b.filled().to_vec()).unwrap_or_default();
    let conn = Conn::new(&open, &client.stream, client.peer, Rc::clone(&client.state));
    run(&open, conn, Rewind::new(read, client.stream)).await;
}

/// What every stream of a connection shares.
pub(crate) struct Conn {
    pub peer: SocketAddr,
    pub local: SocketAddr,
    /// The server name the client sent (shared by its streams) and the TLS version.
    pub tls: Option<(Rc<str>, &'static str)>,
    /// The connection's id for the server pools (`reuse = "never"` keeps a pooled server
    /// connection to the client connection that used it).
    pub id: u64,
    /// A stream of this connection has been answered by a server (`reuse = "safe"`).
    pub served: Cell<bool>,
    /// What its streams may make the switch hold (`limits.h2_connection_bytes`).
    pub budget: Rc<Budget>,
    /// Streams refused because the budget was full.
    memory_refusals: Cell<usize>,
    /// When a stream of this connection last ended (its opening at first): the idle clock
    /// runs from there while no stream runs (`idle_deadline`).
    last_end: Cell<tokio::time::Instant>,
    /// Its streams still running on the switch's side.
    streams: running::Running,
    state: Slot,
}

impl Conn {
    fn new(open: &Open, stream: &ClientStream, peer: SocketAddr, state: Slot) -> Conn {
        let local = stream.local_addr();
        let tls = stream.tls_facts().map(|(sni, version)| (Rc::from(sni), version));
        let limit = open.worker.shared.snapshot.load().config.limits.h2_connection_bytes;
        Conn {
            peer,
            local: local.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0))),
            tls,
            id: open.worker.client_id(),
            served: Cell::new(false),
            budget: Budget::new(limit),
            memory_refusals: Cell::new(0),
            last_end: Cell::new(clock::now()),
            streams: running::Running::default(),
            state,
        }
    }
}

/// The connection: handshake, then streams until the client ends it, it errs, it idles
/// past `client_idle`, or the switch shuts down (GOAWAY, in-flight streams finish).
async fn run<T>(open: &Open, conn: Conn, io: T)
where
    T: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let worker = &open.worker;
    let snap = worker.shared.snapshot.load_full();
    let Some(mut h2) = handshake(worker, &conn, &snap, io).await else { return };
    let conn = Rc::new(conn);
    // The streams still running when the connection ends are abandoned with it.
    let _abandon = AbortOnExit(Rc::clone(&conn));
    let streams = &conn.streams;
    let mut closing = false;
    // Closed for the client's abuse (rapid reset, the memory bound): nothing more is served.
    let mut abandoned = false;
    // Once shutdown starts, the connection counts as a request in progress until its
    // streams' answers are written out and GOAWAY sent (the phases' own count ends when
    // an answer is in the pipe, before this connection has sent it).
    let mut draining: Option<BusyGuard> = None;
    // Streams still running on the switch's side, answered or not: past this the client
    // has opened streams faster than it let them finish, by resetting them (the crate
    // frees a client's stream count at its RST_STREAM, while the request goes on here).
    let max_running = 2 * snap.config.limits.h2_max_concurrent_streams;
    // One timer for the idle clock, re-armed only when it fires: a stream's end does not
    // wake this task (a wake-up polls the h2 connection, its costliest part), it only
    // notes the time (`StreamEnd`); the timer, when it fires, looks at what ran meanwhile.
    let client_idle = snap.config.timeouts.client_idle;
    let idle = tokio::time::sleep(client_idle);
    tokio::pin!(idle);
    loop {
        // Ended streams took themselves out, without waking this task (a wake-up polls the
        // h2 connection again).
        conn.state.set(if streams.is_empty() { ConnState::Idle } else { ConnState::Busy });
        // Biased: the h2 connection first, as it is what wakes this task nearly always
        // (and the branches' order needs no random number per turn).
        tokio::select! {
            biased;
            next = h2.accept() => match next {
                // Ended for the client's abuse: streams it opened before reading the GOAWAY
                // are dropped (reset) uncounted, the connection was counted once.
                Some(Ok(_)) if abandoned => {}
                Some(Ok(_)) if streams.len() >= max_running => {
                    rapid_reset(worker, &conn, &mut h2);
                    streams.abort_all();
                    (closing, abandoned) = (true, true);
                }
                Some(Ok((_, mut respond))) if conn.budget.full() => {
                    if over_budget(worker, &conn, &mut respond) {
                        h2.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                        streams.abort_all();
                        (closing, abandoned) = (true, true);
                    }
                }
                Some(Ok((req, respond))) => {
                    worker.shared.stats.inc(Counter::H2Streams);
                    // Boxed first, so the wrappers around it move a pointer rather than the
                    // stream's whole future; made in its box (`floor::boxed`: `Box::pin` copied
                    // its 3.7 KB once per stream).
                    let listener = open.listener();
                    let s = pinned(|| stream::serve(Rc::clone(worker), listener, Rc::clone(&conn), req, respond));
                    let slot = streams.reserve();
                    let s = StreamEnd(Rc::clone(&conn), running::Slot::of(&slot)).around(s);
                    // A task-local does not pass to spawned tasks: each stream says its listener.
                    streams.spawn(&slot, Stats::on_listener(open.listener(), s));
                }
                Some(Err(e)) => return connection_error(worker, &conn, &e),
                None => return,
            },
            () = &mut idle, if !closing => {
                match idle_deadline(&conn, streams.is_empty(), client_idle) {
                    Some(later) => idle.as_mut().reset(later),
                    None => {
                        closing = true;
                        h2.graceful_shutdown();
                    }
                }
            }
            () = worker.shutdown.notified(), if !closing => {
                closing = true;
                h2.graceful_shutdown();
            }
        }
        if worker.shutting_down() && draining.is_none() {
            draining = Some(BusyGuard::new(worker));
            if !closing {
                closing = true;
                h2.graceful_shutdown();
            }
        }
    }
}

/// When the idle timer should fire next, or `None` when the connection has been without a
/// stream for `limit`: while streams run, `limit` from now; else `limit` after the last one
/// ended.
fn idle_deadline(conn: &Conn, no_streams: bool, limit: Duration) -> Option<tokio::time::Instant> {
    // The precise clock: the coarse one may lag the timer by a tick, which would re-arm it
    // for a moment already past, over and over until the tick.
    let now = tokio::time::Instant::now();
    if !no_streams {
        return Some(now + limit);
    }
    let due = conn.last_end.get() + limit;
    (due > now).then_some(due)
}

/// A running stream: when its task ends (or is aborted) it leaves its connection's
/// running streams and notes the time, for the idle clock.
struct StreamEnd(Rc<Conn>, running::Slot);

impl StreamEnd {
    /// `stream`, noted when it ends.
    async fn around<F: std::future::Future<Output = ()>>(self, stream: F) {
        stream.await;
        drop(self);
    }
}

impl Drop for StreamEnd {
    fn drop(&mut self) {
        self.0.streams.ended(&self.1);
        self.0.last_end.set(clock::now());
    }
}

/// Aborts a connection's running streams when it ends.
struct AbortOnExit(Rc<Conn>);

impl Drop for AbortOnExit {
    fn drop(&mut self) {
        self.0.streams.abort_all();
    }
}

/// The server side of the HTTP/2 handshake (the client's preface and SETTINGS), within
/// `client_head`; counted.
async fn handshake<T>(
    worker: &Worker,
    conn: &Conn,
    snap: &crate::floor::snapshot::Snapshot,
    io: T,
) -> Option<h2::server::Connection<T, bytes::Bytes>>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    match tokio::time::timeout(snap.config.timeouts.client_head, builder(snap).handshake(io)).await {
        Ok(Ok(h2)) => {
            worker.shared.stats.inc(Counter::H2Connections);
            Some(h2)
        }
        Ok(Err(e)) => {
            connection_error(worker, conn, &e);
            None
        }
        Err(_) => {
            worker.shared.stats.inc(Counter::HeadTimeout);
            None
        }
    }
}

/// The server settings: stream and header-list limits like HTTP/1.1's, and the `h2`
/// crate's flood limits.
fn builder(snap: &crate::floor::snapshot::Snapshot) -> h2::server::Builder {
    let mut b = h2::server::Builder::new();
    let limits = &snap.config.limits;
    let head = u32::try_from(limits.max_head_bytes).unwrap_or(u32::MAX);
    let streams = u32::try_from(limits.h2_max_concurrent_streams).unwrap_or(u32::MAX);
    b.max_concurrent_streams(streams)
        .max_header_list_size(head)
        .max_pending_accept_reset_streams(MAX_PENDING_RESETS)
        .max_local_error_reset_streams(Some(MAX_ERROR_RESETS))
        .max_send_buffer_size(64 * 1024);
    b
}

/// Ends a connection whose client resets streams to open more than it may (rapid reset,
/// CVE-2023-44487): GOAWAY ENHANCE_YOUR_CALM (sent as the connection is polled on); its
/// streams in progress are abandoned.
fn rapid_reset<T>(worker: &Worker, conn: &Conn, h2: &mut h2::server::Connection<T, bytes::Bytes>)
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    worker.shared.stats.inc(Counter::H2ConnectionErrors);
    tracing::warn!(client = %conn.peer, "HTTP/2 client reset streams faster than they ended; connection closed");
    h2.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
}

/// A stream opened while the connection holds all the switch gives it
/// (`limits.h2_connection_bytes`): reset ENHANCE_YOUR_CALM, counted and logged. True when
/// the client has done so `MAX_MEMORY_REFUSALS` times: the connection is to end.
fn over_budget(worker: &Worker, conn: &Conn, respond: &mut h2::server::SendResponse<bytes::Bytes>) -> bool {
    worker.shared.stats.inc(Counter::H2MemoryLimit);
    respond.send_reset(h2::Reason::ENHANCE_YOUR_CALM);
    let refused = conn.memory_refusals.get() + 1;
    conn.memory_refusals.set(refused);
    let held = conn.budget.held();
    tracing::info!(client = %conn.peer, held, "HTTP/2 connection at its memory bound; stream refused");
    if refused < MAX_MEMORY_REFUSALS {
        return false;
    }
    worker.shared.stats.inc(Counter::H2ConnectionErrors);
    tracing::warn!(client = %conn.peer, "HTTP/2 client kept opening streams at its memory bound; connection closed");
    true
}

/// A connection that ended in error: counted and logged when the client broke the
/// protocol (an I/O error is just a client that went away).
fn connection_error(worker: &Worker, conn: &Conn, e: &h2::Error) {
    if e.is_io() {
        return;
    }
    worker.shared.stats.inc(Counter::H2ConnectionErrors);
    tracing::info!(client = %conn.peer, error = %e, "HTTP/2 connection error");
}
