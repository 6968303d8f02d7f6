//! One active check of one server: connect, and for `http` send a request and judge the
//! answer, for `smtp` / `pop3` / `imap` read the greeting. The caller bounds the whole
//! probe with the check's timeout.

use config::{Check, HttpCheck};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Most of a response (head and body) an `http` check reads.
const MAX_READ: usize = 64 * 1024;

/// Runs `check` against `addr`; `Err` carries a short reason for the log and the API.
pub async fn run(check: &Check, addr: SocketAddr) -> Result<(), String> {
    let mut stream = TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
    match check {
        Check::Tcp => Ok(()),
        Check::Http(http) => http_check(&mut stream, http, addr).await,
        Check::Smtp => banner(&mut stream, b"220").await,
        Check::Pop3 => banner(&mut stream, b"+OK").await,
        Check::Imap => banner(&mut stream, b"* OK").await,
    }
}

async fn http_check(stream: &mut TcpStream, check: &HttpCheck, addr: SocketAddr) -> Result<(), String> {
    let host = check.host.clone().unwrap_or_else(|| addr.to_string());
    let request = format!(
        "{} {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: cswitch-health\r\nConnection: close\r\n\r\n",
        check.method, check.path
    );
    stream.write_all(request.as_bytes()).await.map_err(|e| format!("send: {e}"))?;
    let response = read_until_closed(stream).await?;
    judge(&response, check)
}

/// Reads until the server closes or `MAX_READ` bytes have arrived.
async fn read_until_closed(stream: &mut TcpStream) -> Result<Vec<u8>, String> {
    let mut response = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    while response.len() < MAX_READ {
        let n = stream.read(&mut chunk).await.map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            break;
        }
        response.extend_from_slice(&chunk[..n]);
    }
    Ok(response)
}

/// The verdict on an HTTP answer: its status within a range, and the body substring.
pub fn judge(response: &[u8], check: &HttpCheck) -> Result<(), String> {
    let status = status_of(response).ok_or_else(|| "no HTTP status line in the answer".to_string())?;
    if !check.expect_status.iter().any(|&(lo, hi)| (lo..=hi).contains(&status)) {
        return Err(format!("status {status}"));
    }
    if let Some(needle) = &check.expect_body {
        let body_start = memchr::memmem::find(response, b"\r\n\r\n").map_or(response.len(), |i| i + 4);
        if memchr::memmem::find(&response[body_start..], needle.as_bytes()).is_none() {
            return Err(format!("body lacks \"{needle}\""));
        }
    }
    Ok(())
}

fn status_of(response: &[u8]) -> Option<u16> {
    let line = response.split(|&b| b == b'\n').next()?;
    let rest = line.strip_prefix(b"HTTP/1.")?;
    let code = rest.get(2..5)?;
    std::str::from_utf8(code).ok()?.parse().ok()
}

/// Reads the greeting line and checks its start.
async fn banner(stream: &mut TcpStream, expect: &[u8]) -> Result<(), String> {
    let mut line = Vec::with_capacity(128);
    let mut chunk = [0u8; 512];
    while !line.contains(&b'\n') && line.len() < 4096 {
        let n = stream.read(&mut chunk).await.map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            break;
        }
        line.extend_from_slice(&chunk[..n]);
    }
    if line.starts_with(expect) {
        Ok(())
    } else {
        let shown = String::from_utf8_lossy(&line[..line.len().min(40)]).trim_end().to_string();
        Err(format!("greeting \"{shown}\" does not start with \"{}\"", String::from_utf8_lossy(expect)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(body: Option<&str>) -> HttpCheck {
        HttpCheck {
            method: "GET".into(),
            path: "/".into(),
            host: None,
            expect_status: vec![(200, 299)],
            expect_body: body.map(str::to_string),
        }
    }

    #[test]
    fn judge_reads_status_and_body() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        assert_eq!(judge(ok, &check(Some("ok"))), Ok(()));
        assert_eq!(judge(ok, &check(Some("fine"))), Err("body lacks \"fine\"".into()));
        let bad = b"HTTP/1.0 503 Service Unavailable\r\n\r\n";
        assert_eq!(judge(bad, &check(None)), Err("status 503".into()));
        assert!(judge(b"garbage", &check(None)).is_err());
        assert!(judge(b"", &check(None)).is_err());
    }
}
