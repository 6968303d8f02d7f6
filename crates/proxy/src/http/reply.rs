//! Phase "forward response": reads the server's response head (forwarding interim 1xx
//! answers), rewrites it for the client, and streams the body back with back-pressure.
//! A malformed or missing response head becomes a 502 / 504 for the client; once bytes have
//! gone to the client, a failure can only close the connection.

use crate::floor::buf::IoBuf;
use crate::floor::clock;
use crate::floor::failure::{Failure, Refusal};
use crate::floor::io::{read_some, write_all_parts, IoFail};
use crate::floor::persist::OnResponse;
use crate::floor::snapshot::Snapshot;
use crate::floor::stats::{Counter, Stats};
use crate::floor::stream::LastWrites;
use crate::floor::worker::Worker;
use crate::observe::record::Outcome;
use http1::{
    write_response_head, write_response_head_with, BodyKind, BodyScanner, HeadLimits, Parse, RequestHead,
    ResponseEdits, ResponseHead, ResponseRewrite, SetCookieEdit, Version,
};
use std::cell::Cell;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

/// How forwarding a response ended when it did not fail.
pub enum Replied {
    /// Whole response forwarded.
    Complete {
        /// The server connection may be pooled.
        server_reusable: bool,
        /// The client connection may stay open.
        keep_client: bool,
    },
    /// A 101 went to the client: the connection becomes a tunnel.
    Upgraded,
}

/// What the response phase needs to know about the request and the settings.
pub struct ReplyCtx<'a> {
    stats: &'a Stats,
    limits: HeadLimits,
    server_timeout: Duration,
    client_timeout: Duration,
    is_head: bool,
    client_version: Version,
    client_keep_alive: bool,
    upgrade_requested: bool,
    persist: Option<OnResponse<'a>>,
    reused: bool,
    server: &'a str,
    /// When the whole request body had been sent (`None` inside: still streaming; no cell:
    /// the request was sent whole before the response was awaited).
    body_sent: Option<&'a Cell<Option<Instant>>>,
    /// The access log is on: the answer's first byte is timed (its `ttfb` field). Off, no
    /// clock is read for it (a precise read costs as much as parsing a field, see
    /// `floor::clock`).
    timed: bool,
}

impl<'a> ReplyCtx<'a> {
    /// Captures what the response phase needs from the request and the snapshot.
    /// `server`: its name, for the log; `reused`: the server connection came from the idle
    /// pool.
    pub fn new(
        worker: &'a Worker,
        snap: &Snapshot,
        req: &RequestHead,
        server: &'a str,
        reused: bool,
    ) -> Self {
        ReplyCtx {
            stats: &worker.shared.stats,
            limits: snap.head_limits,
            server_timeout: snap.config.timeouts.server_response,
            client_timeout: snap.config.timeouts.client_io,
            is_head: req.is_head,
            client_version: req.version,
            client_keep_alive: req.keep_alive && !worker.shutting_down(),
            upgrade_requested: req.upgrade,
            persist: None,
            reused,
            server,
            body_sent: None,
            timed: snap.config.access_log.enabled,
        }
    }

    /// The group's session persistence sees (and may edit) the response head.
    pub fn with_persistence(&mut self, persist: OnResponse<'a>) {
        self.persist = Some(persist);
    }

    /// The request body streams while the response is awaited: the response deadline
    /// starts when `sent` is set.
    pub fn body_streams(&mut self, sent: &'a Cell<Option<Instant>>) {
        self.body_sent = Some(sent);
    }

    /// The client connection closes after this response (`Connection: close`), whatever
    /// the request asked.
    pub fn close_client(&mut self) {
        self.client_keep_alive = false;
    }
}

/// Whether the whole response (head and body) is already in `sbuf`.
fn whole_in_buffer(resp: &ResponseHead, sbuf: &IoBuf) -> bool {
    let body_here = sbuf.len().saturating_sub(resp.head_len) as u64;
    match resp.body {
        BodyKind::None => true,
        BodyKind::Length(n) => body_here >= n,
        BodyKind::Chunked | BodyKind::UntilClose => false,
    }
}

