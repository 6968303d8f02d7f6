//! Header fields: their bytes validated (over the pre-scan's spans), and the fields that decide
//! framing and persistence (Content-Length, Transfer-Encoding, Connection, Host, ...).

use crate::error::HeadError;
use crate::head::{HeaderSpan, Span, Version};
use crate::syntax::{is_token, list_elements};

/// Checks the bytes of every field line the pre-scan found (`spans`): the name a token
/// (RFC 9110 §5.6.2), the value, with the whitespace around it, visible bytes, SP, HTAB and
/// obs-text (RFC 9110 §5.5: no CTL such as NUL, no DEL). The pre-scan already refused
/// bare CR/LF, obs-fold, whitespace before the colon and a missing colon, and the start
/// line is parsed by its own head type, so this is all httparse added: one pass over the
/// field lines instead of parsing the head a second time (ADR 0022; a property test holds
/// it to httparse's answer).
pub(crate) fn validate(head: &[u8], spans: &[HeaderSpan]) -> Result<(), HeadError> {
    let (Some(first), Some(last)) = (spans.first(), spans.last()) else { return Ok(()) };
    // The lines' CRLFs are the only CR and LF in there (the pre-scan split them), and a
    // token is text: every byte from the first field to the last is text or a line end.
    let lines = head.get(first.line.start as usize..last.line.end as usize).unwrap_or_default();
    if !text_or_line_ends(lines)
        || !spans.iter().all(|h| h.name.slice(head).iter().all(|&b| TCHAR[b as usize]))
    {
        return Err(HeadError::BadHeader);
    }
    Ok(())
}

/// `tchar` as a table: one load per byte of a field name.
static TCHAR: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        t[b] = crate::syntax::is_tchar(b as u8);
        b += 1;
    }
    t
};

/// Whether every byte is `is_text`, CR or LF: without an early exit or a branch per byte,
/// so the compiler checks many bytes per instruction.
fn text_or_line_ends(s: &[u8]) -> bool {
    let bad = |b: u8| u8::from(((b < 0x20) & (b != b'\t') & (b != b'\r') & (b != b'\n')) | (b == 0x7f));
    s.iter().fold(0u8, |acc, &b| acc | bad(b)) == 0
}

/// What the framing and persistence fields say, gathered in one pass.
#[derive(Debug, Default)]
pub(crate) struct Fields {
    /// Content-Length, if present (all its values equal).
    pub content_length: Option<u64>,
    /// How many Content-Length values were sent (fields and list elements).
    pub length_elements: usize,
    /// Transfer-Encoding codings, if the field is present.
    pub te: Option<Codings>,
    /// Connection lists `close`.
    pub close: bool,
    /// Connection lists `keep-alive`.
    pub keep_alive: bool,
    /// Connection lists `upgrade`.
    pub upgrade_token: bool,
    /// An Upgrade field is present.
    pub upgrade_field: bool,
    /// Upgrade lists `websocket`.
    pub upgrade_websocket: bool,
    /// A Sec-WebSocket-Key field is present.
    pub websocket_key: bool,
    /// Expect lists `100-continue`.
    pub expect_continue: bool,
    /// How many Host fields.
    pub host_count: usize,
    /// Value of the first Host field.
    pub host: Option<Span>,
}

/// Summary of the transfer codings over every Transfer-Encoding field, in order
/// (RFC 9110 §5.3: several field lines combine into one list).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Codings {
    /// Non-empty list elements.
    pub count: usize,
    /// How many are `chunked` (parameters ignored).
    pub chunked: usize,
    /// The final coding is `chunked`.
    pub last_chunked: bool,
    /// Some coding is not one we know of (RFC 9112 §7.3 registry, plus `identity`).
    pub unknown: bool,
    /// Some element carries parameters (`;`).
    pub params: bool,
}

impl Codings {
    /// The list is exactly `chunked`, without parameters.
    pub fn only_chunked(&self) -> bool {
        self.count == 1 && self.chunked == 1 && !self.params
    }
}

/// Reads the fields that matter for framing; refuses malformed Content-Length and
/// Transfer-Encoding values.
pub(crate) fn analyze(buf: &[u8], headers: &[HeaderSpan]) -> Result<Fields, HeadError> {
    let mut f = Fields::default();
    for h in headers {
        let name = h.name.slice(buf);
        let value = h.value.slice(buf);
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => {
                f.host_count += 1;
                f.host.get_or_insert(h.value);
                if !valid_host(value) {
                    return Err(HeadError::BadHost);
                }
            }
            6 if name.eq_ignore_ascii_case(b"expect") => {
                f.expect_continue |= crate::syntax::list_has(value, b"100-continue");
            }
            7 if name.eq_ignore_ascii_case(b"upgrade") => {
                f.upgrade_field = true;
                f.upgrade_websocket |= crate::syntax::list_has(value, b"websocket");
            }
            17 if name.eq_ignore_ascii_case(b"sec-websocket-key") => f.websocket_key = true,
            10 if name.eq_ignore_ascii_case(b"connection") => connection(value, &mut f),
            14 if name.eq_ignore_ascii_case(b"content-length") => {
                f.length_elements += content_length(value, &mut f.content_length)?;
            }
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                codings(value, f.te.get_or_insert_with(Codings::default))?;
            }
            _ => {}
        }
    }
    Ok(f)
}

