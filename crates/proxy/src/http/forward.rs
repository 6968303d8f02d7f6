//! Phase "forward": the forwarded head written once, then, with bounded retries, choose a
//! server (the one an entry chose, else the scheduler's pick), connect (`upstream`),
//! exchange (`exchange`), and learn from the outcome (passive health, last server,
//! pre-allocation, persistence and rule stickiness). Whether a failure may go to another
//! server is the failure's to say (`floor::failure`).

use crate::floor::boxed::pinned;
use crate::floor::failure::Failure;
use crate::floor::persist;
use crate::floor::stats::Counter;
use crate::floor::tables::sticky_ip::Target;
use crate::http::txn::Txn;
use crate::upstream::connect::{self, NO_SERVER};
use crate::upstream::decide::{self, Decision};
use crate::upstream::passive;
use crate::upstream::slots::Tried;
use config::ConnectionPersistence;
use http1::{write_request_head, BodyKind, BodyScanner, RequestRewrite};
use rules::Sticky;

impl<'a> Txn<'a> {
    /// Forwards the request to a server of the decided group; true when the client
    /// connection stays open.
    pub(super) async fn forward(&mut self, d: &Decision, body: &BodyScanner) -> bool {
        let mut tried = Tried::default();
        let first = self.choose(d, &tried);
        // One-way: the connection goes to the first choice's agent with the request as
        // the client sent it, before the head is rewritten for forwarding.
        if let Some(index) = first {
            if let Some(keep) = self.try_hand_off(d, index).await {
                self.note_choice(d, index, 0);
                return keep;
            }
        }
        self.write_forwarded_head();
        let retries = self.snap.config.limits.retries;
        // Replaying is safe for an idempotent request whose whole body (if any) is here.
        let replayable = self.s.req.idempotent && self.s.body_complete;
        let mut last = Failure::internal(NO_SERVER);
        for attempt in 0..=retries {
            let chosen = if attempt == 0 { first } else { self.choose(d, &tried) };
            let Some(index) = chosen else {
                if attempt == 0 {
                    self.worker.shared.stats.inc(Counter::NoServer);
                }
                return self.fail(last).await;
            };
            self.note_choice(d, index, attempt);
            if let Some(keep) = self.on_server_change(index).await {
                return keep;
            }
            match self.attempt(d.group, index, body).await {
                Ok(keep) => {
                    self.client.served = true;
                    self.learn(d, index);
                    return keep;
                }
                Err(f) => {
                    connect::note_failure(self.worker, self.snap, d.group, index, &f, &mut tried);
                    if !f.may_retry(replayable) || attempt == retries {
                        return self.fail(f).await;
                    }
                    if self.client_left() {
                        return false;
                    }
                    self.worker.shared.stats.inc(Counter::Retries);
                    last = f;
                }
            }
        }
        self.fail(last).await
    }

    /// Whether the client has gone while its request waited for a server: nobody waits for
    /// the answer, so another server must not get the request (counted, logged).
    fn client_left(&mut self) -> bool {
        if !self.client.stream.peer_closed() {
            return false;
        }
        self.worker.shared.stats.inc(Counter::ClientGone);
        tracing::info!(client = %self.client.peer, "client gone; request not retried");
        self.outcome.error = Some("client closed before an answer");
        true
    }

    /// The server to try next.
    fn choose(&self, d: &Decision, tried: &Tried) -> Option<usize> {
        let key = self.s.has_key.then_some(self.s.key.as_slice());
        let prefer = d.server.map(|(id, _)| id);
        connect::choose(self.worker, self.snap, d.group, prefer, tried, key)
    }

    /// For the log: which server, what chose it, how many tries before.
    fn note_choice(&mut self, d: &Decision, index: usize, attempt: u32) {
        let id = self.snap.group(d.group).servers[index].id;
        self.outcome.server = Some(index);
        self.outcome.retries = attempt;
        self.outcome.chosen_by = match d.server {
            Some((chosen, by)) if chosen == id => by.name(),
            _ => "scheduler",
        };
    }

