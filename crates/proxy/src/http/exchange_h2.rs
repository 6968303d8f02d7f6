//! Phase "exchange" toward an HTTP/2 server (`server_protocol = "h2"`): the forwarded
//! head `forward` wrote (the rules' edits and `X-Forwarded-*` in it) becomes a request on
//! a stream of the server's shared connection (`upstream::h2`); the body goes up as DATA
//! frames, de-chunked, a chunked body's trailer section as HTTP/2 trailers; the response
//! comes back as HTTP/1.1 — its head, its body chunked, its trailers (gRPC's
//! `grpc-status`) as the chunked trailer section. Both directions run at once, so a
//! bidirectional gRPC call flows both ways; flow control bounds each (the server's window
//! for the body, the stream window `upstream::h2` gives the server for the response).
//! The group's session persistence edits the answer's head as the HTTP/1.1 reply phase's
//! does (`reply::write_head_with`: a cookie inserted or rewritten).

use crate::floor::failure::{Failure, Refusal};
use crate::floor::fields::{parse_trailer_section, write_chunked_end, CONNECTION_SPECIFIC};
use crate::floor::io::{read_some, write_all_parts, IoFail};
use crate::floor::persist::OnResponse;
use crate::floor::stats::Counter;
use crate::http::reply;
use crate::http::txn::Txn;
use crate::upstream::h2::{self as h2up, H2Upstream};
use bytes::Bytes;
use h2::{RecvStream, SendStream};
use http1::{BodyKind, BodyScanner, HeadLimits, Parse, RequestHead, ResponseHead, ResponseRewrite, Version};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::Instant;

/// How sending the request body up ended early.
enum Up {
    /// The client's body broke a limit or its framing: this answer, if none started.
    Refuse(Refusal),
    /// The client went away or stalled.
    ClientGone,
    /// The server reset the stream or its connection went.
    Server,
}

impl Txn<'_> {
    /// One try on HTTP/2 server `index`: a stream, the exchange on it; true when the
    /// client connection stays open.
    pub(super) async fn attempt_h2(&mut self, group: usize, index: usize) -> Result<bool, Failure> {
        let (worker, snap) = (self.worker, self.snap);
        let began = crate::observe::record::start_if_logged(snap);
        let up = h2up::connect(worker, snap, group, index).await?;
        self.outcome.connect = began.map(|t| t.elapsed());
        let Some(request) = to_h2_request(&self.s.req_out, &snap.head_limits, up.server.addr) else {
            worker.shared.stats.inc(Counter::BadRequest);
            return Err(Failure::internal(Refusal::new(400, "request cannot be sent over HTTP/2")));
        };
        let no_body = self.s.req.body == BodyKind::None;
        let mut send = up.send.clone();
        let (response, upload) = send.send_request(request, no_body).map_err(|e| lost(worker, &up, &e))?;
        let t = &snap.config.timeouts;
        let Some(cbuf) = self.client.buf.as_mut() else { return Err(Failure::client(None)) };
        let (mut cr, mut cw) = self.client.stream.split();
        let g = snap.group(group);
        let share = worker.shared.cluster.get().map(|c| (g.name.as_str(), &**c));
        let (found, server) = (&self.s.notes.persist, up.server);
        let down = Down {
            keep: self.s.req.keep_alive && !self.s.close_after && self.s.req.version != Version::Http10,
            chunked_ok: self.s.req.version != Version::Http10,
            is_head: self.s.req.is_head,
            server_timeout: t.server_response,
            client_timeout: t.client_io,
            persist: g.persistence.as_deref().map(|persist| OnResponse {
                persist,
                found,
                server,
                index,
                share,
            }),
            limits: snap.head_limits,
        };
        let mut pumped = no_body.then_some(Ok(0u64));
        let kind = self.s.req.body;
        let (held, max_body) = (&self.s.held[..], snap.max_body);
        let relayed = {
            let relay = relay_down(&mut cw, response, &down, &mut self.s.resp_out, &mut self.outcome);
            // Never polled without a body (`pumped` is set): the stream ended with its head.
            let pump = pump_up(&mut cr, cbuf, held, BodyScanner::new(kind, max_body), upload, t.client_io);
            tokio::pin!(relay, pump);
            loop {
                tokio::select! {
                    biased;
                    r = &mut relay => break r,
                    p = &mut pump, if pumped.is_none() => match p {
                        Err(Up::Refuse(r)) => {
                            let stats = &worker.shared.stats;
                            stats.inc(if r.status == 413 { Counter::BodyTooLarge } else { Counter::BadRequest });
                            return Err(Failure::client(Some(r)));
                        }
                        Err(Up::ClientGone) => {
                            worker.shared.stats.inc(Counter::ClientAbortedBody);
                            return Err(Failure::client(None));
                        }
                        other => pumped = Some(other),
                    },
                }
            }
        };
        // A broken server connection is found (and forgotten) by the next request's
        // `ready()`; one stream's failure says nothing about the others.
        let keep = relayed?;
        let body_whole = matches!(pumped, Some(Ok(_)));
        if let Some(Ok(n)) = pumped {
            self.outcome.bytes_in += n;
        }
        Ok(keep && body_whole)
    }
}