/// Forwards one response from `sr` to `cw`.
pub async fn forward<SR, CW>(
    sr: &mut SR,
    cw: &mut CW,
    ctx: &ReplyCtx<'_>,
    resp: &mut ResponseHead,
    sbuf: &mut IoBuf,
    out: &mut Vec<u8>,
    outcome: &mut Outcome,
) -> Result<Replied, Failure>
where
    SR: AsyncRead + Unpin,
    CW: AsyncWrite + Unpin + LastWrites,
{
    read_final_head(sr, cw, ctx, resp, sbuf, outcome).await?;
    outcome.status = resp.status;
    if ctx.timed {
        outcome.first_byte = Some(Instant::now());
    }
    if resp.status == 101 {
        return forward_upgrade(cw, ctx, resp, sbuf, out, outcome).await;
    }
    let dechunk = resp.body == BodyKind::Chunked && ctx.client_version == Version::Http10;
    let keep_client = ctx.client_keep_alive && resp.body != BodyKind::UntilClose && !dechunk;
    if !keep_client && whole_in_buffer(resp, sbuf) {
        // The connection ends with this response, which goes out in one write (its interim
        // ones went out above): the FIN may travel with it. A body still to come is not
        // held back this way (a stream's pieces would wait for the close).
        cw.last_writes();
    }
    let rw = ResponseRewrite {
        client_version: ctx.client_version,
        keep_alive: keep_client,
        upgrade: false,
        dechunk,
    };
    out.clear();
    write_head(ctx, sbuf.filled(), resp, &rw, out);
    sbuf.consume(resp.head_len);
    forward_body(sr, cw, ctx, Framing { kind: resp.body, dechunk }, sbuf, out, outcome).await?;
    if resp.body != BodyKind::UntilClose && !sbuf.is_empty() {
        // Bytes past the end of the response (a second, unsolicited response, or a
        // Content-Length that lied): they must never reach another client.
        ctx.stats.inc(Counter::ServerExtraBytes);
        tracing::warn!(
            server = ctx.server,
            extra = sbuf.len(),
            "server sent bytes beyond its response; connection closed"
        );
    }
    let server_reusable = resp.keep_alive && resp.body != BodyKind::UntilClose && sbuf.is_empty();
    Ok(Replied::Complete { server_reusable, keep_client })
}

/// Writes the response head for the client, with the persistence edits when the group has
/// persistence.
fn write_head(ctx: &ReplyCtx<'_>, head: &[u8], resp: &ResponseHead, rw: &ResponseRewrite, out: &mut Vec<u8>) {
    write_head_with(ctx.persist.as_ref(), head, resp, rw, out);
}

/// Writes a response head for the client, with `persist`'s edits (also for the answers of
/// HTTP/2 servers, `exchange_h2`).
pub(super) fn write_head_with(
    persist: Option<&OnResponse<'_>>,
    head: &[u8],
    resp: &ResponseHead,
    rw: &ResponseRewrite,
    out: &mut Vec<u8>,
) {
    let Some(persist) = persist else {
        write_response_head(head, resp, rw, out);
        return;
    };
    let mut extra = Vec::new();
    persist.extra(head, resp, &mut extra);
    let edit = |value: &[u8], out: &mut Vec<u8>| persist.set_cookie(value, out);
    let set_cookie: Option<SetCookieEdit> = persist.edits_set_cookie().then_some(&edit);
    write_response_head_with(head, resp, rw, &ResponseEdits { set_cookie, extra: &extra }, out);
}

