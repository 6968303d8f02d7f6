//! One switch's control connection: the token first, then hand-offs, each restored on
//! HANDOFF (READY or FAILED), served on GO, dropped in repair mode on ABORT or when no GO
//! comes in time; and, between frames, the ENDED reports routed to this connection
//! (`report`).

use super::cookies::Cookies;
use super::report::{Origin, Reports};
use super::session::{self, Session};
use super::{relay, HandoffConfig, HandoffCounts, Shared};
use oneway::{Frame, Persistence, Reader, Route};
use socket2::Socket;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the loop wakes to drop restored connections whose GO is late.
const TICK: Duration = Duration::from_millis(100);

/// A restored connection waiting for GO.
struct Pending {
    sock: Socket,
    since: Instant,
    route: Route,
    vip: SocketAddr,
    client: SocketAddr,
    /// The local server it goes to (chosen by the VIP port it was made to).
    local: SocketAddr,
}

/// Serves one switch until it closes or breaks the protocol.
pub(super) fn serve(mut conn: TcpStream, peer: SocketAddr, cfg: &HandoffConfig, shared: &Arc<Shared>) {
    let (counts, reports) = (&*shared.counts, &shared.reports);
    let _ = conn.set_nodelay(true);
    let _ = conn.set_read_timeout(Some(TICK));
    let mut reader = Reader::default();
    if !authenticate(&mut conn, &mut reader, cfg, counts, peer) {
        return;
    }
    let (registration, outbox) = reports.register(peer.ip());
    let ends = Ends { reports, origin: registration.origin() };
    let mut pending: HashMap<u64, Pending> = HashMap::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        expire(&mut pending, cfg.go_timeout, counts);
        // Reports go out after a read has found the connection open (a switch that closed
        // it is seen first, and the reports go to its other connections).
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => reader.push(&buf[..n]),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
        if !frames(&mut reader, &mut conn, &mut pending, cfg, shared, &ends, peer) {
            break;
        }
        if let Some(unsent) = flush(&mut conn, &outbox, counts) {
            reports.reroute(peer.ip(), unsent, counts);
            break;
        }
    }
    // The switch went away: whatever it handed off and did not confirm is dropped silently;
    // reports routed here go to its other connections.
    counts.aborted.fetch_add(pending.len() as u64, Ordering::Relaxed);
    drop(registration);
    for frame in outbox.try_iter() {
        reports.reroute(peer.ip(), frame, counts);
    }
}

/// Sends the reports routed to this connection; the one that could not be sent, if any.
fn flush(conn: &mut TcpStream, outbox: &Receiver<Frame>, counts: &HandoffCounts) -> Option<Frame> {
    for frame in outbox.try_iter() {
        if send(conn, &frame).is_err() {
            return Some(frame);
        }
        counts.reported.fetch_add(1, Ordering::Relaxed);
    }
    None
}

/// What a hand-off served on this connection needs to report its end.
struct Ends<'a> {
    reports: &'a Reports,
    origin: Origin,
}

/// Handles the whole frames read so far; false when the connection must close.
fn frames(
    reader: &mut Reader,
    conn: &mut TcpStream,
    pending: &mut HashMap<u64, Pending>,
    cfg: &HandoffConfig,
    shared: &Arc<Shared>,
    ends: &Ends<'_>,
    peer: SocketAddr,
) -> bool {
    loop {
        match reader.next_frame() {
            Ok(Some(frame)) => {
                if handle(frame, conn, pending, cfg, shared, ends).is_err() {
                    return false;
                }
            }
            Ok(None) => return true,
            Err(e) => {
                tracing::warn!(switch = %peer, error = %e, "control connection broke the protocol; closed");
                return false;
            }
        }
    }
}

/// The first frame must be HELLO with the token (compared in constant time).
fn authenticate(
    conn: &mut TcpStream,
    reader: &mut Reader,
    cfg: &HandoffConfig,
    counts: &HandoffCounts,
    peer: SocketAddr,
) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = [0u8; 1024];
    let frame = loop {
        match reader.next_frame() {
            Ok(Some(f)) => break Some(f),
            Ok(None) => {}
            Err(_) => break None,
        }
        if Instant::now() > deadline {
            break None;
        }
        match conn.read(&mut buf) {
            Ok(0) => break None,
            Ok(n) => reader.push(&buf[..n]),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(_) => break None,
        }
    };
    let token_ok = matches!(&frame, Some(Frame::Hello { token })
        if crate::wire::token_matches(&cfg.token, std::str::from_utf8(token).ok()));
    if token_ok {
        return send(conn, &Frame::Welcome).is_ok();
    }
    counts.refused.fetch_add(1, Ordering::Relaxed);
    tracing::warn!(switch = %peer, "hand-off connection refused: no valid token");
    let _ = send(conn, &Frame::Refused { reason: "token refused".into() });
    false
}

