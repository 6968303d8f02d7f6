//! How a raw HTTP request would be routed, told by the switch's own steps: the head judged
//! by the same parser and limits (a request the switch refuses is explained as that
//! refusal, with its status), the same admission, the one routing decision
//! (`upstream::decide`: stickiness entries, the rules with their trace, session
//! persistence), and, when no entry chose the server, the server the group's scheduler
//! picks first with every server idle (fed the request's hash key when it reads one).
//! Shared by `cswitch explain` (a config, empty tables) and the admin API's
//! `POST /api/explain` (the running switch's snapshot, tables and effective weights).
//! What it cannot know: a `STICKY_IP_PORT` pin lives with one client connection, and the
//! state of schedulers that depend on load or on earlier picks (rr, lc, …).

use crate::floor::failure::Refusal;
use crate::floor::snapshot::{ListenerParts, Snapshot};
use crate::floor::tables::sticky_ip::StickyIp;
use crate::floor::tables::tls_sessions::TlsSessions;
use crate::http::head;
use crate::http::view::{Dst, HeadView};
use crate::upstream::decide::{self, Act, Ask, Decision, Notes, Tables};
use crate::upstream::pick::extract_key;
use http1::{BodyScanner, RequestHead};
use rules::{Body, RuleSet};
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The routing decision for one request.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Explanation {
    /// Listener the request was taken to arrive on.
    pub listener: String,
    /// Every rule tried and what its conditions saw (empty without rules).
    pub trace: String,
    /// Label of the rule that decided, if one did.
    pub rule: Option<String>,
    /// `route`, `default`, `deny`, `drop`, `redirect` or `refuse` (the switch refuses the
    /// request before routing: see `status`).
    pub action: &'static str,
    /// The decision in one sentence.
    pub decision: String,
    /// Status of the switch's own answer (a refusal, a deny, a redirect).
    pub status: Option<u16>,
    /// Group the request goes to (route / default).
    pub group: Option<String>,
    /// Server it goes to: the one an entry chose, else the scheduler's first pick.
    pub server: Option<String>,
    /// That server's address.
    pub server_addr: Option<String>,
    /// What chose the server: `sticky_ip`, `persistence`, `tls_session`, or `scheduler`.
    pub chosen_by: Option<&'static str>,
    /// The request's hash key, for keyed schedulers.
    pub hash_key: Option<String>,
    /// Header fields set on the forwarded request (rules' setHeader, persistence).
    pub set_headers: Vec<(String, String)>,
    /// The head had bare LF line ends (a request written by hand) and was read as if each
    /// were CRLF; the switch itself refuses bare LF with 400.
    pub lf_read_as_crlf: bool,
}

/// Explains `raw` arriving from `src` on `listener` (default: the first) of a config, with
/// empty tables and configured weights (`cswitch explain`).
pub fn explain_config(
    config: &config::Config,
    compiled: Vec<Option<Arc<RuleSet>>>,
    listener: Option<&str>,
    raw: &[u8],
    src: SocketAddr,
) -> Result<Explanation, String> {
    let snap = Snapshot::build(config.clone(), ListenerParts { rules: compiled, tls: Vec::new() }, None, 0);
    let sticky_ip = StickyIp::new(config.timeouts.sticky_ip);
    let tls_sessions = TlsSessions::new(config.timeouts.tls_session);
    explain(&snap, Tables { sticky_ip: &sticky_ip, tls_sessions: &tls_sessions }, listener, raw, src)
}

