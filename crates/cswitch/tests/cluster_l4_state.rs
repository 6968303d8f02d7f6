//! What the cluster shares, through the kernel L4 tier, in the namespace testbed
//! (`l4_bed`): an inserted-cookie session, a `STICKY_IP` client and a resumed TLS session
//! keep their server when the tier gives their next connection to another node; a
//! partition between nodes (nftables drop of their gossip) and its heal converge the
//! tables; an agent's report to n1 changes the weights n3 uses within 1 s; gossip sealed
//! with another key changes nothing. The tier itself: `cluster_l4.rs`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
mod l4_bed;
mod oneway_bed;

use l4_bed::client;
use l4_bed::{as_client, Bed, COOKIE, STICKY};
use serde_json::Value;
use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 10);

/// How many `what` (`sticky_ip`, `tls_sessions`, …) node `host` holds from each other node.
fn shared_from(bed: &Bed, host: &str, what: &str) -> u64 {
    let view = bed.ctl(host, &["cluster"]);
    view["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["is_self"] != true)
        .filter_map(|n| n[what].as_u64())
        .sum()
}

/// Waits until each node holds, from the other nodes, the entries of kind `what`
/// (`sticky_ip`, `tls_sessions`) made there: `made_at` names the node of each; the time.
fn until_shared(bed: &Bed, made_at: &[&str], what: &str) -> Duration {
    let start = Instant::now();
    for (name, _) in l4_bed::NODES {
        let elsewhere = made_at.iter().filter(|node| **node != name).count() as u64;
        bed.until(name, &["cluster"], Duration::from_secs(2), &format!("{what} at {name}"), |_| {
            shared_from(bed, name, what) >= elsewhere
        });
    }
    start.elapsed()
}

/// Four sessions whose first answer set an inserted cookie come back, each three times on
/// new connections that the tier gives to other nodes, and keep their server.
#[test]
fn an_inserted_cookie_session_keeps_its_server_when_the_tier_moves_it() {
    let _one = l4_bed::one_at_a_time();
    let Some(bed) = Bed::start("cookie", 3) else { return };
    as_client(bed, |bed| {
        let sessions: Vec<(String, String, String)> = (0..4)
            .map(|i| {
                let got = client::get(CLIENT, COOKIE, &format!("/cart/{i}"), None).unwrap();
                let node = bed.flows().get(&got.local).cloned().unwrap();
                (got.origin, got.set_cookie.expect("the switch inserts SRV"), node)
            })
            .collect();
        // Each node hands out servers in turn on its own, and the tier gives the sessions
        // to the nodes in turn: the first three get the same server, the fourth another.
        let servers: BTreeSet<&String> = sessions.iter().map(|(s, _, _)| s).collect();
        assert!(servers.len() >= 2, "the sessions spread over the servers: {sessions:?}");
        for (server, cookie, first) in &sessions {
            let mut nodes = BTreeSet::from([first.clone()]);
            for _ in 0..3 {
                let got = client::get(CLIENT, COOKIE, "/cart", Some(cookie)).unwrap();
                assert_eq!(&got.origin, server, "session {cookie} changed servers");
                nodes.insert(bed.flows().get(&got.local).cloned().unwrap());
            }
            assert!(nodes.len() >= 2, "the tier moved session {cookie} to another node: {nodes:?}");
        }
    });
}

/// Four `STICKY_IP` clients (10.201.0.11–14) pinned through whichever node the tier gave
/// their first connection keep their server on the other nodes once the cluster shared
/// the pins.
#[test]
fn a_sticky_ip_client_keeps_its_server_when_the_tier_moves_it() {
    let _one = l4_bed::one_at_a_time();
    let Some(bed) = Bed::start("sticky", 3) else { return };
    as_client(bed, |bed| {
        let clients: Vec<Ipv4Addr> = (11..=14).map(|n| Ipv4Addr::new(10, 201, 0, n)).collect();
        let mut pins = Vec::new();
        for c in &clients {
            let got = client::get(*c, STICKY, "/pin", None).unwrap();
            pins.push((got.origin.clone(), bed.flows().get(&got.local).cloned().unwrap()));
        }
        let servers: BTreeSet<&String> = pins.iter().map(|(s, _)| s).collect();
        assert!(servers.len() >= 2, "the pins spread over the servers: {pins:?}");
        let made_at: Vec<&str> = pins.iter().map(|(_, n)| n.as_str()).collect();
        let took = until_shared(bed, &made_at, "sticky_ip");
        eprintln!("the four pins reached every other node after {took:?}");
        for (c, (server, first)) in clients.iter().zip(&pins) {
            let mut nodes = BTreeSet::from([first.clone()]);
            for _ in 0..3 {
                let got = client::get(*c, STICKY, "/pin", None).unwrap();
                assert_eq!(&got.origin, server, "client {c} changed servers");
                nodes.insert(bed.flows().get(&got.local).cloned().unwrap());
            }
            assert!(nodes.len() >= 2, "the tier moved client {c} to another node: {nodes:?}");
        }
    });
}

/// Four TLS clients start sessions through the VIP's TLS port (each server with its own
/// session cache), and resume them on connections the tier gives to other nodes: the same
/// server answers, with an abbreviated handshake.
#[test]
fn a_resumed_tls_session_keeps_its_server_when_the_tier_moves_it() {
    let _one = l4_bed::one_at_a_time();
    let Some(bed) = Bed::start("tls", 3) else { return };
    as_client(bed, |bed| {
        let clients: Vec<_> = (0..4).map(|_| client::tls_client()).collect();
        let mut first = Vec::new();
        for c in &clients {
            let (server, resumed, local) = client::tls_talk(c);
            assert!(!resumed, "a first session is a full handshake");
            first.push((server, bed.flows().get(&local).cloned().unwrap()));
        }
        let servers: BTreeSet<&String> = first.iter().map(|(s, _)| s).collect();
        assert!(servers.len() >= 2, "the sessions spread over the servers: {first:?}");
        let made_at: Vec<&str> = first.iter().map(|(_, n)| n.as_str()).collect();
        let took = until_shared(bed, &made_at, "tls_sessions");
        eprintln!("TLS session IDs shared with every node after {took:?}");
        for (c, (server, node)) in clients.iter().zip(&first) {
            let mut nodes = BTreeSet::from([node.clone()]);
            for _ in 0..2 {
                let (again, resumed, local) = client::tls_talk(c);
                assert_eq!(&again, server, "the session moved to another server");
                assert!(resumed, "the session resumed on its server");
                nodes.insert(bed.flows().get(&local).cloned().unwrap());
            }
            assert!(nodes.len() >= 2, "the tier moved the session to another node: {nodes:?}");
        }
    });
}

/// Liveness of `node` as `host` sees it.
fn live_at(view: &Value, node: &str) -> Option<bool> {
    view["nodes"].as_array()?.iter().find(|n| n["name"] == node).map(|n| n["live"] == true)
}

/// n3's gossip is dropped (nftables in its namespace) while STICKY_IP pins are made
/// through the tier: n1 and n3 see each other dead, the tier drops n3, n3 misses the pins.
/// Healed, everything converges: n3 live everywhere, back in the tier, holding the pins.
#[test]
fn a_partition_and_its_heal_converge_the_tables() {
    let _one = l4_bed::one_at_a_time();
    let Some(bed) = Bed::start("partition", 3) else { return };
    as_client(bed, |bed| {
        let drop_gossip = "table inet cut {
              chain i { type filter hook input priority 0; udp dport 7946 drop; }
              chain o { type filter hook output priority 0; udp dport 7946 drop; }
            }
";
        l4_bed::nft(&bed.net, "n3", drop_gossip);
        let cut = Instant::now();
        bed.until("n1", &["cluster"], Duration::from_secs(3), "n3 dead at n1", |v| {
            live_at(v, "n3") == Some(false)
        });
        bed.until("n3", &["cluster"], Duration::from_secs(3), "n1 dead at n3", |v| {
            live_at(v, "n1") == Some(false)
        });
        bed.until_targets(&["n1", "n2"], Duration::from_secs(3));
        eprintln!("partition seen on both sides and by the tier after {:?}", cut.elapsed());
        for n in 11..=14 {
            let got = client::get(Ipv4Addr::new(10, 201, 0, n), STICKY, "/pin", None).unwrap();
            assert_eq!(got.status, 200);
        }
        bed.until("n2", &["cluster"], Duration::from_secs(2), "pins at n2 or n1", |_| {
            shared_from(bed, "n2", "sticky_ip") + shared_from(bed, "n1", "sticky_ip") >= 4
        });
        assert_eq!(shared_from(bed, "n3", "sticky_ip"), 0, "n3 heard nothing while cut off");
        bed.net.run("n3", &["nft", "delete", "table", "inet", "cut"]);
        let healed = Instant::now();
        bed.until("n3", &["cluster"], Duration::from_secs(5), "n3 holding the 4 pins", |v| {
            live_at(v, "n1") == Some(true)
                && live_at(v, "n2") == Some(true)
                && shared_from(bed, "n3", "sticky_ip") >= 4
        });
        bed.until("n1", &["cluster"], Duration::from_secs(5), "n3 live at n1", |v| {
            live_at(v, "n3") == Some(true)
        });
        bed.until_targets(&["n1", "n2", "n3"], Duration::from_secs(5));
        eprintln!("healed: tables and tier converged after {:?}", healed.elapsed());
    });
}

