//! Phase "exchange": sends the request to the chosen server and carries the response back.
//! The rest of the request body streams to the server while the response is awaited, so a
//! server that answers early (or a client waiting for `100 Continue`) never deadlocks, and
//! both directions run with back-pressure through fixed buffers (seed 000 §4.1's flooding
//! problem cannot happen: nothing is read faster than the other side takes it).

use crate::buf::IoBuf;
use crate::io::{read_some, write_all_parts, IoFail};
use crate::persist::{OnResponse, PersistRt};
use crate::reply::{self, ReplyCtx, ReplyEnd};
use crate::request::Outcome;
use crate::respond::Refusal;
use crate::session::{Client, Scratch};
use crate::snapshot::{ServerRt, Snapshot};
use crate::stats::Counter;
use crate::tunnel;
use crate::worker::Worker;
use http1::{BodyError, BodyScanner};
use std::cell::Cell;
use std::pin::pin;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// How an exchange ended.
pub enum Exchange {
    /// The response reached the client; keep the client connection open or not.
    Done {
        /// Keep the client connection.
        keep_client: bool,
    },
    /// The server closed or reset before sending any response byte. `delivered` says
    /// whether any request byte was written to it.
    Unanswered {
        /// Some of the request reached the server.
        delivered: bool,
    },
    /// Failed; send this refusal if given (only when nothing was sent yet), then close.
    Failed(Option<Refusal>),
}

/// Why streaming the request body stopped early.
enum PumpFail {
    Body(BodyError),
    ClientGone,
    ClientTimeout,
    ServerWrite,
}

/// Runs the exchange on `server`; returns the connection to the pool when it can be reused.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    worker: &Worker,
    snap: &Snapshot,
    client: &mut Client,
    scratch: &mut Scratch,
    body: &BodyScanner,
    mut server: TcpStream,
    srv: &ServerRt,
    persist: Option<(&PersistRt, usize)>,
    outcome: &mut Outcome,
) -> Exchange {
    let Some(cbuf) = client.buf.as_mut() else { return Exchange::Failed(None) };
    // The scratch space is recycled: nothing read from an earlier server may leak into this
    // exchange (an aborted response can leave bytes behind).
    scratch.sbuf.clear();
    let timeouts = &snap.config.timeouts;
    // The scanner continues where the route phase left it (past any body it buffered);
    // a copy, so a retry starts from the same place.
    let mut body = body.clone();
    let first = if scratch.body_complete {
        http1::Scan { consumed: 0, done: true }
    } else {
        match body.scan(cbuf.filled()) {
            Ok(scan) => scan,
            Err(e) => return Exchange::Failed(Some(body_refusal(worker, e))),
        }
    };
    let deadline = Instant::now() + timeouts.server_response;
    let parts = [scratch.req_out.as_slice(), &scratch.held, &cbuf.filled()[..first.consumed]];
    if write_all_parts(&mut server, &parts, deadline).await.is_err() {
        return Exchange::Unanswered { delivered: false };
    }
    cbuf.consume(first.consumed);
    outcome.bytes_in += first.consumed as u64;

    let mut ctx = ReplyCtx::new(worker, snap, &scratch.req);
    if scratch.close_after {
        ctx.close_client();
    }
    let Scratch { resp, resp_out, sbuf, persist: found, .. } = scratch;
    if let Some((persist, index)) = persist {
        ctx.with_persistence(OnResponse { persist, found, server: srv, index });
    }
    let (mut cr, mut cw) = client.stream.split();
    let (mut sr, mut sw) = server.split();
    let reply = reply::forward(&mut sr, &mut cw, &ctx, resp, sbuf, resp_out, outcome);
    let body_bytes = Cell::new(0u64);
    let (end, pump) = if first.done {
        (reply.await, Ok(()))
    } else {
        let pump = pump_body(&mut cr, cbuf, &mut sw, &mut body, snap, &body_bytes);
        race(reply, pump).await
    };
    outcome.bytes_in += body_bytes.get();
    let answered = outcome.bytes_out > 0;
    finish(worker, snap, client, scratch, server, srv, end, pump, answered).await
}

