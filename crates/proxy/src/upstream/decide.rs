//! The one routing decision (DESIGN.md §2): from the snapshot, the request as the rules
//! see it, the connection's facts and the tables, where the request goes — the rule that
//! fired, the group, the server when an entry chose it (or "the scheduler picks"), the
//! stickiness to record, and the action. Pure: it counts nothing and changes no table, so
//! `explain` calls exactly what the listeners call ([`count`] does the counting for them).
//!
//! In order: a `STICKY_IP_PORT` pin of this connection; a `STICKY_IP` entry for the client
//! address (listeners with rules); the rules (seed 000 §5); the default group. When no
//! entry chose the server, the group's session persistence (HTTP) or a resumed TLS session
//! may; a chosen server that may not take sticky traffic now (down, maintenance, drained)
//! leaves the pick to the scheduler.

use crate::floor::persist::{self, PersistScratch};
use crate::floor::shared::Shared;
use crate::floor::snapshot::Snapshot;
use crate::floor::stats::Counter;
use crate::floor::tables::sticky_ip::{StickyIp, Target};
use crate::floor::tables::tls_sessions::TlsSessions;
use crate::floor::worker::Worker;
use http1::RequestHead;
use rules::{Outcome, Sticky, Trace};
use std::sync::atomic::Ordering;

/// What is asked: the request and the facts of its connection.
pub struct Ask<'a, R> {
    /// Listener index in the snapshot.
    pub listener: usize,
    /// The request as the rules read it.
    pub request: &'a R,
    /// The server this client connection is pinned to by a `STICKY_IP_PORT` rule.
    pub pinned: Option<Target>,
    /// The HTTP head (bytes and parse), for the group's session persistence.
    pub http: Option<(&'a [u8], &'a RequestHead)>,
    /// The session ID a TLS client offers to resume.
    pub tls_session: Option<&'a [u8]>,
}

/// The tables a decision reads.
#[derive(Clone, Copy)]
pub struct Tables<'a> {
    /// `STICKY_IP` entries.
    pub sticky_ip: &'a StickyIp,
    /// TLS sessions learnt from ServerHellos.
    pub tls_sessions: &'a TlsSessions,
}

impl<'a> Tables<'a> {
    /// The running switch's tables.
    pub fn of(shared: &'a Shared) -> Self {
        Tables { sticky_ip: &shared.sticky_ip, tls_sessions: &shared.tls_sessions }
    }
}

/// What the decision does with the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    /// To a server of `Decision::group`.
    Forward,
    /// Refuse with this status (`deny`).
    Deny(u16),
    /// Close without an answer (`drop`).
    Drop,
    /// Redirect with this status to `Notes::location`.
    Redirect(u16),
}

/// Which entry chose the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    /// The connection's `STICKY_IP_PORT` pin.
    Pin,
    /// A `STICKY_IP` entry of the client address.
    StickyIp,
    /// The group's session persistence (cookie, learned cookie, source, header, URL
    /// parameter).
    Persistence,
    /// The server that issued the TLS session the client resumes.
    TlsSession,
}

impl By {
    /// How `explain` names it.
    pub fn name(self) -> &'static str {
        match self {
            By::Pin => "sticky_ip_port",
            By::StickyIp => "sticky_ip",
            By::Persistence => "persistence",
            By::TlsSession => "tls_session",
        }
    }
}

/// Where the request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The rule that decided (index in its file), if one did.
    pub rule: Option<usize>,
    /// The action.
    pub act: Act,
    /// The group (the listener's default group unless a rule or an entry chose one).
    pub group: usize,
    /// The server an entry chose, and which entry; `None`: the scheduler picks.
    pub server: Option<(u64, By)>,
    /// The stickiness to record once a server is chosen.
    pub sticky: Sticky,
}

/// What a decision leaves for the phases after it (kept by the caller and reused).
#[derive(Default)]
pub struct Notes {
    /// Label of the rule that decided (empty: none).
    pub rule: String,
    /// Header fields to set on the forwarded request (rules' setHeader, persistence's
    /// Cookie rewrite).
    pub set_headers: Vec<(String, String)>,
    /// A redirect's Location.
    pub location: String,
    /// What the group's session persistence found (for the response half).
    pub persist: PersistScratch,
}

impl Notes {
    /// Forgets the previous request's notes.
    pub fn reset(&mut self) {
        self.rule.clear();
        self.set_headers.clear();
        self.location.clear();
        self.persist.reset();
    }
}

/// Decides; `None` when the rules need more of the body than `ask.request` holds.
pub fn decide<R: rules::Request>(
    snap: &Snapshot,
    tables: Tables<'_>,
    eval: &mut rules::EvalState,
    ask: &Ask<'_, R>,
    notes: &mut Notes,
    trace: Option<&mut Trace>,
) -> Option<Decision> {
    let l = &snap.listeners[ask.listener];
    let forward =
        |group, server| Decision { rule: None, act: Act::Forward, group, server, sticky: Sticky::Off };
    let mut decision = if let Some(t) = ask.pinned.filter(|t| snap.has_server(t.group, t.server)) {
        forward(t.group, Some((t.server, By::Pin)))
    } else if let Some(rules) = l.rules.as_deref() {
        let now = std::time::Instant::now();
        let entry = tables.sticky_ip.get(ask.listener, ask.request.src().ip(), now);
        // An entry whose server left the group in a reload is ignored (and dropped at the
        // reload): the rules decide again.
        match entry.and_then(|server| Some((snap.group_of(server)?, server))) {
            Some((group, server)) => forward(group, Some((server, By::StickyIp))),
            None => evaluate(rules, l.default_group, eval, ask.request, notes, trace)?,
        }
    } else {
        forward(l.default_group, None)
    };
    if decision.act == Act::Forward {
        choose_by_session(snap, tables, ask, notes, &mut decision);
    }
    Some(decision)
}

