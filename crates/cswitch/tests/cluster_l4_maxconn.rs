//! Cluster-wide admission behind the L4 tier (issue 13: "a per-server `maxconn` of 10 holds
//! across three nodes under 60 concurrent clients"), in the namespace testbed (`l4_bed`):
//! one server in `srv` with `maxconn = 10` in every node's group, holding each request 30 ms
//! and counting how many it serves at once; 60 clients in `cl` open their connections to
//! the VIP, which the tier spreads over n1–n3 (about 20 each). Each node alone would admit
//! 10, 30 in all. The loopback version (three nodes, clients straight to each) is
//! `cluster_maxconn.rs`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
mod l4_bed;
mod oneway_bed;

use common::counting::{client, counting_server, Counts};
use l4_bed::{as_client, Bed, Extra, VIP};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The VIP's port for this test's listener.
const PORT: u16 = 83;
const MAXCONN: u32 = 10;

/// The counting server in `srv`, kept until `stop` is dropped; the nodes' listener and
/// group for it.
fn counted(net: &testkit::netns::Testbed, counts: Arc<Counts>, stop: std::sync::mpsc::Receiver<()>) -> Extra {
    let (tx, rx) = std::sync::mpsc::channel();
    net.thread("srv", move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let at: SocketAddr = format!("{}:0", testkit::netns::ip_of(31)).parse().unwrap();
        let addr = rt.block_on(counting_server(at, counts, Duration::from_millis(30)));
        tx.send(addr).unwrap();
        // Serve until the test drops its end (or a minute at most).
        rt.block_on(async {
            let wait = tokio::task::spawn_blocking(move || stop.recv_timeout(Duration::from_secs(60)));
            let _ = wait.await;
        });
    });
    let server = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    Extra {
        ports: vec![PORT],
        node_toml: format!(
            "[[listener]]\nname = \"mc\"\nbind = \"0.0.0.0:{PORT}\"\ndefault_group = \"mc\"\n\
             [[group]]\nname = \"mc\"\nscheduler = \"rr\"\n\
             servers = [ {{ name = \"c1\", addr = \"{server}\", maxconn = {MAXCONN} }} ]\n\
             [timeouts]\nqueue = \"20s\"\n"
        ),
    }
}

/// 60 clients, 10 requests each on new connections to the VIP, all starting at once: the
/// server never serves more than the documented bound at once (docs/cluster.md: 10 + 2 + 2
/// + 2 with three nodes), every request is answered 200, and every node took clients.
#[test]
fn a_servers_maxconn_holds_across_three_nodes_behind_the_tier() {
    let _one = l4_bed::one_at_a_time();
    let counts = Arc::new(Counts::default());
    let (keep, stop) = std::sync::mpsc::channel::<()>();
    let counting = Arc::clone(&counts);
    let Some(bed) = Bed::start_with("maxconn", 3, move |net| counted(net, counting, stop)) else { return };
    as_client(bed, move |bed| {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let vip = SocketAddr::from((VIP, PORT));
        let deadline = Instant::now() + Duration::from_secs(30);
        let started = Instant::now();
        let statuses: Vec<u16> = rt.block_on(async {
            let clients: Vec<_> = (0..60).map(|_| tokio::spawn(client(vip, 10, deadline))).collect();
            let mut all = Vec::new();
            for c in clients {
                all.extend(c.await.unwrap());
            }
            all
        });
        let took = started.elapsed();
        let (most, served) = (counts.most.load(Ordering::SeqCst), counts.served.load(Ordering::SeqCst));
        let per_node: Vec<(String, u64)> =
            l4_bed::NODES.iter().map(|(n, _)| (n.to_string(), spread_to(bed, n))).collect();
        eprintln!(
            "60 clients through the tier to 3 nodes, maxconn {MAXCONN}: {} requests in {took:?}, at most \
             {most} at once at the server (overshoot {}); connections per node {per_node:?}",
            statuses.len(),
            most.saturating_sub(MAXCONN)
        );
        assert_eq!(statuses.len(), 600, "the load finished within its deadline");
        assert!(statuses.iter().all(|s| *s == 200), "every request answered 200: {statuses:?}");
        assert_eq!(served, 600);
        assert!(per_node.iter().all(|(_, n)| *n >= 100), "the tier spread the clients: {per_node:?}");
        assert!(
            most <= MAXCONN + 6,
            "the server saw {most} requests at once (maxconn {MAXCONN} across the cluster)"
        );
        drop(keep);
    });
}

/// How many of the clients' connections `lb` sent to `node` (its flow probe).
fn spread_to(bed: &Bed, node: &str) -> u64 {
    bed.flow_nodes().values().filter(|nodes| nodes.iter().any(|n| n == node)).count() as u64
}
