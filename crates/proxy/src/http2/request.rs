//! An HTTP/2 request as the HTTP/1.1 head the request phases read (RFC 9113 §8.3.1:
//! `:method`, `:path`, and `:authority` as `Host`), refused where the translation could
//! smuggle a request: a field value with CR, LF or NUL (RFC 9113 §8.2.1), a
//! connection-specific field (§8.2.2), `:authority` disagreeing with `host` (§8.3.1), a
//! `content-length` the stream cannot have. The `h2` crate refuses most of these already
//! (a malformed stream is reset); they are checked here again because a miss would be a
//! second request on a server connection. What passes is parsed once more by the strict
//! HTTP/1.1 parser in the request phases.

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONTENT_LENGTH, COOKIE, HOST, TE};
use http::{Method, Request};

/// How the request body is framed toward the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// The stream ended with its headers: no body.
    None,
    /// `content-length: n`: exactly `n` bytes of DATA.
    Length(u64),
    /// No length given: the DATA frames go as chunks.
    Chunked,
}

/// The HTTP/1.1 request a stream becomes.
#[derive(Debug)]
pub struct Translated {
    /// The request head, ready for the request phases.
    pub head: Vec<u8>,
    /// How the body follows it.
    pub framing: Framing,
    /// A HEAD request (its answer has no body whatever its fields say).
    pub is_head: bool,
}

/// Why a stream was refused before translation: answered with `status` and `reason`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The status the client gets.
    pub status: u16,
    /// The short reason, in the body and the log.
    pub reason: &'static str,
}

const fn refused(status: u16, reason: &'static str) -> Refused {
    Refused { status, reason }
}

/// Fields that mean something only to one HTTP/1.1 connection (RFC 9113 §8.2.2).
const CONNECTION_SPECIFIC: &[&str] =
    &["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"];

/// Translates the request's head; `end_stream`: the stream carries no DATA.
pub fn translate<B>(req: &Request<B>, end_stream: bool) -> Result<Translated, Refused> {
    let method = req.method();
    if method == Method::CONNECT {
        return Err(refused(501, "CONNECT is not supported over HTTP/2"));
    }
    let path = req.uri().path_and_query().map_or("", |p| p.as_str());
    if path.is_empty() {
        return Err(refused(400, "missing :path"));
    }
    let headers = req.headers();
    let present = check_fields(headers)?;
    let host = host(req.uri().authority().map(|a| a.as_str()), headers, present.host)?;
    let framing = framing(headers, end_stream, present.length)?;
    let mut head = Vec::with_capacity(256);
    for part in [method.as_str().as_bytes(), b" ", path.as_bytes(), b" HTTP/1.1\r\nhost: ", host, b"\r\n"] {
        head.extend_from_slice(part);
    }
    write_fields(headers, present.cookie, &mut head);
    if framing == Framing::Chunked {
        head.extend_from_slice(b"transfer-encoding: chunked\r\n");
    }
    head.extend_from_slice(b"\r\n");
    Ok(Translated { head, framing, is_head: method == Method::HEAD })
}

/// Which of the fields looked up by name a request carries (noted on the one pass over
/// them, so an absent one costs no lookup: most requests carry none of them).
#[derive(Clone, Copy, Default)]
struct Present {
    host: bool,
    length: bool,
    cookie: bool,
}

/// Values without CR, LF or NUL; no connection-specific field; `te` only as `trailers`.
fn check_fields(headers: &HeaderMap) -> Result<Present, Refused> {
    let mut present = Present::default();
    for (name, value) in headers {
        present.host |= name == HOST;
        present.length |= name == CONTENT_LENGTH;
        present.cookie |= name == COOKIE;
        if value.as_bytes().iter().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
            return Err(refused(400, "CR, LF or NUL in a header field value"));
        }
        if CONNECTION_SPECIFIC.contains(&name.as_str()) {
            return Err(refused(400, "connection-specific header field in an HTTP/2 request"));
        }
        if name == TE && value.as_bytes() != b"trailers" {
            return Err(refused(400, "te other than \"trailers\" in an HTTP/2 request"));
        }
    }
    Ok(present)
}

/// The `Host` the server gets: `:authority`, which a `host` field must then equal; else
/// the one `host` field (`present`: there is one at all).
fn host<'a>(authority: Option<&'a str>, headers: &'a HeaderMap, present: bool) -> Result<&'a [u8], Refused> {
    let (first, second) = if present {
        let mut hosts = headers.get_all(HOST).iter();
        (hosts.next(), hosts.next())
    } else {
        (None, None)
    };
    if second.is_some() {
        return Err(refused(400, "more than one host field"));
    }
    match (authority, first) {
        (Some(a), Some(h)) if !a.as_bytes().eq_ignore_ascii_case(h.as_bytes()) => {
            Err(refused(400, ":authority and host disagree"))
        }
        (Some(""), _) => Err(refused(400, "empty :authority")),
        (Some(a), _) => Ok(a.as_bytes()),
        (None, Some(h)) if !h.is_empty() => Ok(h.as_bytes()),
        (None, _) => Err(refused(400, "no :authority and no host")),
    }
}

/// The body's framing: one valid `content-length` (zero when the stream has no DATA), or
/// chunks (`present`: there is a `content-length` at all).
fn framing(headers: &HeaderMap, end_stream: bool, present: bool) -> Result<Framing, Refused> {
    let (first, second) = if present {
        let mut lengths = headers.get_all(CONTENT_LENGTH).iter();
        (lengths.next(), lengths.next())
    } else {
        (None, None)
    };
    let length = match (first, second) {
        (None, _) => None,
        (Some(v), None) => Some(parse_length(v).ok_or(refused(400, "invalid content-length"))?),
        (Some(_), Some(_)) => return Err(refused(400, "more than one content-length")),
    };
    match (length, end_stream) {
        (Some(0) | None, true) => Ok(Framing::None),
        (Some(_), true) => Err(refused(400, "content-length disagrees with the DATA sent")),
        (Some(n), false) => Ok(Framing::Length(n)),
        (None, false) => Ok(Framing::Chunked),
    }
}

fn parse_length(v: &HeaderValue) -> Option<u64> {
    let b = v.as_bytes();
    if b.is_empty() || b.len() > 19 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(b).ok()?.parse().ok()
}

/// The fields as HTTP/1.1 lines, `host` left out (written first) and `cookie` fields
/// joined into one (RFC 9113 §8.2.3; `cookies`: there is one at all).
fn write_fields(headers: &HeaderMap, cookies: bool, out: &mut Vec<u8>) {
    for (name, value) in headers {
        if name == HOST || name == COOKIE {
            continue;
        }
        for part in [name.as_str().as_bytes(), b": ", value.as_bytes(), b"\r\n"] {
            out.extend_from_slice(part);
        }
    }
    if !cookies {
        return;
    }
    let mut cookies = headers.get_all(COOKIE).iter();
    if let Some(first) = cookies.next() {
        out.extend_from_slice(b"cookie: ");
        out.extend_from_slice(first.as_bytes());
        for more in cookies {
            out.extend_from_slice(b"; ");
            out.extend_from_slice(more.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
    }
}

/// A chunk of the body as HTTP/1.1 chunked coding writes it (size line, data, CRLF).
pub fn chunk(data: &Bytes, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests;
