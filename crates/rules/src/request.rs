//! The request as the rules see it. The proxy implements [`Request`] over its parsed head
//! and body buffer without copying; [`OwnedRequest`] is a small self-contained version
//! (its own minimal HTTP/1.1 parser) for tests, `cswitch explain` and fuzzing.

use std::net::SocketAddr;

/// The body bytes received so far.
#[derive(Clone, Copy, Debug, Default)]
pub struct Body<'a> {
    /// The payload (already de-chunked), contiguous, from its first byte.
    pub bytes: &'a [u8],
    /// True when `bytes` is the whole body (for a request without a body: empty and true).
    pub complete: bool,
}

/// What the rules read from a request. Every method must be cheap and must not allocate:
/// evaluation calls each at most once per field a reached rule needs.
pub trait Request {
    /// Client address (an IPv4-mapped IPv6 address is read as IPv4).
    fn src(&self) -> SocketAddr;
    /// The address the client connected to.
    fn dst(&self) -> SocketAddr;
    /// The method token, e.g. `GET`.
    fn method(&self) -> &[u8];
    /// The request-target exactly as sent (origin-form `/a?b`, absolute-form, `*`).
    fn target(&self) -> &[u8];
    /// The protocol version as sent, e.g. `HTTP/1.1`.
    fn version(&self) -> &[u8];
    /// The value of the first field named `name` (given in lower case; compare ASCII
    /// case-insensitively), without surrounding whitespace.
    fn header(&self, name: &str) -> Option<&[u8]>;
    /// Calls `visit` with the value of every field named `name`, in order, until it
    /// returns `true` (used for `Cookie`, which may be sent in several fields).
    fn header_each<'a>(&'a self, name: &str, visit: &mut dyn FnMut(&'a [u8]) -> bool);
    /// The body received so far.
    fn body(&self) -> Body<'_>;
    /// A field of the listener's protocol (TLS ClientHello, SMTP envelope, POP3 / IMAP
    /// login); `None` when this request has none (every HTTP request).
    fn proto_field(&self, field: crate::ProtoField) -> Option<&[u8]> {
        let _ = field;
        None
    }
}

/// A parsed request that owns its bytes.
#[derive(Clone, Debug)]
pub struct OwnedRequest {
    src: SocketAddr,
    dst: SocketAddr,
    method: Vec<u8>,
    target: Vec<u8>,
    version: Vec<u8>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// The de-chunked body received so far.
    pub body: Vec<u8>,
    /// Whether `body` is the whole body.
    pub body_complete: bool,
}

/// Why [`OwnedRequest::parse`] refused its input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// No blank line ends the head.
    #[error("the request head is incomplete (no empty line after the header fields)")]
    IncompleteHead,
    /// The request line is not `METHOD target HTTP/x.y`.
    #[error("bad request line")]
    BadRequestLine,
    /// A header line has no colon or an empty name.
    #[error("bad header field on line {0}")]
    BadHeader(usize),
    /// Content-Length is not a number.
    #[error("bad Content-Length")]
    BadContentLength,
    /// A chunk size line is malformed.
    #[error("bad chunked body")]
    BadChunk,
}

impl OwnedRequest {
    /// Parses a raw request (bare LF line endings are accepted). The body is framed by
    /// Content-Length or chunked coding; a body shorter than announced is kept with
    /// `body_complete = false`.
    pub fn parse(raw: &[u8], src: SocketAddr, dst: SocketAddr) -> Result<OwnedRequest, RequestError> {
        let (head_end, body_start) = find_head_end(raw).ok_or(RequestError::IncompleteHead)?;
        let mut lines = raw[..head_end].split(|b| *b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
        let first = lines.next().ok_or(RequestError::BadRequestLine)?;
        let mut parts = first.split(|b| *b == b' ').filter(|p| !p.is_empty());
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(RequestError::BadRequestLine);
        };
        let mut headers = Vec::new();
        for (n, line) in lines.enumerate() {
            let colon =
                memchr::memchr(b':', line).filter(|&c| c > 0).ok_or(RequestError::BadHeader(n + 2))?;
            headers.push((line[..colon].to_vec(), trim(&line[colon + 1..]).to_vec()));
        }
        let mut req = OwnedRequest {
            src,
            dst,
            method: method.to_vec(),
            target: target.to_vec(),
            version: version.to_vec(),
            headers,
            body: Vec::new(),
            body_complete: true,
        };
        req.frame_body(&raw[body_start..])?;
        Ok(req)
    }

