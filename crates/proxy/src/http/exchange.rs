//! Phase "exchange": sends the request to the chosen server and carries the response back.
//! The rest of the request body streams to the server while the response is awaited, so a
//! server that answers early (or a client waiting for `100 Continue`) never deadlocks, and
//! both directions run with back-pressure through fixed buffers (seed 000 §4.1's flooding
//! problem cannot happen: nothing is read faster than the other side takes it).

use crate::floor::buf::IoBuf;
use crate::floor::clock;
use crate::floor::failure::{Failure, Refusal};
use crate::floor::io::{read_some, write_all_parts, IoFail};
use crate::floor::persist::OnResponse;
use crate::floor::snapshot::Snapshot;
use crate::floor::stats::{Counter, Stats};
use crate::http::client::Client;
use crate::http::reply::{self, Replied, ReplyCtx};
use crate::http::txn::Txn;
use crate::upstream::connect::Upstream;
use crate::upstream::tunnel::moving::{self, Origin};
use http1::{BodyError, BodyScanner};
use std::cell::Cell;
use std::pin::pin;
use tokio::io::{AsyncRead, AsyncWrite};

/// Why streaming the request body stopped early.
enum PumpFail {
    Body(BodyError),
    ClientGone,
    ClientTimeout,
    ServerWrite,
}

impl<'a> Txn<'a> {
    /// Runs the exchange on `up`; true when the client connection stays open. The server
    /// connection goes back to the pool when both sides allow it.
    pub(super) async fn exchange(
        &mut self,
        mut up: Upstream<'a>,
        body: &BodyScanner,
    ) -> Result<bool, Failure> {
        let (worker, snap) = (self.worker, self.snap);
        // The scanner continues where the route phase left it (past any body it buffered);
        // a copy, so a retry starts from the same place.
        let mut body = body.clone();
        let first_done = self.send_request(&mut up, &mut body).await?;
        let body_sent = Cell::new(None);
        let mut ctx = ReplyCtx::new(worker, snap, &self.s.req, &up.server.name, up.reused);
        if self.s.close_after {
            ctx.close_client();
        }
        if !first_done {
            ctx.body_streams(&body_sent);
        }
        let group = self.outcome.group.map(|g| snap.group(g));
        if let Some(persist) = group.and_then(|g| g.persistence.as_deref()) {
            let found = &self.s.notes.persist;
            let share = group.zip(worker.shared.cluster.get()).map(|(g, c)| (g.name.as_str(), &**c));
            ctx.with_persistence(OnResponse { persist, found, server: up.server, index: up.index, share });
        }
        let Some(cbuf) = self.client.buf.as_mut() else { return Err(Failure::client(None)) };
        let (mut cr, mut cw) = self.client.stream.split();
        let (mut sr, mut sw) = up.stream.split();
        let (resp, resp_out, sbuf) = (&mut self.s.resp, &mut self.s.resp_out, &mut self.s.sbuf);
        let outcome = &mut self.outcome;
        let body_bytes = Cell::new(0u64);
        let (end, pump) = if first_done {
            // Awaited where it is made: a future kept in a local first is copied (~900
            // bytes) into the awaiting future's state.
            (Some(reply::forward(&mut sr, &mut cw, &ctx, resp, sbuf, resp_out, outcome).await), Ok(()))
        } else {
            let reply = reply::forward(&mut sr, &mut cw, &ctx, resp, sbuf, resp_out, outcome);
            let pump = pump_body(&mut cr, cbuf, &mut sw, &mut body, snap, &body_bytes);
            race(reply, async {
                let pumped = pump.await;
                body_sent.set(Some(clock::now()));
                pumped
            })
            .await
        };
        self.outcome.bytes_in += body_bytes.get();
        self.finish(up, end, pump).await
    }

    /// Writes the forwarded head, the body bytes held by the route phase and those already
    /// buffered, in one write; true when that was the whole request.
    async fn send_request(&mut self, up: &mut Upstream<'a>, body: &mut BodyScanner) -> Result<bool, Failure> {
        let stats = &self.worker.shared.stats;
        let Some(cbuf) = self.client.buf.as_mut() else { return Err(Failure::client(None)) };
        // The scratch space is recycled: nothing read from an earlier server may leak into
        // this exchange (an aborted response can leave bytes behind).
        self.s.sbuf.clear();
        if self.s.sbuf.capacity() == 0 {
            self.s.sbuf = self.worker.bufs.take();
        }
        let first = if self.s.body_complete {
            http1::Scan { consumed: 0, done: true }
        } else {
            cbuf.grow();
            body.scan(cbuf.filled()).map_err(|e| Failure::client(Some(body_refusal(stats, e))))?
        };
        let deadline = clock::now() + self.snap.config.timeouts.server_response;
        let parts = [self.s.req_out.as_slice(), &self.s.held, &cbuf.filled()[..first.consumed]];
        if write_all_parts(&mut up.stream, &parts, deadline).await.is_err() {
            stats.inc(Counter::ServerAborted);
            return Err(Failure::unanswered(false, up.reused));
        }
        cbuf.consume(first.consumed);
        self.outcome.bytes_in += first.consumed as u64;
        Ok(first.done)
    }