/// Runs the response forwarding and the request-body pump together until the response
/// ends. A body failure that leaves no response to wait for ends the race early.
async fn race(
    reply: impl std::future::Future<Output = ReplyEnd>,
    pump: impl std::future::Future<Output = Result<(), PumpFail>>,
) -> (ReplyEnd, Result<(), PumpFail>) {
    let mut reply = pin!(reply);
    let mut pump = pin!(pump);
    let mut pumped: Option<Result<(), PumpFail>> = None;
    loop {
        tokio::select! {
            biased;
            end = &mut reply => {
                return (end, pumped.unwrap_or(Err(PumpFail::ClientGone)));
            }
            r = &mut pump, if pumped.is_none() => match r {
                // The server stopped reading: it may still answer (e.g. 413), so keep waiting.
                Err(PumpFail::ServerWrite) | Ok(()) => pumped = Some(r),
                Err(fail) => return (ReplyEnd::NotStarted, Err(fail)),
            },
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn finish(
    worker: &Worker,
    snap: &Snapshot,
    client: &mut Client,
    scratch: &mut Scratch,
    mut server: TcpStream,
    srv: &ServerRt,
    end: ReplyEnd,
    pump: Result<(), PumpFail>,
    answered: bool,
) -> Exchange {
    let stats = &worker.shared.stats;
    let pumped = pump.is_ok();
    match (end, pump) {
        (ReplyEnd::NotStarted, Err(_)) if answered => Exchange::Failed(None),
        (ReplyEnd::NotStarted, Err(fail)) => Exchange::Failed(pump_refusal(worker, fail)),
        (ReplyEnd::Complete { server_reusable, keep_client }, _) => {
            if server_reusable && pumped {
                worker.pools.put(srv.id, server);
            }
            Exchange::Done { keep_client: keep_client && pumped }
        }
        (ReplyEnd::Upgraded, _) => {
            stats.inc(Counter::Tunnels);
            let idle = snap.config.timeouts.tunnel_idle;
            let Some(cbuf) = client.buf.as_mut() else { return Exchange::Failed(None) };
            tunnel::run(&mut client.stream, cbuf, &mut server, &mut scratch.sbuf, idle).await;
            Exchange::Done { keep_client: false }
        }
        (ReplyEnd::Unanswered, _) => Exchange::Unanswered { delivered: true },
        (ReplyEnd::Failed(r), _) => Exchange::Failed(r),
        (ReplyEnd::NotStarted, Ok(())) => Exchange::Failed(None),
    }
}

/// Streams the rest of the request body from the client to the server.
async fn pump_body<R, W>(
    cr: &mut R,
    cbuf: &mut IoBuf,
    sw: &mut W,
    body: &mut BodyScanner,
    snap: &Snapshot,
    forwarded: &Cell<u64>,
) -> Result<(), PumpFail>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let t = &snap.config.timeouts;
    loop {
        if cbuf.is_empty() {
            match read_some(cr, cbuf, Instant::now() + t.client_io).await {
                Ok(0) | Err(IoFail::Io) => return Err(PumpFail::ClientGone),
                Ok(_) => {}
                Err(IoFail::Timeout) => return Err(PumpFail::ClientTimeout),
            }
        }
        let scan = body.scan(cbuf.filled()).map_err(PumpFail::Body)?;
        let chunk = &cbuf.filled()[..scan.consumed];
        let deadline = Instant::now() + t.server_response;
        write_all_parts(sw, &[chunk], deadline).await.map_err(|_| PumpFail::ServerWrite)?;
        cbuf.consume(scan.consumed);
        forwarded.set(forwarded.get() + scan.consumed as u64);
        if scan.done {
            return Ok(());
        }
        if scan.consumed == 0 && !cbuf.is_empty() {
            // The scanner always takes what it is given until the body ends; be safe anyway.
            return Err(PumpFail::Body(BodyError::BadChunkSize));
        }
    }
}

fn body_refusal(worker: &Worker, e: BodyError) -> Refusal {
    let stats = &worker.shared.stats;
    if e == BodyError::TooLarge {
        stats.inc(Counter::BodyTooLarge);
        Refusal::new(413, "request body too large")
    } else {
        stats.inc(Counter::BadRequest);
        Refusal::new(400, body_reason(e))
    }
}

fn body_reason(e: BodyError) -> &'static str {
    match e {
        BodyError::BadChunkSize => "invalid chunk size",
        BodyError::BadChunkExtension => "invalid chunk extension",
        BodyError::BadChunkEnd => "chunk data not followed by CRLF",
        BodyError::BadTrailer => "invalid trailer section",
        BodyError::TooLarge => "request body too large",
    }
}

fn pump_refusal(worker: &Worker, fail: PumpFail) -> Option<Refusal> {
    match fail {
        PumpFail::Body(e) => Some(body_refusal(worker, e)),
        PumpFail::ClientTimeout => {
            worker.shared.stats.inc(Counter::ClientTimeout);
            Some(Refusal::new(408, "request body not received in time"))
        }
        PumpFail::ClientGone | PumpFail::ServerWrite => None,
    }
}