/// The listener's rules; their label, setHeader edits and redirect go into `notes`.
fn evaluate<R: rules::Request>(
    rules: &rules::RuleSet,
    default_group: usize,
    eval: &mut rules::EvalState,
    request: &R,
    notes: &mut Notes,
    trace: Option<&mut Trace>,
) -> Option<Decision> {
    let d = match rules.evaluate(request, eval, trace) {
        Outcome::NeedMore => return None,
        Outcome::Decided(d) => d,
    };
    notes.rule.clear();
    if let Some((_, label)) = d.rule {
        notes.rule.push_str(label);
    }
    notes.set_headers.clear();
    notes.set_headers.extend(d.set_headers.iter().map(|(n, v)| (n.to_string(), v.to_string())));
    let mut out = Decision {
        rule: d.rule.map(|(index, _)| index),
        act: Act::Forward,
        group: default_group,
        server: None,
        sticky: Sticky::Off,
    };
    match d.action {
        rules::Action::Route { group, sticky } => (out.group, out.sticky) = (group, sticky),
        rules::Action::Default => {}
        rules::Action::Deny { status } => out.act = Act::Deny(status),
        rules::Action::Drop => out.act = Act::Drop,
        rules::Action::Redirect { status, location } => {
            notes.location.clear();
            notes.location.push_str(location);
            out.act = Act::Redirect(status);
        }
    }
    Some(out)
}

/// A server chosen by an entry is kept while it may take sticky traffic; with none chosen,
/// the group's session persistence or the client's TLS session may choose one.
fn choose_by_session<R: rules::Request>(
    snap: &Snapshot,
    tables: Tables<'_>,
    ask: &Ask<'_, R>,
    notes: &mut Notes,
    d: &mut Decision,
) {
    let g = snap.group(d.group);
    let sticky_ok =
        |id: u64| g.servers.iter().any(|s| s.id == id && s.live.sticky_ok.load(Ordering::Relaxed));
    if d.server.is_some() {
        d.server = d.server.filter(|(id, _)| sticky_ok(*id));
        return;
    }
    if let (Some(p), Some((bytes, head))) = (g.persistence.as_deref(), ask.http) {
        let peer = ask.request.src();
        let found =
            persist::on_request(p, &g.servers, bytes, head, peer, &mut notes.persist, &mut notes.set_headers);
        d.server = found.filter(|id| sticky_ok(*id)).map(|id| (id, By::Persistence));
    }
    if let Some(session) = ask.tls_session.filter(|s| !s.is_empty()) {
        let found = tables.tls_sessions.get(session);
        d.server = found.filter(|id| sticky_ok(*id)).map(|id| (id, By::TlsSession));
    }
}

/// Counts what a listener's decision did: the rule's hit, a refusal by rule, a server
/// chosen by session persistence.
pub fn count(shared: &Shared, snap: &Snapshot, listener: usize, d: &Decision) {
    let l = &snap.listeners[listener];
    if let Some(hits) = d.rule.and_then(|i| l.rule_hits.get(i)) {
        hits.fetch_add(1, Ordering::Relaxed);
    }
    match d.act {
        Act::Deny(_) => shared.stats.inc(Counter::RuleDenied),
        Act::Drop => shared.stats.inc(Counter::RuleDropped),
        Act::Redirect(_) => shared.stats.inc(Counter::RuleRedirects),
        Act::Forward => {}
    }
    if matches!(d.server, Some((_, By::Persistence | By::TlsSession))) {
        shared.stats.inc(Counter::PersistenceHits);
    }
}

/// Records the stickiness a decision asked for, once its request reached `target`:
/// `STICKY_IP` in the shared table (`STICKY_IP_PORT` is the caller's: it lives with the
/// connection).
pub fn remember_sticky_ip(
    shared: &Shared,
    listener: usize,
    ip: std::net::IpAddr,
    sticky: Sticky,
    target: Target,
) {
    if sticky == Sticky::Ip {
        let now = std::time::Instant::now();
        // Only a new or changed entry is shared: a refresh is not worth a gossip write.
        let known =
            shared.cluster.get().is_some() && shared.sticky_ip.get(listener, ip, now) == Some(target.server);
        shared.sticky_ip.put(listener, ip, target.server, now);
        if !known {
            shared.share_sticky_ip(listener, ip, target.server);
        }
    }
}

/// The decision of a connection-level listener (TLS passthrough, SMTP, POP3, IMAP), counted.
/// `None` when a rule refuses the connection (`deny`, `redirect` or `drop`: outside HTTP
/// none can be answered as such).
pub fn route_connection<R: rules::Request>(
    worker: &Worker,
    snap: &Snapshot,
    listener: usize,
    request: &R,
    tls_session: Option<&[u8]>,
) -> Option<Decision> {
    let ask = Ask { listener, request, pinned: None, http: None, tls_session };
    let tables = Tables::of(&worker.shared);
    let mut notes = Notes::default();
    let mut eval = worker.eval.borrow_mut();
    // Only body fields are ever "not yet known", and these requests have no body: the
    // default group stands in, as the rules would decide with no body field true.
    let d = decide(snap, tables, &mut eval, &ask, &mut notes, None).unwrap_or_else(|| Decision {
        rule: None,
        act: Act::Forward,
        group: snap.listeners[listener].default_group,
        server: None,
        sticky: Sticky::Off,
    });
    count(&worker.shared, snap, listener, &d);
    (d.act == Act::Forward).then_some(d)
}
