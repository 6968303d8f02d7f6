//! One stream: translated to an HTTP/1.1 request (`request`), piped into the HTTP/1.1
//! request phases as a connection of its own (`floor::stream::Piped`), its body carried
//! up as the client sends it (within flow control, as the phases take it), and the answer
//! relayed back (`response`). The three run together, so a server that answers before the
//! body is whole, or a large body in either direction, never deadlocks.

use crate::floor::budget::Charge;
use crate::floor::conns::{ConnState, Watch};
use crate::floor::fields::write_chunked_end;
use crate::floor::pipe::{self, PhasesEnd};
use crate::floor::stats::Counter;
use crate::floor::stream::{ClientStream, Piped};
use crate::floor::worker::{BusyGuard, Worker};
use crate::http::Client;
use crate::http2::grpc;
use crate::http2::request::{self, Framing, Refused};
use crate::http2::response::{self, RelayCtx, Relayed};
use crate::http2::Conn;
use crate::observe::record::{self, Details, Entry, Outcome};
use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use std::rc::Rc;
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Serves one stream to its end.
pub async fn serve(
    worker: Rc<Worker>,
    listener: usize,
    conn: Rc<Conn>,
    req: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
) {
    // Shutdown waits for the whole stream, its answer relayed included.
    let _busy = BusyGuard::new(&worker);
    let end_stream = req.body().is_end_stream();
    let t = match request::translate(&req, end_stream) {
        Ok(t) => t,
        Err(r) => return refuse(&worker, &conn, listener, &req, &mut respond, r),
    };
    // The header block is held while the stream runs (in the phases' buffer, where the
    // head reader finds it: it never passes through the pipe); the pipe holds what passes.
    let _head = Charge::new(&conn.budget, t.head.len());
    let snap = worker.snapshot();
    let (wing, theirs) = pipe::pipe(&conn.budget);
    let mut client = piped_client(&worker, &conn, theirs, &t.head);
    let ctx = RelayCtx {
        stats: &worker.shared.stats,
        limits: snap.head_limits,
        is_head: t.is_head,
        client_io: snap.config.timeouts.client_io,
        grpc: grpc::is_grpc(req.headers()),
    };
    // Both halves are made inside the join, not in locals first: a future moved into the
    // join is copied whole (1.7 KB and 0.6 KB per stream).
    let phases = || async {
        crate::http::serve_piped(&worker, listener, &mut client).await;
        if client.served {
            conn.served.set(true);
        }
        if let Some(buf) = client.buf.take() {
            worker.bufs.give(buf);
        }
        drop(client); // the pipe's end: the relay reads the end of the answer
    };
    let exchange = || async {
        let upload = async {
            // A stream that ended with its headers has no body to wait for.
            if t.framing != Framing::None {
                let body = req.into_body();
                upload(wing.writer(), t.framing, body, &worker, snap.config.timeouts.client_io).await;
            }
            wing.close_up();
        };
        let mut answer = wing.reader();
        // Pinned where it is made (`tokio::pin!` on a local moved it: 0.6 KB per stream).
        let mut relay = std::pin::pin!(response::relay(&mut answer, &mut respond, &ctx));
        tokio::select! {
            biased;
            r = &mut relay => r,
            () = upload => relay.await,
        }
    };
    // Biased: the phases first, so an answer they write is relayed in the same poll of the
    // stream instead of the next (each poll of the stream's task costs a wake-up).
    let ((), relayed) = tokio::join!(biased; phases(), exchange());
    if relayed == Relayed::NoAnswer {
        respond.send_reset(h2::Reason::CANCEL);
    }
}

/// The stream as a client connection of the HTTP/1.1 phases: the real connection's
/// address, TLS facts, pool id and `served`; busy from the start (never evicted); its
/// translated head already in its buffer.
fn piped_client(worker: &Worker, conn: &Conn, io: PhasesEnd, head: &[u8]) -> Client {
    let piped = Piped { io, local: conn.local, tls: conn.tls.clone() };
    let mut buf = worker.bufs.take_for_head();
    buf.put(head);
    Client {
        stream: ClientStream::Piped(Box::new(piped)),
        peer: conn.peer,
        buf: Some(buf),
        pins: None,
        state: Rc::new(Watch::with(ConnState::Busy)),
        id: conn.id,
        served: conn.served.get(),
        h2_preface: false,
    }
}

