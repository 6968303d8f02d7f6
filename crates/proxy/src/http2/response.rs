//! The answer the request phases wrote (HTTP/1.1, on the pipe) read back and sent on the
//! stream: interim 1xx answers passed on, the status and fields as an HTTP/2 response
//! without the connection-specific ones (RFC 9113 §8.2.2), the body de-chunked into DATA
//! frames as the client's flow control allows. A client that opens no window within
//! `client_io` (a zero-window stall) has its stream reset.

use crate::floor::fields::parse_trailer_section;
use crate::floor::io::timeout_if_waiting;
use crate::floor::pipe::Reader;
use crate::floor::stats::{Counter, Stats};
use crate::http2::answer;
use crate::http2::grpc;
use bytes::Bytes;
use h2::server::SendResponse;
use h2::SendStream;
use http::HeaderMap;
use http1::{BodyKind, BodyScanner, HeadLimits, Parse, ResponseHead};
use std::time::Duration;
use tokio::time::Instant;

/// How relaying the answer ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Relayed {
    /// The whole answer went to the client.
    Complete,
    /// The phases closed the pipe without an answer (a rule's drop, or a failure after
    /// which nothing could be said): the stream is reset.
    NoAnswer,
    /// The client reset the stream or the connection went away, or a stall.
    Broken,
}

/// Fields an HTTP/2 response must not carry.
const CONNECTION_SPECIFIC: &[&str] =
    &["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"];

/// What the relay needs to know.
pub struct RelayCtx<'a> {
    pub stats: &'a Stats,
    pub limits: HeadLimits,
    pub is_head: bool,
    pub client_io: Duration,
    /// The request is a gRPC call: an answer other than `200` goes out as a gRPC status.
    pub grpc: bool,
}

/// Reads the answer from `pipe` and sends it on `respond`.
pub async fn relay(pipe: &mut Reader<'_>, respond: &mut SendResponse<Bytes>, ctx: &RelayCtx<'_>) -> Relayed {
    // Empty: the first read takes the pipe's own buffer (`floor::pipe`).
    let mut buf = Vec::new();
    let mut head = ResponseHead::new();
    if final_head(pipe, &mut buf, &mut head, respond, ctx).await.is_none() {
        return Relayed::NoAnswer;
    }
    if ctx.grpc && head.status != 200 {
        return grpc_status(pipe, &mut buf, &head, respond, ctx).await;
    }
    let response = translate(&buf, &head);
    let no_body = head.body == BodyKind::None;
    let Ok(mut send) = respond.send_response(response, no_body) else { return Relayed::Broken };
    buf.drain(..head.head_len);
    if no_body {
        return Relayed::Complete;
    }
    body(pipe, &mut buf, head.body, &mut send, ctx).await
}

/// Reads until `buf` starts with a final (non-1xx) head; `None`: the pipe closed first,
/// or what came is not a head (the phases write only valid ones: a failure there). The
/// head is not validated again (`answer`). Interim answers go on to the client as they
/// come (a `100 Continue` a client waits for before its body, a `103 Early Hints`).
async fn final_head(
    pipe: &mut Reader<'_>,
    buf: &mut Vec<u8>,
    head: &mut ResponseHead,
    respond: &mut SendResponse<Bytes>,
    ctx: &RelayCtx<'_>,
) -> Option<()> {
    let max = ctx.limits.max_head_bytes.max(64 * 1024);
    loop {
        if !buf.is_empty() {
            match answer::read(buf, head, ctx.is_head, max) {
                Ok(Parse::Complete) if head.is_interim() => {
                    // 101 has no meaning in HTTP/2 (RFC 9113 §8.6): never passed on.
                    if head.status != 101 {
                        // A client already gone fails the final answer too: nothing to do here.
                        let _ = respond.send_informational(translate(buf, head));
                    }
                    buf.drain(..head.head_len);
                    continue;
                }
                Ok(Parse::Complete) => return Some(()),
                Ok(Parse::Partial) => {}
                Err(_) => return None,
            }
        }
        if pipe.take_into(buf).await == 0 {
            return None;
        }
    }
}

/// The status and fields, without the connection-specific ones (and those `Connection`
/// names).
fn translate(buf: &[u8], head: &ResponseHead) -> http::Response<()> {
    let mut response = http::Response::new(());
    *response.status_mut() = http::StatusCode::from_u16(head.status).unwrap_or(http::StatusCode::BAD_GATEWAY);
    let fields = response.headers_mut();
    fields.reserve(head.headers.len());
    // The values are slices of one copy of the head (one allocation, not one per value).
    let shared = Bytes::copy_from_slice(buf.get(..head.head_len).unwrap_or(buf));
    // The answers the switch passes on rarely carry `Connection` (the reply phase drops
    // the server's): its list is looked at only when there is one.
    let connection = head.headers.iter().find(|h| h.name.slice(buf).eq_ignore_ascii_case(b"connection"));
    for h in &head.headers {
        let name = h.name.slice(buf);
        if connection_specific(name) || connection.is_some_and(|_| named_by_connection(buf, head, name)) {
            continue;
        }
        let (start, end) = (h.value.start as usize, h.value.end as usize);
        if start > end || end > shared.len() {
            continue; // not within the head (`answer` never makes such a span)
        }
        let value = shared.slice(start..end);
        let (Ok(name), Ok(value)) =
            (http::HeaderName::from_bytes(name), http::HeaderValue::from_maybe_shared(value))
        else {
            continue; // the HTTP/1.1 parser let it through; HTTP/2 cannot carry it
        };
        fields.append(name, value);
    }
    response
}