fn handle(
    frame: Frame,
    conn: &mut TcpStream,
    pending: &mut HashMap<u64, Pending>,
    cfg: &HandoffConfig,
    shared: &Arc<Shared>,
    ends: &Ends<'_>,
) -> io::Result<()> {
    let counts = &shared.counts;
    match frame {
        Frame::Handoff { id, vip, client, route, state, already_read } => {
            match oneway::restore(&state, &already_read, vip, client) {
                Ok(sock) => {
                    let local = cfg.local_for(vip.port());
                    pending.insert(id, Pending { sock, since: Instant::now(), route, vip, client, local });
                    send(conn, &Frame::Ready { id })
                }
                Err(e) => {
                    counts.failed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%client, error = %e, "hand-off restore failed");
                    send(conn, &Frame::Failed { id, reason: e.to_string() })
                }
            }
        }
        Frame::Go { id } => {
            match pending.remove(&id) {
                Some(p) => go(p, id, cfg, shared, ends),
                None => {
                    shared.migrations.answer(id, false);
                }
            }
            Ok(())
        }
        Frame::Dump { id } => match shared.migrations.dump(id) {
            Some(answer) => send(conn, &answer),
            None => send(conn, &Frame::Failed { id, reason: "no such connection".into() }),
        },
        Frame::Policy(policy) => {
            shared.policies.set(policy);
            Ok(())
        }
        Frame::Abort { id } => {
            if pending.remove(&id).is_some() {
                counts.aborted.fetch_add(1, Ordering::Relaxed);
            } else {
                shared.migrations.answer(id, true);
            }
            Ok(())
        }
        other => {
            tracing::warn!(frame = ?other, "unexpected frame from a switch; closed");
            Err(io::Error::other("unexpected frame"))
        }
    }
}

/// Leaves repair mode (the window probe makes the client ACK along the new path) and
/// gives the connection to the local server: passed as a descriptor or spliced under
/// `pin`, through a session that reads its requests and answers under `close` and
/// `redirect` or with cookie persistence. When the agent's part is over, a duplicate of the
/// client's descriptor goes to the watcher, which reports the end once the socket closes.
fn go(p: Pending, id: u64, cfg: &HandoffConfig, shared: &Arc<Shared>, ends: &Ends<'_>) {
    let counts = &shared.counts;
    if let Err(e) = oneway::leave_repair(&p.sock, true) {
        counts.failed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(error = %e, "leaving repair mode failed");
        return;
    }
    counts.served.fetch_add(1, Ordering::Relaxed);
    let client: TcpStream = p.sock.into();
    let Ok(dup) = client.try_clone() else {
        tracing::warn!("no descriptor to watch the connection with; handed-off connection closed");
        return;
    };
    let cookies = p.route.cookie.as_ref().and_then(Cookies::new).map(|c| match c.learns() {
        true => Arc::new(c.reporting(learned_report(shared, ends.origin, &p.route))),
        false => Arc::new(c),
    });
    if p.route.persistence != Persistence::Pin || cookies.is_some() {
        let on_end = ends.reports.on_end(ends.origin, id, p.client, dup);
        let s = Session {
            id,
            origin: ends.origin,
            route: p.route,
            shared: Arc::clone(shared),
            vip: p.vip,
            peer: p.client,
            idle: cfg.idle_timeout,
            cookies,
        };
        session::spawn(client, p.local, s, on_end);
        return;
    }
    // Passed as a descriptor when the local server takes them (it owns the connection from
    // then on; the watcher still sees it close); relayed otherwise.
    let client = match &shared.passer {
        Some(passer) => match passer.pass(client) {
            Ok(()) => {
                counts.passed.fetch_add(1, Ordering::Relaxed);
                ends.reports.passed(ends.origin, id, p.client, dup);
                return;
            }
            Err(client) => client,
        },
        None => client,
    };
    relay::spawn(client, p.local, cfg.idle_timeout, ends.reports.on_end(ends.origin, id, p.client, dup));
}

/// Where `learn` sends a session cookie the server set: to the switch that handed the
/// connection off, as `Learned`.
fn learned_report(shared: &Arc<Shared>, origin: Origin, route: &Route) -> super::cookies::Report {
    let shared = Arc::clone(shared);
    let group = route.group.clone();
    let tag = route.cookie.as_ref().map(|c| c.tag.clone()).unwrap_or_default();
    Box::new(move |set_cookie: &[u8]| {
        let frame =
            Frame::Learned { group: group.clone(), tag: tag.clone(), set_cookie: set_cookie.to_vec() };
        if !shared.reports.send(origin, frame) {
            tracing::debug!("learned cookie not reported: no control connection from the switch");
        }
    })
}

/// Drops restored connections whose GO did not come within `timeout` (in repair mode:
/// nothing is sent; the switch serves them, or the client retries).
fn expire(pending: &mut HashMap<u64, Pending>, timeout: Duration, counts: &HandoffCounts) {
    let before = pending.len();
    pending.retain(|_, p| p.since.elapsed() < timeout);
    counts.aborted.fetch_add((before - pending.len()) as u64, Ordering::Relaxed);
}

fn send(conn: &mut TcpStream, frame: &Frame) -> io::Result<()> {
    let mut out = Vec::with_capacity(64);
    frame.encode(&mut out);
    conn.write_all(&out)
}
