//! Request heads (RFC 9112 §3) and request body framing (§6.1–§6.3).

use crate::body::BodyKind;
use crate::error::HeadError;
use crate::head::{HeaderSpan, HeadLimits, Parse, Span, Version};

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
    /// The Host field value, if present.
    pub host: Option<Span>,
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
            is_head: false,
            idempotent: true,
        }
    }

    /// Parses the head at the start of `buf`. `Partial` means no complete head yet and no
    /// limit exceeded; the caller reads more and calls again with the longer buffer.
    /// Strict: every case in `docs/http.md` is an `Err`.
    pub fn parse(&mut self, buf: &[u8], limits: &HeadLimits) -> Result<Parse, HeadError> {
        let _ = (buf, limits);
        todo!("http1 helper")
    }

    /// Value of the first header named `name` (ASCII case-insensitive), if any.
    pub fn header<'a>(&self, buf: &'a [u8], name: &str) -> Option<&'a [u8]> {
        self.headers
            .iter()
            .find(|h| h.name.slice(buf).eq_ignore_ascii_case(name.as_bytes()))
            .map(|h| h.value.slice(buf))
    }
}
