//! HashNAT mode (seed 004) through running binaries on 127.0.0.x: three hosts, each with an
//! origin, a `cswitch run` in front of it and a `cswitch agent` reporting the host's
//! capacity (g(x) = C·e^(−k·x) of a load read from a file) to its own switch. Every switch
//! lists the three hosts by their peer listeners and SIEVE places each URL over the
//! gossiped capacities; the host a URL belongs to serves it from its own origin
//! (`local_addr`), the others forward it to that host's peer listener. Asserts: a URL
//! reaches the same origin through every node, a host with a lower capacity gets fewer
//! URLs, and a node leaving (SIGTERM) and joining again under a client loop through the
//! other two costs no request.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cluster_bed;
mod common;

use cluster_bed::*;
use common::{cswitch, tempdir};
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One host's addresses.
#[derive(Clone)]
struct Host {
    name: String,
    origin: SocketAddr,
    peer: SocketAddr,
    gossip: SocketAddr,
    agents: SocketAddr,
    load: PathBuf,
}

/// A `cswitch agent` child, killed when dropped.
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn agent(host: &Host) -> Agent {
    let child = cswitch()
        .args(["agent", "--server", &host.peer.to_string(), "--switch", &host.agents.to_string()])
        .args(["--metric", &format!("file:{}", host.load.display()), "--interval", "200ms"])
        .args(["--capacity", "1000", "--max-load", "10"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Agent(child)
}

fn set_load(host: &Host, load: &str) {
    let tmp = host.load.with_extension("tmp");
    std::fs::write(&tmp, load).unwrap();
    std::fs::rename(tmp, &host.load).unwrap();
}

fn config(me: &Host, hosts: &[Host]) -> String {
    let seeds: Vec<String> =
        hosts.iter().filter(|h| h.name != me.name).map(|h| format!("\"{}\"", h.gossip)).collect();
    let servers: Vec<String> = hosts
        .iter()
        .map(|h| format!("{{ name = \"{}\", addr = \"{}\", local_addr = \"{}\" }}", h.name, h.peer, h.origin))
        .collect();
    format!(
        "[global]\nworkers = 1\ngrace_period = \"1s\"\n[access_log]\nenabled = false\n\
         [admin]\nbind = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\
         [agents]\nbind = \"{}\"\nsilent_after = \"1s\"\n\
         [cluster]\nnode = \"{}\"\nbind = \"{}\"\nseeds = [{}]\nkey = \"{KEY}\"\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
         [[listener]]\nname = \"peer\"\nbind = \"{}\"\ndefault_group = \"here\"\n\
         [[group]]\nname = \"web\"\nscheduler = \"sieve\"\nweights = \"agent\"\nservers = [ {} ]\n\
         [[group]]\nname = \"here\"\nscheduler = \"rr\"\nservers = [ {{ name = \"origin\", addr = \"{}\" }} ]\n",
        me.agents,
        me.name,
        me.gossip,
        seeds.join(", "),
        me.peer,
        servers.join(", "),
        me.origin
    )
}

fn start_host(dir: &Path, me: &Host, hosts: &[Host]) -> (Node, Agent) {
    let node = start_config(dir, &me.name, me.agents, &config(me, hosts));
    (node, agent(me))
}

/// Whether `node` weighs the hosts in `up` by their agents' capacities (SIEVE's weight is
/// the capacity) and the others at 0.
fn weighs(node: &Node, up: &[&str]) -> bool {
    let v = ctl_json(node, &["servers"]);
    ["cs1", "cs2", "cs3"].iter().all(|name| {
        let s = server(&v, name);
        let weight = s["effective_weight"].as_u64().unwrap_or(0);
        match up.contains(name) {
            true => weight > 0 && s["capacity"].as_u64() == Some(weight),
            false => weight == 0,
        }
    })
}

fn get(rt: &tokio::runtime::Runtime, node: SocketAddr, url: &str) -> Result<String, String> {
    rt.block_on(async {
        let mut c = testkit::RawClient::connect(node).await.map_err(|e| e.to_string())?;
        let req = format!("GET {url} HTTP/1.1\r\nHost: shop\r\nConnection: close\r\n\r\n");
        c.send(req.as_bytes()).await.map_err(|e| e.to_string())?;
        let r = c.read_response().await.map_err(|e| e.to_string())?;
        match r.status {
            200 => Ok(r.header("X-Origin").unwrap_or_default().to_string()),
            other => Err(format!("status {other}")),
        }
    })
}

fn placement(rt: &tokio::runtime::Runtime, node: &Node) -> Vec<String> {
    (0..48).map(|i| get(rt, node.web, &format!("/obj/{i}")).unwrap()).collect()
}

#[test]
fn hashnat_nodes_place_alike_and_a_node_leaves_and_joins_without_a_failed_request() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let origins: Vec<testkit::Origin> =
        rt.block_on(async { futures_join(["o1", "o2", "o3", "o4"].map(testkit::Origin::start)).await });
    let dir = tempdir("cluster-hashnat");
    let hosts: Vec<Host> = (0..3)
        .map(|i| {
            let ip = format!("127.0.0.{}", 95 + i);
            let peer = TcpListener::bind((ip.as_str(), 0)).unwrap().local_addr().unwrap();
            Host {
                name: format!("cs{}", i + 1),
                origin: origins[i].addr(),
                peer,
                gossip: free_udp(&ip),
                agents: free_udp("127.0.0.1"),
                load: dir.join(format!("load{}", i + 1)),
            }
        })
        .collect();
    for h in &hosts {
        set_load(h, "1");
    }
    let (n1, _a1) = start_host(&dir, &hosts[0], &hosts);
    let (n2, a2) = start_host(&dir, &hosts[1], &hosts);
    let (n3, _a3) = start_host(&dir, &hosts[2], &hosts);
    let all = ["cs1", "cs2", "cs3"];
    for node in [&n1, &n2, &n3] {
        until(node, &["cluster"], Duration::from_secs(5), "three live nodes", |v| {
            all.iter().all(|n| node_live(v, n) == Some(true))
        });
        let start = Instant::now();
        while !weighs(node, &all) {
            assert!(start.elapsed() < Duration::from_secs(3), "agents' capacities not everywhere");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    // The same URL reaches the same origin through every node, served by its host.
    let at1 = placement(&rt, &n1);
    // Through cs1, its own URLs come straight from o1 (one address in X-Forwarded-For: the
    // client's), the others through the owner's peer listener (two: the client's, cs1's).
    for (i, owner) in at1.iter().enumerate() {
        let origin = origins.iter().find(|o| o.name() == owner).unwrap();
        let url = format!("/obj/{i}");
        let seen = origin.requests().into_iter().rev().find(|r| r.target == url).unwrap();
        let hops = seen.header("X-Forwarded-For").map_or(0, |v| v.split(',').count());
        let expected = if owner == "o1" { 1 } else { 2 };
        assert_eq!(
            hops,
            expected,
            "{url} served by {owner} through cs1: {:?}",
            seen.header("X-Forwarded-For")
        );
    }
    assert_eq!(placement(&rt, &n2), at1, "cs2 places URLs as cs1 does");
    assert_eq!(placement(&rt, &n3), at1, "cs3 places URLs as cs1 does");
    let share = |placed: &[String]| -> BTreeMap<String, usize> {
        placed.iter().fold(BTreeMap::new(), |mut m, o| {
            *m.entry(o.clone()).or_default() += 1;
            m
        })
    };
    let even = share(&at1);
    eprintln!("equal loads: {even:?}");
    assert_eq!(even.len(), 3, "every host serves some URLs: {even:?}");

    // A loaded host (x = 6: capacity 1000·e^(−6·ln 1000/10) ≈ 16) gets fewer URLs.
    set_load(&hosts[2], "6");
    let weights = |node: &Node| -> Vec<u64> {
        let v = ctl_json(node, &["servers"]);
        all.iter().map(|n| server(&v, n)["effective_weight"].as_u64().unwrap_or(0)).collect()
    };
    let start = Instant::now();
    while !(weights(&n1)[2] < weights(&n1)[0] && weights(&n1) == weights(&n2)) {
        assert!(start.elapsed() < Duration::from_secs(3), "cs3's lower capacity not weighed alike");
        std::thread::sleep(Duration::from_millis(50));
    }
    let skewed = share(&placement(&rt, &n1));
    eprintln!("cs3 loaded: {skewed:?}");
    assert!(skewed.get("o3").copied().unwrap_or(0) < even["o3"], "{skewed:?} vs {even:?}");
    assert_eq!(placement(&rt, &n2), placement(&rt, &n1), "still alike");
    set_load(&hosts[2], "1");

    // A client loop through cs1 and cs3 (the L4 tier's live nodes) while cs2 leaves and
    // comes back.
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let loops: Vec<_> = (0..4)
        .map(|w| {
            let (stop, failures, sent) = (Arc::clone(&stop), Arc::clone(&failures), Arc::clone(&sent));
            let targets = [n1.web, n3.web];
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                let deadline = Instant::now() + Duration::from_secs(30);
                let mut i = w;
                while !stop.load(Ordering::Relaxed) && Instant::now() < deadline && i < 20_000 {
                    let url = format!("/obj/{}", i % 48);
                    if let Err(e) = get(&rt, targets[i % 2], &url) {
                        failures.lock().unwrap().push(format!("{url}: {e}"));
                    }
                    sent.fetch_add(1, Ordering::Relaxed);
                    i += 4;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    n2.run.signal("-TERM");
    let mut n2 = n2;
    let exited = n2.run.child.wait().unwrap();
    assert!(exited.success(), "cs2 stopped cleanly: {exited:?}");
    drop(a2);
    let gone = Instant::now();
    for node in [&n1, &n3] {
        while !weighs(node, &["cs1", "cs3"]) {
            assert!(gone.elapsed() < Duration::from_secs(3), "cs2 not out within 3 s");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    eprintln!("cs2 weighed 0 by cs1 and cs3 {:?} after it stopped", gone.elapsed());
    std::thread::sleep(Duration::from_millis(500));
    let o2_before = origins[1].requests().len();
    let (n2, _a2) = start_host(&dir, &hosts[1], &hosts);
    let back = Instant::now();
    for node in [&n1, &n3] {
        while !weighs(node, &all) {
            assert!(back.elapsed() < Duration::from_secs(5), "cs2 not back within 5 s");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    eprintln!("cs2 weighed again {:?} after it started", back.elapsed());
    std::thread::sleep(Duration::from_millis(800));
    stop.store(true, Ordering::Relaxed);
    for l in loops {
        l.join().unwrap();
    }
    let failures = failures.lock().unwrap();
    let total = sent.load(Ordering::Relaxed);
    let o2_after = origins[1].requests().len() - o2_before;
    eprintln!("{total} requests through cs1 and cs3 while cs2 left and joined: {} failed; o2 served {o2_after} after cs2 came back", failures.len());
    assert!(failures.is_empty(), "failed requests: {:?}", &failures[..failures.len().min(10)]);
    assert!(total > 200, "the loop ran: {total}");
    assert!(o2_after > 0, "cs2's host serves again after it joined");
    // The restarted cs2 heard the capacities in another order than cs1 and cs3, which saw
    // it leave and come back: all three still place every URL alike, as before it left.
    for node in [&n1, &n2, &n3] {
        let start = Instant::now();
        while !weighs(node, &all) {
            assert!(start.elapsed() < Duration::from_secs(3), "capacities not settled");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let after = placement(&rt, &n1);
    assert_eq!(after, at1, "cs1 places as before cs2 left");
    assert_eq!(placement(&rt, &n2), after, "the rejoined cs2 places URLs as cs1 does");
    assert_eq!(placement(&rt, &n3), after, "cs3 places URLs as cs1 does");
    drop(n2);
    let _ = std::fs::remove_dir_all(dir);
}
