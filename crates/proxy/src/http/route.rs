//! Phase "route": where a request goes, decided by `upstream::decide` (stickiness, the
//! listener's rules, the group's session persistence). Rules that read the body make this
//! phase buffer it first, up to `limits.rule_body_bytes`, deciding again as it grows; rules
//! that read only the head decide at once and the body streams afterwards. Also the
//! answers a route can end in without a server: a rule's redirect.

use crate::floor::failure::Refusal;
use crate::floor::io::{read_some, write_all_parts, IoFail};
use crate::floor::stats::Counter;
use crate::http::respond::write_redirect;
use crate::http::txn::Txn;
use crate::http::view::{Dst, HeadView};
use crate::upstream::decide::{self, Act, Ask, Decision, Tables};
use crate::upstream::pick::extract_key;
use config::ConnectionPersistence;
use http1::{BodyKind, BodyScanner};
use rules::Body;
use tokio::time::Instant;

/// Why routing ended without a decision.
enum Stop {
    /// The client went away while its body was being read.
    Closed,
    /// Refuse the request with this.
    Refuse(Refusal),
}

impl Txn<'_> {
    /// Decides the route, buffering body while the rules need it; counts the decision.
    /// `Err` holds the connection's fate when the request ended here.
    pub(super) async fn route(&mut self, scanner: &mut BodyScanner) -> Result<Decision, bool> {
        let decision = match self.decide_with_body(scanner).await {
            Ok(d) => d,
            Err(Stop::Closed) => return Err(false),
            Err(Stop::Refuse(r)) => return Err(self.refuse(r).await),
        };
        decide::count(&self.worker.shared, self.snap, self.listener, &decision);
        if decision.act == Act::Forward {
            self.outcome.group = Some(decision.group);
            self.take_hash_key(decision.group);
            if self.snap.listeners[self.listener].connection_persistence == ConnectionPersistence::Redirect {
                self.keep_target_for_redirect();
            }
        }
        Ok(decision)
    }

    async fn decide_with_body(&mut self, scanner: &mut BodyScanner) -> Result<Decision, Stop> {
        let cap = self.snap.config.limits.rule_body_bytes;
        self.s.body_complete = self.s.req.body == BodyKind::None;
        let mut last_eval_len = 0usize;
        loop {
            if let Some(d) = self.decide_once()? {
                return Ok(d);
            }
            last_eval_len = last_eval_len.max(1);
            // Decide again when the buffered body has doubled or is complete: each
            // evaluation reads the body from its start, and doubling keeps the work linear.
            while !self.s.body_complete && self.s.payload.len() < 2 * last_eval_len {
                self.s.body_complete = self.buffer_more(scanner).await?;
                if self.s.payload.len() > cap {
                    self.worker.shared.stats.inc(Counter::BodyTooLarge);
                    return Err(Stop::Refuse(Refusal::new(413, "request body too large for rule matching")));
                }
            }
            last_eval_len = self.s.payload.len();
        }
    }

    /// One decision over the head and the body buffered so far; `None`: need more body.
    fn decide_once(&mut self) -> Result<Option<Decision>, Stop> {
        let Some(buf) = self.client.buf.as_ref() else { return Err(Stop::Closed) };
        let view = HeadView {
            head: buf.filled(),
            req: &self.s.req,
            src: self.client.peer,
            dst: Dst::of(&self.client.stream),
            body: Body { bytes: &self.s.payload, complete: self.s.body_complete },
        };
        let ask = Ask {
            listener: self.listener,
            request: &view,
            pinned: self.client.sticky(),
            http: Some((buf.filled(), &self.s.req)),
            tls_session: None,
        };
        let tables = Tables::of(&self.worker.shared);
        let mut eval = self.worker.eval.borrow_mut();
        Ok(decide::decide(self.snap, tables, &mut eval, &ask, &mut self.s.notes, None))
    }

    /// Moves the body bytes after the head from the client buffer into `held` (raw, as they
    /// will be forwarded) and `payload` (de-chunked, for the rules), reading from the client
    /// when none are buffered. `Ok(true)` once the body is complete.
    async fn buffer_more(&mut self, scanner: &mut BodyScanner) -> Result<bool, Stop> {
        let Some(buf) = self.client.buf.as_mut() else { return Err(Stop::Closed) };
        buf.grow();
        let head_len = self.s.req.head_len;
        if buf.len() == head_len {
            let deadline = Instant::now() + self.snap.config.timeouts.client_io;
            match read_some(&mut self.client.stream, buf, deadline).await {
                Ok(0) | Err(IoFail::Io) => return Err(Stop::Closed),
                Ok(_) => {}
                Err(IoFail::Timeout) => {
                    return Err(Stop::Refuse(Refusal::new(408, "request body not received in time")))
                }
            }
        }
        let after_head = &buf.filled()[head_len..];
        let payload = &mut self.s.payload;
        let scan = scanner
            .scan_data(after_head, |d| payload.extend_from_slice(d))
            .map_err(|e| Stop::Refuse(Refusal::new(e.status(), "invalid request body")))?;
        self.s.held.extend_from_slice(&after_head[..scan.consumed]);
        self.outcome.bytes_in += scan.consumed as u64;
        // Whatever follows the body (a pipelined request) stays in the buffer after the head.
        buf.remove_range(head_len, head_len + scan.consumed);
        Ok(scan.done)
    }

    /// Copies the request's hash key when the group's scheduler reads one (before the
    /// head's bytes are consumed).
    fn take_hash_key(&mut self, group: usize) {
        let g = self.snap.group(group);
        self.s.has_key = false;
        let (Some(buf), true) = (self.client.buf.as_ref(), g.scheduler.uses_key()) else { return };
        let view =
            HeadView::head_only(buf.filled(), &self.s.req, self.client.peer, Dst::of(&self.client.stream));
        self.s.has_key = extract_key(&g.hash_key, &view, &mut self.s.key);
    }

    /// Copies the request-target into the redirect location: the URL a change of server
    /// under `connection_persistence = "redirect"` sends the client back to.
    fn keep_target_for_redirect(&mut self) {
        let Some(buf) = self.client.buf.as_ref() else { return };
        let location = &mut self.s.notes.location;
        location.clear();
        location.push_str(&String::from_utf8_lossy(self.s.req.target.slice(buf.filled())));
    }

    /// Answers a rule's redirect. The connection stays open when the request's body has
    /// been read whole (there is nothing of it left to skip).
    pub(super) async fn redirect(&mut self, status: u16) -> bool {
        let keep = self.s.body_complete && self.s.req.keep_alive && !self.worker.shutting_down();
        if let Some(buf) = self.client.buf.as_mut() {
            buf.consume(self.s.req.head_len);
        }
        self.send_redirect(status, keep).await
    }

    /// Writes a redirect to the decided location; true when the connection stays open.
    pub(super) async fn send_redirect(&mut self, status: u16, keep: bool) -> bool {
        self.s.resp_out.clear();
        write_redirect(status, &self.s.notes.location, keep, &mut self.s.resp_out);
        let deadline = Instant::now() + self.snap.config.timeouts.client_io;
        let ok = write_all_parts(&mut self.client.stream, &[&self.s.resp_out], deadline).await.is_ok();
        self.outcome.status = status;
        self.outcome.bytes_out += self.s.resp_out.len() as u64;
        ok && keep
    }
}