/// Writes the body as DATA arrives (chunked unless a length was given) into the phases'
/// pipe; a body longer or shorter than its `content-length` is refused (the stream reset,
/// counted) and never written past the length. The caller closes the pipe when this ends,
/// done or failed: the phases then see the request end (or the client go).
async fn upload<W: AsyncWrite + Unpin>(
    mut pw: W,
    framing: Framing,
    mut body: RecvStream,
    worker: &Worker,
    client_io: Duration,
) {
    let mut sent = 0u64;
    let mut chunk = Vec::new();
    loop {
        let data = match tokio::time::timeout(client_io, body.data()).await {
            Ok(Some(Ok(data))) => data,
            Ok(None) => break,
            Ok(Some(Err(e))) => return note_body_error(worker, &e),
            Err(_) => return, // the phases count their own body timeout (408)
        };
        if data.is_empty() {
            continue; // an empty DATA frame: as a chunk it would end the body
        }
        sent += data.len() as u64;
        if matches!(framing, Framing::Length(n) if sent > n) || framing == Framing::None {
            return length_mismatch(worker);
        }
        let written = match framing {
            Framing::Chunked => {
                request::chunk(&data, &mut chunk);
                pw.write_all(&chunk).await
            }
            _ => pw.write_all(&data).await,
        };
        if written.is_err() {
            return;
        }
        // Only now may the client send more: what waits for the pipe (the connection's
        // budget full) stays within the flow-control window.
        let _ = body.flow_control().release_capacity(data.len());
    }
    match framing {
        Framing::Length(n) if sent != n => length_mismatch(worker),
        Framing::Chunked => {
            // The request's trailers (after its DATA), as the chunked trailer section.
            let trailers = tokio::time::timeout(client_io, body.trailers()).await;
            chunk.clear();
            write_chunked_end(trailers.ok().and_then(Result::ok).flatten().as_ref(), &mut chunk);
            let _ = pw.write_all(&chunk).await;
        }
        _ => {}
    }
}

/// DATA that disagrees with `content-length` (RFC 9113 §8.1.1: malformed).
fn length_mismatch(worker: &Worker) {
    worker.shared.stats.inc(Counter::H2Refused);
    tracing::info!("HTTP/2 request body disagrees with its content-length; not forwarded whole");
}

/// The body ended in a stream error: one the `h2` crate found malformed is a refusal.
fn note_body_error(worker: &Worker, e: &h2::Error) {
    if e.reason() == Some(h2::Reason::PROTOCOL_ERROR) {
        worker.shared.stats.inc(Counter::H2Refused);
        tracing::info!(error = %e, "HTTP/2 request body refused");
    }
}

/// Answers a stream refused before translation: counted, logged as an event and in the
/// access log (the request phases never saw it).
fn refuse(
    worker: &Worker,
    conn: &Conn,
    listener: usize,
    req: &http::Request<RecvStream>,
    respond: &mut SendResponse<Bytes>,
    r: Refused,
) {
    let started = tokio::time::Instant::now();
    let stats = &worker.shared.stats;
    stats.inc(if r.status == 501 { Counter::NotImplemented } else { Counter::H2Refused });
    tracing::info!(client = %conn.peer, status = r.status, reason = r.reason, "HTTP/2 request refused");
    if grpc::is_grpc(req.headers()) {
        stats.inc(Counter::GrpcStatusAnswers);
        let _ = respond.send_response(grpc::trailers_only(r.status, r.reason), true);
        let outcome = Outcome { status: r.status, error: Some(r.reason), ..Outcome::default() };
        return log_refusal(worker, conn, listener, req, started, &outcome);
    }
    let body = Bytes::from(format!("{}\n", r.reason));
    let response = http::Response::builder()
        .status(r.status)
        .header("content-type", "text/plain")
        .header("content-length", body.len())
        .body(());
    let sent = body.len() as u64;
    if let Ok(mut send) = response.map(|resp| respond.send_response(resp, false)) {
        if let Ok(send) = send.as_mut() {
            let _ = send.send_data(body, true);
        }
    }
    let outcome = Outcome { status: r.status, bytes_out: sent, error: Some(r.reason), ..Outcome::default() };
    log_refusal(worker, conn, listener, req, started, &outcome);
}

/// The access-log line of a refused stream.
fn log_refusal(
    worker: &Worker,
    conn: &Conn,
    listener: usize,
    req: &http::Request<RecvStream>,
    started: tokio::time::Instant,
    outcome: &Outcome,
) {
    let snap = worker.shared.snapshot.load();
    let target = req.uri().path_and_query().map_or("", |p| p.as_str());
    let field = |name: http::header::HeaderName| req.headers().get(name).and_then(|v| v.to_str().ok());
    let host = req.uri().authority().map(|a| a.as_str()).or_else(|| field(http::header::HOST));
    let entry =
        Entry { client: conn.peer, listener, rule: "", method: req.method().as_str(), target, started };
    let tls = conn.tls.as_ref();
    let details = Details {
        version: "HTTP/2.0",
        host: host.unwrap_or(""),
        user_agent: field(http::header::USER_AGENT).unwrap_or(""),
        real_client: None,
        sni: tls.map_or("", |t| &*t.0),
        tls_version: tls.map_or("", |t| t.1),
    };
    record::finish_with(&worker.shared, &snap, &entry, outcome, &details);
}
