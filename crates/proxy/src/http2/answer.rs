//! The head of an answer the HTTP/1.1 request phases wrote into a stream's pipe, read back
//! without validating it a second time (ADR 0020). The phases write only heads they made
//! themselves (refusals, redirects) or rewrote from a server's head that the strict parser
//! (`http1::ResponseHead::parse`) had accepted, so what is left is to find the fields and
//! the body's framing (RFC 9112 §6.3, as the strict parser decides it); every field still
//! passes `http`'s own checks on its way into the HTTP/2 response (`response::translate`).
//! A head that does not have the shape the phases write is an error, as before.

use http1::{BodyKind, HeaderSpan, Parse, ResponseHead, Span};

/// Why a head could not be read.
#[derive(Debug, PartialEq, Eq)]
pub struct NotAHead;

/// Reads the head at the start of `buf` into `head`; `Partial` until its empty line is
/// there. `request_was_head`: the answer has no body whatever its fields say.
pub fn read(
    buf: &[u8],
    head: &mut ResponseHead,
    request_was_head: bool,
    max: usize,
) -> Result<Parse, NotAHead> {
    head.headers.clear();
    let (mut chunked, mut length) = (None, None);
    let mut at = 0;
    loop {
        // Line by line (one `memchr` each): no search for the empty line first.
        let Some(nl) = memchr::memchr(b'\n', &buf[at..]) else {
            return if buf.len() > max { Err(NotAHead) } else { Ok(Parse::Partial) };
        };
        let eol = at + nl;
        if eol == at || buf[eol - 1] != b'\r' {
            return Err(NotAHead);
        }
        let line = (at, eol - 1);
        at = eol + 1;
        if line.0 == 0 {
            head.status = status(&buf[..line.1]).ok_or(NotAHead)?;
            continue;
        }
        if line.0 == line.1 {
            break;
        }
        let field = read_field(buf, line.0, line.1)?;
        let (name, value) = (field.name.slice(buf), field.value.slice(buf));
        if name.eq_ignore_ascii_case(b"transfer-encoding") {
            let last = value.rsplit(|b| *b == b',').next().unwrap_or_default();
            chunked = Some(last.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if name.eq_ignore_ascii_case(b"content-length") {
            length = std::str::from_utf8(value).ok().and_then(|v| v.parse::<u64>().ok());
        }
        head.headers.push(field);
    }
    head.head_len = at;
    head.body = framing(head.status, request_was_head, chunked, length);
    Ok(Parse::Complete)
}

/// `HTTP/1.x NNN ...`: the status code.
fn status(line: &[u8]) -> Option<u16> {
    let code = line.get(9..12)?;
    if !line.starts_with(b"HTTP/1.") || line.get(8) != Some(&b' ') || !code.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let digits = code.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    (100..=599).contains(&digits).then_some(digits)
}

/// The field line `buf[from..to]`: name, and value without its surrounding whitespace.
fn read_field(buf: &[u8], from: usize, to: usize) -> Result<HeaderSpan, NotAHead> {
    let colon = from + memchr::memchr(b':', &buf[from..to]).filter(|c| *c > 0).ok_or(NotAHead)?;
    let mut value = (colon + 1, to);
    while value.0 < value.1 && matches!(buf[value.0], b' ' | b'\t') {
        value.0 += 1;
    }
    while value.1 > value.0 && matches!(buf[value.1 - 1], b' ' | b'\t') {
        value.1 -= 1;
    }
    let span = |a: usize, b: usize| -> Result<Span, NotAHead> {
        Ok(Span {
            start: u32::try_from(a).map_err(|_| NotAHead)?,
            end: u32::try_from(b).map_err(|_| NotAHead)?,
        })
    };
    Ok(HeaderSpan { name: span(from, colon)?, value: span(value.0, value.1)?, line: span(from, to)? })
}

/// RFC 9112 §6.3, as `http1::ResponseHead::parse` decides it: no body after HEAD, 1xx,
/// 204, 304; chunked when it is the last coding, else until close; else the length (none
/// when 0); else until close.
fn framing(status: u16, request_was_head: bool, chunked: Option<bool>, length: Option<u64>) -> BodyKind {
    if request_was_head || (100..200).contains(&status) || status == 204 || status == 304 {
        return BodyKind::None;
    }
    match (chunked, length) {
        (Some(true), _) => BodyKind::Chunked,
        (Some(false), _) => BodyKind::UntilClose,
        (None, Some(0)) => BodyKind::None,
        (None, Some(n)) => BodyKind::Length(n),
        (None, None) => BodyKind::UntilClose,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http1::HeadLimits;

    /// What the strict parser makes of `head`, and what this reader makes of it, agree.
    fn same(raw: &str, request_was_head: bool) {
        let mut strict = ResponseHead::new();
        let limits = HeadLimits::default();
        assert_eq!(
            strict.parse(raw.as_bytes(), &limits, request_was_head).unwrap(),
            Parse::Complete,
            "{raw}"
        );
        let mut light = ResponseHead::new();
        assert_eq!(read(raw.as_bytes(), &mut light, request_was_head, 65536).unwrap(), Parse::Complete);
        assert_eq!(
            (light.head_len, light.status, light.body),
            (strict.head_len, strict.status, strict.body),
            "{raw}"
        );
        let fields = |h: &ResponseHead| -> Vec<(Vec<u8>, Vec<u8>)> {
            let b = raw.as_bytes();
            h.headers.iter().map(|f| (f.name.slice(b).to_vec(), f.value.slice(b).to_vec())).collect()
        };
        assert_eq!(fields(&light), fields(&strict), "{raw}");
    }

    #[test]
    fn reads_what_the_strict_parser_reads() {
        same("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A:  b c \t\r\n\r\nhello", false);
        same("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", true);
        same("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", false);
        same("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", false);
        same("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", false);
        same("HTTP/1.1 204 No Content\r\nServer: x\r\n\r\n", false);
        same("HTTP/1.1 304 Not Modified\r\nETag: \"1\"\r\n\r\n", false);
        same("HTTP/1.1 100 Continue\r\n\r\n", false);
        same("HTTP/1.1 200\r\n\r\n", false);
        same("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close", false);
        same("HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nempty:\r\n\r\n", false);
    }

    #[test]
    fn waits_for_the_empty_line_and_refuses_what_is_not_a_head() {
        let mut h = ResponseHead::new();
        assert_eq!(read(b"HTTP/1.1 200 OK\r\nA: b\r\n", &mut h, false, 100), Ok(Parse::Partial));
        assert_eq!(read(&[b'x'; 200], &mut h, false, 100), Err(NotAHead));
        assert_eq!(read(b"HTTP/1.1 2x0 OK\r\n\r\n", &mut h, false, 100), Err(NotAHead));
        assert_eq!(read(b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", &mut h, false, 100), Err(NotAHead));
        assert_eq!(read(b"HTTP/1.1 200 OK\r\n: no name\r\n\r\n", &mut h, false, 100), Err(NotAHead));
    }
}
