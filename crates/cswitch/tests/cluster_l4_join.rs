//! A node (re)joining the cluster, in the namespace testbed (`l4_bed`): it takes flows from
//! the L4 tier only once it has the other nodes' tables (issue 13;
//! `crates/cluster/src/joining.rs`) — four `STICKY_IP` clients pinned through n1 and n2 keep
//! asking on new connections while n3 starts, and every request the tier gives n3, from its
//! very first, reaches the client's pinned server; and a node an operator drained comes back
//! from a restart drained until `ready` (`[cluster] state_file`).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
mod l4_bed;
mod oneway_bed;

use l4_bed::{as_client, client, Bed, STICKY};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

/// The pinned clients' addresses.
fn clients() -> Vec<Ipv4Addr> {
    (11..=14).map(|n| Ipv4Addr::new(10, 201, 0, n)).collect()
}

#[test]
fn a_joining_node_keeps_sticky_clients_on_their_servers_from_its_first_flow() {
    let _one = l4_bed::one_at_a_time();
    let Some(bed) = Bed::start("join-sticky", 2) else { return };
    as_client(bed, |bed| {
        let mut pinned: BTreeMap<Ipv4Addr, String> = BTreeMap::new();
        for from in clients() {
            let got = client::get(from, STICKY, "/pin", None).unwrap();
            assert_eq!(got.status, 200);
            pinned.insert(from, got.origin);
        }
        eprintln!("pins: {pinned:?}");
        let t0 = Instant::now();
        bed.start_node(2);
        let listened = t0.elapsed();
        // The clients ask in turn, on new connections, until n3 has had a dozen of them (at
        // most 5 s).
        let mut asked: Vec<(Duration, Ipv4Addr, SocketAddrV4, String)> = Vec::new();
        let mut on_n3 = 0;
        'ask: while t0.elapsed() < Duration::from_secs(5) {
            for from in clients() {
                let got = client::get(from, STICKY, "/again", None).unwrap();
                assert_eq!(got.status, 200);
                asked.push((t0.elapsed(), from, got.local, got.origin));
            }
            if asked.len().is_multiple_of(24) {
                let flows = bed.flows();
                on_n3 = asked.iter().filter(|a| flows.get(&a.2).is_some_and(|n| n == "n3")).count();
                if on_n3 >= 12 {
                    break 'ask;
                }
            }
        }
        let flows = bed.flows();
        let mut first: Option<Duration> = None;
        for (at, from, local, origin) in &asked {
            let node = flows.get(local).map_or("?", String::as_str);
            if node == "n3" {
                first.get_or_insert(*at);
                assert_eq!(
                    origin,
                    &pinned[from],
                    "{from} reached {origin} through n3 {:?} after it listened, pinned to {}",
                    at.saturating_sub(listened),
                    pinned[from]
                );
            }
        }
        let first = first.expect("n3 took no flow within 5 s");
        // n3 says why it became ready: it had every live peer's tables (not the bound).
        let n3 = bed.nodes[2].as_ref().unwrap();
        let said = n3.lines.try_iter().find(|l| l.contains("ready for the L4 tier")).unwrap_or_default();
        eprintln!("n3: {said}");
        assert!(said.contains("the other nodes' tables received"), "n3 logged: {said:?}");
        eprintln!(
            "n3 listened at {listened:?}; its first flow {:?} later; {on_n3} of {} requests through n3, \
             each on its client's pinned server",
            first.saturating_sub(listened),
            asked.len()
        );
    });
}

/// `ctl cluster drain` on n2, then n2 killed and started again: it comes back live but
/// drained (its `state_file`), and the tier sends it nothing until `ctl cluster ready`;
/// restarted after that, it is ready at once.
#[test]
fn a_drained_node_comes_back_from_a_restart_drained_until_ready() {
    let _one = l4_bed::one_at_a_time();
    let Some(bed) = Bed::start("restart-drained", 3) else { return };
    as_client(bed, |bed| {
        assert_eq!(bed.ctl("n2", &["cluster", "drain"])["serving"], "draining");
        bed.until_targets(&["n1", "n3"], Duration::from_secs(2));
        let generation = |bed: &Bed| {
            let v = bed.ctl("lb", &["cluster"]);
            let rows = v["nodes"].as_array().unwrap().clone();
            rows.iter().filter(|n| n["name"] == "n2").filter_map(|n| n["generation"].as_u64()).max().unwrap()
        };
        // The newest generation of n2 lb knows, when newer than `old`: live, and serving so.
        let n2_back = |v: &serde_json::Value, old: u64, serving: &str| {
            let rows = v["nodes"].as_array().unwrap();
            let newest = rows.iter().filter(|n| n["name"] == "n2").max_by_key(|n| n["generation"].as_u64());
            newest.is_some_and(|n| {
                n["generation"].as_u64() > Some(old) && n["live"] == true && n["serving"] == serving
            })
        };
        let old = generation(bed);
        bed.kill(1);
        bed.start_node(1);
        let restarted = Instant::now();
        bed.until("lb", &["cluster"], Duration::from_secs(5), "the new n2 live and draining", |v| {
            n2_back(v, old, "draining")
        });
        let seen = restarted.elapsed();
        // Out of the tier all along, for a second past what a ready node needs to get in.
        while restarted.elapsed() < seen + Duration::from_secs(1) {
            assert_eq!(bed.targets(), ["n1", "n3"], "the restarted, drained n2 got flows");
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!(
            "n2 restarted drained: live and draining at lb {seen:?} after it listened, out of the tier"
        );
        assert_eq!(bed.ctl("n2", &["cluster", "ready"])["serving"], "ready");
        let took = bed.until_targets(&["n1", "n2", "n3"], Duration::from_secs(2));
        eprintln!("`ctl cluster ready`: n2 in the tier {took:?} later");
        let old = generation(bed);
        bed.kill(1);
        bed.start_node(1);
        let restarted = Instant::now();
        bed.until("lb", &["cluster"], Duration::from_secs(5), "the new n2 live and ready", |v| {
            n2_back(v, old, "ready")
        });
        let back = restarted.elapsed();
        bed.until_targets(&["n1", "n2", "n3"], Duration::from_secs(2));
        eprintln!("restarted after `ready`: live and ready at lb {back:?} after it listened, in the tier");
    });
}
