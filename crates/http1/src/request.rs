//! Request heads (RFC 9112 §3) and request body framing (§6.1–§6.3).

use crate::body::BodyKind;
use crate::error::HeadError;
use crate::fields::{self, Fields};
use crate::head::{span, HeadLimits, HeaderSpan, Parse, Span, Version};
use crate::scan;
use crate::syntax::is_token;

/// Idempotent methods (RFC 9110 §9.2.2); method names are case-sensitive (§9.1).
const IDEMPOTENT: [&[u8]; 6] = [b"GET", b"HEAD", b"PUT", b"DELETE", b"OPTIONS", b"TRACE"];

/// A parsed request head. All spans index the buffer given to [`RequestHead::parse`].
/// Reuse one value per connection: `parse` clears it and keeps the header `Vec`'s capacity.
#[derive(Clone, Debug)]
pub struct RequestHead {
    /// Bytes of the head including the final empty line; the body (if any) starts here.
    pub head_len: usize,
    /// Method token.
    pub method: Span,
    /// Request-target as sent.
    pub target: Span,
    /// HTTP/1.0 or HTTP/1.1.
    pub version: Version,
    /// Header fields in order.
    pub headers: Vec<HeaderSpan>,
    /// How the request body is framed: `None`, `Length(n)` (n > 0) or `Chunked`.
    pub body: BodyKind,
    /// The client allows the connection to persist after this exchange
    /// (HTTP/1.1 without `Connection: close`, or HTTP/1.0 with `Connection: keep-alive`).
    pub keep_alive: bool,
    /// `Expect: 100-continue` was sent.
    pub expect_continue: bool,
    /// `Upgrade` header present and `Connection` lists `upgrade` (e.g. WebSocket).
    pub upgrade: bool,
    /// The host the request is for: the authority of an absolute-form target (RFC 9112
    /// §3.2.2: it wins over the Host field, which is then rewritten to it), else the Host
    /// field's value, if present.
    pub host: Option<Span>,
    /// The authority of an absolute-form target (`http://authority/path`).
    pub authority: Option<Span>,
    /// Content-Length was sent as a list or repeated (all values equal): it is forwarded
    /// as one field with this value.
    pub collapse_length: Option<u64>,
    /// Method is HEAD (its response has no body).
    pub is_head: bool,
    /// Method is idempotent (GET HEAD PUT DELETE OPTIONS TRACE, RFC 9110 §9.2.2).
    pub idempotent: bool,
}

impl Default for RequestHead {
    fn default() -> Self {
        Self::new()
    }
}

impl RequestHead {
    /// An empty head, ready for `parse`.
    pub fn new() -> Self {
        RequestHead {
            head_len: 0,
            method: Span::default(),
            target: Span::default(),
            version: Version::Http11,
            headers: Vec::with_capacity(32),
            body: BodyKind::None,
            keep_alive: true,
            expect_continue: false,
            upgrade: false,
            host: None,
            authority: None,
            collapse_length: None,
            is_head: false,
            idempotent: true,
        }
    }

    /// Parses the head at the start of `buf`. `Partial` means no complete head yet and no
    /// limit exceeded; the caller reads more and calls again with the longer buffer.
    /// Strict: every case in `docs/http.md` is an `Err`.
    ///
    /// `HeadTooLarge` comes as soon as `buf` holds `max_head_bytes` bytes without a complete
    /// head, so a read buffer of `max_head_bytes` always gets a decision. Empty lines before
    /// the request line are skipped (RFC 9112 §2.2) and count in `head_len`; `method` is
    /// where the request line starts. After `Partial` or an `Err` the fields of `self` are
    /// unspecified.
    pub fn parse(&mut self, buf: &[u8], limits: &HeadLimits) -> Result<Parse, HeadError> {
        let Some(found) = scan::find_head(buf, limits, true, &mut self.headers)? else {
            return Ok(Parse::Partial);
        };
        let head = buf.get(..found.head_len).unwrap_or(buf);
        let line = head.get(found.start..found.start_line_end).unwrap_or_default();
        let (method, target, version) = parse_request_line(line, found.start)?;
        let authority = target_form(method.slice(buf), target.slice(buf), target)?;
        fields::validate(head, &self.headers)?;
        let f = fields::analyze(head, &self.headers)?;
        // RFC 9112 §3.2: 400 for an HTTP/1.1 request without Host, and for any request
        // with more than one.
        if f.host_count > 1 || (version == Version::Http11 && f.host_count == 0) {
            return Err(HeadError::BadHost);
        }
        self.body = request_body(&f, version)?;
        let method_bytes = method.slice(buf);
        self.head_len = found.head_len;
        self.method = method;
        self.target = target;
        self.version = version;
        self.keep_alive = fields::persistent(version, &f);
        // RFC 9110 §10.1.1 and §7.8: an HTTP/1.0 request's 100-continue and Upgrade are
        // ignored.
        self.expect_continue = f.expect_continue && version == Version::Http11;
        // A WebSocket upgrade without its key cannot be completed (RFC 6455 §4.1): it is
        // forwarded as a plain request, never tunnelled.
        let websocket_ok = !f.upgrade_websocket || f.websocket_key;
        self.upgrade = f.upgrade_field && f.upgrade_token && websocket_ok && version == Version::Http11;
        self.authority = authority;
        self.host = authority.or(f.host);
        self.collapse_length = f.content_length.filter(|_| f.length_elements > 1);
        self.is_head = method_bytes == b"HEAD";
        self.idempotent = IDEMPOTENT.contains(&method_bytes);
        Ok(Parse::Complete)
    }