/// A request the server's connection could not take: the connection is forgotten (the
/// next request opens another), and the request may go elsewhere (nothing reached a server).
fn lost(worker: &crate::floor::worker::Worker, up: &H2Upstream<'_>, e: &h2::Error) -> Failure {
    worker.h2_pools.forget(up.server.id);
    tracing::info!(server = %up.server.name, error = %e, "HTTP/2 server connection lost");
    Failure::unanswered(false, up.reused)
}

/// The forwarded HTTP/1.1 head as an HTTP/2 request: `Host` as `:authority` (the server's
/// address when there is none), the connection-specific fields and those `Connection`
/// names left out, `te: trailers` always. `None` if it cannot be expressed.
fn to_h2_request(
    head: &[u8],
    limits: &HeadLimits,
    server: std::net::SocketAddr,
) -> Option<http::Request<()>> {
    let mut req = RequestHead::new();
    let limits = HeadLimits { max_head_bytes: head.len().max(limits.max_head_bytes), ..*limits };
    if !matches!(req.parse(head, &limits), Ok(Parse::Complete)) {
        return None;
    }
    let method = http::Method::from_bytes(req.method.slice(head)).ok()?;
    let target = req.target.slice(head);
    let host = req.host.map(|h| h.slice(head)).filter(|h| !h.is_empty());
    let uri = if target.first() == Some(&b'/') {
        let authority = host.map_or_else(|| server.to_string().into_bytes(), <[u8]>::to_vec);
        http::Uri::builder().scheme("http").authority(authority).path_and_query(target).build().ok()?
    } else {
        http::Uri::try_from(target).ok()?
    };
    let named: Vec<&[u8]> = req
        .headers
        .iter()
        .filter(|h| h.name.slice(head).eq_ignore_ascii_case(b"connection"))
        .flat_map(|h| h.value.slice(head).split(|b| *b == b','))
        .map(<[u8]>::trim_ascii)
        .collect();
    let mut out = http::Request::builder().method(method).uri(uri).body(()).ok()?;
    // The switch carries trailers on (to HTTP/2 clients, and chunked to HTTP/1.1 ones),
    // and gRPC servers refuse a call without it (HTTP/1.1's rewrite drops the client's
    // `te` as hop-by-hop).
    out.headers_mut().insert(http::header::TE, http::HeaderValue::from_static("trailers"));
    for h in &req.headers {
        let (name, value) = (h.name.slice(head), h.value.slice(head));
        let is = |n: &[u8]| n.eq_ignore_ascii_case(name);
        let te_other = is(b"te") && !value.eq_ignore_ascii_case(b"trailers");
        if is(b"host")
            || te_other
            || CONNECTION_SPECIFIC.iter().any(|c| is(c.as_bytes()))
            || named.iter().any(|c| is(c))
        {
            continue;
        }
        let name = http::HeaderName::from_bytes(name).ok()?;
        out.headers_mut().append(name, http::HeaderValue::from_bytes(value).ok()?);
    }
    Some(out)
}

