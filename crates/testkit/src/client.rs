//! Test clients: a raw connection that sends exact bytes and reads responses with the
//! testkit's own reader, and a one-shot GET.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::wire::{self, eof, find, invalid, Body, Wire};

/// A response as a client read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// Protocol version from the status line, e.g. `HTTP/1.1`.
    pub version: String,
    /// Status code.
    pub status: u16,
    /// Reason phrase (may be empty).
    pub reason: String,
    /// Headers in arrival order, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The decoded body.
    pub body: Vec<u8>,
    /// Trailer fields of a chunked body.
    pub trailers: Vec<(String, String)>,
    /// The head exactly as received, blank line included.
    pub raw_head: Vec<u8>,
}

impl Response {
    /// The first value of header `name`, ignoring ASCII case.
    pub fn header(&self, name: &str) -> Option<&str> {
        find(&self.headers, name)
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// A client connection that sends exactly the bytes it is given.
#[derive(Debug)]
pub struct RawClient {
    stream: TcpStream,
    /// Bytes read past the last response (pipelined responses, WebSocket frames).
    buf: Vec<u8>,
}

impl RawClient {
    /// Connects to `addr`.
    pub async fn connect(addr: SocketAddr) -> io::Result<RawClient> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(RawClient { stream, buf: Vec::new() })
    }

    /// Connects from a chosen local address (e.g. another loopback address, for rules on
    /// the client's IP).
    pub async fn connect_from(local: SocketAddr, addr: SocketAddr) -> io::Result<RawClient> {
        let socket =
            if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        socket.bind(local)?;
        let stream = socket.connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(RawClient { stream, buf: Vec::new() })
    }

    /// Writes `bytes` as they are.
    pub async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// Reads one response: head, then the body by `Content-Length`, chunked (decoded,
    /// trailers kept) or until close; no body for 1xx, 204 and 304. Interim (1xx)
    /// responses are returned like any other, so a caller expecting one loops.
    pub async fn read_response(&mut self) -> io::Result<Response> {
        self.read(false).await
    }

    /// Reads the response to a HEAD request: like [`RawClient::read_response`], but
    /// never a body, whatever the headers say.
    pub async fn read_response_to_head(&mut self) -> io::Result<Response> {
        self.read(true).await
    }

    async fn read(&mut self, head_request: bool) -> io::Result<Response> {
        let mut w = Wire { stream: &mut self.stream, buf: &mut self.buf };
        let raw_head = w.read_head().await?.ok_or_else(|| eof("connection closed before a response"))?;
        let (start, headers) = wire::parse_head(&raw_head).ok_or_else(|| invalid("bad head"))?;
        let (version, status, reason) = parse_status(&start)?;
        let bodiless = head_request || (100..200).contains(&status) || matches!(status, 204 | 304);
        let framing = match bodiless {
            true => wire::Framing::Empty,
            false => wire::framing(&headers, false).map_err(|e| invalid(&e))?,
        };
        let mut body = Body::with_cap(usize::MAX);
        let trailers = w.read_body(framing, &mut body).await?;
        Ok(Response { version, status, reason, headers, body: body.data, trailers, raw_head })
    }

    /// True when the peer closes (or resets) the connection within `d`. Bytes that
    /// arrive meanwhile are kept for the next read.
    pub async fn closed_within(&mut self, d: Duration) -> bool {
        let mut w = Wire { stream: &mut self.stream, buf: &mut self.buf };
        let closed = async {
            loop {
                match w.fill().await {
                    Ok(0) | Err(_) => return true,
                    Ok(_) => {}
                }
            }
        };
        tokio::time::timeout(d, closed).await.unwrap_or(false)
    }

    /// The connection, for raw operations (WebSocket frames, slow writes, half-close).
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// The connection and the bytes already read from it, e.g. for [`crate::ws_read_frame`].
    pub fn parts_mut(&mut self) -> (&mut TcpStream, &mut Vec<u8>) {
        (&mut self.stream, &mut self.buf)
    }

    /// The connection and the bytes read from it but not yet consumed.
    pub fn into_parts(self) -> (TcpStream, Vec<u8>) {
        (self.stream, self.buf)
    }
}

/// `HTTP/1.1 200 OK` → version, status, reason.
fn parse_status(line: &str) -> io::Result<(String, u16, String)> {
    let mut parts = line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    let code = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/") || code.len() != 3 {
        return Err(invalid("bad status line"));
    }
    let status = code.parse().map_err(|_| invalid("bad status code"))?;
    let reason = parts.next().unwrap_or_default();
    Ok((version.to_string(), status, reason.to_string()))
}

/// One-shot GET with keep-alive off (`Connection: close`); interim responses other than
/// 101 are skipped.
pub async fn get(addr: SocketAddr, path: &str) -> io::Result<Response> {
    let mut client = RawClient::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    client.send(request.as_bytes()).await?;
    loop {
        let response = client.read_response().await?;
        if response.status == 101 || !(100..200).contains(&response.status) {
            return Ok(response);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Headers;

    #[test]
    fn status_lines() {
        let (v, s, r) = parse_status("HTTP/1.1 404 Not Found").expect("valid");
        assert_eq!((v.as_str(), s, r.as_str()), ("HTTP/1.1", 404, "Not Found"));
        assert_eq!(parse_status("HTTP/1.1 204").expect("valid").2, "");
        assert!(parse_status("HTTP/1.1 2000 X").is_err());
        assert!(parse_status("ICY 200 OK").is_err());
    }

    #[test]
    fn headers_lookup_ignores_case() {
        let headers: Headers = vec![("X-A".into(), "1".into()), ("x-a".into(), "2".into())];
        let r = Response {
            version: "HTTP/1.1".into(),
            status: 200,
            reason: "OK".into(),
            headers,
            body: b"hi".to_vec(),
            trailers: Vec::new(),
            raw_head: Vec::new(),
        };
        assert_eq!(r.header("x-A"), Some("1"));
        assert_eq!(r.body_str(), "hi");
    }
}
