//! `[cluster]` through running binaries: three `cswitch run` processes gossiping on
//! 127.0.0.x addresses find each other; a capacity an agent reports to node A changes the
//! weights node B uses within 1 s, and drops to 0 on B once the agent has been silent for
//! `silent_after`; a killed node is seen dead within 2 s; a node with another key, and raw
//! datagrams, are refused and counted and change nothing. Everything is read through
//! `cswitch ctl --json` (the admin API).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{cswitch, tempdir, Running};
use serde_json::Value;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

const TOKEN: &str = "cluster-test-admin-token";
const KEY: &str = "cluster-test-gossip-key-0123";
/// Servers nothing listens on: this test reads weights, it sends no requests.
const S1: &str = "127.0.0.1:9";
const S2: &str = "127.0.0.1:13";

/// A free UDP port on `ip` (bound, then released for the node to bind).
fn free_udp(ip: &str) -> SocketAddr {
    UdpSocket::bind((ip, 0)).unwrap().local_addr().unwrap()
}

/// One node: its process, admin address, gossip and agents addresses.
struct Node {
    run: Running,
    admin: SocketAddr,
    agents: SocketAddr,
}

fn config(name: &str, gossip: SocketAddr, seeds: &[SocketAddr], key: &str, agents: SocketAddr) -> String {
    let seeds: Vec<String> = seeds.iter().map(|s| format!("\"{s}\"")).collect();
    format!(
        "[global]\nworkers = 1\ngrace_period = \"1s\"\n[access_log]\nenabled = false\n\
         [admin]\nbind = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\
         [agents]\nbind = \"{agents}\"\nsilent_after = \"1s\"\n\
         [cluster]\nnode = \"{name}\"\nbind = \"{gossip}\"\nseeds = [{}]\nkey = \"{key}\"\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
         [[group]]\nname = \"web\"\nscheduler = \"wrr\"\nweights = \"agent\"\n\
         servers = [ {{ name = \"s1\", addr = \"{S1}\" }}, {{ name = \"s2\", addr = \"{S2}\" }} ]\n",
        seeds.join(", ")
    )
}

fn start(dir: &Path, name: &str, gossip: SocketAddr, seeds: &[SocketAddr], key: &str) -> Node {
    let agents = free_udp("127.0.0.1");
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, config(name, gossip, seeds, key, agents)).unwrap();
    let run = Running::start(&path);
    run.wait_for("joined cluster gossip");
    let line = run.wait_for("admin listener");
    let admin = line.split_whitespace().find_map(|w| w.strip_prefix("addr=")).unwrap().parse().unwrap();
    Node { run, admin, agents }
}

/// `cswitch ctl --json ARGS` against `node`.
fn ctl_json(node: &Node, args: &[&str]) -> Value {
    let out = cswitch()
        .args(["ctl", "--json", "--addr", &node.admin.to_string(), "--token", TOKEN])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "ctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Polls `node`'s `ctl --json ARGS` until `ok`; how long it took. Bounded by `limit`.
fn until(node: &Node, args: &[&str], limit: Duration, what: &str, ok: impl Fn(&Value) -> bool) -> Duration {
    let start = Instant::now();
    loop {
        let v = ctl_json(node, args);
        if ok(&v) {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}; last answer: {v:#}");
        std::thread::sleep(Duration::from_millis(25));
    }
}

fn node_live(cluster: &Value, name: &str) -> Option<bool> {
    cluster["nodes"].as_array()?.iter().find(|n| n["name"] == name).map(|n| n["live"] == true)
}

fn server<'a>(servers: &'a Value, name: &str) -> &'a Value {
    servers.as_array().unwrap().iter().find(|s| s["name"] == name).unwrap()
}

/// A capacity report as `cswitch agent` sends it (no token: `[agents]` is on loopback).
fn report(to: SocketAddr, server: &str, capacity: u32) {
    let line = format!("cswitch-agent/1 server={server} capacity={capacity} load=0.5 metric=loadavg\n");
    UdpSocket::bind("127.0.0.1:0").unwrap().send_to(line.as_bytes(), to).unwrap();
}