/// Streams the request body up: the bytes the route phase held, those buffered, then
/// reads, de-chunked, within the server's flow control; a chunked body's trailers as
/// HTTP/2 trailers. Returns the body bytes read from the client.
async fn pump_up<R: AsyncRead + Unpin>(
    cr: &mut R,
    cbuf: &mut crate::floor::buf::IoBuf,
    held: &[u8],
    mut scanner: BodyScanner,
    mut upload: SendStream<Bytes>,
    client_io: Duration,
) -> Result<u64, Up> {
    let mut trailer = Vec::new();
    let mut read = 0;
    let mut data = Vec::new();
    let scan = scanner.scan_parts(held, |d| data.extend_from_slice(d), |b| trailer.push(b));
    let mut done = scan.map_err(body_refusal)?.done;
    send_data(&mut upload, &mut data).await?;
    while !done {
        if cbuf.is_empty() {
            match read_some(cr, cbuf, Instant::now() + client_io).await {
                Ok(0) | Err(IoFail::Io) | Err(IoFail::Timeout) => return Err(Up::ClientGone),
                Ok(_) => {}
            }
        }
        let scan = scanner.scan_parts(cbuf.filled(), |d| data.extend_from_slice(d), |b| trailer.push(b));
        let scan = scan.map_err(body_refusal)?;
        cbuf.consume(scan.consumed);
        read += scan.consumed as u64;
        done = scan.done;
        send_data(&mut upload, &mut data).await?;
    }
    let trailers = parse_trailer_section(&trailer);
    let end = if trailers.is_empty() {
        upload.send_data(Bytes::new(), true)
    } else {
        upload.send_trailers(trailers)
    };
    end.map_err(|_| Up::Server)?;
    Ok(read)
}

fn body_refusal(e: http1::BodyError) -> Up {
    if e == http1::BodyError::TooLarge {
        Up::Refuse(Refusal::new(413, "request body too large"))
    } else {
        Up::Refuse(Refusal::new(400, "invalid request body"))
    }
}

/// Sends `data` (emptied) as the server's window opens.
async fn send_data(upload: &mut SendStream<Bytes>, data: &mut Vec<u8>) -> Result<(), Up> {
    let mut bytes = Bytes::from(std::mem::take(data));
    while !bytes.is_empty() {
        upload.reserve_capacity(bytes.len());
        match std::future::poll_fn(|cx| upload.poll_capacity(cx)).await {
            Some(Ok(0)) => {}
            Some(Ok(n)) => {
                upload.send_data(bytes.split_to(n.min(bytes.len())), false).map_err(|_| Up::Server)?
            }
            Some(Err(_)) | None => return Err(Up::Server),
        }
    }
    Ok(())
}

/// What relaying the response needs.
struct Down<'a> {
    /// The client connection may stay open after it.
    keep: bool,
    /// The client speaks HTTP/1.1 (chunked coding, trailers).
    chunked_ok: bool,
    is_head: bool,
    server_timeout: Duration,
    client_timeout: Duration,
    /// The group's session persistence, which may edit the head.
    persist: Option<OnResponse<'a>>,
    limits: HeadLimits,
}

/// Waits for the response and writes it to the client as HTTP/1.1; true when the client
/// connection may stay open.
async fn relay_down<W: AsyncWrite + Unpin>(
    cw: &mut W,
    response: h2::client::ResponseFuture,
    down: &Down<'_>,
    out: &mut Vec<u8>,
    outcome: &mut crate::observe::record::Outcome,
) -> Result<bool, Failure> {
    let response = match tokio::time::timeout(down.server_timeout, response).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) if e.reason() == Some(h2::Reason::REFUSED_STREAM) => {
            return Err(Failure::unanswered(false, true))
        }
        Ok(Err(_)) => return Err(Failure::unanswered(true, false)),
        Err(_) => return Err(Failure::server(Some(Refusal::new(504, "server response timed out")))),
    };
    let (parts, mut body) = response.into_parts();
    let status = parts.status.as_u16();
    let no_body = down.is_head || status == 204 || status == 304;
    let framing = write_head(&parts, no_body || body.is_end_stream(), down, out);
    if let Some(persist) = &down.persist {
        persistence_edits(persist, down, framing, out);
    }
    outcome.status = status;
    let deadline = Instant::now() + down.client_timeout;
    write_all_parts(cw, &[out], deadline).await.map_err(|_| Failure::client(None))?;
    outcome.bytes_out += out.len() as u64;
    if no_body {
        return Ok(down.keep);
    }
    while let Some(data) = next_data(&mut body, down.server_timeout).await? {
        let size = format!("{:x}\r\n", data.len());
        let parts: [&[u8]; 3] =
            if framing == Framing::Chunked { [size.as_bytes(), &data, b"\r\n"] } else { [&[], &data, &[]] };
        let deadline = Instant::now() + down.client_timeout;
        write_all_parts(cw, &parts, deadline).await.map_err(|_| Failure::client(None))?;
        outcome.bytes_out += parts.iter().map(|p| p.len() as u64).sum::<u64>();
        let _ = body.flow_control().release_capacity(data.len());
    }
    let trailers = match tokio::time::timeout(down.server_timeout, body.trailers()).await {
        Ok(Ok(t)) => t,
        Ok(Err(_)) | Err(_) => return Err(Failure::server(None)),
    };
    if framing == Framing::Chunked {
        out.clear();
        write_chunked_end(trailers.as_ref(), out);
        let deadline = Instant::now() + down.client_timeout;
        write_all_parts(cw, &[out], deadline).await.map_err(|_| Failure::client(None))?;
        outcome.bytes_out += out.len() as u64;
    }
    Ok(down.keep && framing != Framing::UntilClose)
}