/// One of the fields an HTTP/2 response must not carry (checked by length first: most
/// fields have none of these lengths).
fn connection_specific(name: &[u8]) -> bool {
    matches!(name.len(), 7 | 10 | 16 | 17)
        && CONNECTION_SPECIFIC.iter().any(|c| c.as_bytes().eq_ignore_ascii_case(name))
}

/// Whether a `Connection` field of the head names `name`.
fn named_by_connection(buf: &[u8], head: &ResponseHead, name: &[u8]) -> bool {
    head.headers
        .iter()
        .filter(|h| h.name.slice(buf).eq_ignore_ascii_case(b"connection"))
        .flat_map(|h| h.value.slice(buf).split(|b| *b == b','))
        .any(|c| c.trim_ascii().eq_ignore_ascii_case(name))
}

/// Streams the body as DATA frames, de-chunked, within the client's flow control.
async fn body(
    pipe: &mut Reader<'_>,
    buf: &mut Vec<u8>,
    kind: BodyKind,
    send: &mut SendStream<Bytes>,
    ctx: &RelayCtx<'_>,
) -> Relayed {
    let mut scanner = BodyScanner::new(kind, u64::MAX);
    let mut data = Vec::new();
    let mut trailer = Vec::new();
    loop {
        let (consumed, done) = if buf.is_empty() {
            (0, false)
        } else {
            match scanner.scan_parts(buf, |d| data.extend_from_slice(d), |b| trailer.push(b)) {
                Ok(scan) => (scan.consumed, scan.done),
                Err(_) => return reset(send, Relayed::Broken),
            }
        };
        buf.drain(..consumed);
        // The body's last DATA frame carries END_STREAM itself when no trailers follow: no
        // empty frame after it (one frame less to queue, encode and send per answer).
        let trailers =
            if done && !trailer.is_empty() { parse_trailer_section(&trailer) } else { HeaderMap::new() };
        let last = done && trailers.is_empty();
        if !data.is_empty() {
            if send_data(send, Bytes::from(std::mem::take(&mut data)), last, ctx).await.is_err() {
                return reset(send, Relayed::Broken);
            }
            if last {
                return Relayed::Complete;
            }
        }
        if done {
            return end(send, trailers);
        }
        match pipe.take_into(buf).await {
            0 if kind == BodyKind::UntilClose => return end(send, HeaderMap::new()),
            0 => return reset(send, Relayed::NoAnswer),
            _ => {}
        }
    }
}

/// Ends the stream: with its trailers (a chunked answer's trailer section: gRPC's
/// `grpc-status`), else an empty DATA frame.
fn end(send: &mut SendStream<Bytes>, trailers: HeaderMap) -> Relayed {
    let ended =
        if trailers.is_empty() { send.send_data(Bytes::new(), true) } else { send.send_trailers(trailers) };
    match ended {
        Ok(()) => Relayed::Complete,
        Err(_) => Relayed::Broken,
    }
}

/// A gRPC call answered with another status than `200`: the answer becomes a gRPC status,
/// trailers-only; a short plain body (the switch's own reason) goes in `grpc-message`.
async fn grpc_status(
    pipe: &mut Reader<'_>,
    buf: &mut Vec<u8>,
    head: &ResponseHead,
    respond: &mut SendResponse<Bytes>,
    ctx: &RelayCtx<'_>,
) -> Relayed {
    let reason = short_body(pipe, buf, head).await;
    let reason = reason.as_deref().map(str::trim).filter(|r| !r.is_empty());
    let phrase = http::StatusCode::from_u16(head.status).ok().and_then(|s| s.canonical_reason());
    let response = grpc::trailers_only(head.status, reason.or(phrase).unwrap_or("error"));
    ctx.stats.inc(Counter::GrpcStatusAnswers);
    match respond.send_response(response, true) {
        Ok(_) => Relayed::Complete,
        Err(_) => Relayed::Broken,
    }
}

/// The body of an answer when it is short text with a length (the switch's refusals are).
async fn short_body(pipe: &mut Reader<'_>, buf: &mut Vec<u8>, head: &ResponseHead) -> Option<String> {
    let BodyKind::Length(n) = head.body else { return None };
    let end = head.head_len + usize::try_from(n).ok().filter(|n| *n <= 512)?;
    while buf.len() < end {
        if pipe.take_into(buf).await == 0 {
            return None;
        }
    }
    String::from_utf8(buf[head.head_len..end].to_vec()).ok()
}

fn reset(send: &mut SendStream<Bytes>, why: Relayed) -> Relayed {
    send.send_reset(h2::Reason::CANCEL);
    why
}

/// Sends `data` as the client's window opens, its last frame ending the stream when `last`;
/// a window that stays shut for `client_io` is a stall (counted as a client timeout).
async fn send_data(
    send: &mut SendStream<Bytes>,
    mut data: Bytes,
    last: bool,
    ctx: &RelayCtx<'_>,
) -> Result<(), ()> {
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        // The timer only when the window is shut: an answer that fits the open window
        // (nearly all) goes without one.
        let open = std::future::poll_fn(|cx| send.poll_capacity(cx));
        let capacity = timeout_if_waiting(|| Instant::now() + ctx.client_io, open).await;
        match capacity {
            Ok(Some(Ok(0))) => continue,
            Ok(Some(Ok(n))) => {
                let part = data.split_to(n.min(data.len()));
                send.send_data(part, last && data.is_empty()).map_err(drop)?;
            }
            Ok(Some(Err(_)) | None) => return Err(()),
            Err(_) => {
                ctx.stats.inc(Counter::ClientTimeout);
                tracing::info!("HTTP/2 client opened no flow-control window in time; stream reset");
                return Err(());
            }
        }
    }
    Ok(())
}
