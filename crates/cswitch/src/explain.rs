//! `cswitch explain`: runs the rules of a listener over a raw request read from a file and
//! prints the trace (every rule tried, what each condition saw) and the decision, with the
//! server the group's scheduler would pick first.

use anyhow::Context;
use std::net::SocketAddr;
use std::path::Path;

/// Prints how the request in `request` would be routed.
pub fn run(config: &Path, request: &Path, src: SocketAddr, listener: Option<&str>) -> anyhow::Result<()> {
    let cfg = config::load(config).map_err(|d| anyhow::anyhow!("invalid config:\n{d}"))?;
    let compiled = proxy::compile_rules(&cfg).map_err(|e| anyhow::anyhow!("invalid rules:\n{e}"))?;
    let index = match listener {
        Some(name) => {
            cfg.listeners.iter().position(|l| l.name == name).context("no listener of that name")?
        }
        None => 0,
    };
    let l = &cfg.listeners[index];
    let raw = std::fs::read(request).with_context(|| format!("reading {}", request.display()))?;
    let req = rules::OwnedRequest::parse(&raw, src, l.bind)
        .map_err(|e| anyhow::anyhow!("{}: {e}", request.display()))?;
    println!("listener {} ({}), client {src}", l.name, l.bind);
    let group = match &compiled[index] {
        None => {
            println!("no rules: the default group decides");
            l.default_group.clone()
        }
        Some(rules) => decide(rules, &req, &l.default_group)?,
    };
    print_server(&cfg, &group, &req);
    Ok(())
}

/// Evaluates with a trace; returns the group the request goes to.
fn decide(rules: &rules::RuleSet, req: &rules::OwnedRequest, default_group: &str) -> anyhow::Result<String> {
    let mut state = rules::EvalState::new();
    let mut trace = rules::Trace::default();
    let outcome = rules.evaluate(req, &mut state, Some(&mut trace));
    print!("{trace}");
    let rules::Outcome::Decided(d) = outcome else {
        anyhow::bail!("the rules need more of the body than the request file holds");
    };
    let rule = d.rule.map_or("none".to_string(), |(_, label)| label.to_string());
    for (name, value) in d.set_headers.iter() {
        println!("setHeader {name}: {value}");
    }
    let group = match d.action {
        rules::Action::Route { group, sticky } => {
            println!("decision: rule {rule} routes to group {} ({sticky:?})", rules.groups()[group]);
            rules.groups()[group].clone()
        }
        rules::Action::Default => {
            println!("decision: no rule routed; default group {default_group}");
            default_group.to_string()
        }
        rules::Action::Deny { status } => {
            return finish(format!("decision: rule {rule} denies with {status}"))
        }
        rules::Action::Drop => return finish(format!("decision: rule {rule} drops the connection")),
        rules::Action::Redirect { status, location } => {
            return finish(format!("decision: rule {rule} redirects ({status}) to {location}"))
        }
    };
    Ok(group)
}

fn finish(line: String) -> anyhow::Result<String> {
    println!("{line}");
    Ok(String::new())
}

/// The server the group's scheduler would pick first with every server idle, fed the
/// request's hash key when it reads one. (Session persistence and learned tables of a
/// running switch are not known here.)
fn print_server(cfg: &config::Config, group: &str, req: &rules::OwnedRequest) {
    let Some(g) = cfg.groups.iter().find(|g| g.name == group) else { return };
    let candidates: Vec<balance::Candidate> = g
        .servers
        .iter()
        .map(|s| balance::Candidate { weight: s.weight, active: 0, usable: s.weight > 0, maxconn: s.maxconn })
        .collect();
    let members: Vec<balance::Member> = g
        .servers
        .iter()
        .map(|s| balance::Member { name: &s.name, weight: s.weight, maxconn: s.maxconn })
        .collect();
    let mut scheduler = g.scheduler.build(&g.params);
    scheduler.rebuild(&members);
    let mut key_bytes = Vec::new();
    let key = (g.scheduler.uses_key() && proxy::extract_key(&g.hash_key, req, &mut key_bytes))
        .then_some(key_bytes.as_slice());
    if let Some(k) = key {
        println!("hash key: {}", String::from_utf8_lossy(k));
    }
    match scheduler.pick(&candidates, key) {
        Some(i) => println!(
            "server: {} ({}) — {} picks it first with every server idle",
            g.servers[i].name,
            g.servers[i].addr,
            g.scheduler.name()
        ),
        None => println!("server: none usable in group {group}"),
    }
}
