//! One request, phase by phase (DESIGN.md §2). [`Txn`] is the transaction context every
//! phase is a method of; [`handle`] runs the phases in order:
//!
//! read head (`head`) → admit (`head`) → route: stickiness, rules, persistence (`route`,
//! over `upstream::decide`) → forward: pick, queue, connect, exchange, learn, with retries
//! (`forward`, `exchange`, `reply`) → record and log (`observe::record`).

use crate::floor::boxed::pinned;
use crate::floor::conns::ConnState;
use crate::floor::failure::Refusal;
use crate::floor::io::{read_some, write_all_parts};
use crate::floor::snapshot::Snapshot;
use crate::floor::stats::Counter;
use crate::floor::stream::LastWrites;
use crate::floor::worker::Worker;
use crate::http::client::Client;
use crate::http::head::{self, HeadFail};
use crate::http::respond::write_refusal;
use crate::http::scratch::Scratch;
use crate::observe::record::{self, Details, Entry, Outcome};
use crate::upstream::decide::Act;
use http1::BodyScanner;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

/// How long, and how many bytes, a closing connection reads after the switch's refusal.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 1 << 20;

/// A request in progress: what every phase needs.
pub struct Txn<'a> {
    /// The worker.
    pub worker: &'a Worker,
    /// The snapshot the request started on (it finishes on it).
    pub snap: &'a Snapshot,
    /// Listener index.
    pub listener: usize,
    /// The client connection.
    pub client: &'a mut Client,
    /// Working space.
    pub s: &'a mut Scratch,
    /// How it went, for the figures and the log.
    pub outcome: Outcome,
    /// When it started.
    pub started: Instant,
    /// The connection closed before any byte of a request: nothing to record (a keep-alive
    /// connection's normal end, or a client that connected and left: HAProxy's
    /// `dontlognull`).
    pub null: bool,
}

/// Handles one request on `client`; true when the client connection stays open.
pub async fn handle(
    worker: &Worker,
    snap: &Snapshot,
    listener: usize,
    client: &mut Client,
    s: &mut Scratch,
) -> bool {
    let started = Instant::now();
    let mut t = Txn { worker, snap, listener, client, s, outcome: Outcome::default(), started, null: false };
    let keep = t.run().await;
    if !t.null {
        t.record();
    }
    keep
}

