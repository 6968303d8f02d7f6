//! Types shared by request and response heads.

/// A span from `usize` offsets; heads are capped below `u32::MAX` by the pre-scan.
pub(crate) fn span(start: usize, end: usize) -> Span {
    Span { start: start as u32, end: end as u32 }
}

/// A byte range `start..end` into the buffer a head was parsed from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// The bytes this span covers in `buf` (the same buffer the head was parsed from).
    /// Empty if the span does not fit `buf` (a different buffer): never panics.
    pub fn slice<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        buf.get(self.start as usize..self.end as usize).unwrap_or_default()
    }
}

/// One header field: name and value (value without surrounding whitespace).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeaderSpan {
    /// The field name as sent.
    pub name: Span,
    /// The field value, optional whitespace trimmed.
    pub value: Span,
    /// The whole field line without its CRLF (used when forwarding it unchanged).
    pub line: Span,
}

/// HTTP version of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.0
    Http10,
    /// HTTP/1.1
    Http11,
}

/// Limits on a head (RFC 9112 §2.3 leaves them to the implementation).
#[derive(Clone, Copy, Debug)]
pub struct HeadLimits {
    /// Largest head (start line + fields + final CRLF) accepted; beyond it → 431 (requests).
    pub max_head_bytes: usize,
    /// Most header fields accepted; beyond it → 431 (requests).
    pub max_headers: usize,
}

impl Default for HeadLimits {
    fn default() -> Self {
        HeadLimits { max_head_bytes: 16 * 1024, max_headers: 100 }
    }
}

/// Result of a parse attempt on a buffer that may hold only part of a head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parse {
    /// The head is complete; its length is in the head's `head_len`.
    Complete,
    /// More bytes are needed (and the limits are not yet exceeded).
    Partial,
}
