//! A node joining the cluster takes flows from the L4 tier only once it has the other
//! nodes' tables (issue 13; `crates/cluster/src/joining.rs`), in the namespace testbed
//! (`l4_bed`): four `STICKY_IP` clients pinned through n1 and n2 keep asking on new
//! connections while n3 starts; every request the tier gives n3, from its very first,
//! reaches the client's pinned server.
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
