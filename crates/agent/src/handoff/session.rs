//! A handed-off connection whose later requests the agent must see (issue 12 part 5; seed
//! 001 §III): the listener's `connection_persistence` is `close` or `redirect`. `pin`
//! connections take the zero-copy `relay` instead.
//!
//! - `close` (seed 001's "rewriting HTTP header"): the request goes to the server with
//!   `Connection: close`, so the server closes after its answer and the client's next
//!   request comes on a new connection, which the switch routes. Then the bytes are
//!   spliced as by the relay.
//! - `redirect` (seed 001's "302"): every request head is read, and a later request the
//!   switch's rules (`policy`) send to another group is answered — once every earlier
//!   answer has reached the client (`responses`) — with a redirect to its own URL and
//!   `Connection: close` (302; 307 for a request with a body or an unsafe method, so it
//!   is repeated as sent). Requests that stay are forwarded as they came.
//!
//! Threads: this one carries client → server, `responses` server → client.

mod responses;

use super::policy::Verdict;
use super::{relay, Shared};
use http1::{BodyKind, BodyScanner, HeadLimits, Parse, RequestHead};
use oneway::{Persistence, Route};
use responses::Track;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// What a session needs besides its sockets.
pub(super) struct Session {
    pub route: Route,
    /// The rules (`policy`) and the counters.
    pub shared: Arc<Shared>,
    pub vip: SocketAddr,
    pub peer: SocketAddr,
    pub idle: Duration,
}

/// Connects to `local` and serves `client` on threads of their own.
pub(super) fn spawn(client: TcpStream, local: SocketAddr, session: Session) {
    let started = std::thread::Builder::new().name("session".into()).spawn(move || {
        let Some(server) = relay::connect(&client, local, session.idle) else { return };
        let result = match session.route.persistence {
            Persistence::Close => close_mode(&client, &server),
            _ => redirect_mode(&client, &server, &session),
        };
        if let Err(e) = result {
            tracing::debug!(client = %session.peer, error = %e, "session ended");
        }
    });
    if started.is_err() {
        tracing::warn!("cannot start a session thread; handed-off connection closed");
    }
}

/// The first request with `Connection: close`, its answer with `Connection: close` (so
/// the client knows, and does not send a request the server would not read), then the
/// bytes spliced as by the relay.
fn close_mode(client: &TcpStream, server: &TcpStream) -> io::Result<()> {
    let mut buf = Vec::with_capacity(4096);
    let mut req = RequestHead::new();
    if !read_head(client, &mut buf, &mut req)? {
        return Ok(());
    }
    let mut out = Vec::with_capacity(buf.len() + 32);
    write_closing_head(&buf, &req, &mut out);
    out.extend_from_slice(&buf[req.head_len..]);
    (&*server).write_all(&out)?;
    let is_head = req.is_head;
    let (client2, server2) = (client.try_clone()?, server.try_clone()?);
    std::thread::Builder::new()
        .name("session-down".into())
        .spawn(move || responses::pass_closing(&server2, &client2, is_head))?;
    relay::pump(client, server);
    Ok(())
}

/// Reads until `buf` starts with a whole request head (false: the client closed first).
fn read_head(mut client: &TcpStream, buf: &mut Vec<u8>, req: &mut RequestHead) -> io::Result<bool> {
    let limits = HeadLimits::default();
    loop {
        if !buf.is_empty() {
            match req.parse(buf, &limits) {
                Ok(Parse::Complete) => return Ok(true),
                Ok(Parse::Partial) => {}
                Err(e) => return Err(io::Error::other(format!("request head: {e}"))),
            }
        }
        if read_more(&mut client, buf)? == 0 {
            return Ok(false);
        }
    }
}

fn read_more(from: &mut &TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut chunk = [0u8; 16 * 1024];
    let n = from.read(&mut chunk)?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n)
}

/// The request head with its `Connection` and `Keep-Alive` fields replaced by
/// `Connection: close`.
fn write_closing_head(buf: &[u8], req: &RequestHead, out: &mut Vec<u8>) {
    write_closing(buf, req.method.start as usize, &req.headers, out);
}

