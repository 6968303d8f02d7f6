//! `[cluster]`: values, defaults, and the refusals that name file:line:col and the fix.
#![allow(clippy::unwrap_used)] // in tests a panic is the failure report

use cswitch_config::{parse, Cluster, Config, Diagnostic, Diagnostics};
use std::path::Path;
use std::time::Duration;

const BASE: &str = r#"[[listener]]
name = "web"
bind = "127.0.0.1:8080"
default_group = "web"
[[group]]
name = "web"
servers = [{ name = "s1", addr = "127.0.0.1:9001" }]
"#;

fn config(text: &str) -> Config {
    parse(&format!("{BASE}{text}"), Path::new("/etc/cswitch/c.toml")).unwrap_or_else(|e| panic!("{e}"))
}

/// The only diagnostic; `text` starts on line 8.
fn one(text: &str) -> Diagnostic {
    match parse(&format!("{BASE}{text}"), Path::new("/etc/cswitch/c.toml")) {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(Diagnostics(mut d)) => {
            assert_eq!(d.len(), 1, "{}", Diagnostics(d.clone()));
            d.remove(0)
        }
    }
}

#[test]
fn a_loopback_node_needs_no_key_and_gets_the_defaults() {
    let c = config("[cluster]\nnode = \"cs1\"\nbind = \"127.0.0.2:7946\"\n");
    let expected = Cluster {
        node: "cs1".into(),
        bind: "127.0.0.2:7946".parse().unwrap(),
        seeds: vec![],
        key: None,
        gossip_interval: Duration::from_millis(100),
        state_file: None,
        l4: None,
    };
    assert_eq!(c.cluster, Some(expected));
    assert_eq!(config("").cluster, None);
}

#[test]
fn every_key_is_read() {
    let c = config(concat!(
        "[cluster]\nnode = \"edge-1.a\"\nbind = \"10.0.0.1:7946\"\n",
        "seeds = [\"10.0.0.2:7946\", \"[fd00::3]:7946\"]\nkey = \"0123456789abcdef0123\"\n",
        "gossip_interval = \"250ms\"\n"
    ))
    .cluster
    .unwrap();
    assert_eq!(c.node, "edge-1.a");
    assert_eq!(c.seeds, vec!["10.0.0.2:7946".parse().unwrap(), "[fd00::3]:7946".parse().unwrap()]);
    assert_eq!(c.key.as_deref(), Some("0123456789abcdef0123"));
    assert_eq!(c.gossip_interval, Duration::from_millis(250));
}

#[test]
fn gossip_off_loopback_without_a_key_is_refused_at_the_bind() {
    let d = one("[cluster]\nnode = \"cs1\"\nbind = \"10.0.0.1:7946\"\n");
    assert_eq!((d.line, d.col, d.key.as_str()), (10, 8, "cluster.bind"));
    assert!(d.message.contains("reachable from other hosts but has no key"), "{}", d.message);
    assert!(d.hint.as_deref().unwrap_or("").contains("key_file"), "{:?}", d.hint);
}

#[test]
fn the_key_may_come_from_a_file() {
    let file = std::env::temp_dir().join(format!("cswitch-cluster-key-{}", std::process::id()));
    std::fs::write(&file, "fedcba9876543210fedc\n").unwrap();
    let text =
        format!("[cluster]\nnode = \"a\"\nbind = \"10.0.0.1:7946\"\nkey_file = \"{}\"\n", file.display());
    assert_eq!(config(&text).cluster.unwrap().key.as_deref(), Some("fedcba9876543210fedc"));
    let both = format!("{text}key = \"fedcba9876543210fedc\"\n");
    assert!(one(&both).message.contains("both `key` and `key_file`"), "{}", one(&both).message);
    let _ = std::fs::remove_file(file);
    let d = one("[cluster]\nnode = \"a\"\nbind = \"127.0.0.1:7946\"\nkey = \"short\"\n");
    assert!(d.message.contains("the key for cluster gossip is 5 characters"), "{}", d.message);
}

#[test]
fn the_state_file_is_kept_beside_the_config_in_a_directory_that_exists() {
    let base = std::env::temp_dir();
    let parse_at = |text: &str| parse(&format!("{BASE}{text}"), &base.join("c.toml"));
    let text = "[cluster]\nnode = \"a\"\nbind = \"127.0.0.1:7946\"\nstate_file = \"a.state\"\n";
    let c = parse_at(text).unwrap_or_else(|e| panic!("{e}")).cluster.unwrap();
    assert_eq!(c.state_file, Some(base.join("a.state")), "relative to the config's directory");
    let d =
        one("[cluster]\nnode = \"a\"\nbind = \"127.0.0.1:7946\"\nstate_file = \"/no/such/dir/a.state\"\n");
    assert_eq!((d.line, d.col, d.key.as_str()), (11, 14, "cluster.state_file"));
    assert!(d.message.contains("no directory `/no/such/dir`"), "{}", d.message);
    assert!(d.hint.as_deref().unwrap_or("").contains("create the directory"), "{:?}", d.hint);
}

