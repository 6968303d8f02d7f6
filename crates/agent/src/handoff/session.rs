//! A handed-off connection whose requests or answers the agent must read (issue 12 parts
//! 5 and 6; seed 001 §III–§IV): the listener's `connection_persistence` is `close` or
//! `redirect`, or the group has cookie persistence. Otherwise (`pin` without cookies) the
//! zero-copy `relay` carries it.
//!
//! - `close` (seed 001's "rewriting HTTP header"): the request goes to the server with
//!   `Connection: close` and its answer to the client with `Connection: close`, so each
//!   connection carries one request and the client's next one comes on a new connection,
//!   which the switch routes.
//! - `redirect` (seed 001's "302"): a later request the switch's rules (`policy`) send to
//!   another group is answered — once every earlier answer has reached the client — with a
//!   redirect to its own URL and `Connection: close` (302; 307 for a request with a body or
//!   a method other than GET/HEAD, so it is repeated as sent).
//! - `migrate`: such a request moves the connection, through the switch, to a server of
//!   that group (`migrate`); when it cannot move, it is served here.
//! - cookies (`cookies`): requests get their cookies as the server expects them, answers
//!   the cookie that brings the client back here.
//!
//! Threads: this one carries client → server, `responses` server → client; they share
//! the `Track` of requests awaiting their answers.

mod head;
mod responses;

use super::cookies::{Cookies, Seen};
use super::migrate::Outcome;
use super::policy::Verdict;
use super::report::Origin;
use super::{relay, Shared};
use head::Field;
use http1::{BodyKind, BodyScanner, HeadLimits, Parse, RequestHead};
use oneway::Frame;
use oneway::{Persistence, Route};
use responses::Track;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How long a session waits for the switch to move its connection before it serves the
/// request itself (an undumped connection) or lets it go (a dumped one).
const MIGRATE_WAIT: Duration = Duration::from_secs(5);

/// What a session needs besides its sockets.
pub(super) struct Session {
    /// The hand-off, and the control connection it came on (`Migrate` goes there).
    pub id: u64,
    pub origin: Origin,
    pub route: Route,
    /// The rules (`policy`) and the counters.
    pub shared: Arc<Shared>,
    pub vip: SocketAddr,
    pub peer: SocketAddr,
    pub idle: Duration,
    /// The group's cookie persistence for this server, if any.
    pub cookies: Option<Arc<Cookies>>,
}

/// Connects to `local` and serves `client` on threads of their own; `on_end` is called
/// once the session is over (both directions, or a failure).
pub(super) fn spawn(
    client: TcpStream,
    local: SocketAddr,
    session: Session,
    on_end: Box<dyn FnOnce() + Send>,
) {
    let started = std::thread::Builder::new().name("session".into()).spawn(move || {
        let mut migrated = false;
        if let Some(server) = relay::connect(&client, local, session.idle) {
            match run(&client, &server, &session) {
                Ok(moved) => migrated = moved,
                Err(e) => tracing::debug!(client = %session.peer, error = %e, "session ended"),
            }
        }
        // A connection moved to another server is that server's to report.
        if !migrated {
            on_end();
        }
    });
    if started.is_err() {
        tracing::warn!("cannot start a session thread; handed-off connection closed");
    }
}

/// True when the connection moved to another server.
fn run(client: &TcpStream, server: &TcpStream, s: &Session) -> io::Result<bool> {
    let track = Arc::new(Track::default());
    let down = {
        let (client, server, track) = (client.try_clone()?, server.try_clone()?, Arc::clone(&track));
        let edits =
            responses::Edits { close: s.route.persistence == Persistence::Close, cookies: s.cookies.clone() };
        std::thread::Builder::new()
            .name("session-down".into())
            .spawn(move || responses::run(&server, &client, &track, &edits))?
    };
    let result = forward_requests(client, server, s, &track);
    if matches!(result, Ok(Next::Closed) | Err(_)) {
        // The client left, broke HTTP, or the connection closes after this answer: the
        // server is told; answers in flight finish.
        let _ = server.shutdown(Shutdown::Write);
    }
    let _ = down.join();
    result.map(|next| matches!(next, Next::Migrated))
}

enum Next {
    Closed,
    Redirected,
    Migrated,
}

fn forward_requests(
    client: &TcpStream,
    mut server: &TcpStream,
    s: &Session,
    track: &Track,
) -> io::Result<Next> {
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut req = RequestHead::new();
    let mut out = Vec::with_capacity(1024);
    let close = s.route.persistence == Persistence::Close;
    let mut first = true;
    loop {
        if !read_head(client, &mut buf, &mut req)? {
            return Ok(Next::Closed);
        }
        let judged = !first && matches!(s.route.persistence, Persistence::Redirect | Persistence::Migrate);
        if judged && s.shared.policies.verdict(&s.route, &buf, s.peer, s.vip) == Verdict::Elsewhere {
            if s.route.persistence == Persistence::Redirect {
                redirect(client, server, &buf, &req, track, s)?;
                return Ok(Next::Redirected);
            }
            if migrate(client, server, &buf, track, s)? == Outcome::Moved {
                return Ok(Next::Migrated);
            }
        }
        first = false;
        let seen = edited_head(&buf, &req, close, s.cookies.as_deref(), &mut out);
        track.sent(req.is_head, seen);
        server.write_all(if out.is_empty() { &buf[..req.head_len] } else { &out })?;
        buf.drain(..req.head_len);
        pass_body(client, server, &mut buf, req.body, ("request body", AtEof::Fail))?;
        if close || req.upgrade {
            // After a closing request the server reads nothing more; after an upgrade the
            // bytes are another protocol's: either way, the rest as it comes.
            server.write_all(&buf)?;
            io::copy(&mut &*client, &mut server)?;
            return Ok(Next::Closed);
        }
    }
}