/// Explains `raw` arriving from `src` on `listener` (default: the first) of `snap`.
pub fn explain(
    snap: &Snapshot,
    tables: Tables<'_>,
    listener: Option<&str>,
    raw: &[u8],
    src: SocketAddr,
) -> Result<Explanation, String> {
    let index = match listener {
        Some(name) => snap
            .listeners
            .iter()
            .position(|l| l.name == name)
            .ok_or_else(|| format!("no listener `{name}`"))?,
        None => 0,
    };
    let l = snap.listeners.get(index).ok_or("the config has no listener")?;
    if l.protocol != config::Protocol::Http {
        return Err(format!("explain reads HTTP requests; listener `{}` is not an HTTP listener", l.name));
    }
    let mut out = Explanation { listener: l.name.clone(), ..Explanation::default() };
    let crlf = hand_written_head(raw);
    out.lf_read_as_crlf = crlf.is_some();
    let raw = crlf.as_deref().unwrap_or(raw);
    let mut req = RequestHead::new();
    let limit = head::buffer_size(snap);
    let seen = &raw[..raw.len().min(limit)];
    match head::judge(req.parse(seen, &snap.head_limits), seen.len() >= limit) {
        Ok(true) => {}
        Ok(false) => {
            return Err("the request head is incomplete (no empty line after the header fields)".into())
        }
        Err((r, _)) => return Ok(refused(out, r)),
    }
    if let Some((r, _)) = head::admit(snap, &req) {
        return Ok(refused(out, r));
    }
    let dst = Dst::Known(snap.config.listeners[index].bind);
    let mut notes = Notes::default();
    let mut trace = rules::Trace::default();
    let mut eval = rules::EvalState::new();
    let decide = |view: &HeadView<'_>,
                  notes: &mut Notes,
                  trace: &mut rules::Trace,
                  eval: &mut rules::EvalState| {
        let ask =
            Ask { listener: index, request: view, pinned: None, http: Some((raw, &req)), tls_session: None };
        decide::decide(snap, tables, eval, &ask, notes, Some(trace))
    };
    let no_body = Body { bytes: &[], complete: req.body == http1::BodyKind::None };
    let head_only = HeadView { head: raw, req: &req, src, dst, body: no_body };
    let mut decision = decide(&head_only, &mut notes, &mut trace, &mut eval);
    if decision.is_none() {
        // The rules read the body: the switch buffers it (up to `rule_body_bytes`).
        let (payload, complete) = match body_for_rules(snap, &req, &raw[req.head_len..]) {
            Ok(body) => body,
            Err(r) => return Ok(refused(out, r)),
        };
        let view = HeadView { head: raw, req: &req, src, dst, body: Body { bytes: &payload, complete } };
        decision = decide(&view, &mut notes, &mut trace, &mut eval);
    }
    let d = decision.ok_or("the rules need more of the body than the request holds")?;
    out.trace = if l.rules.is_some() { trace.to_string() } else { String::new() };
    describe(snap, index, &d, &notes, &mut out);
    if d.act == Act::Forward {
        choose_server(snap, &d, &head_only, &mut out);
    }
    Ok(out)
}

/// A head written by hand (an editor's bare LF line ends, no CR anywhere in it) with CRLF
/// line ends, the body left as it is; `None` for anything else.
fn hand_written_head(raw: &[u8]) -> Option<Vec<u8>> {
    let end = raw.windows(2).position(|w| w == b"\n\n")? + 2;
    if raw[..end].contains(&b'\r') {
        return None;
    }
    let mut out = Vec::with_capacity(raw.len() + 64);
    for &b in &raw[..end] {
        if b == b'\n' {
            out.push(b'\r');
        }
        out.push(b);
    }
    out.extend_from_slice(&raw[end..]);
    Some(out)
}

/// The body as the route phase buffers it for the rules: de-chunked, within the cap.
fn body_for_rules(snap: &Snapshot, req: &RequestHead, after_head: &[u8]) -> Result<(Vec<u8>, bool), Refusal> {
    let mut scanner = BodyScanner::new(req.body, snap.max_body);
    let mut payload = Vec::new();
    let scan = scanner
        .scan_data(after_head, |d| payload.extend_from_slice(d))
        .map_err(|e| Refusal::new(e.status(), "invalid request body"))?;
    if payload.len() > snap.config.limits.rule_body_bytes {
        return Err(Refusal::new(413, "request body too large for rule matching"));
    }
    Ok((payload, scan.done))
}

