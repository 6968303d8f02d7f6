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
    /// When the server's answer began (taken only while the access log is on).
    pub first_byte: Option<Instant>,
    /// Why it failed, if it did.
    pub error: Option<&'static str>,
    /// What chose the server (`upstream::decide::By::name`, or `scheduler`).
    pub chosen_by: &'static str,
    /// Other servers tried after failures.
    pub retries: u32,
    /// How long the last connect (or pool take) took (timed only while the access log is on).
    pub connect: Option<std::time::Duration>,
}

/// What an HTTP request or a TLS connection adds to its log line (empty: absent).
#[derive(Default)]
pub struct Details<'a> {
    /// HTTP version.
    pub version: &'a str,
    /// `Host` header.
    pub host: &'a str,
    /// `User-Agent` header.
    pub user_agent: &'a str,
    /// Client IP after the listener's `trusted_proxies`.
    pub real_client: Option<std::net::IpAddr>,
    /// TLS server name.
    pub sni: &'a str,
    /// TLS version.
    pub tls_version: &'a str,
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

/// The start of a duration only the access log reports (`connect_ms`): `None`, and no
/// clock read, while the log is off (a precise read costs as much as parsing a field, see
/// `floor::clock`).
pub fn start_if_logged(snap: &Snapshot) -> Option<std::time::Instant> {
    snap.config.access_log.enabled.then(std::time::Instant::now)
}

/// Records the end of a request or session.
pub fn finish(shared: &Shared, snap: &Snapshot, entry: &Entry<'_>, o: &Outcome) {
    finish_with(shared, snap, entry, o, &Details::default());
}

/// [`finish`] with what an HTTP request or a TLS connection adds to the log line.
pub fn finish_with(shared: &Shared, snap: &Snapshot, entry: &Entry<'_>, o: &Outcome, d: &Details<'_>) {
    if let Some(l) = shared.listeners.get(entry.listener) {
        l.record(o.status, o.bytes_in, o.bytes_out);
    }
    let group = o.group.and_then(|g| snap.groups.get(g));
    let server = group.zip(o.server).and_then(|(g, s)| g.servers.get(s));
    let total = entry.started.elapsed();
    if let Some(server) = server {
        server.live.record(o.status, o.bytes_in, o.bytes_out, total);
    }
    let log = &snap.config.access_log;
    if !log.enabled {
        return;
    }
    let record = Record {
        client: Some(entry.client),
        real_client: d.real_client,
        listener: &snap.listeners[entry.listener].name,
        rule: entry.rule,
        chosen_by: if server.is_some() { o.chosen_by } else { "" },
        group: group.map_or("", |g| g.name.as_str()),
        server: server.map_or("", |s| s.name.as_str()),
        method: entry.method,
        target: entry.target,
        version: d.version,
        host: d.host,
        user_agent: d.user_agent,
        status: o.status,
        bytes_in: o.bytes_in,
        bytes_out: o.bytes_out,
        connect: o.connect,
        ttfb: o.first_byte.map(|t| t.duration_since(entry.started)),
        total: Some(total),
        retries: o.retries,
        sni: d.sni,
        tls_version: d.tls_version,
        error: o.error,
    };
    access_log::write(log, &record);
}