/// An agent's report to n1 changes the weights n3 uses within 1 s.
#[test]
fn an_agents_report_to_n1_changes_n3s_weights_within_1s() {
    let _one = l4_bed::one_at_a_time();
    let Some(bed) = Bed::start("agent", 3) else { return };
    as_client(bed, |bed| {
        let weight = |v: &Value, name: &str| {
            v.as_array().unwrap().iter().find(|s| s["group"] == "agents" && s["name"] == name).unwrap()
                ["capacity"]
                .clone()
        };
        let start = Instant::now();
        l4_bed::report(&bed.net, 0, bed.origins[0], 90);
        l4_bed::report(&bed.net, 0, bed.origins[1], 10);
        let took = bed.until("n3", &["servers"], Duration::from_secs(1), "n1's report at n3", |v| {
            weight(v, "o1") == 90 && weight(v, "o2") == 10
        });
        let servers = bed.ctl("n3", &["servers"]);
        let eff = |name: &str| {
            servers.as_array().unwrap().iter().find(|s| s["group"] == "agents" && s["name"] == name).unwrap()
                ["effective_weight"]
                .as_u64()
        };
        assert!(eff("o1") > eff("o2"), "n3 weighs by the report: {servers:#}");
        eprintln!(
            "a report to n1 reached n3's weights after {took:?} ({:?} with the report)",
            start.elapsed()
        );
    });
}