/// A head (start line at `start` of `buf`, then `headers`) with `Connection: close` in
/// place of its `Connection` and `Keep-Alive` fields.
fn write_closing(buf: &[u8], start: usize, headers: &[http1::HeaderSpan], out: &mut Vec<u8>) {
    let line_end = buf[start..].iter().position(|&b| b == b'\n').map_or(start, |p| start + p + 1);
    out.extend_from_slice(&buf[start..line_end]);
    for h in headers {
        let name = h.name.slice(buf);
        if name.eq_ignore_ascii_case(b"connection") || name.eq_ignore_ascii_case(b"keep-alive") {
            continue;
        }
        out.extend_from_slice(h.line.slice(buf));
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
}

/// Requests forwarded one by one until one belongs elsewhere: that one is redirected.
fn redirect_mode(client: &TcpStream, server: &TcpStream, s: &Session) -> io::Result<()> {
    let track = Arc::new(Track::default());
    let down = {
        let (client, server, track) = (client.try_clone()?, server.try_clone()?, Arc::clone(&track));
        std::thread::Builder::new()
            .name("session-down".into())
            .spawn(move || responses::run(&server, &client, &track))?
    };
    let result = forward_requests(client, server, s, &track);
    if !matches!(result, Ok(Next::Redirected)) {
        // The client left or broke HTTP: the server is told, the answers in flight finish.
        let _ = server.shutdown(Shutdown::Write);
    }
    let _ = down.join();
    result.map(|_| ())
}

enum Next {
    Closed,
    Redirected,
}

fn forward_requests(
    client: &TcpStream,
    mut server: &TcpStream,
    s: &Session,
    track: &Track,
) -> io::Result<Next> {
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut req = RequestHead::new();
    let mut first = true;
    loop {
        if !read_head(client, &mut buf, &mut req)? {
            return Ok(Next::Closed);
        }
        if !first && s.shared.policies.verdict(&s.route, &buf, s.peer, s.vip) == Verdict::Elsewhere {
            redirect(client, server, &buf, &req, track, s)?;
            return Ok(Next::Redirected);
        }
        first = false;
        track.sent(req.is_head);
        server.write_all(&buf[..req.head_len])?;
        buf.drain(..req.head_len);
        forward_body(client, server, &mut buf, req.body)?;
        if req.upgrade {
            // The answer may switch protocols: from here on, bytes as they come.
            server.write_all(&buf)?;
            return copy_rest(client, server).map(|()| Next::Closed);
        }
    }
}

/// Forwards the request body framed by `kind`; what follows it stays in `buf`.
fn forward_body(
    mut client: &TcpStream,
    mut server: &TcpStream,
    buf: &mut Vec<u8>,
    kind: BodyKind,
) -> io::Result<()> {
    let mut scanner = BodyScanner::new(kind, u64::MAX);
    loop {
        let scan = scanner.scan(buf).map_err(|e| io::Error::other(format!("request body: {e}")))?;
        server.write_all(&buf[..scan.consumed])?;
        buf.drain(..scan.consumed);
        if scan.done {
            return Ok(());
        }
        if read_more(&mut client, buf)? == 0 {
            return Err(io::Error::other("client closed inside a request body"));
        }
    }
}

fn copy_rest(mut client: &TcpStream, mut server: &TcpStream) -> io::Result<()> {
    io::copy(&mut client, &mut server)?;
    Ok(())
}

/// Waits for the earlier answers, answers `req` with a redirect to itself, closes.
fn redirect(
    mut client: &TcpStream,
    server: &TcpStream,
    buf: &[u8],
    req: &RequestHead,
    track: &Track,
    s: &Session,
) -> io::Result<()> {
    let quiet = track.stop_when_answered(s.idle);
    // The server gets no more requests; its side of the relay ends.
    let _ = server.shutdown(Shutdown::Both);
    if !quiet {
        return Err(io::Error::other("earlier answers did not finish in time"));
    }
    let bodyless = req.body == BodyKind::None && matches!(req.method.slice(buf), b"GET" | b"HEAD");
    let status = if bodyless { "302 Found" } else { "307 Temporary Redirect" };
    let location = req.target.slice(buf);
    let mut out = Vec::with_capacity(128 + location.len());
    out.extend_from_slice(format!("HTTP/1.1 {status}\r\nLocation: ").as_bytes());
    out.extend_from_slice(location);
    out.extend_from_slice(b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    client.write_all(&out)?;
    s.shared.counts.redirected.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(client = %s.peer, location = %String::from_utf8_lossy(location), "later request for another group redirected");
    let _ = client.shutdown(Shutdown::Write);
    drain(client);
    Ok(())
}

/// Reads what the client still sends (a body nobody will read) until it closes, so the
/// close is a FIN and not a reset. Bounded: 2 s, 1 MiB.
fn drain(mut client: &TcpStream) {
    let _ = client.set_read_timeout(Some(Duration::from_secs(2)));
    let mut sink = [0u8; 16 * 1024];
    let mut total = 0usize;
    while total < 1 << 20 {
        match client.read(&mut sink) {
            Ok(0) | Err(_) => return,
            Ok(n) => total += n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closing_head_loses_only_its_connection_fields() {
        let raw = b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nAccept: */*\r\n\r\n";
        let mut req = RequestHead::new();
        assert_eq!(req.parse(raw, &HeadLimits::default()).unwrap(), Parse::Complete);
        let mut out = Vec::new();
        write_closing_head(raw, &req, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /a HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }
}
