//! One switch's control connection: the token first, then hand-offs, each restored on
//! HANDOFF (READY or FAILED), served on GO, dropped in repair mode on ABORT or when no GO
//! comes in time.

use super::cookies::Cookies;
use super::session::{self, Session};
use super::{relay, HandoffConfig, HandoffCounts, Shared};
use oneway::{Frame, Persistence, Reader, Route};
use socket2::Socket;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::Ordering;
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
    let counts = &shared.counts;
    let _ = conn.set_nodelay(true);
    let _ = conn.set_read_timeout(Some(TICK));
    let mut reader = Reader::default();
    if !authenticate(&mut conn, &mut reader, cfg, counts, peer) {
        return;
    }
    let mut pending: HashMap<u64, Pending> = HashMap::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        expire(&mut pending, cfg.go_timeout, counts);
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => reader.push(&buf[..n]),
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => continue,
            Err(_) => break,
        }
        loop {
            match reader.next_frame() {
                Ok(Some(frame)) => {
                    if handle(frame, &mut conn, &mut pending, cfg, shared).is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(switch = %peer, error = %e, "control connection broke the protocol; closed");
                    return;
                }
            }
        }
    }
    // The switch went away: whatever it handed off and did not confirm is dropped silently.
    counts.aborted.fetch_add(pending.len() as u64, Ordering::Relaxed);
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
            if let Some(p) = pending.remove(&id) {
                go(p, cfg, shared);
            }
            Ok(())
        }
        Frame::Policy(policy) => {
            shared.policies.set(policy);
            Ok(())
        }
        Frame::Abort { id } => {
            if pending.remove(&id).is_some() {
                counts.aborted.fetch_add(1, Ordering::Relaxed);
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
/// gives the connection to the local server: spliced under `pin`, through a session that
/// reads its requests and answers under `close` and `redirect` or with cookie persistence.
fn go(p: Pending, cfg: &HandoffConfig, shared: &Arc<Shared>) {
    let counts = &shared.counts;
    if let Err(e) = oneway::leave_repair(&p.sock, true) {
        counts.failed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(error = %e, "leaving repair mode failed");
        return;
    }
    counts.served.fetch_add(1, Ordering::Relaxed);
    let client: TcpStream = p.sock.into();
    let cookies = p.route.cookie.as_ref().and_then(Cookies::new).map(Arc::new);
    if p.route.persistence == Persistence::Pin && cookies.is_none() {
        // Passed as a descriptor when the local server takes them; relayed otherwise (or
        // when it cannot take this one).
        let client = match &shared.passer {
            Some(passer) => match passer.pass(client) {
                Ok(()) => {
                    counts.passed.fetch_add(1, Ordering::Relaxed);
                    return;
                }
                Err(client) => client,
            },
            None => client,
        };
        relay::spawn(client, p.local, cfg.idle_timeout);
        return;
    }
    let s = Session {
        route: p.route,
        shared: Arc::clone(shared),
        vip: p.vip,
        peer: p.client,
        idle: cfg.idle_timeout,
        cookies,
    };
    session::spawn(client, p.local, s);
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
