//! The kernel L4 tier in front of three cswitch nodes (issue 13, part 5), in the namespace
//! testbed (`l4_bed`): real `cswitch run` processes, the tier programmed by the `lb` node
//! from the gossiped membership, clients connecting to the VIP. Asserted on what the
//! clients get and what `lb`'s kernel does (its conntrack table and nftables ruleset):
//! the same URL reaches the same server through every node; a killed node leaves the tier
//! within 2 s and costs only the requests it had; a drained node gets no new flow while its
//! open connection goes on; a node joining under load fails no request.
//! Session persistence across nodes, partitions, agents and keys: `cluster_l4_state.rs`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
mod l4_bed;
mod oneway_bed;

use l4_bed::client::{self, Fetched};
use l4_bed::{as_client, Bed, WEB};
use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 10);

/// Each of 24 URLs, asked three times in a row on new connections, reaches the same
/// server each time, whichever node the tier gave the connection (it hands them out in
/// turn, so each URL goes through every node).
#[test]
fn the_same_url_reaches_the_same_server_through_every_node() {
    let _one = l4_bed::one_at_a_time();
    let Some(bed) = Bed::start("url", 3) else { return };
    as_client(bed, |bed| {
        let mut asked: Vec<(String, Fetched)> = Vec::new();
        for i in 0..24 {
            let path = format!("/item/{i}.html");
            for _ in 0..3 {
                let got = client::get(CLIENT, WEB, &path, None).unwrap();
                assert_eq!(got.status, 200, "{path}: {got:?}");
                asked.push((path.clone(), got));
            }
        }
        let flows = bed.flows();
        let mut by_url: BTreeMap<&str, (BTreeSet<&str>, BTreeSet<&str>)> = BTreeMap::new();
        for (path, got) in &asked {
            let node = flows.get(&got.local).map(String::as_str).unwrap_or("?");
            let entry = by_url.entry(path).or_default();
            entry.0.insert(&got.origin);
            entry.1.insert(node);
        }
        for (path, (servers, nodes)) in &by_url {
            assert_eq!(servers.len(), 1, "{path} reached {servers:?} through {nodes:?}");
            assert!(nodes.len() >= 2 && !nodes.contains("?"), "{path} went through {nodes:?} only");
        }
        let servers: BTreeSet<&str> = by_url.values().flat_map(|(s, _)| s.iter().copied()).collect();
        assert!(servers.len() >= 3, "the URLs spread over the servers: {servers:?}");
        let nodes: BTreeSet<&str> = by_url.values().flat_map(|(_, n)| n.iter().copied()).collect();
        assert_eq!(nodes.len(), 3, "every node took connections: {nodes:?}");
        eprintln!("{} URLs, each through {nodes:?}, on servers {servers:?}", by_url.len());
        // The tier's node has no routing config of its own: no drift either way.
        for host in ["lb", "n1"] {
            let view = bed.ctl(host, &["cluster"]);
            let rows = view["nodes"].as_array().unwrap();
            assert!(rows.iter().all(|n| n["drift"] == false), "{host} sees drift: {view:#}");
            assert!(rows.iter().any(|n| n["name"] == "lb" && n["runs_l4"] == true && n["serving"].is_null()));
        }
        // And the table a person reads on the tier's node.
        let bin = env!("CARGO_BIN_EXE_cswitch");
        let out =
            bed.net.run("lb", &[bin, "ctl", "--addr", "127.0.0.1:9900", "--token", l4_bed::TOKEN, "cluster"]);
        let text = String::from_utf8_lossy(&out.stdout);
        eprintln!("{text}");
        assert!(
            text.contains(
                "L4 tier (nft table ip cswitch_l4): 10.201.0.100 port(s) 80,81,82,443 → n1, n2, n3"
            ),
            "{text}"
        );
    });
}

/// One bounded client loop's requests: when each started and ended, from which client
/// port, and whether it got a 200.
#[derive(Clone, Debug)]
struct Done {
    started: Duration,
    ended: Duration,
    local: std::net::SocketAddrV4,
    ok: bool,
    error: String,
}

/// Two client threads asking `/load/N` on new connections until `stop` (at most 30 s and
/// 20,000 requests each), every result recorded against `t0`.
fn load(t0: Instant, stop: Arc<AtomicBool>) -> (Vec<std::thread::JoinHandle<()>>, Arc<Mutex<Vec<Done>>>) {
    let done = Arc::new(Mutex::new(Vec::new()));
    let threads = (0..2)
        .map(|w| {
            let (stop, done) = (Arc::clone(&stop), Arc::clone(&done));
            std::thread::spawn(move || {
                for i in 0..20_000 {
                    if stop.load(Ordering::Relaxed) || t0.elapsed() > Duration::from_secs(30) {
                        return;
                    }
                    let started = t0.elapsed();
                    let (local, result) = client::try_get(CLIENT, WEB, &format!("/load/{w}-{i}"), None);
                    let ended = t0.elapsed();
                    let (ok, error) = match result {
                        Ok(f) => (f.status == 200, format!("status {}", f.status)),
                        Err(e) => (false, e.to_string()),
                    };
                    done.lock().unwrap().push(Done { started, ended, local, ok, error });
                    std::thread::sleep(Duration::from_millis(5));
                }
            })
        })
        .collect();
    (threads, done)
}

