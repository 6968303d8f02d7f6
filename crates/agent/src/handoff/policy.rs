//! The switch's rules for its one-way listeners, held by the agent (issue 12 part 5): a
//! handed-off connection's later requests reach the agent, not the switch, so the agent
//! tells with the same rules whether one belongs to another group. The switch sends each
//! listener's [`Policy`] on every control connection and after every reload; the newest
//! wins (`Policy::replaces`). Rules that read the body see the bytes that came with the
//! head (a later request whose deciding rule needs more stays where it is).

use oneway::{Policy, Route};
use rules::{Action, EvalState, Outcome, OwnedRequest, RuleSet};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Where a later request belongs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The group of the server that has the connection.
    Stay,
    /// Another group, or an answer only the switch gives (deny, drop, redirect).
    Elsewhere,
}

/// A policy and its compiled rules.
struct Compiled {
    policy: Policy,
    rules: Rules,
}

enum Rules {
    /// The listener has none: every request goes to its default group.
    None,
    Compiled(Box<RuleSet>),
    /// They did not compile here (logged): requests stay where they are.
    Broken,
}

/// Every one-way listener's policy, shared by the agent's threads.
#[derive(Default)]
pub struct Policies {
    by_listener: Mutex<HashMap<String, Arc<Compiled>>>,
}

impl Policies {
    /// Takes `policy` unless the one held for its listener is newer.
    pub fn set(&self, policy: Policy) {
        let mut map = self.by_listener.lock().unwrap_or_else(|e| e.into_inner());
        if map.get(&policy.listener).is_some_and(|held| !policy.replaces(&held.policy)) {
            return;
        }
        let rules = compile(&policy);
        tracing::info!(listener = %policy.listener, generation = policy.generation, "rules received from the switch");
        map.insert(policy.listener.clone(), Arc::new(Compiled { policy, rules }));
    }

    /// Where the later request `raw` (its head, and what came of its body) on a
    /// connection routed by `route` belongs.
    pub fn verdict(&self, route: &Route, raw: &[u8], client: SocketAddr, vip: SocketAddr) -> Verdict {
        if route.pinned {
            return Verdict::Stay;
        }
        let held = self.by_listener.lock().unwrap_or_else(|e| e.into_inner()).get(&route.listener).cloned();
        let Some(held) = held else {
            tracing::debug!(listener = %route.listener, "no rules from the switch yet; the request stays");
            return Verdict::Stay;
        };
        let group = match &held.rules {
            Rules::None => Some(held.policy.default_group.as_str()),
            Rules::Compiled(rules) => decide(rules, &held.policy, raw, client, vip),
            Rules::Broken => None,
        };
        match group {
            Some(g) if g == route.group => Verdict::Stay,
            Some(_) => Verdict::Elsewhere,
            // Undecided (a body rule waiting for more, rules that did not compile): where it is.
            None => Verdict::Stay,
        }
    }
}

fn compile(policy: &Policy) -> Rules {
    if policy.rules.is_empty() {
        return Rules::None;
    }
    let groups: Vec<&str> = policy.groups.iter().map(String::as_str).collect();
    let file = format!("rules of listener {} (from the switch)", policy.listener);
    match RuleSet::compile(&policy.rules, Path::new(&file), &groups) {
        Ok(r) => Rules::Compiled(Box::new(r)),
        Err(e) => {
            tracing::warn!(listener = %policy.listener, errors = %e, "the switch's rules do not compile here; later requests stay on their server");
            Rules::Broken
        }
    }
}

/// The group the rules send `raw` to; the empty name for answers only the switch gives;
/// `None` when they cannot decide from these bytes.
fn decide<'a>(
    rules: &'a RuleSet,
    policy: &'a Policy,
    raw: &[u8],
    client: SocketAddr,
    vip: SocketAddr,
) -> Option<&'a str> {
    let req = OwnedRequest::parse(raw, client, vip).ok()?;
    let mut state = EvalState::new();
    let Outcome::Decided(d) = rules.evaluate(&req, &mut state, None) else { return None };
    Some(match d.action {
        Action::Route { group, .. } => policy.groups.get(group).map_or("", String::as_str),
        Action::Default => policy.default_group.as_str(),
        Action::Deny { .. } | Action::Drop | Action::Redirect { .. } => "",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use oneway::Persistence;

    fn policy(generation: u64, rules: &str) -> Policy {
        Policy {
            listener: "web".into(),
            switch: 1,
            generation,
            default_group: "static".into(),
            groups: vec!["static".into(), "api".into()],
            rules: rules.into(),
        }
    }

    fn route(group: &str, pinned: bool) -> Route {
        Route {
            listener: "web".into(),
            group: group.into(),
            persistence: Persistence::Redirect,
            pinned,
            cookie: None,
        }
    }

    const API: &str = "R1: if (match(url, \"^/api\")) { routeTo(api, NONSTICKY); }\n";
    const ADDR: &str = "10.0.0.1:40000";

    fn verdict(p: &Policies, route: &Route, raw: &[u8]) -> Verdict {
        p.verdict(route, raw, ADDR.parse().unwrap(), "10.0.0.100:80".parse().unwrap())
    }

    #[test]
    fn later_requests_are_judged_by_the_switchs_rules() {
        let p = Policies::default();
        p.set(policy(1, API));
        let on_static = route("static", false);
        assert_eq!(verdict(&p, &on_static, b"GET /img.png HTTP/1.1\r\nHost: a\r\n\r\n"), Verdict::Stay);
        assert_eq!(verdict(&p, &on_static, b"GET /api/x HTTP/1.1\r\nHost: a\r\n\r\n"), Verdict::Elsewhere);
        let on_api = route("api", false);
        assert_eq!(verdict(&p, &on_api, b"GET /api/x HTTP/1.1\r\nHost: a\r\n\r\n"), Verdict::Stay);
        // Pinned by the first request's rule: the rules are not asked.
        assert_eq!(
            verdict(&p, &route("static", true), b"GET /api/x HTTP/1.1\r\nHost: a\r\n\r\n"),
            Verdict::Stay
        );
    }

    #[test]
    fn the_newest_policy_wins_and_a_new_switch_replaces_an_old_one() {
        let p = Policies::default();
        p.set(policy(5, API));
        p.set(policy(4, ""));
        let api = b"GET /api/x HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(verdict(&p, &route("static", false), api), Verdict::Elsewhere, "generation 4 is older");
        p.set(Policy { switch: 2, ..policy(0, "") });
        assert_eq!(verdict(&p, &route("static", false), api), Verdict::Stay, "a restarted switch's rules");
    }

    #[test]
    fn without_rules_from_the_switch_requests_stay() {
        let p = Policies::default();
        assert_eq!(verdict(&p, &route("api", false), b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), Verdict::Stay);
        p.set(policy(1, "this is not a rule"));
        assert_eq!(verdict(&p, &route("api", false), b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"), Verdict::Stay);
    }
}
