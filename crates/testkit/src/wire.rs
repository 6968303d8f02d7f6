//! A small, lenient HTTP/1.1 reader shared by the origins and the clients.
//!
//! Written here rather than borrowed from `cswitch-http1` so that tests never check the
//! proxy with its own parser. It is deliberately simple: find the end of the head, split
//! lines, frame bodies by `Content-Length`, chunked or end of stream. It accepts bare `\n`
//! line ends and rejects only what it cannot frame.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest head either side accepts; beyond it the peer is not speaking HTTP.
const MAX_HEAD: usize = 1 << 20;

/// Longest chunk-size or trailer line.
const MAX_LINE: usize = 64 * 1024;

/// A name/value header list in arrival order.
pub(crate) type Headers = Vec<(String, String)>;

/// A stream and the bytes already read from it but not yet consumed.
pub(crate) struct Wire<'a> {
    /// The connection.
    pub(crate) stream: &'a mut TcpStream,
    /// Read-ahead: bytes past whatever was consumed last (pipelined requests, frames).
    pub(crate) buf: &'a mut Vec<u8>,
}

/// How a message's body ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// Everything until the peer closes (responses only).
    UntilClose,
}

/// Where a body goes: kept up to `cap` bytes, counted in full.
pub(crate) struct Body {
    /// The first `cap` bytes.
    pub(crate) data: Vec<u8>,
    /// Every byte, kept or not.
    pub(crate) len: u64,
    cap: usize,
}

impl Body {
    /// A body that keeps at most `cap` bytes.
    pub(crate) fn with_cap(cap: usize) -> Body {
        Body { data: Vec::new(), len: 0, cap }
    }

    fn push(&mut self, bytes: &[u8]) {
        let room = self.cap.saturating_sub(self.data.len());
        self.data.extend_from_slice(&bytes[..room.min(bytes.len())]);
        self.len += bytes.len() as u64;
    }
}

impl Wire<'_> {
    /// Reads more bytes into the buffer; `Ok(0)` at end of stream.
    pub(crate) async fn fill(&mut self) -> io::Result<usize> {
        self.buf.reserve(16 * 1024);
        self.stream.read_buf(self.buf).await
    }

    /// Writes all of `bytes`.
    pub(crate) async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// The next head, blank line included, or `None` when the stream ends cleanly
    /// before it starts. Empty lines before a head are skipped (RFC 9112 §2.2).
    pub(crate) async fn read_head(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            let blank = self.buf.iter().take_while(|&&b| b == b'\r' || b == b'\n');
            let skip = blank.count();
            self.buf.drain(..skip);
            if let Some(end) = head_end(self.buf) {
                return Ok(Some(self.buf.drain(..end).collect()));
            }
            if self.buf.len() > MAX_HEAD {
                return Err(invalid("head too long"));
            }
            if self.fill().await? == 0 {
                return match self.buf.is_empty() {
                    true => Ok(None),
                    false => Err(eof("stream ended inside a head")),
                };
            }
        }
    }

    /// One line, its `\r\n` or `\n` removed.
    async fn read_line(&mut self) -> io::Result<Vec<u8>> {
        loop {
            if let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
                let mut line: Vec<u8> = self.buf.drain(..=nl).collect();
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                return Ok(line);
            }
            if self.buf.len() > MAX_LINE {
                return Err(invalid("line too long"));
            }
            if self.fill().await? == 0 {
                return Err(eof("stream ended inside a line"));
            }
        }
    }

    /// Reads a body framed as `framing` into `sink`; returns the trailers (chunked only).
    pub(crate) async fn read_body(&mut self, framing: Framing, sink: &mut Body) -> io::Result<Headers> {
        match framing {
            Framing::Empty => Ok(Vec::new()),
            Framing::Length(n) => self.read_exact(n, sink).await.map(|()| Vec::new()),
            Framing::Chunked => self.read_chunked(sink).await,
            Framing::UntilClose => self.read_to_end(sink).await.map(|()| Vec::new()),
        }
    }

    /// Moves up to `max` buffered bytes into `sink`, reading first if nothing is buffered.
    /// Returns how many moved; 0 only at end of stream.
    async fn take(&mut self, max: u64, sink: &mut Body) -> io::Result<usize> {
        if self.buf.is_empty() && self.fill().await? == 0 {
            return Ok(0);
        }
        let n = self.buf.len().min(usize::try_from(max).unwrap_or(usize::MAX));
        sink.push(&self.buf[..n]);
        self.buf.drain(..n);
        Ok(n)
    }

    async fn read_exact(&mut self, mut n: u64, sink: &mut Body) -> io::Result<()> {
        while n > 0 {
            match self.take(n, sink).await? {
                0 => return Err(eof("stream ended inside a body")),
                got => n -= got as u64,
            }
        }
        Ok(())
    }

    async fn read_to_end(&mut self, sink: &mut Body) -> io::Result<()> {
        while self.take(u64::MAX, sink).await? > 0 {}
        Ok(())
    }

    /// Decodes chunked transfer coding (RFC 9112 §7.1): extensions ignored, trailers kept.
    async fn read_chunked(&mut self, sink: &mut Body) -> io::Result<Headers> {
        loop {
            let line = self.read_line().await?;
            let size = chunk_size(&line).ok_or_else(|| invalid("bad chunk size"))?;
            if size == 0 {
                break;
            }
            self.read_exact(size, sink).await?;
            if !self.read_line().await?.is_empty() {
                return Err(invalid("chunk data not followed by CRLF"));
            }
        }
        let mut trailers = Vec::new();
        loop {
            let line = self.read_line().await?;
            if line.is_empty() {
                return Ok(trailers);
            }
            trailers.push(header_line(&line).ok_or_else(|| invalid("bad trailer"))?);
        }
    }
}

