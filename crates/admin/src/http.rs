//! The admin listener's HTTP/1.1, kept small on purpose: one request per connection
//! (every answer says `Connection: close`), the head parsed by httparse, bodies only with
//! `Content-Length`. Limits keep a misbehaving client cheap: heads up to 16 KiB (431),
//! bodies up to 1 MiB (413); the caller bounds the time.

use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Largest request head.
pub(crate) const MAX_HEAD: usize = 16 * 1024;
/// Largest request body.
pub(crate) const MAX_BODY: usize = 1 << 20;
/// Most header fields in a head.
const MAX_FIELDS: usize = 64;

/// A request head, parsed.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) method: String,
    /// Path segments, percent-decoded one by one (so `%2F` never splits a segment).
    pub(crate) segments: Vec<String>,
    /// Query parameters, percent-decoded, in order.
    pub(crate) query: Vec<(String, String)>,
    pub(crate) authorization: Option<Vec<u8>>,
    pub(crate) content_length: usize,
    pub(crate) expect_continue: bool,
}

impl Head {
    /// The first value of query parameter `name`.
    pub(crate) fn param(&self, name: &str) -> Option<&str> {
        self.query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// A whole request: head and body.
#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) head: Head,
    pub(crate) body: Vec<u8>,
}

/// Reads a request head into `buf` (which keeps the bytes read past it: the body's start).
/// `Ok(None)`: the client closed before sending a complete head.
pub(crate) async fn read_head<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut Vec<u8>,
) -> Result<Option<Head>, Response> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((head, len)) = parse_head(buf)? {
            buf.drain(..len);
            return Ok(Some(head));
        }
        if buf.len() >= MAX_HEAD {
            return Err(Response::error(431, "request head larger than 16 KiB"));
        }
        let n = stream.read(&mut chunk).await.map_err(|_| Response::silent())?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Reads the body the head announced; `buf` holds what was read past the head already.
pub(crate) async fn read_body<S: AsyncRead + Unpin>(
    stream: &mut S,
    mut buf: Vec<u8>,
    len: usize,
) -> Result<Vec<u8>, Response> {
    if buf.len() > len {
        return Err(Response::error(400, "bytes after the body (one request per connection)"));
    }
    buf.reserve_exact(len - buf.len());
    let mut chunk = [0u8; 8192];
    while buf.len() < len {
        let want = (len - buf.len()).min(chunk.len());
        let n = stream.read(&mut chunk[..want]).await.map_err(|_| Response::silent())?;
        if n == 0 {
            return Err(Response::error(400, "connection closed before the whole body arrived"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok(buf)
}

/// `Some((head, length))` once `buf` holds a complete head.
fn parse_head(buf: &[u8]) -> Result<Option<(Head, usize)>, Response> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut req = httparse::Request::new(&mut fields);
    let len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Response::error(431, "more than 64 header fields"));
        }
        Err(e) => return Err(Response::error(400, format!("malformed request: {e}"))),
    };
    let method = req.method.unwrap_or_default().to_string();
    let target = req.path.unwrap_or_default();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if !path.starts_with('/') {
        return Err(Response::error(400, "the request target must be a path (origin form)"));
    }
    let mut head = Head {
        method,
        segments: path[1..].split('/').map(percent_decode).collect(),
        query: parse_query(query),
        authorization: None,
        content_length: 0,
        expect_continue: false,
    };
    read_fields(req.headers, &mut head)?;
    Ok(Some((head, len)))
}

