//! How `cswitch ctl` prints the admin API's answers: aligned tables for lists, a few lines
//! for the rest (`--json` prints the API's JSON as it came instead).

use serde_json::Value;

/// `GET /api/status`.
pub fn status(v: &Value) {
    println!(
        "cswitch {}, up {}, config generation {} ({}), {} client connection(s)",
        text(&v["version"]),
        duration(v["uptime_secs"].as_f64().unwrap_or(0.0)),
        text(&v["generation"]),
        text(&v["config_file"]),
        text(&v["connections"]),
    );
    let columns = ["LISTENER", "BIND", "DEFAULT", "CONNS", "REQS", "2xx", "3xx", "4xx", "5xx"];
    let rows = list(v, "listeners")
        .map(|l| {
            let mut row = vec![text(&l["name"]), text(&l["bind"]), text(&l["default_group"])];
            row.extend([text(&l["connections"]), text(&l["requests"])]);
            row.extend(["2xx", "3xx", "4xx", "5xx"].map(|c| text(&l["responses"][c])));
            row
        })
        .collect();
    print!("{}", table(&columns, rows, 3));
}

/// `GET /api/cluster`.
pub fn cluster(v: &Value) {
    if v["enabled"] != true {
        println!("this switch is not in a cluster (no [cluster] in its config)");
        return;
    }
    let g = &v["gossip"];
    println!(
        "node {}, config digest {}; gossip: {} datagrams in, {} out, {} refused",
        text(&v["node"]),
        text(&v["config_digest"]),
        text(&g["received"]),
        text(&g["sent"]),
        text(&g["rejected"]),
    );
    if let Some(last) = g["last_rejected"].as_str() {
        println!("last refused: {last}");
    }
    let columns = [
        "NODE",
        "GOSSIP",
        "LIVE",
        "L4",
        "DIGEST",
        "LAG",
        "CAPACITIES",
        "STICKY_IP",
        "COOKIES",
        "TLS",
        "ASSIGNED",
    ];
    let rows = list(v, "nodes").map(cluster_row).collect();
    print!("{}", table(&columns, rows, 5));
    let l4 = &v["l4"];
    if l4.is_object() {
        let targets: Vec<String> = list(l4, "targets").map(text).collect();
        let gone: Vec<String> = list(l4, "gone").map(text).collect();
        let ports: Vec<String> = list(l4, "ports").map(text).collect();
        println!(
            "L4 tier (nft table ip {}): {} port(s) {} → {}; reset: {}; {} change(s), last took {} µs{}",
            text(&l4["table"]),
            text(&l4["vip"]),
            ports.join(","),
            if targets.is_empty() { "no node".to_string() } else { targets.join(", ") },
            if gone.is_empty() { "none".to_string() } else { gone.join(", ") },
            text(&l4["changes"]),
            text(&l4["load_us"]),
            if l4["forwarding"] == true { "" } else { "; WARNING: net.ipv4.ip_forward is 0" },
        );
        if let Some(error) = l4["error"].as_str() {
            println!("L4 tier error: {error}");
        }
    }
}

/// `POST /api/cluster/drain` or `/ready`.
pub fn serving(v: &Value) {
    println!("this node is now {} in the L4 tier", text(&v["serving"]));
}

fn cluster_row(n: &Value) -> Vec<String> {
    let name = match n["is_self"] == true {
        true => format!("{} (self)", text(&n["name"])),
        false => text(&n["name"]),
    };
    let live = if n["live"] == true { "live" } else { "dead" };
    let drift = if n["drift"] == true { " (differs)" } else { "" };
    let lag = n["lag_ms"].as_u64().map_or("-".to_string(), |ms| format!("{ms}ms"));
    let digest = format!("{}{drift}", text(&n["config_digest"]));
    let shares =
        [&n["capacities"], &n["sticky_ip"], &n["learned_cookies"], &n["tls_sessions"], &n["assignments"]]
            .map(text);
    let serving = match (n["serving"].as_str(), n["runs_l4"] == true) {
        (Some(s), true) => format!("{s}, tier"),
        (Some(s), false) => s.to_string(),
        (None, true) => "tier".to_string(),
        (None, false) => "-".to_string(),
    };
    let mut row = vec![name, text(&n["gossip"]), live.into(), serving, digest, lag];
    row.extend(shares);
    row
}

/// `GET /api/servers`.
pub fn servers(v: &Value) {
    let columns = [
        "GROUP", "SERVER", "ADDR", "STATE", "HEALTH", "WEIGHT", "EFF", "CAP", "ACTIVE", "QUEUED", "REQS",
        "2xx", "5xx", "P50", "P99",
    ];
    let rows = v
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let health = if s["passive_out"] == true { "out".to_string() } else { text(&s["health"]) };
            vec![
                text(&s["group"]),
                text(&s["name"]),
                text(&s["addr"]),
                text(&s["state"]),
                health,
                text(&s["weight"]),
                text(&s["effective_weight"]),
                text(&s["capacity"]),
                text(&s["active"]),
                text(&s["queued"]),
                text(&s["requests"]),
                text(&s["responses"]["2xx"]),
                text(&s["responses"]["5xx"]),
                micros(&s["p50_us"]),
                micros(&s["p99_us"]),
            ]
        })
        .collect();
    print!("{}", table(&columns, rows, 5));
}

/// An applied edit or reload: its generation and what changed.
pub fn applied(v: &Value) {
    let changes: Vec<String> = list(v, "changes").map(text).collect();
    if changes.is_empty() {
        println!("no change (config generation {})", text(&v["generation"]));
    } else {
        println!("applied: config generation {}", text(&v["generation"]));
        for c in changes {
            println!("  {c}");
        }
    }
}

