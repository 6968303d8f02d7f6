//! Response heads (RFC 9112 §4) and response body framing (§6.3).

use crate::body::BodyKind;
use crate::error::HeadError;
use crate::fields::{self, Fields};
use crate::head::{span, HeadLimits, HeaderSpan, Parse, Span, Version};
use crate::scan;
use crate::syntax::is_text;

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
    ///
    /// Unlike requests, unknown transfer codings are accepted (the body is forwarded as
    /// received): a final coding other than chunked means the body runs until close.
    /// Limits, `Partial` and `HeadTooLarge` behave as for [`crate::RequestHead::parse`]; no
    /// empty lines are skipped before the status line. After `Partial` or an `Err` the
    /// fields of `self` are unspecified.
    pub fn parse(
        &mut self,
        buf: &[u8],
        limits: &HeadLimits,
        request_was_head: bool,
    ) -> Result<Parse, HeadError> {
        let Some(found) = scan::find_head(buf, limits, false, &mut self.headers)? else {
            return Ok(Parse::Partial);
        };
        let head = buf.get(..found.head_len).unwrap_or(buf);
        let line = head.get(..found.start_line_end).unwrap_or_default();
        let (version, status, reason) = parse_status_line(line)?;
        fields::validate(head, &self.headers)?;
        let f = fields::analyze(head, &self.headers)?;
        fields::check_framing(&f, version)?;
        let body = response_body(&f, status, request_was_head);
        self.head_len = found.head_len;
        self.version = version;
        self.status = status;
        self.reason = reason;
        self.body = body;
        // RFC 9112 §9.3; a close-delimited body ends the connection (§6.3 rule 8).
        self.keep_alive = fields::persistent(version, &f) && body != BodyKind::UntilClose;
        Ok(Parse::Complete)
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

/// `status-line = HTTP-version SP status-code SP [ reason-phrase ]` (RFC 9112 §4), the
/// second SP optional too ("HTTP/1.1 200" is common and harmless). The status line starts
/// the buffer (no empty lines are skipped before a response).
fn parse_status_line(line: &[u8]) -> Result<(Version, u16, Span), HeadError> {
    let version = fields::parse_version(line.get(..8).unwrap_or(line))?;
    if line.get(8) != Some(&b' ') {
        return Err(HeadError::BadStartLine);
    }
    // status-code = 3DIGIT, and RFC 9110 §15: 100–599.
    let code = line.get(9..12).unwrap_or_default();
    let status = match code {
        [a, b, c] if code.iter().all(u8::is_ascii_digit) => {
            u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
        }
        _ => return Err(HeadError::BadStatus),
    };
    if !(100..=599).contains(&status) {
        return Err(HeadError::BadStatus);
    }
    let reason = match line.get(12) {
        None => span(12, 12),
        Some(b' ') => span(13, line.len()),
        Some(_) => return Err(HeadError::BadStatus),
    };
    // reason-phrase = 1*( HTAB / SP / VCHAR / obs-text ).
    if !reason.slice(line).iter().all(|&b| is_text(b)) {
        return Err(HeadError::BadStartLine);
    }
    Ok((version, status, reason))
}

/// Response body framing (RFC 9112 §6.3).
fn response_body(f: &Fields, status: u16, request_was_head: bool) -> BodyKind {
    // Rule 1: responses to HEAD, 1xx (101 included: what follows is the new protocol),
    // 204 and 304 end with their head.
    if request_was_head || (100..200).contains(&status) || status == 204 || status == 304 {
        return BodyKind::None;
    }
    // Rule 4: chunked when it is the final coding, else read until the server closes.
    if let Some(te) = f.te {
        return if te.last_chunked { BodyKind::Chunked } else { BodyKind::UntilClose };
    }
    // Rules 6 and 8.
    match f.content_length {
        Some(0) => BodyKind::None,
        Some(n) => BodyKind::Length(n),
        None => BodyKind::UntilClose,
    }
}