impl Txn<'_> {
    /// The phases, in order. What follows the head is boxed: until a whole head is here a
    /// request holds only this small future (a client trickling its head in costs little).
    async fn run(&mut self) -> bool {
        match head::read(self.snap, self.client, &mut self.s.req, self.started).await {
            Ok(()) => self.on_head(),
            Err(HeadFail::Closed) => {
                self.on_closed_in_head();
                return false;
            }
            Err(HeadFail::Refuse(_, _)) if self.opens_with_h2_preface() => {
                // Not a request: the connection speaks HTTP/2 (`serve` hands it over).
                self.null = true;
                self.client.h2_preface = true;
                return false;
            }
            Err(HeadFail::Refuse(r, counter)) => return self.refuse_counted(r, counter).await,
        }
        pinned(|| self.after_head()).await // made in its box: `floor::boxed`
    }

    /// Whether the connection's first bytes are the HTTP/2 connection preface (RFC 9113
    /// §3.4) and its listener takes HTTP/2 that way. Asked only when the head was refused
    /// (the preface's start line is `PRI * HTTP/2.0`), so HTTP/1.1 pays nothing for it.
    fn opens_with_h2_preface(&self) -> bool {
        const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
        let Some(buf) = self.client.buf.as_ref() else { return false };
        let seen = &buf.filled()[..buf.len().min(PREFACE.len())];
        self.client.state.get() == ConnState::Fresh
            && !self.client.stream.is_piped()
            && seen.len() >= 16
            && PREFACE.starts_with(seen)
            && self.snap.config.listeners[self.listener].takes_h2_preface()
    }

    /// Admit, route, and answer or forward.
    async fn after_head(&mut self) -> bool {
        if let Some((r, counter)) = head::admit(self.snap, &self.s.req) {
            return self.refuse_counted(r, counter).await;
        }
        let mut body = BodyScanner::new(self.s.req.body, self.snap.max_body);
        let decision = match self.route(&mut body).await {
            Ok(d) => d,
            Err(end) => return end,
        };
        match decision.act {
            Act::Forward => self.forward(&decision, &body).await,
            Act::Redirect(status) => self.redirect(status).await,
            Act::Deny(status) => self.refuse(Refusal::new(status, "denied by rule")).await,
            Act::Drop => {
                self.outcome.error = Some("dropped by rule");
                false
            }
        }
    }

    /// A valid head arrived: count it, keep its start line for the log.
    fn on_head(&mut self) {
        self.client.state.set(ConnState::Busy);
        self.worker.shared.stats.inc(Counter::Requests);
        self.s.log.clear();
        let log = &self.snap.config.access_log;
        let (Some(buf), true) = (self.client.buf.as_ref(), log.enabled) else {
            return;
        };
        let (bytes, req) = (buf.filled(), &self.s.req);
        if req.head_len <= bytes.len() {
            let trusted = &self.snap.config.listeners[self.listener].trusted_proxies;
            self.s.log.capture(log, bytes, req, self.client.peer.ip(), trusted);
        }
    }

    /// The client closed before its head was whole: a null connection, or a request cut
    /// short (logged with what arrived).
    fn on_closed_in_head(&mut self) {
        let received = self.client.buf.as_ref().map_or(0, |b| b.len());
        self.null = received == 0;
        self.outcome.bytes_in = received as u64;
        self.outcome.error = Some("client closed during the request head");
    }

    /// Counts and logs a refusal of the request itself, then sends it.
    async fn refuse_counted(&mut self, r: Refusal, counter: Counter) -> bool {
        self.worker.shared.stats.inc(counter);
        tracing::info!(client = %self.client.peer, status = r.status, reason = r.reason, "request refused");
        self.refuse(r).await
    }

    /// Sends a refusal; the connection closes after it.
    pub async fn refuse(&mut self, r: Refusal) -> bool {
        self.s.resp_out.clear();
        write_refusal(r, &mut self.s.resp_out);
        self.client.stream.last_writes();
        let deadline = Instant::now() + Duration::from_secs(5);
        let _ = write_all_parts(&mut self.client.stream, &[&self.s.resp_out], deadline).await;
        self.outcome.status = r.status;
        self.outcome.bytes_out += self.s.resp_out.len() as u64;
        self.outcome.error = Some(r.reason);
        self.linger().await;
        false
    }

    /// Lingering close (RFC 9112 §9.6): after the switch's last answer, end the write side
    /// and read (and discard) what the client is still sending, for a moment. Closing with
    /// unread bytes would make the kernel send a reset, which can destroy the answer in the
    /// client's receive queue before it reads it.
    async fn linger(&mut self) {
        let deadline = Instant::now() + LINGER;
        if tokio::time::timeout_at(deadline, self.client.stream.shutdown()).await.is_err() {
            return;
        }
        let Some(buf) = self.client.buf.as_mut() else { return };
        let mut drained = 0;
        while drained < LINGER_BYTES {
            buf.clear();
            match read_some(&mut self.client.stream, buf, deadline).await {
                Ok(n) if n > 0 => drained += n,
                _ => return,
            }
        }
    }

    /// The end of the request, in the figures and the log.
    fn record(&self) {
        let entry = Entry {
            client: self.client.peer,
            listener: self.listener,
            rule: &self.s.notes.rule,
            method: &self.s.log.method,
            target: &self.s.log.target,
            started: self.started,
        };
        let tls = self.client.stream.tls_facts();
        let details = Details {
            version: if self.client.stream.is_piped() { "HTTP/2.0" } else { self.s.log.version },
            host: &self.s.log.host,
            user_agent: &self.s.log.user_agent,
            real_client: self.s.log.real_client,
            sni: tls.map_or("", |t| t.0),
            tls_version: tls.map_or("", |t| t.1),
        };
        record::finish_with(&self.worker.shared, self.snap, &entry, &self.outcome, &details);
    }
}