/// The next DATA frame's bytes; `None` at the end of the body. A server that goes silent
/// past `server_response`, or resets the stream, fails the exchange after the answer
/// started: the client connection closes.
async fn next_data(body: &mut RecvStream, limit: Duration) -> Result<Option<Bytes>, Failure> {
    loop {
        match tokio::time::timeout(limit, body.data()).await {
            Ok(Some(Ok(data))) if data.is_empty() => {}
            Ok(Some(Ok(data))) => return Ok(Some(data)),
            Ok(None) => return Ok(None),
            Ok(Some(Err(_))) | Err(_) => return Err(Failure::server(None)),
        }
    }
}

/// How the response body is framed toward the client.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// None, or the server's `content-length` (trailers cannot follow).
    AsIs,
    Chunked,
    /// An HTTP/1.0 client without a length: until the connection closes.
    UntilClose,
}

/// The head in `out` edited by the group's session persistence, as the HTTP/1.1 reply
/// phase edits a server's head.
fn persistence_edits(persist: &OnResponse<'_>, down: &Down<'_>, framing: Framing, out: &mut Vec<u8>) {
    let mut resp = ResponseHead::new();
    let limits = HeadLimits { max_head_bytes: out.len().max(down.limits.max_head_bytes), ..down.limits };
    if !matches!(resp.parse(out, &limits, down.is_head), Ok(Parse::Complete)) {
        return; // written above from valid fields: cannot happen
    }
    let rw = ResponseRewrite {
        client_version: if down.chunked_ok { Version::Http11 } else { Version::Http10 },
        keep_alive: down.keep && framing != Framing::UntilClose,
        upgrade: false,
        dechunk: false,
    };
    let mut edited = Vec::with_capacity(out.len() + 128);
    reply::write_head_with(Some(persist), out, &resp, &rw, &mut edited);
    *out = edited;
}

/// The response head as HTTP/1.1 in `out`; `ended`: no body follows (a trailers-only
/// gRPC answer gets `content-length: 0`).
fn write_head(parts: &http::response::Parts, ended: bool, down: &Down<'_>, out: &mut Vec<u8>) -> Framing {
    out.clear();
    let reason = parts.status.canonical_reason().unwrap_or("");
    out.extend_from_slice(format!("HTTP/1.1 {} {reason}\r\n", parts.status.as_u16()).as_bytes());
    for (name, value) in &parts.headers {
        if CONNECTION_SPECIFIC.contains(&name.as_str()) {
            continue;
        }
        for part in [name.as_str().as_bytes(), b": ", value.as_bytes(), b"\r\n"] {
            out.extend_from_slice(part);
        }
    }
    let has_length = parts.headers.contains_key(http::header::CONTENT_LENGTH);
    let framing = if ended || has_length {
        if ended
            && !has_length
            && !down.is_head
            && parts.status.as_u16() != 204
            && parts.status.as_u16() != 304
        {
            out.extend_from_slice(b"content-length: 0\r\n");
        }
        Framing::AsIs
    } else if down.chunked_ok {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
        Framing::Chunked
    } else {
        Framing::UntilClose
    };
    if !down.keep || framing == Framing::UntilClose {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
    framing
}