/// n2 is killed (SIGKILL) under a client loop: the tier stops sending it flows within 2 s
/// of the kill — within half a second, since the tier's host finds n2's port refusing
/// before the failure detector calls n2 dead; the only failed requests are ones the tier
/// had sent to n2, none started after n2 left the tier, and n1 and n3 answer everything.
#[test]
fn a_killed_node_leaves_the_tier_within_2s_and_costs_only_its_requests() {
    let _one = l4_bed::one_at_a_time();
    let Some(bed) = Bed::start("kill", 3) else { return };
    as_client(bed, |bed| {
        let t0 = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let (threads, done) = load(t0, Arc::clone(&stop));
        std::thread::sleep(Duration::from_millis(1500));
        let killed_at = t0.elapsed();
        bed.kill(1);
        let left = bed.until_targets(&["n1", "n3"], Duration::from_secs(2));
        let removed_at = killed_at + left;
        eprintln!("n2 killed at {killed_at:?}; out of the tier's ruleset {left:?} later");
        assert!(left < Duration::from_millis(500), "the probe took n2 out only after {left:?}");
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, Ordering::Relaxed);
        threads.into_iter().for_each(|t| t.join().unwrap());
        let flows = bed.flows();
        let done = done.lock().unwrap().clone();
        let failed: Vec<&Done> = done.iter().filter(|d| !d.ok).collect();
        let after = done.iter().filter(|d| d.started > removed_at).count();
        eprintln!(
            "{} requests, {} failed (all in [{killed_at:?}, {removed_at:?}]), {after} started after n2 left",
            done.len(),
            failed.len()
        );
        assert!(after > 20, "the loop ran on after the removal: {after}");
        for d in &failed {
            assert!(d.ended >= killed_at, "a request failed before the kill: {d:?}");
            assert!(d.started <= removed_at, "a request started after n2 left the tier failed: {d:?}");
            // A refused connection has its client port too, and the probe its node.
            let node = flows.get(&d.local).map_or("?", String::as_str);
            assert_eq!(node, "n2", "a request the tier sent to {node} failed ({}): {d:?}", d.error);
        }
        let to_n2_after = done
            .iter()
            .filter(|d| d.started > removed_at && flows.get(&d.local).is_some_and(|n| n == "n2"))
            .count();
        assert_eq!(to_n2_after, 0, "flows went to n2 after it left the tier");
    });
}

/// n2 stopped cleanly (SIGTERM) under a client loop first drains itself out of the tier,
/// then finishes its requests: not one request fails.
#[test]
fn a_node_stopped_cleanly_under_load_fails_no_request() {
    let _one = l4_bed::one_at_a_time();
    let Some(bed) = Bed::start("stop", 3) else { return };
    as_client(bed, |bed| {
        let t0 = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let (threads, done) = load(t0, Arc::clone(&stop));
        std::thread::sleep(Duration::from_millis(1000));
        let mut n2 = bed.nodes[1].take().unwrap();
        let term = std::process::Command::new("kill").args(["-TERM", &n2.child.id().to_string()]).status();
        assert!(term.unwrap().success());
        let signalled = Instant::now();
        let status = n2.child.wait().unwrap();
        eprintln!("n2 stopped {:?} after SIGTERM ({status})", signalled.elapsed());
        assert!(status.success(), "a clean stop: {status}");
        assert_eq!(bed.targets(), ["n1", "n3"], "n2 left the tier before it stopped");
        std::thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::Relaxed);
        threads.into_iter().for_each(|t| t.join().unwrap());
        let flows = bed.flows();
        let done = done.lock().unwrap().clone();
        let failed: Vec<&Done> = done.iter().filter(|d| !d.ok).collect();
        let to_n2 = done.iter().filter(|d| flows.get(&d.local).is_some_and(|n| n == "n2")).count();
        eprintln!("{} requests, {to_n2} through n2, {} failed", done.len(), failed.len());
        assert!(to_n2 > 10, "n2 took flows before it stopped: {to_n2}");
        assert!(failed.is_empty(), "requests failed while n2 stopped: {failed:#?}");
    });
}