#[test]
fn bad_names_binds_and_seeds_say_how_to_fix_them() {
    let d = one("[cluster]\nnode = \"cs 1\"\nbind = \"127.0.0.1:7946\"\n");
    assert_eq!((d.line, d.key.as_str()), (9, "cluster.node"));
    assert!(d.hint.unwrap().contains("letters, digits"));
    let d = one("[cluster]\nnode = \"a\"\nbind = \"0.0.0.0:7946\"\nkey = \"0123456789abcdef0123\"\n");
    assert!(d.message.contains("not an address peers can send to"), "{}", d.message);
    let d = one("[cluster]\nnode = \"a\"\nbind = \"127.0.0.1:0\"\n");
    assert!(d.message.contains("port 0"), "{}", d.message);
    let d = one("[cluster]\nnode = \"a\"\nbind = \"127.0.0.1:7946\"\nseeds = [\"cs2:7946\"]\n");
    assert_eq!((d.line, d.col, d.key.as_str()), (11, 9, "cluster.seeds"));
    let d = one("[cluster]\nbind = \"127.0.0.1:7946\"\n");
    assert!(d.message.contains("node"), "{}", d.message);
    let d = one("[cluster]\nnode = \"a\"\nbind = \"127.0.0.1:7946\"\ntoken = \"0123456789abcdef0123\"\n");
    assert!(d.message.contains("token"), "{}", d.message);
}

const HASHNAT: &str = r#"[[listener]]
name = "web"
bind = "127.0.0.1:8080"
default_group = "web"
[[group]]
name = "web"
scheduler = "sieve"
servers = [
  { name = "cs1", addr = "10.0.0.1:8081", local_addr = "127.0.0.1:80" },
  { name = "cs2", addr = "10.0.0.2:8081", local_addr = "127.0.0.1:80" },
]
"#;

#[test]
fn a_hashnat_server_is_reached_at_its_local_addr_on_its_own_node_only() {
    let text = format!("{HASHNAT}[cluster]\nnode = \"cs1\"\nbind = \"127.0.0.2:7946\"\n");
    let c = parse(&text, Path::new("/etc/cswitch/c.toml")).unwrap_or_else(|e| panic!("{e}"));
    let servers = &c.groups[0].servers;
    assert_eq!(servers[0].local_addr, Some("127.0.0.1:80".parse().unwrap()));
    assert_eq!(servers[0].connect_addr(Some("cs1")), "127.0.0.1:80".parse().unwrap());
    assert_eq!(servers[1].connect_addr(Some("cs1")), "10.0.0.2:8081".parse().unwrap());
    assert_eq!(servers[0].connect_addr(None), "10.0.0.1:8081".parse().unwrap());
}

#[test]
fn local_addr_without_a_cluster_is_refused_where_it_is_written() {
    let d = match parse(HASHNAT, Path::new("/etc/cswitch/c.toml")) {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(Diagnostics(d)) => d,
    };
    assert_eq!(d.len(), 2, "{}", Diagnostics(d.clone()));
    assert_eq!((d[0].line, d[0].col, d[0].key.as_str()), (9, 56, "group[0].servers[0].local_addr"));
    assert!(d[0].hint.as_deref().unwrap_or("").contains("add [cluster]"), "{:?}", d[0].hint);
}

const NODE: &str = "[cluster]\nnode = \"l4\"\nbind = \"127.0.0.1:7946\"\n";

#[test]
fn the_l4_tier_is_read_with_its_defaults() {
    let c =
        config(&format!("{NODE}[cluster.l4]\nvip = \"192.0.2.10\"\nports = [80, 443]\n")).cluster.unwrap();
    let l4 = c.l4.unwrap();
    assert_eq!(l4.vip, std::net::Ipv4Addr::new(192, 0, 2, 10));
    assert_eq!(l4.ports, vec![80, 443]);
    assert!(l4.nodes.is_empty(), "every node that serves");
    assert_eq!(l4.table, "cswitch_l4");
    let c = config(&format!(
        "{NODE}[cluster.l4]\nvip = \"192.0.2.10\"\nports = [80]\nnodes = [\"cs1\", \"cs2\"]\ntable = \"edge\"\n"
    ));
    let l4 = c.cluster.unwrap().l4.unwrap();
    assert_eq!((l4.nodes.len(), l4.table.as_str()), (2, "edge"));
}

