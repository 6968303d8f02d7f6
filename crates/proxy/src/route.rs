//! Phase "route": where a request goes. In order: a `STICKY_IP_PORT` server remembered on
//! this connection; a `STICKY_IP` entry for the client address; the listener's rules
//! (seed 000 §5); the listener's default group (NO_CS). Rules that read the body make this
//! phase buffer it first, up to `limits.rule_body_bytes`, re-evaluating as it grows; rules
//! that read only the head decide at once and the body streams afterwards.

use crate::io::{read_some, IoFail};
use crate::respond::Refusal;
use crate::session::{Client, Scratch};
use crate::snapshot::{ListenerRt, Snapshot};
use crate::stats::Counter;
use crate::sticky::Target;
use crate::worker::Worker;
use http1::{BodyKind, BodyScanner, RequestHead};
use rules::{Action, Body, Outcome, RuleSet, Sticky};
use std::net::SocketAddr;
use tokio::time::Instant;

/// Where the request goes.
pub enum Route {
    /// To a server of `group`; `prefer` is a sticky server to try first.
    Forward {
        /// Group index.
        group: usize,
        /// Server id to use if it is still in the group.
        prefer: Option<u64>,
        /// Stickiness to record once a server is chosen.
        sticky: Sticky,
    },
    /// Answer with this refusal (deny, or a body over the rule cap) and close.
    Refuse(Refusal),
    /// Close without an answer (`drop()`).
    Drop,
    /// Answer with a redirect to `scratch.location`.
    Redirect(u16),
    /// The client went away while its body was being read.
    Closed,
}

/// Decides the route. Leaves the rule label in `scratch.rule`, setHeader edits in
/// `scratch.set_headers`, and any buffered body in `scratch.held` (raw) with `scanner`
/// advanced past it.
pub async fn decide(
    worker: &Worker,
    snap: &Snapshot,
    listener: usize,
    client: &mut Client,
    scratch: &mut Scratch,
    scanner: &mut BodyScanner,
) -> Route {
    let l = &snap.listeners[listener];
    if let Some(t) = client.sticky().filter(|t| snap.has_server(t.group, t.server)) {
        return Route::Forward { group: t.group, prefer: Some(t.server), sticky: Sticky::Off };
    }
    let Some(rules) = l.rules.as_deref() else {
        return Route::Forward { group: l.default_group, prefer: None, sticky: Sticky::Off };
    };
    let now = std::time::Instant::now();
    if let Some(server) = worker.shared.sticky_ip.get(listener, client.peer.ip(), now) {
        if let Some(group) = snap.group_of(server) {
            return Route::Forward { group, prefer: Some(server), sticky: Sticky::Off };
        }
        // Its server left the group in a reload: match the rules again.
        worker.shared.sticky_ip.remove(listener, client.peer.ip());
    }
    evaluate_with_body(worker, snap, l, rules, client, scratch, scanner).await
}

/// Evaluates, reading more of the body while the rules need it.
async fn evaluate_with_body(
    worker: &Worker,
    snap: &Snapshot,
    l: &ListenerRt,
    rules: &RuleSet,
    client: &mut Client,
    scratch: &mut Scratch,
    scanner: &mut BodyScanner,
) -> Route {
    let cap = snap.config.limits.rule_body_bytes;
    let mut last_eval_len = 0usize;
    let mut body_done = scratch.req.body == BodyKind::None;
    loop {
        if let Some(route) = evaluate_once(worker, l, rules, client, scratch, body_done) {
            return route;
        }
        last_eval_len = last_eval_len.max(1);
        // Re-evaluate when the buffered body has doubled or is complete: each evaluation
        // reads the body from its start, and doubling keeps the total work linear.
        while !body_done && scratch.payload.len() < 2 * last_eval_len {
            match buffer_more(snap, client, scratch, scanner).await {
                Ok(done) => {
                    body_done = done;
                    scratch.body_complete = done;
                }
                Err(route) => return route,
            }
            if scratch.payload.len() > cap {
                worker.shared.stats.inc(Counter::BodyTooLarge);
                return Route::Refuse(Refusal::new(413, "request body too large for rule matching"));
            }
        }
        last_eval_len = scratch.payload.len();
    }
}

