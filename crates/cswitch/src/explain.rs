//! `cswitch explain`: runs the rules of a listener over a raw request read from a file and
//! prints the trace (every rule tried, what each condition saw) and the decision, with the
//! server the group's scheduler would pick first (`proxy::explain`, with the config's
//! weights; the admin API's `POST /api/explain` asks a running switch instead).

use anyhow::Context;
use std::net::SocketAddr;
use std::path::Path;

/// Prints how the request in `request` would be routed.
pub fn run(config: &Path, request: &Path, src: SocketAddr, listener: Option<&str>) -> anyhow::Result<()> {
    let cfg = config::load(config).map_err(|d| anyhow::anyhow!("invalid config:\n{d}"))?;
    let compiled = proxy::compile_rules(&cfg).map_err(|e| anyhow::anyhow!("invalid rules:\n{e}"))?;
    let raw = std::fs::read(request).with_context(|| format!("reading {}", request.display()))?;
    let e = proxy::explain::explain_config(&cfg, compiled, listener, &raw, src)
        .map_err(|e| anyhow::anyhow!("{}: {e}", request.display()))?;
    let bind = cfg.listeners.iter().find(|l| l.name == e.listener).map(|l| l.bind);
    println!("listener {} ({}), client {src}", e.listener, bind.map_or_else(String::new, |b| b.to_string()));
    if e.trace.is_empty() {
        println!("no rules: the default group decides");
    }
    print!("{}", e.trace);
    for (name, value) in &e.set_headers {
        println!("setHeader {name}: {value}");
    }
    println!("decision: {}", e.decision);
    if let Some(key) = &e.hash_key {
        println!("hash key: {key}");
    }
    match (&e.group, &e.server, &e.server_addr) {
        (Some(_), Some(server), Some(addr)) => match e.chosen_by {
            Some(by) if by != "scheduler" => println!("server: {server} ({addr}) — chosen by {by}"),
            _ => println!("server: {server} ({addr}) — picked first with every server idle"),
        },
        (Some(group), _, _) => println!("server: none usable in group {group}"),
        _ => {}
    }
    Ok(())
}
