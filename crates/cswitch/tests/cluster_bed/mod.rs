//! The loopback bed the cluster tests share: nodes (`cswitch run` with `[cluster]`,
//! `[admin]` and `[agents]`) on 127.0.0.x gossip addresses, their admin API read through
//! `cswitch ctl --json`, agent reports, origins.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![allow(dead_code)] // each test file uses part of this

use crate::common::{cswitch, Running};
use serde_json::Value;
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::time::{Duration, Instant};

pub const TOKEN: &str = "cluster-test-admin-token";
pub const KEY: &str = "cluster-test-gossip-key-0123";
/// Servers nothing listens on: this test reads weights, it sends no requests.
pub const S1: &str = "127.0.0.1:9";
pub const S2: &str = "127.0.0.1:13";

/// A free UDP port on `ip` (bound, then released for the node to bind).
pub fn free_udp(ip: &str) -> SocketAddr {
    UdpSocket::bind((ip, 0)).unwrap().local_addr().unwrap()
}

/// One node: its process, admin address, agents address and web listener.
pub struct Node {
    pub run: Running,
    pub admin: SocketAddr,
    pub agents: SocketAddr,
    pub web: SocketAddr,
}

/// The group the first tests use: weighted round robin by the agents' capacities.
pub fn wrr_group() -> String {
    format!(
        "[[group]]\nname = \"web\"\nscheduler = \"wrr\"\nweights = \"agent\"\n\
         servers = [ {{ name = \"s1\", addr = \"{S1}\" }}, {{ name = \"s2\", addr = \"{S2}\" }} ]\n"
    )
}

pub fn config(
    name: &str,
    gossip: SocketAddr,
    seeds: &[SocketAddr],
    key: &str,
    agents: SocketAddr,
    group: &str,
) -> String {
    let seeds: Vec<String> = seeds.iter().map(|s| format!("\"{s}\"")).collect();
    format!(
        "[global]\nworkers = 1\ngrace_period = \"1s\"\n[access_log]\nenabled = false\n\
         [admin]\nbind = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\
         [agents]\nbind = \"{agents}\"\nsilent_after = \"1s\"\n\
         [cluster]\nnode = \"{name}\"\nbind = \"{gossip}\"\nseeds = [{}]\nkey = \"{key}\"\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n{group}",
        seeds.join(", ")
    )
}

pub fn start(dir: &Path, name: &str, gossip: SocketAddr, seeds: &[SocketAddr], key: &str) -> Node {
    start_with(dir, name, gossip, seeds, key, &wrr_group())
}

pub fn start_with(
    dir: &Path,
    name: &str,
    gossip: SocketAddr,
    seeds: &[SocketAddr],
    key: &str,
    group: &str,
) -> Node {
    let agents = free_udp("127.0.0.1");
    start_config(dir, name, agents, &config(name, gossip, seeds, key, agents, group))
}

pub fn start_config(dir: &Path, name: &str, agents: SocketAddr, text: &str) -> Node {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    let run = Running::start(&path);
    // In the order the switch logs them.
    run.wait_for("joined cluster gossip");
    let web = addr_in(&run.wait_for("listening"));
    let admin = addr_in(&run.wait_for("admin listener"));
    Node { run, admin, agents, web }
}

/// The `addr=IP:PORT` field of a log line.
pub fn addr_in(line: &str) -> SocketAddr {
    let field = line.split_whitespace().find_map(|w| w.strip_prefix("addr=")).unwrap();
    field.parse().unwrap_or_else(|_| panic!("{line}"))
}

/// `cswitch ctl --json ARGS` against `node`.
pub fn ctl_json(node: &Node, args: &[&str]) -> Value {
    let out = cswitch()
        .args(["ctl", "--json", "--addr", &node.admin.to_string(), "--token", TOKEN])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "ctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Polls `node`'s `ctl --json ARGS` until `ok`; how long it took. Bounded by `limit`.
pub fn until(
    node: &Node,
    args: &[&str],
    limit: Duration,
    what: &str,
    ok: impl Fn(&Value) -> bool,
) -> Duration {
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

pub fn node_live(cluster: &Value, name: &str) -> Option<bool> {
    cluster["nodes"].as_array()?.iter().find(|n| n["name"] == name).map(|n| n["live"] == true)
}

pub fn server<'a>(servers: &'a Value, name: &str) -> &'a Value {
    servers.as_array().unwrap().iter().find(|s| s["name"] == name).unwrap()
}

/// A capacity report as `cswitch agent` sends it (no token: `[agents]` is on loopback).
pub fn report(to: SocketAddr, server: &str, capacity: u32) {
    let line = format!("cswitch-agent/1 server={server} capacity={capacity} load=0.5 metric=loadavg\n");
    UdpSocket::bind("127.0.0.1:0").unwrap().send_to(line.as_bytes(), to).unwrap();
}

/// Starts the four origins one after the other on the current runtime.
pub async fn futures_join<F: std::future::Future<Output = testkit::Origin>>(
    starts: [F; 4],
) -> Vec<testkit::Origin> {
    let mut origins = Vec::with_capacity(4);
    for start in starts {
        origins.push(start.await);
    }
    origins
}

/// `GET path` from `node`'s admin listener with the token; the response's body.
pub fn admin_get(node: &Node, path: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(node.admin).unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: admin\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default()
}
