//! How a raw request would be routed: the listener's rules with their trace, the decision,
//! and the server the group's scheduler would pick first with every server idle (fed the
//! request's hash key when it reads one). Shared by `cswitch explain` (config weights) and
//! the admin API's `POST /api/explain` (the running switch's effective weights).
//! Persistence entries and learned tables of a running switch are not consulted.

use crate::balancing::extract_key;
use rules::{Action, Outcome, OwnedRequest, RuleSet};
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::Arc;

/// The routing decision for one request.
#[derive(Clone, Debug, Serialize)]
pub struct Explanation {
    /// Listener the request was taken to arrive on.
    pub listener: String,
    /// Every rule tried and what its conditions saw (empty without rules).
    pub trace: String,
    /// Label of the rule that decided, if one did.
    pub rule: Option<String>,
    /// `route`, `default`, `deny`, `drop` or `redirect`.
    pub action: &'static str,
    /// The decision in one sentence.
    pub decision: String,
    /// Group the request goes to (route / default).
    pub group: Option<String>,
    /// Server the scheduler picks first with every server idle.
    pub server: Option<String>,
    /// That server's address.
    pub server_addr: Option<String>,
    /// The request's hash key, for keyed schedulers.
    pub hash_key: Option<String>,
    /// Header fields a rule sets.
    pub set_headers: Vec<(String, String)>,
}

/// Explains `raw` arriving from `src` on `listener` (default: the first). `weight` gives a
/// server's current weight (config or effective) by group and server name.
pub fn explain(
    config: &config::Config,
    compiled: &[Option<Arc<RuleSet>>],
    listener: Option<&str>,
    raw: &[u8],
    src: SocketAddr,
    weight: &dyn Fn(&str, &config::Server) -> u32,
) -> Result<Explanation, String> {
    let index = match listener {
        Some(name) => config
            .listeners
            .iter()
            .position(|l| l.name == name)
            .ok_or_else(|| format!("no listener `{name}`"))?,
        None => 0,
    };
    let l = config.listeners.get(index).ok_or("the config has no listener")?;
    let req = OwnedRequest::parse(raw, src, l.bind).map_err(|e| format!("request: {e}"))?;
    let mut out = Explanation {
        listener: l.name.clone(),
        trace: String::new(),
        rule: None,
        action: "default",
        decision: format!("no rules: default group {}", l.default_group),
        group: Some(l.default_group.clone()),
        server: None,
        server_addr: None,
        hash_key: None,
        set_headers: Vec::new(),
    };
    if let Some(rules) = compiled.get(index).and_then(Option::as_deref) {
        decide(rules, &req, &l.default_group, &mut out)?;
    }
    if let Some(group) = out.group.clone() {
        pick_server(config, &group, &req, weight, &mut out);
    }
    Ok(out)
}

fn decide(
    rules: &RuleSet,
    req: &OwnedRequest,
    default_group: &str,
    out: &mut Explanation,
) -> Result<(), String> {
    let mut state = rules::EvalState::new();
    let mut trace = rules::Trace::default();
    let outcome = rules.evaluate(req, &mut state, Some(&mut trace));
    out.trace = trace.to_string();
    let Outcome::Decided(d) = outcome else {
        return Err("the rules need more of the body than the request holds".into());
    };
    out.rule = d.rule.map(|(_, label)| label.to_string());
    let rule = out.rule.clone().unwrap_or_else(|| "none".into());
    out.set_headers = d.set_headers.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
    out.group = None;
    match d.action {
        Action::Route { group, sticky } => {
            let name = rules.groups()[group].clone();
            out.action = "route";
            let sticky = match sticky {
                rules::Sticky::IpPort => "STICKY_IP_PORT",
                rules::Sticky::Ip => "STICKY_IP",
                rules::Sticky::Off => "NONSTICKY",
            };
            out.decision = format!("rule {rule} routes to group {name} ({sticky})");
            out.group = Some(name);
        }
        Action::Default => {
            out.action = "default";
            out.decision = format!("no rule routed; default group {default_group}");
            out.group = Some(default_group.to_string());
        }
        Action::Deny { status } => {
            out.action = "deny";
            out.decision = format!("rule {rule} denies with {status}");
        }
        Action::Drop => {
            out.action = "drop";
            out.decision = format!("rule {rule} drops the connection");
        }
        Action::Redirect { status, location } => {
            out.action = "redirect";
            out.decision = format!("rule {rule} redirects ({status}) to {location}");
        }
    }
    Ok(())
}

fn pick_server(
    config: &config::Config,
    group: &str,
    req: &OwnedRequest,
    weight: &dyn Fn(&str, &config::Server) -> u32,
    out: &mut Explanation,
) {
    let Some(g) = config.groups.iter().find(|g| g.name == group) else { return };
    let weights: Vec<u32> = g.servers.iter().map(|s| weight(&g.name, s)).collect();
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
    let has_key = g.scheduler.uses_key() && extract_key(&g.hash_key, req, &mut key);
    if has_key {
        out.hash_key = Some(String::from_utf8_lossy(&key).into_owned());
    }
    if let Some(i) = scheduler.pick(&candidates, has_key.then_some(key.as_slice())) {
        out.server = Some(g.servers[i].name.clone());
        out.server_addr = Some(g.servers[i].addr.to_string());
    }
}