    /// What the response and the body pump left: the pool, a tunnel, or the failure.
    async fn finish(
        &mut self,
        mut up: Upstream<'a>,
        end: Option<Result<Replied, Failure>>,
        pump: Result<(), PumpFail>,
    ) -> Result<bool, Failure> {
        let worker = self.worker;
        let pumped = pump.is_ok();
        let answered = self.outcome.bytes_out > 0;
        match (end, pump) {
            (None, Err(fail)) if answered => {
                let _ = pump_refusal(&worker.shared.stats, fail);
                Err(Failure::client(None))
            }
            (None, Err(fail)) => Err(Failure::client(pump_refusal(&worker.shared.stats, fail))),
            (None, Ok(())) => Err(Failure::client(None)),
            (Some(Err(f)), _) => Err(f),
            (Some(Ok(Replied::Complete { server_reusable, keep_client })), _) => {
                let keep = keep_client && pumped;
                let policy =
                    self.outcome.group.map_or_else(config::Reuse::default, |g| self.snap.group(g).reuse);
                if server_reusable && pumped && Client::may_pool(policy, keep) {
                    worker.pools.put(up.server.id, up.stream, self.client.id);
                }
                Ok(keep)
            }
            (Some(Ok(Replied::Upgraded)), _) => {
                worker.shared.stats.inc(Counter::Tunnels);
                let idle = self.snap.config.timeouts.tunnel_idle;
                let Some(cbuf) = self.client.buf.as_mut() else { return Err(Failure::client(None)) };
                let (listener, peer, server) = (self.listener, self.client.peer, Some(up.server));
                let from = Origin { listener, peer, kind: "websocket", server };
                let (client, sbuf) = (&mut self.client.stream, &mut self.s.sbuf);
                let carried = moving::run(worker, from, client, cbuf, &mut up.stream, sbuf, idle).await;
                self.outcome.bytes_in += carried.up;
                self.outcome.bytes_out += carried.down;
                Ok(false)
            }
        }
    }
}

/// Runs the response forwarding and the request-body pump together until the response
/// ends. A body failure that leaves no response to wait for ends the race early (`None`).
async fn race<T>(
    reply: impl std::future::Future<Output = T>,
    pump: impl std::future::Future<Output = Result<(), PumpFail>>,
) -> (Option<T>, Result<(), PumpFail>) {
    let mut reply = pin!(reply);
    let mut pump = pin!(pump);
    let mut pumped: Option<Result<(), PumpFail>> = None;
    loop {
        tokio::select! {
            biased;
            end = &mut reply => {
                return (Some(end), pumped.unwrap_or(Err(PumpFail::ClientGone)));
            }
            r = &mut pump, if pumped.is_none() => match r {
                // The server stopped reading: it may still answer (e.g. 413), so keep waiting.
                Err(PumpFail::ServerWrite) | Ok(()) => pumped = Some(r),
                Err(fail) => return (None, Err(fail)),
            },
        }
    }
}

/// The most of a request body of known length read (and written) at once; a buffer widens
/// to it while such a body streams (nginx reads bodies into up to `client_body_buffer_size`).
const BODY_PIECE: usize = 64 * 1024;

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
    if let Some(left) = body.remaining() {
        // 64 KiB of body through a 16 KiB buffer was four reads and four writes.
        cbuf.widen(cbuf.len().saturating_add(usize::try_from(left).unwrap_or(usize::MAX)), BODY_PIECE);
    }
    loop {
        if cbuf.is_empty() {
            match read_some(cr, cbuf, clock::now() + t.client_io).await {
                Ok(0) | Err(IoFail::Io) => return Err(PumpFail::ClientGone),
                Ok(_) => {}
                Err(IoFail::Timeout) => return Err(PumpFail::ClientTimeout),
            }
        }
        let scan = body.scan(cbuf.filled()).map_err(PumpFail::Body)?;
        let chunk = &cbuf.filled()[..scan.consumed];
        let deadline = clock::now() + t.server_response;
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

fn body_refusal(stats: &Stats, e: BodyError) -> Refusal {
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

fn pump_refusal(stats: &Stats, fail: PumpFail) -> Option<Refusal> {
    if let PumpFail::ClientGone = fail {
        stats.inc(Counter::ClientAbortedBody);
        tracing::info!("client closed in the middle of its request body");
    }
    match fail {
        PumpFail::Body(e) => Some(body_refusal(stats, e)),
        PumpFail::ClientTimeout => {
            stats.inc(Counter::ClientTimeout);
            Some(Refusal::new(408, "request body not received in time"))
        }
        PumpFail::ClientGone | PumpFail::ServerWrite => None,
    }
}