/// `POST /api/reopen`.
pub fn reopened(_: &Value) {
    println!("access log reopened");
}

/// `POST /api/upgrade`.
pub fn upgraded(v: &Value) {
    println!(
        "upgraded: new process {} serving after {} ms, old one drained after {} ms",
        text(&v["new_pid"]),
        text(&v["serving_after_ms"]),
        text(&v["duration_ms"])
    );
    println!("  connections moved:           {}", text(&v["moved"]));
    println!(
        "    tunnels among them:        {} ({} buffered bytes moved with them)",
        text(&v["tunnels_moved"]),
        text(&v["tunnel_bytes_buffered"])
    );
    println!("  finished in the old process: {}", text(&v["finished_in_old"]));
    let why = &v["finished_in_old_why"];
    println!("    TLS-terminated, closed once idle: {}", text(&why["tls_terminated"]));
    println!("    tunnels that cannot move:         {}", text(&why["tunnels_not_movable"]));
    println!("    other (closed by the client, HTTP/2, ...): {}", text(&why["other"]));
    println!("  failed to move:              {}", text(&v["failed_to_move"]));
    if let Some(why) = v["last_failure"].as_str() {
        println!("    last failure: {why}");
    }
    println!("  cut at the grace period:     {}", text(&v["cut_at_grace_period"]));
}

/// `GET /api/upgrade`.
pub fn upgrade_status(v: &Value) {
    match v["running"].as_object() {
        Some(r) => {
            let fact = |k: &str| r.get(k).map_or_else(|| "-".to_string(), text);
            println!("upgrade running: {} for {} ms", fact("phase"), fact("for_ms"));
            if r.contains_key("new_pid") {
                println!("  new process:        {}", fact("new_pid"));
                println!("  moved so far:       {} ({} tunnels)", fact("moved"), fact("tunnels_moved"));
                println!("  failed to move:     {}", fact("failed_to_move"));
                println!("  still open here:    {}", fact("still_open_here"));
            }
        }
        None => println!("no upgrade running"),
    }
    if let Some(adopted) = v["taking_over"]["adopted_so_far"].as_u64() {
        println!("taking over from the previous process: {adopted} connection(s) so far");
    }
    let last = &v["last"];
    if last["done"].is_object() {
        println!("last upgrade:");
        upgraded(&last["done"]);
    } else if let Some(why) = last["failed"].as_str() {
        println!("last upgrade failed ({}): {why}", text(&last["status"]));
    }
}

/// `DELETE /api/servers/G/N`.
pub fn removal(v: &Value) {
    let timeout = v["drain_timeout_ms"].as_f64().unwrap_or(0.0) / 1000.0;
    println!(
        "draining {}/{}: removed once idle, at most {} from now",
        text(&v["group"]),
        text(&v["server"]),
        duration(timeout)
    );
    applied(v)
}

/// `POST /api/explain`.
pub fn explanation(v: &Value) {
    println!("listener {}", text(&v["listener"]));
    let trace = v["trace"].as_str().unwrap_or_default();
    if trace.is_empty() {
        println!("no rules: the default group decides");
    }
    print!("{trace}");
    for h in list(v, "set_headers") {
        println!("setHeader {}: {}", text(&h[0]), text(&h[1]));
    }
    println!("decision: {}", text(&v["decision"]));
    if let Some(key) = v["hash_key"].as_str() {
        println!("hash key: {key}");
    }
    match (v["group"].as_str(), v["server"].as_str()) {
        (Some(_), Some(server)) => {
            println!("server: {server} ({}) — picked first with every server idle", text(&v["server_addr"]))
        }
        (Some(group), None) => println!("server: none usable in group {group}"),
        _ => {}
    }
}

fn list<'a>(v: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    v[key].as_array().into_iter().flatten()
}

/// A JSON value as a cell: strings bare, `null` as `-`.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// Microseconds, readable: `850µs`, `12.3ms`, `1.20s`.
fn micros(v: &Value) -> String {
    match v.as_u64() {
        None => "-".into(),
        Some(us) if us < 1_000 => format!("{us}µs"),
        Some(us) if us < 1_000_000 => format!("{:.1}ms", us as f64 / 1e3),
        Some(us) => format!("{:.2}s", us as f64 / 1e6),
    }
}

/// Seconds, readable: `42s`, `3m07s`, `5h02m`, `2d03h`.
fn duration(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// Columns padded to their widest cell; the first `left` columns (names) are aligned
/// left, the rest (numbers) right.
fn table(columns: &[&str], rows: Vec<Vec<String>>, left: usize) -> String {
    let width =
        |i: usize| rows.iter().map(|r| r[i].chars().count()).chain([columns[i].len()]).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns.len()).map(width).collect();
    let header: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
    let mut out = String::new();
    for row in std::iter::once(header).chain(rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, &w))| {
                let pad = " ".repeat(w.saturating_sub(cell.chars().count()));
                if i < left {
                    format!("{cell}{pad}")
                } else {
                    format!("{pad}{cell}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_names_left_and_numbers_right() {
        let rows = vec![vec!["web".into(), "5".into()], vec!["static".into(), "1234".into()]];
        assert_eq!(table(&["GROUP", "REQS"], rows, 1), "GROUP   REQS\nweb        5\nstatic  1234\n");
    }

    #[test]
    fn figures_are_readable() {
        assert_eq!(micros(&Value::from(850)), "850µs");
        assert_eq!(micros(&Value::from(12_345)), "12.3ms");
        assert_eq!(micros(&Value::Null), "-");
        assert_eq!(duration(187.0), "3m07s");
        assert_eq!(duration(7300.0), "2h01m");
    }
}