/// A drained node (`cswitch ctl cluster drain`) gets no new flow, while a keep-alive
/// connection the tier gave it before goes on being answered there; `ready` brings it back.
#[test]
fn a_drained_node_gets_no_new_flow_while_its_connection_goes_on() {
    let _one = l4_bed::one_at_a_time();
    let Some(bed) = Bed::start("drain", 3) else { return };
    as_client(bed, |bed| {
        let mut open = client::connect(CLIENT, WEB).unwrap();
        let first = client::ask(&mut open, "/kept/1").unwrap();
        assert_eq!(first.status, 200);
        let std::net::SocketAddr::V4(local) = open.local_addr().unwrap() else { panic!() };
        let drained = bed.flows().get(&local).cloned().unwrap();
        let answer = bed.ctl(&drained, &["cluster", "drain"]);
        assert_eq!(answer["serving"], "draining", "{answer}");
        let others: Vec<&str> = l4_bed::NODES.iter().map(|(n, _)| *n).filter(|n| *n != drained).collect();
        let took = bed.until_targets(&others, Duration::from_secs(2));
        eprintln!("{drained} drained: out of the tier's ruleset after {took:?}");
        let view = bed.ctl("lb", &["cluster"]);
        let row = view["nodes"].as_array().unwrap().iter().find(|n| n["name"] == drained.as_str()).unwrap();
        assert_eq!(row["serving"], "draining", "lb sees it draining: {row}");
        let mut to: Vec<String> = Vec::new();
        for i in 0..12 {
            let got = client::get(CLIENT, WEB, &format!("/new/{i}"), None).unwrap();
            assert_eq!(got.status, 200);
            to.push(bed.flows().get(&got.local).cloned().unwrap_or_default());
            // The open connection is still answered, through the drained node.
            assert_eq!(client::ask(&mut open, &format!("/kept/{}", i + 2)).unwrap().status, 200);
        }
        assert!(!to.contains(&drained), "a new flow went to the drained {drained}: {to:?}");
        assert_eq!(bed.flows().get(&local), Some(&drained), "the open connection stayed on {drained}");
        bed.ctl(&drained, &["cluster", "ready"]);
        bed.until_targets(&["n1", "n2", "n3"], Duration::from_secs(2));
    });
}

/// A node that falls silent without a word (all its traffic dropped, as a crashed host's
/// would be) leaves the tier within 2 s; a client connection it had, idle meanwhile, gets
/// a reset from the tier once the node has been dead 5 s, instead of retransmitting into
/// the void until its own timeout.
#[test]
fn a_silent_nodes_open_connection_is_reset_by_the_tier() {
    let _one = l4_bed::one_at_a_time();
    let Some(bed) = Bed::start("silent", 3) else { return };
    as_client(bed, |bed| {
        let mut open = client::connect(CLIENT, WEB).unwrap();
        assert_eq!(client::ask(&mut open, "/before").unwrap().status, 200);
        let std::net::SocketAddr::V4(local) = open.local_addr().unwrap() else { panic!() };
        let silent = bed.flows().get(&local).cloned().unwrap();
        l4_bed::nft(
            &bed.net,
            &silent,
            "table netdev mute {
               chain in { type filter hook ingress device eth0 priority 0; policy drop; }
             }
             table inet mute {
               chain out { type filter hook output priority 0; oif eth0 drop; }
             }
",
        );
        let muted = Instant::now();
        let others: Vec<&str> = l4_bed::NODES.iter().map(|(n, _)| *n).filter(|n| *n != silent).collect();
        let left = bed.until_targets(&others, Duration::from_secs(2));
        eprintln!("{silent} silent: out of the tier after {left:?}");
        bed.until("lb", &["cluster"], Duration::from_secs(8), "its address in `gone`", |v| {
            v["l4"]["gone"]
                .as_array()
                .is_some_and(|g| g.iter().any(|ip| ip == l4_bed::node_ip(&silent).to_string().as_str()))
        });
        let reset_after = muted.elapsed();
        let asked = Instant::now();
        let err = client::ask(&mut open, "/after").unwrap_err();
        eprintln!(
            "reset by the tier {reset_after:?} after the silence, answered in {:?}: {err}",
            asked.elapsed()
        );
        assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}");
        assert!(asked.elapsed() < Duration::from_secs(1), "the reset came at once: {:?}", asked.elapsed());
        assert!(reset_after >= Duration::from_secs(5), "not before 5 s of death: {reset_after:?}");
    });
}

/// n3 starts while two clients loop through the VIP: it enters the tier once it says it
/// is ready (its listeners bound), takes flows, and not one request fails.
#[test]
fn a_node_joining_under_load_fails_no_request() {
    let _one = l4_bed::one_at_a_time();
    let Some(bed) = Bed::start("join", 2) else { return };
    as_client(bed, |bed| {
        let t0 = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let (threads, done) = load(t0, Arc::clone(&stop));
        std::thread::sleep(Duration::from_millis(1000));
        let started_at = t0.elapsed();
        bed.start_node(2);
        let took = bed.until_targets(&["n1", "n2", "n3"], Duration::from_secs(5));
        eprintln!("n3 started at {started_at:?}; in the tier {took:?} after it listened");
        std::thread::sleep(Duration::from_millis(1500));
        stop.store(true, Ordering::Relaxed);
        threads.into_iter().for_each(|t| t.join().unwrap());
        let flows = bed.flows();
        let done = done.lock().unwrap().clone();
        let failed: Vec<&Done> = done.iter().filter(|d| !d.ok).collect();
        let to_n3 = done.iter().filter(|d| flows.get(&d.local).is_some_and(|n| n == "n3")).count();
        eprintln!("{} requests, {} through n3, {} failed", done.len(), to_n3, failed.len());
        assert!(failed.is_empty(), "requests failed while n3 joined: {failed:#?}");
        assert!(to_n3 > 10, "n3 took flows: {to_n3}");
    });
}
