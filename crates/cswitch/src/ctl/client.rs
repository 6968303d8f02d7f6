//! A blocking HTTP/1.1 client for the admin API, over `std::net`: one request per
//! connection (the admin listener closes after each answer), the answer read to the end
//! and its head parsed by httparse. A full client crate would bring a runtime and TLS for
//! what is a handful of loopback requests.

use anyhow::{anyhow, bail, Context};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long to wait for a connection and then for the answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
// `upgrade` answers once the new process serves (at most 30 s) and the old one is drained
// (at most its `grace_period`).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(120);

/// A 2xx answer: the body as sent and as parsed.
pub struct Answer {
    pub raw: String,
    pub json: Value,
}

/// The admin listener at `addr`, with the token to send.
pub struct Client {
    addr: String,
    token: Option<String>,
}

impl Client {
    pub fn new(addr: String, token: Option<String>) -> Client {
        Client { addr, token }
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> anyhow::Result<Answer> {
        self.send("GET", path, b"")
    }

    /// `method path` with `body`; the answer, or the API's error for a non-2xx answer.
    pub fn send(&self, method: &str, path: &str, body: &[u8]) -> anyhow::Result<Answer> {
        let (status, answer) = self.exchange(method, path, body)?;
        let json: Option<Value> = serde_json::from_slice(&answer).ok();
        if !(200..300).contains(&status) {
            let message = json
                .as_ref()
                .and_then(|j| j["error"].as_str().map(str::to_string))
                .unwrap_or_else(|| String::from_utf8_lossy(&answer).trim().to_string());
            let hint = match status {
                401 => " (give --token, --token-file or CSWITCH_ADMIN_TOKEN)",
                _ => "",
            };
            bail!("{method} {path}: {status}: {message}{hint}");
        }
        let json = json.ok_or_else(|| anyhow!("{method} {path}: the answer is not JSON"))?;
        Ok(Answer { raw: String::from_utf8_lossy(&answer).into_owned(), json })
    }

    /// One request and its answer: status and body.
    fn exchange(&self, method: &str, path: &str, body: &[u8]) -> anyhow::Result<(u16, Vec<u8>)> {
        let mut stream = self.connect()?;
        stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
        stream.set_write_timeout(Some(ANSWER_TIMEOUT))?;
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", self.addr);
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        if !body.is_empty() {
            head.push_str("Content-Type: application/json\r\n");
        }
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        stream.write_all(head.as_bytes())?;
        stream.write_all(body)?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).with_context(|| format!("reading the answer from {}", self.addr))?;
        parse_answer(&answer).with_context(|| format!("the answer from {}", self.addr))
    }

    fn connect(&self) -> anyhow::Result<TcpStream> {
        let addrs = self
            .addr
            .to_socket_addrs()
            .with_context(|| format!("`{}` is not an address (IP:port or host:port)", self.addr))?;
        let mut last = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        let reason = last.map_or_else(|| "no address".to_string(), |e| e.to_string());
        bail!(
            "cannot reach the admin listener at {}: {reason} (is the switch running with [admin]?)",
            self.addr
        )
    }
}

/// Status and body of a whole answer (`Content-Length` trims the body when present).
fn parse_answer(answer: &[u8]) -> anyhow::Result<(u16, Vec<u8>)> {
    let mut fields = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut fields);
    let len = match response.parse(answer)? {
        httparse::Status::Complete(len) => len,
        httparse::Status::Partial => bail!("connection closed before a complete answer"),
    };
    let status = response.code.unwrap_or(0);
    let length = response
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| std::str::from_utf8(h.value).ok()?.trim().parse::<usize>().ok());
    let body = &answer[len..];
    let body = match length {
        Some(n) if n <= body.len() => &body[..n],
        Some(_) => bail!("connection closed in the middle of the answer"),
        None => body,
    };
    Ok((status, body.to_vec()))
}

/// Percent-encodes everything but unreserved characters, for path segments and query values.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn answers_are_split_into_status_and_body() {
        let raw = b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
        assert_eq!(parse_answer(raw).unwrap(), (404, b"{}".to_vec()));
        assert!(parse_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}").is_err());
        assert!(parse_answer(b"HTTP/1.1 200 OK\r\n").is_err());
    }

    #[test]
    fn encoding_keeps_names_and_escapes_the_rest() {
        assert_eq!(encode("web-1_a.b"), "web-1_a.b");
        assert_eq!(encode("127.0.0.1:5000"), "127.0.0.1%3A5000");
        assert_eq!(encode("a/b c"), "a%2Fb%20c");
    }
}