/// Connection options (RFC 9110 §7.6.1), case-insensitive tokens in a list.
fn connection(value: &[u8], f: &mut Fields) {
    for e in list_elements(value) {
        f.close |= e.eq_ignore_ascii_case(b"close");
        f.keep_alive |= e.eq_ignore_ascii_case(b"keep-alive");
        f.upgrade_token |= e.eq_ignore_ascii_case(b"upgrade");
    }
}

/// `Content-Length = 1*DIGIT` (RFC 9110 §8.6). A list of identical values (or repeated
/// identical fields) is accepted as that value, as §8.6 allows; anything else is refused
/// (RFC 9112 §6.3 rule 5): a sign, hex, an empty element, overflow, differing values.
fn content_length(value: &[u8], seen: &mut Option<u64>) -> Result<usize, HeadError> {
    let mut count = 0;
    for e in list_elements(value) {
        count += 1;
        let n = parse_decimal(e).ok_or(HeadError::BadContentLength)?;
        match seen {
            Some(prev) if *prev != n => return Err(HeadError::BadContentLength),
            _ => *seen = Some(n),
        }
    }
    Ok(count)
}

/// `1*DIGIT` as a u64; `None` when empty, not all digits, or too large.
fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &b| {
        let d = if b.is_ascii_digit() {
            u64::from(b - b'0')
        } else {
            return None;
        };
        acc.checked_mul(10)?.checked_add(d)
    })
}

/// Adds one Transfer-Encoding field's codings to the running summary. An empty element
/// (`,chunked`) or a coding that is not a token makes the field malformed: RFC 9110
/// §5.6.1 lets recipients skip empty elements, but a server that does not would read the
/// body differently, so the request is refused.
fn codings(value: &[u8], c: &mut Codings) -> Result<(), HeadError> {
    for e in list_elements(value) {
        if e.is_empty() {
            return Err(HeadError::BadHeader);
        }
        let (name, params) = match memchr::memchr(b';', e) {
            Some(i) => (crate::syntax::trim_ows(e.get(..i).unwrap_or_default()), true),
            None => (e, false),
        };
        if !is_token(name) {
            return Err(HeadError::BadHeader);
        }
        let chunked = name.eq_ignore_ascii_case(b"chunked");
        c.count += 1;
        c.params |= params;
        c.chunked += usize::from(chunked);
        c.last_chunked = chunked;
        c.unknown |= !chunked && !KNOWN_CODINGS.iter().any(|k| name.eq_ignore_ascii_case(k));
    }
    Ok(())
}

/// Registered transfer codings (RFC 9112 §7.3) and `identity` (RFC 7230's, still sent).
const KNOWN_CODINGS: [&[u8]; 6] = [b"gzip", b"x-gzip", b"deflate", b"compress", b"x-compress", b"identity"];

/// Framing rules common to requests and responses.
pub(crate) fn check_framing(f: &Fields, version: Version) -> Result<(), HeadError> {
    let Some(te) = f.te else { return Ok(()) };
    // RFC 9112 §6.3 rule 3: both fields "ought to be handled as an error" (request
    // smuggling / response splitting); §6.1 lets a server reject such a request.
    if f.content_length.is_some() {
        return Err(HeadError::LengthAndChunked);
    }
    // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing.
    if version == Version::Http10 {
        return Err(HeadError::ChunkedInHttp10);
    }
    // RFC 9112 §6.1: "A sender MUST NOT apply the chunked transfer coding more than once".
    if te.chunked > 1 {
        return Err(HeadError::ChunkedNotLast);
    }
    Ok(())
}

/// Host = uri-host [ ":" port ] (RFC 9110 §7.2, RFC 3986 §3.2.2): reg-name, IPv4 or an
/// IP-literal in brackets; empty is allowed (RFC 9112 §3.2, for targets with no authority).
/// A port, if any, is decimal digits.
pub(crate) fn valid_host(v: &[u8]) -> bool {
    let port = match v.first() {
        Some(b'[') => memchr::memchr(b']', v).map(|i| &v[i + 1..]).unwrap_or_default(),
        _ => memchr::memchr(b':', v).map(|i| &v[i..]).unwrap_or_default(),
    };
    let port_ok = match port.split_first() {
        None => true,
        Some((b':', digits)) => digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    };
    port_ok
        && v.iter().all(|&b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'-' | b'.'
                        | b'_'
                        | b'~'
                        | b'%'
                        | b':'
                        | b'['
                        | b']'
                        | b'!'
                        | b'$'
                        | b'&'
                        | b'\''
                        | b'('
                        | b')'
                        | b'*'
                        | b'+'
                        | b','
                        | b';'
                        | b'='
                )
        })
}

/// RFC 9112 §9.3: HTTP/1.1 persists unless `close`; HTTP/1.0 only with `keep-alive`
/// (Appendix C.2.2). `close` wins over `keep-alive`.
pub(crate) fn persistent(version: Version, f: &Fields) -> bool {
    match version {
        Version::Http11 => !f.close,
        Version::Http10 => f.keep_alive && !f.close,
    }
}

/// `HTTP-version = HTTP-name "/" DIGIT "." DIGIT` (RFC 9112 §2.3, case-sensitive). A
/// well-formed version we don't speak is 505; anything else is a malformed start line.
pub(crate) fn parse_version(v: &[u8]) -> Result<Version, HeadError> {
    match v {
        b"HTTP/1.1" => Ok(Version::Http11),
        b"HTTP/1.0" => Ok(Version::Http10),
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            Err(HeadError::BadVersion)
        }
        _ => Err(HeadError::BadStartLine),
    }
}