fn refused(mut out: Explanation, r: Refusal) -> Explanation {
    out.action = "refuse";
    out.status = Some(r.status);
    out.decision = format!("the switch refuses it before routing: {} {}", r.status, r.reason);
    out
}

/// The decision in words.
fn describe(snap: &Snapshot, listener: usize, d: &Decision, notes: &Notes, out: &mut Explanation) {
    let rule = (!notes.rule.is_empty()).then(|| notes.rule.clone());
    let named = rule.clone().unwrap_or_else(|| "none".into());
    let group = snap.group(d.group).name.clone();
    out.rule = rule;
    out.set_headers = notes.set_headers.clone();
    match d.act {
        Act::Forward => {
            let default =
                d.group == snap.listeners[listener].default_group && d.rule.is_none() && d.server.is_none();
            out.action = if default { "default" } else { "route" };
            out.decision = match (d.server, d.rule) {
                (Some((_, by)), _) if by != decide::By::Persistence => {
                    format!("a {} entry sends it to group {group}", by.name())
                }
                (_, Some(_)) => format!("rule {named} routes to group {group} ({})", d.sticky.keyword()),
                _ if snap.listeners[listener].rules.is_some() => {
                    format!("no rule routed; default group {group}")
                }
                _ => format!("no rules: default group {group}"),
            };
            out.group = Some(group);
        }
        Act::Deny(status) => {
            out.action = "deny";
            out.status = Some(status);
            out.decision = format!("rule {named} denies with {status}");
        }
        Act::Drop => {
            out.action = "drop";
            out.decision = format!("rule {named} drops the connection");
        }
        Act::Redirect(status) => {
            out.action = "redirect";
            out.status = Some(status);
            out.decision = format!("rule {named} redirects ({status}) to {}", notes.location);
        }
    }
}

/// The server an entry chose, else the scheduler's first pick with every server idle and
/// the servers' current effective weights.
fn choose_server(snap: &Snapshot, d: &Decision, view: &HeadView<'_>, out: &mut Explanation) {
    let g = snap.group(d.group);
    let chosen = d.server.and_then(|(id, by)| Some((g.servers.iter().position(|s| s.id == id)?, by.name())));
    let index = chosen.map(|(i, _)| i).or_else(|| {
        let weights: Vec<u32> =
            g.servers.iter().map(|s| s.live.effective_weight.load(Ordering::Relaxed)).collect();
        let candidates: Vec<balance::Candidate> = g
            .servers
            .iter()
            .zip(&weights)
            .map(|(s, &w)| balance::Candidate { weight: w, active: 0, usable: w > 0, maxconn: s.maxconn })
            .collect();
        let members: Vec<balance::Member> = g
            .servers
            .iter()
            .zip(&weights)
            .map(|(s, &w)| balance::Member { name: &s.name, weight: w, maxconn: s.maxconn })
            .collect();
        let mut scheduler = g.scheduler.build(&g.params);
        scheduler.rebuild(&members);
        let mut key = Vec::new();
        let has_key = g.scheduler.uses_key() && extract_key(&g.hash_key, view, &mut key);
        if has_key {
            out.hash_key = Some(String::from_utf8_lossy(&key).into_owned());
        }
        scheduler.pick(&candidates, has_key.then_some(key.as_slice()))
    });
    out.chosen_by = Some(chosen.map_or("scheduler", |(_, by)| by));
    if let Some(s) = index.and_then(|i| g.servers.get(i)) {
        out.server = Some(s.name.clone());
        out.server_addr = Some(s.addr.to_string());
        if let Some((_, by)) = chosen {
            out.decision.push_str(&format!("; {by} chose server {}", s.name));
        }
    }
}