    /// One try on server `index`: connect (or reuse), then exchange.
    async fn attempt(&mut self, group: usize, index: usize, body: &BodyScanner) -> Result<bool, Failure> {
        let g = self.snap.group(group);
        if g.server_protocol == config::ServerProtocol::H2 {
            return pinned(|| self.attempt_h2(group, index)).await; // `floor::boxed`
        }
        let prealloc = self.client.take_prealloc(g.servers[index].id);
        let pool = self.client.pool_take(g.reuse);
        let (worker, snap) = (self.worker, self.snap);
        let began = crate::observe::record::start_if_logged(snap);
        let up = connect::connect(worker, snap, group, index, pool, prealloc).await?;
        self.outcome.connect = began.map(|t| t.elapsed());
        self.exchange(up, body).await
    }

    /// Tells the client about a failure, if it can still be told; the connection closes.
    async fn fail(&mut self, f: Failure) -> bool {
        match f.answer {
            Some(r) => self.refuse(r).await,
            None => false,
        }
    }

    /// After a complete exchange with server `index`: passive health, the server the
    /// connection and the client address used, persistence and rule stickiness.
    fn learn(&mut self, d: &Decision, index: usize) {
        let (shared, snap) = (&self.worker.shared, self.snap);
        let group = snap.group(d.group);
        let server = &group.servers[index];
        if passive::counts_as_failure(group, self.outcome.status) {
            passive::on_failure(group, server, &shared.stats, &shared.weights_epoch);
        } else {
            passive::on_success(server);
        }
        let l = &snap.listeners[self.listener];
        if l.connection_persistence != ConnectionPersistence::PerRequest {
            self.client.pins_mut().last_server = Some(server.id);
        }
        if l.preallocate {
            shared.last_server.record(self.client.peer.ip(), server.id);
        }
        if let Some(p) = group.persistence.as_deref() {
            persist::remember(p, &self.s.notes.persist, server.id, self.client.peer);
        }
        let target = Target { group: d.group, server: server.id };
        match d.sticky {
            Sticky::IpPort => self.client.pins_mut().sticky = Some(target),
            sticky => {
                decide::remember_sticky_ip(shared, self.listener, self.client.peer.ip(), sticky, target)
            }
        }
    }

    /// Connection persistence (seed 001 Table 1) when this request would go to another
    /// server than the previous one on the connection: `None` to go on (under `close`,
    /// after marking the connection to close with this response), or the redirect's
    /// keep-alive result.
    async fn on_server_change(&mut self, index: usize) -> Option<bool> {
        let group = self.outcome.group?;
        let server = self.snap.group(group).servers[index].id;
        let changed = self.client.last_server().is_some_and(|last| last != server);
        if !changed {
            return None;
        }
        match self.snap.listeners[self.listener].connection_persistence {
            // `pin` and `migrate` are one-way listeners', whose agents keep the server; a
            // request served here (its hand-off fell back) is routed as it comes.
            ConnectionPersistence::PerRequest
            | ConnectionPersistence::Pin
            | ConnectionPersistence::Migrate => None,
            ConnectionPersistence::Close => {
                self.worker.shared.stats.inc(Counter::ServerChangeCloses);
                self.s.close_after = true;
                None
            }
            ConnectionPersistence::Redirect => {
                self.worker.shared.stats.inc(Counter::ServerChangeRedirects);
                // 302 as the switches of the paper answered; 307 for other methods, so a
                // POST is repeated as a POST with its body.
                let bodyless = self.s.req.idempotent && self.s.req.body == BodyKind::None;
                Some(self.send_redirect(if bodyless { 302 } else { 307 }, false).await)
            }
        }
    }

    /// Writes the head the server gets (once; retries resend it) and consumes the client's
    /// head bytes.
    fn write_forwarded_head(&mut self) {
        let Some(buf) = self.client.buf.as_mut() else { return };
        let listener = &self.snap.listeners[self.listener];
        let s = &mut *self.s;
        // Empty (and not allocated) unless a rule or persistence set a header field.
        let set: Vec<(&str, &str)> =
            s.notes.set_headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let proto = if self.client.stream.is_tls() { "https" } else { "http" };
        let rw = RequestRewrite {
            forwarded_for: listener.x_forwarded_for.then(|| self.client.peer.ip()),
            forwarded_proto: listener.x_forwarded_proto.then_some(proto),
            upgrade: s.req.upgrade,
            set_headers: &set,
        };
        s.req_out.clear();
        write_request_head(buf.filled(), &s.req, &rw, &mut s.req_out);
        buf.consume(s.req.head_len);
        self.outcome.bytes_in += s.req.head_len as u64;
    }
}