#[test]
fn a_node_that_only_runs_the_l4_tier_needs_no_listener_or_group() {
    let text = format!("{NODE}[cluster.l4]\nvip = \"192.0.2.10\"\nports = [80]\n");
    let c = parse(&text, Path::new("/etc/cswitch/l4.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert!(c.listeners.is_empty() && c.groups.is_empty());
    let without = parse(NODE, Path::new("/etc/cswitch/l4.toml")).unwrap_err();
    assert!(without.to_string().contains("no [[listener]]"), "{without}");
}

#[test]
fn bad_l4_values_name_their_place_and_the_fix() {
    // `text` starts on line 8: [cluster] 8–10, [cluster.l4] 11, its keys from 12.
    let d = one(&format!("{NODE}[cluster.l4]\nvip = \"2001:db8::1\"\nports = [80]\n"));
    assert_eq!((d.line, d.col, d.key.as_str()), (12, 7, "cluster.l4.vip"));
    assert!(d.message.contains("IPv4 flows only"), "{}", d.message);
    let d = one(&format!("{NODE}[cluster.l4]\nvip = \"192.0.2.10:80\"\nports = [80]\n"));
    assert!(d.hint.unwrap().contains("without a port"));
    let d = one(&format!("{NODE}[cluster.l4]\nvip = \"192.0.2.10\"\nports = [80, 70000]\n"));
    assert_eq!((d.line, d.col, d.key.as_str()), (13, 9, "cluster.l4.ports"));
    let d = one(&format!("{NODE}[cluster.l4]\nvip = \"192.0.2.10\"\nports = [80, 80]\n"));
    assert!(d.message.contains("port 80 is listed twice"), "{}", d.message);
    let d = one(&format!("{NODE}[cluster.l4]\nvip = \"192.0.2.10\"\n"));
    assert!(d.message.contains("missing `ports`"), "{}", d.message);
    let d = one(&format!("{NODE}[cluster.l4]\nvip = \"192.0.2.10\"\nports = [80]\ntable = \"a-b\"\n"));
    assert!(d.message.contains("not an nftables table name"), "{}", d.message);
    let d = one(&format!("{NODE}[cluster.l4]\nvip = \"192.0.2.10\"\nports = [80]\nport = 80\n"));
    assert_eq!(d.key, "cluster.l4.port");
}

/// HashNAT with hand-offs (ADR 0019): a one-way client listener on a public address, the
/// hosts (peer listeners, agents) on private ones.
const HASHNAT_ONEWAY: &str = r#"[cluster]
node = "cs1"
bind = "10.0.0.1:7946"
key = "0123456789abcdef0123"
[oneway]
interface = "eth0"
token = "0123456789abcdef0123"
[[listener]]
name = "web"
bind = "192.0.2.1:80"
default_group = "web"
mode = "one-way"
[[listener]]
name = "peer"
bind = "10.0.0.1:8081"
default_group = "here"
[[group]]
name = "web"
scheduler = "sieve"
servers = [
  { name = "cs1", addr = "10.0.0.1:8081", local_addr = "127.0.0.1:80", agent = "10.0.0.1:9000", mac = "02:00:00:00:00:01" },
  { name = "cs2", addr = "10.0.0.2:8081", local_addr = "127.0.0.1:80", agent = "10.0.0.2:9000", mac = "02:00:00:00:00:02" },
]
[[group]]
name = "here"
servers = [ { name = "origin", addr = "127.0.0.1:80" } ]
"#;

#[test]
fn hashnat_hands_off_from_a_one_way_listener_on_an_address_of_its_own() {
    let c = parse(HASHNAT_ONEWAY, Path::new("/etc/cswitch/c.toml")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.listeners[0].mode, cswitch_config::Mode::OneWay);
    let cs2 = &c.groups[0].servers[1];
    assert_eq!(cs2.handoff.map(|h| h.agent), Some("10.0.0.2:9000".parse().unwrap()));
    assert_eq!(cs2.connect_addr(Some("cs1")), "10.0.0.2:8081".parse().unwrap(), "proxied there on fallback");
}

#[test]
fn a_one_way_listener_on_a_hashnat_peer_address_is_refused_at_its_bind() {
    let text = HASHNAT_ONEWAY.replace("bind = \"192.0.2.1:80\"", "bind = \"10.0.0.2:80\"");
    let d = match parse(&text, Path::new("/etc/cswitch/c.toml")) {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(Diagnostics(d)) => d,
    };
    assert_eq!(d.len(), 1, "{}", Diagnostics(d.clone()));
    assert_eq!((d[0].line, d[0].col, d[0].key.as_str()), (10, 8, "listener[0].bind"));
    assert!(d[0].message.contains("HashNAT server `cs2`'s peer address 10.0.0.2"), "{}", d[0].message);
    assert!(d[0].hint.as_deref().unwrap_or("").contains("public address"), "{:?}", d[0].hint);
}