    fn frame_body(&mut self, rest: &[u8]) -> Result<(), RequestError> {
        let chunked =
            self.header("transfer-encoding").is_some_and(|v| trim(v).eq_ignore_ascii_case(b"chunked"));
        if chunked {
            let (body, complete) = dechunk(rest)?;
            self.body = body;
            self.body_complete = complete;
        } else if let Some(cl) = self.header("content-length") {
            let n: usize = std::str::from_utf8(cl)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or(RequestError::BadContentLength)?;
            self.body = rest[..n.min(rest.len())].to_vec();
            self.body_complete = rest.len() >= n;
        }
        Ok(())
    }

    /// A copy whose body is cut to its first `n` bytes and marked incomplete (for
    /// testing "need more" behaviour); `n` at or past the end gives the request as is.
    pub fn with_body_prefix(&self, n: usize) -> OwnedRequest {
        let mut r = self.clone();
        if n < r.body.len() {
            r.body.truncate(n);
            r.body_complete = false;
        }
        r
    }
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|c| !matches!(c, b' ' | b'\t')).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !matches!(c, b' ' | b'\t')).map_or(start, |e| e + 1);
    &b[start..end.max(start)]
}

/// (end of the header lines, start of the body).
fn find_head_end(raw: &[u8]) -> Option<(usize, usize)> {
    let mut at = 0;
    while let Some(i) = memchr::memchr(b'\n', &raw[at..]) {
        let nl = at + i;
        let next = &raw[nl + 1..];
        if next.starts_with(b"\r\n") {
            return Some((nl, nl + 3));
        }
        if next.starts_with(b"\n") {
            return Some((nl, nl + 2));
        }
        at = nl + 1;
    }
    None
}

/// Decodes chunked coding: (payload, whether the last chunk was seen).
fn dechunk(mut rest: &[u8]) -> Result<(Vec<u8>, bool), RequestError> {
    let mut out = Vec::new();
    loop {
        let Some(nl) = memchr::memchr(b'\n', rest) else { return Ok((out, false)) };
        let line = trim(rest[..nl].strip_suffix(b"\r").unwrap_or(&rest[..nl]));
        let digits = line.split(|b| *b == b';').next().map(trim).unwrap_or_default();
        let size = std::str::from_utf8(digits)
            .ok()
            .and_then(|s| usize::from_str_radix(s, 16).ok())
            .ok_or(RequestError::BadChunk)?;
        rest = &rest[nl + 1..];
        if size == 0 {
            return Ok((out, true));
        }
        let take = size.min(rest.len());
        out.extend_from_slice(&rest[..take]);
        if take < size {
            return Ok((out, false));
        }
        rest = &rest[take..];
        rest = rest.strip_prefix(b"\r\n").or_else(|| rest.strip_prefix(b"\n")).unwrap_or(rest);
    }
}

impl Request for OwnedRequest {
    fn src(&self) -> SocketAddr {
        self.src
    }
    fn dst(&self) -> SocketAddr {
        self.dst
    }
    fn method(&self) -> &[u8] {
        &self.method
    }
    fn target(&self) -> &[u8] {
        &self.target
    }
    fn version(&self) -> &[u8] {
        &self.version
    }
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes())).map(|(_, v)| v.as_slice())
    }
    fn header_each<'a>(&'a self, name: &str, visit: &mut dyn FnMut(&'a [u8]) -> bool) {
        for (n, v) in &self.headers {
            if n.eq_ignore_ascii_case(name.as_bytes()) && visit(v) {
                return;
            }
        }
    }
    fn body(&self) -> Body<'_> {
        Body { bytes: &self.body, complete: self.body_complete }
    }
}
