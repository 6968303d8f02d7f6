//! `[cluster]` through running binaries: three `cswitch run` processes gossiping on
//! 127.0.0.x addresses find each other; a capacity an agent reports to node A changes the
//! weights node B uses within 1 s, and drops to 0 on B once the agent has been silent for
//! `silent_after`; a killed node is seen dead within 2 s; a node with another key, and raw
//! datagrams, are refused and counted and change nothing; the same URL reaches the same
//! server through every node; the stats page lists the nodes. Read through `cswitch ctl
//! --json` (the admin API), `/metrics` and a headless browser. Persistence across nodes is
//! in `cluster_persistence.rs` and `cluster_tls.rs`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cluster_bed;
mod common;

use cluster_bed::*;
use common::{cswitch, tempdir};
use serde_json::Value;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

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
    assert!(
        row_b.contains("<span class=\"badge b-ok\">ready</span>"),
        "b takes flows from an L4 tier: {row_b}"
    );
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