#[test]
fn three_nodes_share_membership_and_capacities_and_see_a_killed_node_die() {
    let dir = tempdir("cluster-three");
    let (ga, gb, gc) = (free_udp("127.0.0.41"), free_udp("127.0.0.42"), free_udp("127.0.0.43"));
    let a = start(&dir, "a", ga, &[], KEY);
    let b = start(&dir, "b", gb, &[ga], KEY);
    let mut c = start(&dir, "c", gc, &[ga, gb], KEY);
    until(&b, &["cluster"], Duration::from_secs(5), "three live nodes at b", |v| {
        ["a", "b", "c"].iter().all(|n| node_live(v, n) == Some(true))
    });
    let view = ctl_json(&b, &["cluster"]);
    let digests: Vec<&Value> =
        view["nodes"].as_array().unwrap().iter().map(|n| &n["config_digest"]).collect();
    assert!(
        digests.iter().all(|d| *d == &view["config_digest"]),
        "same routing config, same digest: {view:#}"
    );

    // Before any report, `weights = "agent"` gives both servers nothing at b.
    let before = ctl_json(&b, &["servers"]);
    assert_eq!(server(&before, "s1")["capacity"], Value::Null, "{before:#}");
    // The agent reports to a only, once per 200 ms (as `cswitch agent` does, faster).
    let start = Instant::now();
    let mut sent = 0;
    let took = loop {
        report(a.agents, S1, 90);
        report(a.agents, S2, 10);
        sent += 1;
        let v = ctl_json(&b, &["servers"]);
        let (s1, s2) = (server(&v, "s1"), server(&v, "s2"));
        if s1["capacity"] == 90
            && s2["capacity"] == 10
            && s1["effective_weight"].as_u64() > s2["effective_weight"].as_u64()
        {
            break start.elapsed();
        }
        assert!(start.elapsed() < Duration::from_secs(1), "b not weighing by a's report within 1 s: {v:#}");
        std::thread::sleep(Duration::from_millis(50));
    };
    eprintln!("a report to a changed b's weights after {took:?} ({sent} round(s) of reports)");
    let left = Duration::from_secs(1).saturating_sub(start.elapsed()).max(Duration::from_millis(100));
    until(&c, &["servers"], left, "c weighing by it too, within 1 s", |v| server(v, "s1")["capacity"] == 90);

    // The agent goes silent: after silent_after (1 s) b gives s1 nothing again.
    let silent = until(&b, &["servers"], Duration::from_secs(3), "s1 back to 0 at b", |v| {
        server(v, "s1")["effective_weight"] == 0
    });
    eprintln!("silent agent: s1 at weight 0 on b {silent:?} after the last check");

    // c is killed (SIGKILL, no goodbye): a and b see it dead within 2 s.
    c.run.child.kill().unwrap();
    let killed = Instant::now();
    c.run.child.wait().unwrap();
    until(&b, &["cluster"], Duration::from_secs(2), "c dead at b", |v| node_live(v, "c") == Some(false));
    let seen = killed.elapsed();
    eprintln!("killed node seen dead at b after {seen:?}");
    assert!(seen < Duration::from_secs(2));
    let left = Duration::from_secs(2).saturating_sub(killed.elapsed()).max(Duration::from_millis(100));
    until(&a, &["cluster"], left, "c dead at a too, within 2 s of the kill", |v| {
        node_live(v, "c") == Some(false) && node_live(v, "b") == Some(true)
    });
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_node_without_the_key_is_ignored_and_counted() {
    let dir = tempdir("cluster-intruder");
    let (ga, gx) = (free_udp("127.0.0.44"), free_udp("127.0.0.45"));
    let a = start(&dir, "a", ga, &[], KEY);
    let x = start(&dir, "intruder", gx, &[ga], "some-other-gossip-key-987");
    // Raw garbage too, as a scanner would send.
    UdpSocket::bind("127.0.0.1:0").unwrap().send_to(b"hello?", ga).unwrap();
    until(&a, &["cluster"], Duration::from_secs(3), "refusals counted at a", |v| {
        v["gossip"]["rejected"].as_u64() >= Some(3)
    });
    let view = ctl_json(&a, &["cluster"]);
    assert_eq!(node_live(&view, "intruder"), None, "never a member: {view:#}");
    assert_eq!(view["nodes"].as_array().unwrap().len(), 1);
    let intruder_view = ctl_json(&x, &["cluster"]);
    assert_eq!(node_live(&intruder_view, "a"), None, "a told the intruder nothing: {intruder_view:#}");
    // The table a person reads says the same.
    let out = cswitch()
        .args(["ctl", "--addr", &a.admin.to_string(), "--token", TOKEN, "cluster"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("a (self)") && text.contains("live") && text.contains("refused"), "{text}");
    assert!(text.contains("last refused: "), "{text}");
    drop((a, x));
    let _ = std::fs::remove_dir_all(dir);
}