/// A `cswitch run` with another key joins through n1 and claims to serve (its gossip is
/// sealed with its key), and raw datagrams hit n1's gossip port: n1 counts the refusals,
/// no node learns of the intruder, and the tier's ruleset does not change.
#[test]
fn gossip_sealed_with_another_key_changes_nothing() {
    let _one = l4_bed::one_at_a_time();
    let Some(bed) = Bed::start("key", 3) else { return };
    as_client(bed, |bed| {
        // The view shows what the tier loaded at the tick before: wait for all three.
        bed.until("lb", &["cluster"], Duration::from_secs(1), "three targets in lb's view", |v| {
            v["l4"]["targets"].as_array().map(Vec::len) == Some(3)
        });
        let before = bed.ctl("lb", &["cluster"]);
        let refused_before = bed.ctl("n1", &["cluster"])["gossip"]["rejected"].as_u64().unwrap();
        let text = std::fs::read_to_string(bed.dir.join("n1.toml"))
            .unwrap()
            .replace(l4_bed::KEY, "another-key-of-the-right-size-42")
            .replace("node = \"n1\"", "node = \"intruder\"")
            .replace("10.201.0.21:", "10.201.0.31:");
        let seeds = text.lines().find(|l| l.starts_with("seeds = ")).unwrap().to_string();
        let text = text.replace(&seeds, "seeds = [\"10.201.0.21:7946\"]");
        let path = bed.dir.join("intruder.toml");
        std::fs::write(&path, text).unwrap();
        let bin = env!("CARGO_BIN_EXE_cswitch");
        let intruder =
            oneway_bed::Proc::spawn(&bed.net, "srv", &[bin, "run", "--config", &path.to_string_lossy()]);
        intruder.wait_for("listening");
        let n1: std::net::SocketAddr = "10.201.0.21:7946".parse().unwrap();
        std::net::UdpSocket::bind("10.201.0.10:0").unwrap().send_to(b"not gossip", n1).unwrap();
        bed.until("n1", &["cluster"], Duration::from_secs(3), "refusals counted at n1", |v| {
            v["gossip"]["rejected"].as_u64().unwrap() >= refused_before + 3
        });
        std::thread::sleep(Duration::from_millis(500));
        for host in ["lb", "n1", "n2", "n3"] {
            let view = bed.ctl(host, &["cluster"]);
            assert_eq!(live_at(&view, "intruder"), None, "{host} learnt of the intruder: {view:#}");
        }
        let after = bed.ctl("lb", &["cluster"]);
        assert_eq!(after["l4"]["targets"], before["l4"]["targets"]);
        assert_eq!(after["l4"]["changes"], before["l4"]["changes"], "the tier was not reprogrammed");
        assert_eq!(bed.targets(), ["n1", "n2", "n3"]);
        drop(intruder);
    });
}