/// The request head as the server must get it, in `out` (left empty when it goes as
/// sent), and what its answer depends on.
fn edited_head(
    buf: &[u8],
    req: &RequestHead,
    close: bool,
    cookies: Option<&Cookies>,
    out: &mut Vec<u8>,
) -> Seen {
    out.clear();
    let mut seen = Seen::default();
    let mut cookie_value = Vec::new();
    let rewrite_cookies = cookies.is_some_and(|c| {
        let joined = join_cookies(buf, req);
        !joined.is_empty() && c.on_request(&joined, &mut seen, &mut cookie_value)
    });
    if !close && !rewrite_cookies {
        return seen;
    }
    let mut extra = Vec::new();
    if rewrite_cookies && !cookie_value.is_empty() {
        extra.extend_from_slice(b"Cookie: ");
        extra.extend_from_slice(&cookie_value);
        extra.extend_from_slice(b"\r\n");
    }
    if close {
        extra.extend_from_slice(b"Connection: close\r\n");
    }
    let field = |name: &[u8], _: &[u8]| match () {
        () if close && head::is_connection_field(name) => Field::Drop,
        () if rewrite_cookies && name.eq_ignore_ascii_case(b"cookie") => Field::Drop,
        () => Field::Keep,
    };
    head::write(buf, req.method.start as usize, &req.headers, field, &extra, out);
    seen
}

/// The request's Cookie fields, joined with `; `.
fn join_cookies(buf: &[u8], req: &RequestHead) -> Vec<u8> {
    let mut joined = Vec::new();
    for h in req.headers.iter().filter(|h| h.name.slice(buf).eq_ignore_ascii_case(b"cookie")) {
        if !joined.is_empty() {
            joined.extend_from_slice(b"; ");
        }
        joined.extend_from_slice(h.value.slice(buf));
    }
    joined
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

/// What the end of the stream inside a body means.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum AtEof {
    /// A request body cut short: the client left.
    Fail,
    /// An answer body ends there (close-delimited), or is passed on as short as it is.
    End,
}

/// Passes on the body framed by `kind` from `from` (what was read of it in `buf`) to `to`;
/// what follows it stays in `buf`. `what` names it in errors.
pub(super) fn pass_body(
    mut from: &TcpStream,
    mut to: &TcpStream,
    buf: &mut Vec<u8>,
    kind: BodyKind,
    (what, at_eof): (&str, AtEof),
) -> io::Result<()> {
    let mut scanner = BodyScanner::new(kind, u64::MAX);
    loop {
        let scan = scanner.scan(buf).map_err(|e| io::Error::other(format!("{what}: {e}")))?;
        to.write_all(&buf[..scan.consumed])?;
        buf.drain(..scan.consumed);
        if scan.done {
            return Ok(());
        }
        if read_more(&mut from, buf)? == 0 {
            return match at_eof {
                AtEof::End => Ok(()),
                AtEof::Fail => Err(io::Error::other(format!("closed inside a {what}"))),
            };
        }
    }
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
    // The server gets no more requests; its side of the session ends.
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

/// Asks the switch to move the connection, once every earlier answer has reached the
/// client; `buf` holds what was read of the request. `Stays`: serve it here.
fn migrate(
    client: &TcpStream,
    server: &TcpStream,
    buf: &[u8],
    track: &Track,
    s: &Session,
) -> io::Result<Outcome> {
    if !track.stop_when_answered(s.idle) {
        return Err(io::Error::other("earlier answers did not finish in time"));
    }
    let migrations = &s.shared.migrations;
    let outcome = migrations.ask(s.id, client.try_clone()?);
    let ask = Frame::Migrate { id: s.id, vip: s.vip, client: s.peer, request: buf.to_vec() };
    let result =
        if s.shared.reports.send(s.origin, ask) { outcome.recv_timeout(MIGRATE_WAIT).ok() } else { None };
    let result = result.unwrap_or_else(|| match migrations.give_up(s.id) {
        true => Outcome::Stays,
        // Dumped and never answered: the switch may have moved it; it is not ours to touch.
        false => Outcome::Moved,
    });
    if result == Outcome::Moved {
        s.shared.counts.migrated.fetch_add(1, Ordering::Relaxed);
        // The old server's side ends; the answers side stops without a word to the client.
        let _ = server.shutdown(Shutdown::Both);
    } else {
        track.resume();
    }
    Ok(result)
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

    fn parsed(raw: &[u8]) -> RequestHead {
        let mut req = RequestHead::new();
        assert_eq!(req.parse(raw, &HeadLimits::default()).unwrap(), Parse::Complete);
        req
    }

    #[test]
    fn a_closing_head_loses_only_its_connection_fields() {
        let raw = b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nAccept: */*\r\n\r\n";
        let mut out = Vec::new();
        edited_head(raw, &parsed(raw), true, None, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /a HTTP/1.1\r\nHost: x\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn a_head_without_edits_goes_as_sent() {
        let raw = b"GET /a HTTP/1.1\r\nHost: x\r\nCookie: a=1\r\n\r\n";
        let mut out = Vec::new();
        edited_head(raw, &parsed(raw), false, None, &mut out);
        assert!(out.is_empty());
    }
}