fn read_fields(fields: &[httparse::Header<'_>], head: &mut Head) -> Result<(), Response> {
    let mut length: Option<usize> = None;
    for f in fields {
        if f.name.eq_ignore_ascii_case("authorization") {
            head.authorization = Some(f.value.to_vec());
        } else if f.name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(Response::error(501, "Transfer-Encoding is not supported; send Content-Length"));
        } else if f.name.eq_ignore_ascii_case("expect") {
            head.expect_continue = f.value.eq_ignore_ascii_case(b"100-continue");
        } else if f.name.eq_ignore_ascii_case("content-length") {
            let n = std::str::from_utf8(f.value)
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<usize>().ok())
                .ok_or_else(|| Response::error(400, "malformed Content-Length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(Response::error(400, "conflicting Content-Length fields"));
            }
            length = Some(n);
        }
    }
    head.content_length = length.unwrap_or(0);
    if head.content_length > MAX_BODY {
        return Err(Response::error(413, "request body larger than 1 MiB"));
    }
    Ok(())
}

/// `a=1&b=x%3Ay` → pairs; `+` is a space, as in forms.
fn parse_query(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(&k.replace('+', " ")), percent_decode(&v.replace('+', " ")))
        })
        .collect()
}

/// `%XX` escapes decoded; a malformed escape is kept as it is (names with `%` are invalid
/// anyway, and the handlers say so).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(hi), Some(lo)) => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An answer.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    content_type: &'static str,
    headers: Vec<(&'static str, String)>,
    pub(crate) body: Vec<u8>,
}

impl Response {
    /// `value` as JSON.
    pub(crate) fn json<T: Serialize>(status: u16, value: &T) -> Response {
        match serde_json::to_vec_pretty(value) {
            Ok(mut body) => {
                body.push(b'\n');
                Response { status, content_type: "application/json", headers: Vec::new(), body }
            }
            Err(e) => Response::error(500, format!("cannot encode the answer: {e}")),
        }
    }

    /// `{"error": message}`.
    pub(crate) fn error(status: u16, message: impl Into<String>) -> Response {
        #[derive(Serialize)]
        struct Error {
            error: String,
        }
        let body = serde_json::to_vec(&Error { error: message.into() }).unwrap_or_default();
        Response { status, content_type: "application/json", headers: Vec::new(), body }
    }

    /// Any other body.
    pub(crate) fn body(status: u16, content_type: &'static str, body: Vec<u8>) -> Response {
        Response { status, content_type, headers: Vec::new(), body }
    }

    /// Nothing is sent (the connection is already broken).
    pub(crate) fn silent() -> Response {
        Response::body(0, "", Vec::new())
    }

    /// Adds a header field.
    pub(crate) fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }

    /// Writes the answer; a [`Response::silent`] writes nothing.
    pub(crate) async fn write<S: AsyncWrite + Unpin>(&self, stream: &mut S) -> std::io::Result<()> {
        if self.status == 0 {
            return Ok(());
        }
        let mut head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n",
            self.status,
            reason(self.status),
            self.content_type,
            self.body.len()
        );
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(&self.body).await?;
        stream.flush().await
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn heads_are_split_into_segments_and_query() {
        let raw = b"PATCH /api/servers/web/s%31?group=a%3Ab&x=1+2 HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
        let (head, len) = parse_head(raw).unwrap().unwrap();
        assert_eq!(head.method, "PATCH");
        assert_eq!(head.segments, ["api", "servers", "web", "s1"]);
        assert_eq!(head.param("group"), Some("a:b"));
        assert_eq!(head.param("x"), Some("1 2"));
        assert_eq!(head.content_length, 5);
        assert_eq!(&raw[len..], b"hello");
    }

    #[test]
    fn bad_heads_get_the_right_status() {
        let status = |raw: &[u8]| parse_head(raw).err().map(|r| r.status);
        assert_eq!(status(b"GET / HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n"), Some(413));
        assert_eq!(status(b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"), Some(400));
        assert_eq!(status(b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), Some(501));
        assert_eq!(status(b"GET http://x/ HTTP/1.1\r\n\r\n"), Some(400));
        assert_eq!(status(b"GET / HTTP/1.1\r\n"), None);
        let many = format!("GET / HTTP/1.1\r\n{}\r\n", "A: b\r\n".repeat(65));
        assert_eq!(status(many.as_bytes()), Some(431));
    }
}