    /// Value of the first header named `name` (ASCII case-insensitive), if any.
    pub fn header<'a>(&self, buf: &'a [u8], name: &str) -> Option<&'a [u8]> {
        self.headers
            .iter()
            .find(|h| h.name.slice(buf).eq_ignore_ascii_case(name.as_bytes()))
            .map(|h| h.value.slice(buf))
    }
}

/// The target's form must fit the method (RFC 9112 §3.2): origin form (`/path`) or absolute
/// form (`http[s]://authority…`) for every method, the asterisk form for OPTIONS only,
/// and the authority form for CONNECT only — which the switch refuses (501). No fragment
/// (RFC 9110 §7.1: a client never sends one). Returns the absolute form's authority.
fn target_form(method: &[u8], target: &[u8], at: Span) -> Result<Option<Span>, HeadError> {
    if memchr::memchr(b'#', target).is_some() {
        return Err(HeadError::BadTargetForm);
    }
    if method == b"CONNECT" {
        return Err(if authority_form(target) { HeadError::Connect } else { HeadError::BadTargetForm });
    }
    match target {
        b"*" if method == b"OPTIONS" => Ok(None),
        [b'/', ..] => Ok(None),
        _ => {
            let (scheme_len, authority) = absolute_form(target).ok_or(HeadError::BadTargetForm)?;
            let start = at.start + scheme_len as u32;
            Ok(Some(span(start as usize, start as usize + authority)))
        }
    }
}

/// `host:port` with a non-empty host and a decimal port (RFC 9112 §3.2.3).
fn authority_form(target: &[u8]) -> bool {
    match memchr::memrchr(b':', target) {
        Some(i) => i > 0 && i + 1 < target.len() && target[i + 1..].iter().all(u8::is_ascii_digit),
        None => false,
    }
}

/// `http://authority[/…]` or `https://…` (case-insensitive scheme, non-empty authority):
/// the length of `scheme://` and of the authority.
fn absolute_form(target: &[u8]) -> Option<(usize, usize)> {
    let rest_at = if target.len() >= 7 && target[..7].eq_ignore_ascii_case(b"http://") {
        7
    } else if target.len() >= 8 && target[..8].eq_ignore_ascii_case(b"https://") {
        8
    } else {
        return None;
    };
    let rest = &target[rest_at..];
    let len = rest.iter().position(|&b| matches!(b, b'/' | b'?')).unwrap_or(rest.len());
    (len > 0 && fields::valid_host(&rest[..len])).then_some((rest_at, len))
}

/// `request-line = method SP request-target SP HTTP-version` (RFC 9112 §3). `base` is the
/// offset of `line` in the buffer. The target runs from the first SP to the last, so a
/// target containing SP is refused as a bad target rather than misread.
fn parse_request_line(line: &[u8], base: usize) -> Result<(Span, Span, Version), HeadError> {
    let (Some(sp1), Some(sp2)) = (memchr::memchr(b' ', line), memchr::memrchr(b' ', line)) else {
        return Err(HeadError::BadStartLine);
    };
    let method = line.get(..sp1).unwrap_or_default();
    let target = line.get(sp1 + 1..sp2).unwrap_or_default();
    // RFC 9112 §3.1: method = token.
    if sp2 <= sp1 || !is_token(method) || target.is_empty() {
        return Err(HeadError::BadStartLine);
    }
    // RFC 9112 §3.2 / RFC 3986: the target is visible US-ASCII; no CTL, SP, DEL or
    // non-ASCII byte (servers disagree on how to read those).
    if !target.iter().all(|&b| (0x21..0x7f).contains(&b)) {
        return Err(HeadError::BadTarget);
    }
    let version = fields::parse_version(line.get(sp2 + 1..).unwrap_or_default())?;
    let method = span(base, base + sp1);
    let target = span(base + sp1 + 1, base + sp2);
    Ok((method, target, version))
}

/// Request body framing (RFC 9112 §6.3 rules 3–7).
fn request_body(f: &Fields, version: Version) -> Result<BodyKind, HeadError> {
    fields::check_framing(f, version)?;
    if let Some(te) = f.te {
        if te.unknown {
            return Err(HeadError::UnknownCoding);
        }
        // RFC 9112 §6.3 rule 4: a request whose final coding is not chunked can't be
        // delimited: 400 and close.
        if !te.last_chunked {
            return Err(HeadError::ChunkedNotLast);
        }
        // We forward bodies as received and decode none but chunked, so anything other
        // than exactly `chunked` (e.g. `gzip, chunked`, `chunked;x=1`) is not implemented
        // (RFC 9112 §6.1: 501 for a transfer coding the server does not understand).
        if !te.only_chunked() {
            return Err(HeadError::UnknownCoding);
        }
        return Ok(BodyKind::Chunked);
    }
    // RFC 9112 §6.3 rules 6 and 7: Content-Length, else no body.
    Ok(match f.content_length {
        Some(n) if n > 0 => BodyKind::Length(n),
        _ => BodyKind::None,
    })
}