/// Index just past the blank line ending a head, accepting `\r\n` or bare `\n`.
fn head_end(buf: &[u8]) -> Option<usize> {
    let mut at = 0;
    while let Some(nl) = buf[at..].iter().position(|&b| b == b'\n') {
        let i = at + nl;
        match buf.get(i + 1) {
            Some(b'\n') => return Some(i + 2),
            Some(b'\r') if buf.get(i + 2) == Some(&b'\n') => return Some(i + 3),
            _ => at = i + 1,
        }
    }
    None
}

fn chunk_size(line: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(line).ok()?;
    let digits = text.split(';').next()?.trim();
    if digits.is_empty() {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

fn header_line(line: &[u8]) -> Option<(String, String)> {
    let colon = line.iter().position(|&b| b == b':')?;
    let name = String::from_utf8_lossy(&line[..colon]).into_owned();
    if name.is_empty() || name.contains(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let value = String::from_utf8_lossy(&line[colon + 1..]);
    Some((name, value.trim().to_string()))
}

/// Splits a raw head into its start line and headers; `None` if a header line is not
/// `name: value`. Folded continuation lines are joined to the previous value.
pub(crate) fn parse_head(raw: &[u8]) -> Option<(String, Headers)> {
    let mut lines =
        raw.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l)).take_while(|l| !l.is_empty());
    let start = String::from_utf8_lossy(lines.next()?).into_owned();
    let mut headers: Headers = Vec::new();
    for line in lines {
        if line[0] == b' ' || line[0] == b'\t' {
            let (_, value) = headers.last_mut()?;
            value.push(' ');
            value.push_str(String::from_utf8_lossy(line).trim());
        } else {
            headers.push(header_line(line)?);
        }
    }
    Some((start, headers))
}

/// The first value of header `name` (ASCII case-insensitive).
pub(crate) fn find<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
}

/// True when any `name` header lists `token` (comma-separated, case-insensitive).
pub(crate) fn has_token(headers: &[(String, String)], name: &str, token: &str) -> bool {
    headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name))
        .flat_map(|(_, v)| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Body framing from the headers (RFC 9112 §6.3). Without either header a request has
/// no body and a response runs until close. Conflicting lengths are an error.
pub(crate) fn framing(headers: &[(String, String)], request: bool) -> Result<Framing, String> {
    let codings: Vec<&str> = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("transfer-encoding"))
        .flat_map(|(_, v)| v.split(','))
        .map(str::trim)
        .collect();
    if let Some(last) = codings.last() {
        return match (last.eq_ignore_ascii_case("chunked"), request) {
            (true, _) => Ok(Framing::Chunked),
            (false, false) => Ok(Framing::UntilClose),
            (false, true) => Err(format!("cannot frame transfer coding {last:?}")),
        };
    }
    let mut length = None;
    let values = headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .flat_map(|(_, v)| v.split(','));
    for value in values {
        let n: u64 = value.trim().parse().map_err(|_| format!("bad content-length {value:?}"))?;
        if length.is_some_and(|l| l != n) {
            return Err("conflicting content-length values".to_string());
        }
        length = Some(n);
    }
    Ok(match (length, request) {
        (Some(0), _) | (None, true) => Framing::Empty,
        (Some(n), _) => Framing::Length(n),
        (None, false) => Framing::UntilClose,
    })
}

pub(crate) fn invalid(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.to_string())
}

pub(crate) fn eof(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, why.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_head_end_with_either_line_ending() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n\r\nrest"), Some(24));
        assert_eq!(head_end(b"GET / HTTP/1.1\nA: b\n\nrest"), Some(21));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n"), None);
    }

    #[test]
    fn parses_heads_and_framing() {
        let (start, headers) =
            parse_head(b"POST /x HTTP/1.1\r\nContent-Length: 5\r\nX: a\r\n  b\r\n\r\n").expect("valid head");
        assert_eq!(start, "POST /x HTTP/1.1");
        assert_eq!(find(&headers, "x"), Some("a b"));
        assert_eq!(framing(&headers, true), Ok(Framing::Length(5)));
        let te = vec![("Transfer-Encoding".to_string(), "gzip, chunked".to_string())];
        assert_eq!(framing(&te, true), Ok(Framing::Chunked));
        assert_eq!(framing(&[], false), Ok(Framing::UntilClose));
        let bad = vec![("Content-Length".to_string(), "abc".to_string())];
        assert!(framing(&bad, false).is_err());
        assert!(parse_head(b"GET / HTTP/1.1\r\nno colon\r\n\r\n").is_none());
    }

    #[test]
    fn chunk_sizes_ignore_extensions() {
        assert_eq!(chunk_size(b"1a;foo=bar"), Some(26));
        assert_eq!(chunk_size(b"0"), Some(0));
        assert_eq!(chunk_size(b"zz"), None);
        assert_eq!(chunk_size(b""), None);
    }
}