/// Reads heads until a final (non-1xx or 101) one; interim ones go to HTTP/1.1 clients.
async fn read_final_head<SR, CW>(
    sr: &mut SR,
    cw: &mut CW,
    ctx: &ReplyCtx<'_>,
    resp: &mut ResponseHead,
    sbuf: &mut IoBuf,
    outcome: &mut Outcome,
) -> Result<(), Failure>
where
    SR: AsyncRead + Unpin,
    CW: AsyncWrite + Unpin,
{
    loop {
        match parse_head(resp, sbuf, ctx) {
            Ok(Parse::Complete) if resp.is_interim() => {
                forward_interim(cw, ctx, resp, sbuf, outcome).await?;
                continue;
            }
            Ok(Parse::Complete) => return Ok(()),
            Ok(Parse::Partial) => {}
            Err(end) => return Err(end),
        }
        let nothing_yet = sbuf.is_empty() && outcome.bytes_out == 0;
        // The response is due `server_response` after the request body was sent, not after
        // its head: an upload slower than that is not the server's delay. While the body
        // still streams (its own idle limits apply in the pump), waiting just goes on.
        let (deadline, body_sent) = match ctx.body_sent.and_then(Cell::get) {
            Some(sent) => (sent + ctx.server_timeout, true),
            None => (clock::now() + ctx.server_timeout, false),
        };
        match read_some(sr, sbuf, deadline).await {
            Err(IoFail::Timeout) if !body_sent && ctx.body_sent.is_some() => continue,
            Ok(0) | Err(IoFail::Io) if nothing_yet => {
                ctx.stats.inc(Counter::ServerAborted);
                return Err(Failure::unanswered(true, ctx.reused));
            }
            Ok(0) | Err(IoFail::Io) => return Err(bad_gateway(ctx, outcome, "incomplete response head")),
            Ok(_) => {}
            Err(IoFail::Timeout) => {
                ctx.stats.inc(Counter::ServerTimeout);
                tracing::warn!("server response timed out");
                let r =
                    (outcome.bytes_out == 0).then_some(Refusal::new(504, "server did not answer in time"));
                return Err(Failure::server(r));
            }
        }
    }
}

fn parse_head(resp: &mut ResponseHead, sbuf: &IoBuf, ctx: &ReplyCtx<'_>) -> Result<Parse, Failure> {
    if sbuf.is_empty() {
        return Ok(Parse::Partial);
    }
    match resp.parse(sbuf.filled(), &ctx.limits, ctx.is_head) {
        Ok(Parse::Partial) if sbuf.is_full() => Err(malformed(ctx, "response head too large")),
        Ok(p) => Ok(p),
        Err(e) => Err(malformed(ctx, e.reason())),
    }
}

fn malformed(ctx: &ReplyCtx<'_>, why: &'static str) -> Failure {
    ctx.stats.inc(Counter::BadResponse);
    tracing::warn!(reason = why, "malformed response from server");
    Failure::server(Some(Refusal::new(502, "malformed response from server")))
}

fn bad_gateway(ctx: &ReplyCtx<'_>, outcome: &Outcome, why: &'static str) -> Failure {
    ctx.stats.inc(Counter::ServerAborted);
    tracing::warn!(reason = why, "server aborted the response");
    let r = (outcome.bytes_out == 0).then_some(Refusal::new(502, "server aborted the response"));
    Failure::server(r)
}

async fn forward_interim<CW: AsyncWrite + Unpin>(
    cw: &mut CW,
    ctx: &ReplyCtx<'_>,
    resp: &ResponseHead,
    sbuf: &mut IoBuf,
    outcome: &mut Outcome,
) -> Result<(), Failure> {
    // HTTP/1.0 clients do not understand 1xx (RFC 9110 §15.2): drop it for them.
    if ctx.client_version == Version::Http11 {
        let head = &sbuf.filled()[..resp.head_len];
        let deadline = clock::now() + ctx.client_timeout;
        if write_all_parts(cw, &[head], deadline).await.is_err() {
            return Err(Failure::client(None));
        }
        outcome.bytes_out += resp.head_len as u64;
    }
    sbuf.consume(resp.head_len);
    Ok(())
}