/// One evaluation over the head and the body buffered so far; `None` = need more body.
fn evaluate_once(
    worker: &Worker,
    l: &ListenerRt,
    rules: &RuleSet,
    client: &Client,
    scratch: &mut Scratch,
    body_done: bool,
) -> Option<Route> {
    let buf = client.buf.as_ref()?;
    let view = HeadView {
        head: buf.filled(),
        req: &scratch.req,
        client,
        body: Body { bytes: &scratch.payload, complete: body_done },
    };
    let mut state = worker.eval.borrow_mut();
    let decision = match rules.evaluate(&view, &mut state, None) {
        Outcome::NeedMore => return None,
        Outcome::Decided(d) => d,
    };
    scratch.rule.clear();
    if let Some((index, label)) = decision.rule {
        scratch.rule.push_str(label);
        if let Some(hits) = l.rule_hits.get(index) {
            hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
    scratch.set_headers.clear();
    for (name, value) in decision.set_headers.iter() {
        scratch.set_headers.push((name.to_string(), value.to_string()));
    }
    Some(match decision.action {
        Action::Route { group, sticky } => Route::Forward { group, prefer: None, sticky },
        Action::Default => Route::Forward { group: l.default_group, prefer: None, sticky: Sticky::Off },
        Action::Deny { status } => {
            worker.shared.stats.inc(Counter::RuleDenied);
            Route::Refuse(Refusal::new(status, "denied by rule"))
        }
        Action::Drop => {
            worker.shared.stats.inc(Counter::RuleDropped);
            Route::Drop
        }
        Action::Redirect { status, location } => {
            scratch.location.clear();
            scratch.location.push_str(location);
            Route::Redirect(status)
        }
    })
}

/// Moves the body bytes after the head from the client buffer into `scratch.held` (raw,
/// as they will be forwarded) and `scratch.payload` (de-chunked, for the rules), reading
/// from the client when none are buffered. `Ok(true)` once the body is complete.
async fn buffer_more(
    snap: &Snapshot,
    client: &mut Client,
    scratch: &mut Scratch,
    scanner: &mut BodyScanner,
) -> Result<bool, Route> {
    let Some(buf) = client.buf.as_mut() else { return Err(Route::Closed) };
    let head_len = scratch.req.head_len;
    if buf.len() == head_len {
        let deadline = Instant::now() + snap.config.timeouts.client_io;
        match read_some(&mut client.stream, buf, deadline).await {
            Ok(0) | Err(IoFail::Io) => return Err(Route::Closed),
            Ok(_) => {}
            Err(IoFail::Timeout) => {
                return Err(Route::Refuse(Refusal::new(408, "request body not received in time")))
            }
        }
    }
    let after_head = &buf.filled()[head_len..];
    let payload = &mut scratch.payload;
    let scan = match scanner.scan_data(after_head, |d| payload.extend_from_slice(d)) {
        Ok(scan) => scan,
        Err(e) => return Err(Route::Refuse(Refusal::new(e.status(), "invalid request body"))),
    };
    scratch.held.extend_from_slice(&after_head[..scan.consumed]);
    // Whatever follows the body (a pipelined request) stays in the buffer after the head.
    let rest = after_head.len() - scan.consumed;
    buf.remove_range(head_len, head_len + scan.consumed);
    debug_assert_eq!(buf.len(), head_len + rest);
    Ok(scan.done)
}

/// The rules' view of a request: the parsed head over the client buffer, plus the body
/// buffered so far. Every accessor is a slice of bytes already in memory.
pub struct HeadView<'a> {
    head: &'a [u8],
    req: &'a RequestHead,
    client: &'a Client,
    body: Body<'a>,
}

impl<'a> HeadView<'a> {
    /// The head only (no body read yet): what the schedulers' hash keys look at.
    pub fn head_only(head: &'a [u8], req: &'a RequestHead, client: &'a Client) -> Self {
        HeadView { head, req, client, body: Body { bytes: &[], complete: false } }
    }
}

impl rules::Request for HeadView<'_> {
    fn src(&self) -> SocketAddr {
        self.client.peer
    }

    fn dst(&self) -> SocketAddr {
        self.client.local()
    }

    fn method(&self) -> &[u8] {
        self.req.method.slice(self.head)
    }

    fn target(&self) -> &[u8] {
        self.req.target.slice(self.head)
    }

    fn version(&self) -> &[u8] {
        match self.req.version {
            http1::Version::Http10 => b"HTTP/1.0",
            http1::Version::Http11 => b"HTTP/1.1",
        }
    }

    fn header(&self, name: &str) -> Option<&[u8]> {
        self.req.header(self.head, name)
    }

    fn header_each<'a>(&'a self, name: &str, visit: &mut dyn FnMut(&'a [u8]) -> bool) {
        for h in &self.req.headers {
            if h.name.slice(self.head).eq_ignore_ascii_case(name.as_bytes())
                && visit(h.value.slice(self.head))
            {
                return;
            }
        }
    }

    fn body(&self) -> Body<'_> {
        Body { bytes: self.body.bytes, complete: self.body.complete }
    }
}

/// Records stickiness for the server a sticky route ended on.
pub fn remember(worker: &Worker, listener: usize, client: &mut Client, sticky: Sticky, target: Target) {
    match sticky {
        Sticky::IpPort => client.pins_mut().sticky = Some(target),
        Sticky::Ip => {
            worker.shared.sticky_ip.put(listener, client.peer.ip(), target.server, std::time::Instant::now());
        }
        Sticky::Off => {}
    }
}
