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

/// One node: its process, admin address, agents address and web listener.
struct Node {
    run: Running,
    admin: SocketAddr,
    agents: SocketAddr,
    web: SocketAddr,
}

/// The group the first tests use: weighted round robin by the agents' capacities.
fn wrr_group() -> String {
    format!(
        "[[group]]\nname = \"web\"\nscheduler = \"wrr\"\nweights = \"agent\"\n\
         servers = [ {{ name = \"s1\", addr = \"{S1}\" }}, {{ name = \"s2\", addr = \"{S2}\" }} ]\n"
    )
}

fn config(
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

fn start(dir: &Path, name: &str, gossip: SocketAddr, seeds: &[SocketAddr], key: &str) -> Node {
    start_with(dir, name, gossip, seeds, key, &wrr_group())
}

fn start_with(
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

fn start_config(dir: &Path, name: &str, agents: SocketAddr, text: &str) -> Node {
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
fn addr_in(line: &str) -> SocketAddr {
    let field = line.split_whitespace().find_map(|w| w.strip_prefix("addr=")).unwrap();
    field.parse().unwrap_or_else(|_| panic!("{line}"))
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

    // Before any report, b has no capacity for either server.
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
    // And so do the metrics.
    let metrics = admin_get(&a, "/metrics");
    let refused = metrics.lines().find(|l| l.starts_with("cswitch_cluster_gossip_refused_total ")).unwrap();
    assert!(refused.split(' ').nth(1).unwrap().parse::<u64>().unwrap() >= 3, "{refused}");
    assert!(metrics.contains("cswitch_cluster_node_live{node=\"a\"} 1"), "{metrics}");
    drop((a, x));
    let _ = std::fs::remove_dir_all(dir);
}

/// The same URL reaches the same server through every node, for the same membership and
/// the capacities the cluster shares: a `carp` group weighted by agents that report to node
/// a only, and node c listing the servers in another order (placement goes by name).
#[test]
fn every_node_sends_a_url_to_the_same_server() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let origins: Vec<testkit::Origin> =
        rt.block_on(async { futures_join(["o1", "o2", "o3", "o4"].map(testkit::Origin::start)).await });
    let entry = |o: &testkit::Origin| format!("{{ name = \"{}\", addr = \"{}\" }}", o.name(), o.addr());
    let group = |order: &[usize]| {
        let servers: Vec<String> = order.iter().map(|&i| entry(&origins[i])).collect();
        format!(
            "[[group]]\nname = \"web\"\nscheduler = \"carp\"\nhash_key = \"url\"\nweights = \"agent\"\n\
             servers = [ {} ]\n",
            servers.join(", ")
        )
    };
    let dir = tempdir("cluster-placement");
    let (ga, gb, gc) = (free_udp("127.0.0.46"), free_udp("127.0.0.47"), free_udp("127.0.0.48"));
    let a = start_with(&dir, "a", ga, &[], KEY, &group(&[0, 1, 2, 3]));
    let b = start_with(&dir, "b", gb, &[ga], KEY, &group(&[0, 1, 2, 3]));
    let c = start_with(&dir, "c", gc, &[ga], KEY, &group(&[3, 1, 0, 2]));
    let nodes = [&a, &b, &c];
    let capacities = [("o1", 100), ("o2", 50), ("o3", 25), ("o4", 10)];
    // The agents report to a only, every 200 ms (bounded: 20 s at most) until the test ends,
    // so no capacity goes stale (silent_after = 1 s) while the nodes are compared.
    let reporting = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let reporter = {
        let targets: Vec<(String, u32)> =
            origins.iter().zip(capacities).map(|(o, (_, c))| (o.addr().to_string(), c)).collect();
        let (reporting, to) = (std::sync::Arc::clone(&reporting), a.agents);
        std::thread::spawn(move || {
            for _ in 0..100 {
                if !reporting.load(std::sync::atomic::Ordering::Relaxed) {
                    return;
                }
                targets.iter().for_each(|(server, capacity)| report(to, server, *capacity));
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    // Every node must weigh by them, with the same effective weights, before the comparison.
    let weights = |n: &Node| -> Vec<Value> {
        let v = ctl_json(n, &["servers"]);
        capacities.iter().map(|(name, _)| server(&v, name)["effective_weight"].clone()).collect()
    };
    let start = Instant::now();
    loop {
        let all: Vec<Vec<Value>> = nodes.iter().map(|n| weights(n)).collect();
        // Alike, and by the reports (o1 > o2 > o3 > o4): until a server's first report, a
        // node gives it its configured weight, alike everywhere but not what we compare.
        let ordered =
            all[0].windows(2).all(|w| w[0].as_u64() > w[1].as_u64()) && all[0][3].as_u64() > Some(0);
        let agreed = all.iter().all(|w| w == &all[0]) && ordered;
        if agreed {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(3), "weights not alike within 3 s: {all:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut served: Vec<Vec<String>> = Vec::new();
    for node in nodes {
        let answers = rt.block_on(async {
            let mut answers = Vec::new();
            for i in 0..40 {
                let response = testkit::get(node.web, &format!("/item/{i}.html")).await.unwrap();
                assert_eq!(response.status, 200);
                answers.push(response.header("X-Origin").unwrap_or("?").to_string());
            }
            answers
        });
        served.push(answers);
    }
    assert_eq!(served[0], served[1], "a and b place URLs alike");
    assert_eq!(served[0], served[2], "a and c (servers listed in another order) place URLs alike");
    let used: std::collections::BTreeSet<&String> = served[0].iter().collect();
    assert!(used.len() >= 3, "the URLs spread over the servers: {used:?}");
    reporting.store(false, std::sync::atomic::Ordering::Relaxed);
    reporter.join().unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

/// Starts the four origins one after the other on the current runtime.
async fn futures_join<F: std::future::Future<Output = testkit::Origin>>(
    starts: [F; 4],
) -> Vec<testkit::Origin> {
    let mut origins = Vec::with_capacity(4);
    for start in starts {
        origins.push(start.await);
    }
    origins
}

/// A `STICKY_IP` client keeps its server whichever node it reaches: four clients (127.0.0.x
/// source addresses) pinned through node a are served by the same servers through node b,
/// which asks them in the opposite order (so b's own round robin could not agree by chance).
#[test]
fn a_sticky_ip_client_keeps_its_server_on_another_node() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let origins: Vec<testkit::Origin> =
        rt.block_on(async { futures_join(["o1", "o2", "o3", "o4"].map(testkit::Origin::start)).await });
    let dir = tempdir("cluster-sticky");
    std::fs::write(
        dir.join("sticky.rules"),
        "Pin: if (inNet(srcip, \"127.0.0.0/8\")) { routeTo(web, STICKY_IP); }\n",
    )
    .unwrap();
    let servers: Vec<String> =
        origins.iter().map(|o| format!("{{ name = \"{}\", addr = \"{}\" }}", o.name(), o.addr())).collect();
    let group = format!(
        "rules = \"sticky.rules\"\n[[group]]\nname = \"web\"\nscheduler = \"rr\"\nservers = [ {} ]\n",
        servers.join(", ")
    );
    let (ga, gb) = (free_udp("127.0.0.49"), free_udp("127.0.0.50"));
    let a = start_with(&dir, "a", ga, &[], KEY, &group);
    let b = start_with(&dir, "b", gb, &[ga], KEY, &group);
    until(&b, &["cluster"], Duration::from_secs(5), "a live at b", |v| node_live(v, "a") == Some(true));
    let clients = ["127.0.0.61", "127.0.0.62", "127.0.0.63", "127.0.0.64"];
    let ask = |node: &Node, client: &str| -> String {
        rt.block_on(async {
            let local: SocketAddr = format!("{client}:0").parse().unwrap();
            let mut c = testkit::RawClient::connect_from(local, node.web).await.unwrap();
            c.send(b"GET /cart HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n").await.unwrap();
            let response = c.read_response().await.unwrap();
            assert_eq!(response.status, 200);
            response.header("X-Origin").unwrap().to_string()
        })
    };
    let pinned: Vec<String> = clients.iter().map(|c| ask(&a, c)).collect();
    let distinct: std::collections::BTreeSet<&String> = pinned.iter().collect();
    assert_eq!(distinct.len(), 4, "round robin at a pinned each client to its own server: {pinned:?}");
    let shared = until(&b, &["cluster"], Duration::from_secs(1), "a's four entries at b", |v| {
        v["nodes"].as_array().unwrap().iter().any(|n| n["name"] == "a" && n["sticky_ip"] == 4)
    });
    eprintln!("a's sticky entries visible at b after {shared:?}");
    for (client, server) in clients.iter().zip(&pinned).rev() {
        for _ in 0..3 {
            assert_eq!(&ask(&b, client), server, "client {client} moved to b");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// `GET path` from `node`'s admin listener with the token; the response's body.
fn admin_get(node: &Node, path: &str) -> String {
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

/// The stats page shows the cluster: a headless Chromium loads node a's page, whose Cluster
/// table lists b, live, with the same digest. Skipped without `chromium` unless `CSWITCH_REQUIRE_CHROMIUM` is set.
#[test]
fn the_stats_page_lists_the_nodes() {
    let Some(chromium) = chromium() else { return };
    let dir = tempdir("cluster-page");
    let (ga, gb) = (free_udp("127.0.0.51"), free_udp("127.0.0.52"));
    // An admin listener without a token (loopback): headless Chromium cannot answer the
    // page's HTTP Basic challenge, and fetches refuse a URL with credentials in it.
    let open = |name: &str, gossip: SocketAddr, seeds: &[SocketAddr]| {
        let agents = free_udp("127.0.0.1");
        let text = config(name, gossip, seeds, KEY, agents, &wrr_group());
        start_config(&dir, name, agents, &text.replace(&format!("token = \"{TOKEN}\"\n"), ""))
    };
    let a = open("a", ga, &[]);
    let _b = open("b", gb, &[ga]);
    until(&a, &["cluster"], Duration::from_secs(5), "b live at a", |v| node_live(v, "b") == Some(true));
    let out = std::process::Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--virtual-time-budget=3000"])
        .arg(format!("--user-data-dir={}", dir.join("chromium-profile").display()))
        .arg("--dump-dom")
        .arg(format!("http://{}/", a.admin))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!dom.is_empty(), "chromium printed no DOM ({}): {log}", out.status);
    let row = |node: &str| {
        let at = dom
            .find(&format!("<tr data-node=\"{node}\">"))
            .unwrap_or_else(|| panic!("no row for {node}: {dom}"));
        dom[at..].split("</tr>").next().unwrap().to_string()
    };
    let (row_a, row_b) = (row("a"), row("b"));
    assert!(row_a.contains("a (this node)"), "{row_a}");
    assert!(row_b.contains("<span class=\"badge b-ok\">live</span>"), "{row_b}");
    let digest = ctl_json(&a, &["cluster"])["config_digest"].as_str().unwrap().to_string();
    assert!(row_b.contains(&format!("<span class=\"badge b-off\">{digest}</span>")), "same digest: {row_b}");
    assert!(dom.contains("id=\"cluster-gossip\">gossip: "), "the gossip counters are shown");
    let _ = std::fs::remove_dir_all(dir);
}

/// `chromium` on PATH; `None` (the test is skipped) when it is not there and
/// `CSWITCH_REQUIRE_CHROMIUM` is unset (CI sets it and installs chromium).
fn chromium() -> Option<std::path::PathBuf> {
    let paths = std::env::var_os("PATH").unwrap_or_default();
    let found = std::env::split_paths(&paths).map(|d| d.join("chromium")).find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CSWITCH_REQUIRE_CHROMIUM").is_none(),
            "CSWITCH_REQUIRE_CHROMIUM is set but `chromium` is not on PATH (Debian: apt-get install chromium)"
        );
        eprintln!("SKIPPED the_stats_page_lists_the_nodes: `chromium` is not on PATH");
    }
    found
}

/// A learned session cookie keeps its client on its server whichever node it reaches: four
/// clients log in through node a (the origin sets `sid`, a learns it) and come back
/// through node b, in the opposite order, carrying the cookie.
#[test]
fn a_learned_cookie_keeps_its_server_on_another_node() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let origins: Vec<testkit::Origin> =
        rt.block_on(async { futures_join(["o1", "o2", "o3", "o4"].map(testkit::Origin::start)).await });
    let dir = tempdir("cluster-learn");
    let servers: Vec<String> =
        origins.iter().map(|o| format!("{{ name = \"{}\", addr = \"{}\" }}", o.name(), o.addr())).collect();
    let group = format!(
        "[[group]]\nname = \"web\"\nscheduler = \"rr\"\n\
         persistence = {{ mode = \"learn\", cookie = \"sid\", timeout = \"5m\" }}\nservers = [ {} ]\n",
        servers.join(", ")
    );
    let (ga, gb) = (free_udp("127.0.0.53"), free_udp("127.0.0.54"));
    let a = start_with(&dir, "a", ga, &[], KEY, &group);
    let b = start_with(&dir, "b", gb, &[ga], KEY, &group);
    until(&b, &["cluster"], Duration::from_secs(5), "a live at b", |v| node_live(v, "a") == Some(true));
    let ask = |node: &Node, cookie: Option<&str>| -> (String, Option<String>) {
        rt.block_on(async {
            let mut c = testkit::RawClient::connect(node.web).await.unwrap();
            let cookie = cookie.map_or(String::new(), |v| format!("Cookie: sid={v}\r\n"));
            let path = if cookie.is_empty() { "/login/sid" } else { "/cart" };
            let req = format!("GET {path} HTTP/1.1\r\nHost: shop\r\n{cookie}Connection: close\r\n\r\n");
            c.send(req.as_bytes()).await.unwrap();
            let response = c.read_response().await.unwrap();
            assert_eq!(response.status, 200);
            let set = response
                .header("Set-Cookie")
                .and_then(|v| v.strip_prefix("sid="))
                .map(|v| v.split(';').next().unwrap().to_string());
            (response.header("X-Origin").unwrap().to_string(), set)
        })
    };
    let sessions: Vec<(String, String)> = (0..4)
        .map(|_| {
            let (server, set) = ask(&a, None);
            (server, set.expect("the origin sets sid"))
        })
        .collect();
    let distinct: std::collections::BTreeSet<&String> = sessions.iter().map(|(s, _)| s).collect();
    assert_eq!(distinct.len(), 4, "round robin at a gave each login its own server: {sessions:?}");
    let shared = until(&b, &["cluster"], Duration::from_secs(1), "a's four cookies at b", |v| {
        v["nodes"].as_array().unwrap().iter().any(|n| n["name"] == "a" && n["learned_cookies"] == 4)
    });
    eprintln!("a's learned cookies visible at b after {shared:?}");
    for (server, sid) in sessions.iter().rev() {
        for _ in 0..3 {
            assert_eq!(&ask(&b, Some(sid)).0, server, "session {sid} moved to b");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// An inserted cookie needs nothing shared: it names the server (its `cookie` token), and
/// every node has the same config. Four sessions started through node a keep their servers
/// through node b.
#[test]
fn an_inserted_cookie_keeps_its_server_on_another_node() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let origins: Vec<testkit::Origin> =
        rt.block_on(async { futures_join(["o1", "o2", "o3", "o4"].map(testkit::Origin::start)).await });
    let dir = tempdir("cluster-insert");
    let servers: Vec<String> =
        origins.iter().map(|o| format!("{{ name = \"{}\", addr = \"{}\" }}", o.name(), o.addr())).collect();
    let group = format!(
        "[[group]]\nname = \"web\"\nscheduler = \"rr\"\n\
         persistence = {{ mode = \"insert\", cookie = \"SRV\" }}\nservers = [ {} ]\n",
        servers.join(", ")
    );
    let (ga, gb) = (free_udp("127.0.0.55"), free_udp("127.0.0.56"));
    let a = start_with(&dir, "a", ga, &[], KEY, &group);
    let b = start_with(&dir, "b", gb, &[ga], KEY, &group);
    let ask = |node: &Node, cookie: Option<&str>| -> (String, Option<String>) {
        rt.block_on(async {
            let mut c = testkit::RawClient::connect(node.web).await.unwrap();
            let cookie = cookie.map_or(String::new(), |v| format!("Cookie: {v}\r\n"));
            let req = format!("GET /cart HTTP/1.1\r\nHost: shop\r\n{cookie}Connection: close\r\n\r\n");
            c.send(req.as_bytes()).await.unwrap();
            let response = c.read_response().await.unwrap();
            assert_eq!(response.status, 200);
            let set = response.header("Set-Cookie").map(|v| v.split(';').next().unwrap().to_string());
            (response.header("X-Origin").unwrap().to_string(), set)
        })
    };
    let sessions: Vec<(String, String)> = (0..4)
        .map(|_| {
            let (server, set) = ask(&a, None);
            (server, set.expect("the switch inserts SRV"))
        })
        .collect();
    let distinct: std::collections::BTreeSet<&String> = sessions.iter().map(|(s, _)| s).collect();
    assert_eq!(distinct.len(), 4, "round robin at a gave each session its own server: {sessions:?}");
    for (server, cookie) in sessions.iter().rev() {
        assert_eq!(&ask(&b, Some(cookie)).0, server, "session {cookie} moved to b");
    }
    let _ = std::fs::remove_dir_all(dir);
}