async fn forward_upgrade<CW: AsyncWrite + Unpin>(
    cw: &mut CW,
    ctx: &ReplyCtx<'_>,
    resp: &ResponseHead,
    sbuf: &mut IoBuf,
    out: &mut Vec<u8>,
    outcome: &mut Outcome,
) -> Result<Replied, Failure> {
    if !ctx.upgrade_requested {
        return Err(malformed(ctx, "101 without an upgrade request"));
    }
    let rw = ResponseRewrite {
        client_version: ctx.client_version,
        keep_alive: true,
        upgrade: true,
        dechunk: false,
    };
    out.clear();
    write_response_head(sbuf.filled(), resp, &rw, out);
    sbuf.consume(resp.head_len);
    let deadline = clock::now() + ctx.client_timeout;
    if write_all_parts(cw, &[out], deadline).await.is_err() {
        return Err(Failure::client(None));
    }
    outcome.bytes_out += out.len() as u64;
    Ok(Replied::Upgraded)
}

/// How the response body is framed, and whether it is de-chunked for an HTTP/1.0 client.
#[derive(Clone, Copy)]
struct Framing {
    kind: BodyKind,
    dechunk: bool,
}

/// Streams the body: the head in `out` leaves with the first body bytes in one write.
async fn forward_body<SR, CW>(
    sr: &mut SR,
    cw: &mut CW,
    ctx: &ReplyCtx<'_>,
    Framing { kind, dechunk }: Framing,
    sbuf: &mut IoBuf,
    out: &mut Vec<u8>,
    outcome: &mut Outcome,
) -> Result<(), Failure>
where
    SR: AsyncRead + Unpin,
    CW: AsyncWrite + Unpin,
{
    let mut scanner = BodyScanner::new(kind, u64::MAX);
    let mut done = kind == BodyKind::None;
    loop {
        let (consumed, finished) = if done || sbuf.is_empty() {
            (0, done)
        } else {
            let scan = if dechunk {
                scanner.scan_data(sbuf.filled(), |d| out.extend_from_slice(d))
            } else {
                scanner.scan(sbuf.filled())
            };
            let scan = scan.map_err(|e| {
                tracing::warn!(error = %e, "malformed response body from server");
                ctx.stats.inc(Counter::BadResponse);
                Failure::server(None)
            })?;
            (scan.consumed, scan.done)
        };
        let body = if dechunk { &[][..] } else { &sbuf.filled()[..consumed] };
        if !out.is_empty() || !body.is_empty() {
            let deadline = clock::now() + ctx.client_timeout;
            write_all_parts(cw, &[out, body], deadline).await.map_err(|_| Failure::client(None))?;
            outcome.bytes_out += (out.len() + body.len()) as u64;
            out.clear();
        }
        sbuf.consume(consumed);
        if finished {
            return Ok(());
        }
        done = read_body_bytes(sr, sbuf, ctx, kind).await?;
    }
}

/// Reads more body bytes; `Ok(true)` when a close-delimited body ended.
async fn read_body_bytes<SR: AsyncRead + Unpin>(
    sr: &mut SR,
    sbuf: &mut IoBuf,
    ctx: &ReplyCtx<'_>,
    kind: BodyKind,
) -> Result<bool, Failure> {
    match read_some(sr, sbuf, clock::now() + ctx.server_timeout).await {
        Ok(0) if kind == BodyKind::UntilClose => Ok(true),
        Ok(0) | Err(IoFail::Io) => {
            ctx.stats.inc(Counter::ServerAborted);
            tracing::warn!("server closed in the middle of a response body");
            Err(Failure::server(None))
        }
        Ok(_) => Ok(false),
        Err(IoFail::Timeout) => {
            ctx.stats.inc(Counter::ServerTimeout);
            Err(Failure::server(None))
        }
    }
}
