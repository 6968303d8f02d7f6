//! The end of every request (HTTP) and session (TLS passthrough, SMTP, POP3, IMAP), one
//! way for all listeners: the listener's and the server's live figures, then the access
//! log line when the log is on.

use crate::floor::shared::Shared;
use crate::floor::snapshot::Snapshot;
use crate::observe::access_log::{self, Record};
use std::net::SocketAddr;
use tokio::time::Instant;

/// How a request or session went.
#[derive(Default)]
pub struct Outcome {
    /// Index of the group that got it.
    pub group: Option<usize>,
    /// Index of the server (in its group) that got it last.
    pub server: Option<usize>,
    /// HTTP status sent to the client (0: none, or not HTTP).
    pub status: u16,
    /// Bytes read from the client.
    pub bytes_in: u64,
    /// Bytes written to the client.
    pub bytes_out: u64,
    /// When the server's answer began.
    pub first_byte: Option<Instant>,
    /// Why it failed, if it did.
    pub error: Option<&'static str>,
}

/// What the log line says besides the outcome.
pub struct Entry<'a> {
    /// Client address.
    pub client: SocketAddr,
    /// Listener index.
    pub listener: usize,
    /// Label of the rule that decided (empty: none).
    pub rule: &'a str,
    /// HTTP method, or the protocol of a session (`TLS`, `SMTP`, `POP3`, `IMAP`).
    pub method: &'a str,
    /// Request-target, or what a session was routed on (SNI, recipient, user).
    pub target: &'a str,
    /// When the request head (or the session) arrived.
    pub started: Instant,
}

/// Records the end of a request or session.
pub fn finish(shared: &Shared, snap: &Snapshot, entry: &Entry<'_>, o: &Outcome) {
    if let Some(l) = shared.listeners.get(entry.listener) {
        l.record(o.status, o.bytes_in, o.bytes_out);
    }
    let group = o.group.and_then(|g| snap.groups.get(g));
    let server = group.zip(o.server).and_then(|(g, s)| g.servers.get(s));
    if let Some(server) = server {
        server.live.record(o.status, o.bytes_in, o.bytes_out, entry.started.elapsed());
    }
    if !snap.config.access_log.enabled {
        return;
    }
    fn dash(s: &str) -> &str {
        if s.is_empty() {
            "-"
        } else {
            s
        }
    }
    let record = Record {
        client: entry.client,
        listener: &snap.listeners[entry.listener].name,
        rule: dash(entry.rule),
        group: group.map_or("-", |g| g.name.as_str()),
        server: server.map_or("-", |s| s.name.as_str()),
        method: dash(entry.method),
        target: dash(entry.target),
        status: o.status,
        bytes_in: o.bytes_in,
        bytes_out: o.bytes_out,
        ttfb: o.first_byte.map(|t| t.duration_since(entry.started)),
        total: entry.started.elapsed(),
        error: o.error,
    };
    access_log::write(snap.config.access_log.format, &record);
}
