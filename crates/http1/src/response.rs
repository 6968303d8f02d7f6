//! Response heads (RFC 9112 §4) and response body framing (§6.3).

use crate::body::BodyKind;
use crate::error::HeadError;
use crate::head::{HeaderSpan, HeadLimits, Parse, Span, Version};

/// A parsed response head. Spans index the buffer given to [`ResponseHead::parse`].
#[derive(Clone, Debug)]
pub struct ResponseHead {
    /// Bytes of the head including the final empty line.
    pub head_len: usize,
    /// HTTP/1.0 or HTTP/1.1.
    pub version: Version,
    /// Status code, 100–599.
    pub status: u16,
    /// Reason phrase as sent (may be empty).
    pub reason: Span,
    /// Header fields in order.
    pub headers: Vec<HeaderSpan>,
    /// Body framing, given the request method: `None` for HEAD requests, 1xx, 204, 304;
    /// `Chunked`; `Length(n)`; otherwise `UntilClose`.
    pub body: BodyKind,
    /// The server allows the connection to persist after this response.
    pub keep_alive: bool,
}

impl Default for ResponseHead {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseHead {
    /// An empty head, ready for `parse`.
    pub fn new() -> Self {
        ResponseHead {
            head_len: 0,
            version: Version::Http11,
            status: 0,
            reason: Span::default(),
            headers: Vec::with_capacity(32),
            body: BodyKind::None,
            keep_alive: true,
        }
    }

    /// Parses a response head at the start of `buf`; `request_was_head` says whether the
    /// request was HEAD (then there is no body whatever the fields say). Same strictness
    /// as requests where it applies (bare CR/LF, obs-fold, CL+TE, bad CL, bad codings).
    pub fn parse(
        &mut self,
        buf: &[u8],
        limits: &HeadLimits,
        request_was_head: bool,
    ) -> Result<Parse, HeadError> {
        let _ = (buf, limits, request_was_head);
        todo!("http1 helper")
    }

    /// Value of the first header named `name` (ASCII case-insensitive), if any.
    pub fn header<'a>(&self, buf: &'a [u8], name: &str) -> Option<&'a [u8]> {
        self.headers
            .iter()
            .find(|h| h.name.slice(buf).eq_ignore_ascii_case(name.as_bytes()))
            .map(|h| h.value.slice(buf))
    }

    /// 1xx other than 101: an interim response; the final one follows on the same connection.
    pub fn is_interim(&self) -> bool {
        (100..200).contains(&self.status) && self.status != 101
    }
}
