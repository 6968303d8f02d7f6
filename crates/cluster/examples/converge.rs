//! How the gossip scales, measured in one process: N members (each its own thread and
//! runtime, as in `cswitch run`) on 127.0.x.y loopback addresses, all joining through the
//! first. Prints the time until every member sees all N live, the gossip bytes per second
//! per member at rest, and the time a capacity published on one member takes to reach all.
//!
//! `cargo run --release -p cswitch-cluster --example converge -- 3 10 30 60`
#![allow(clippy::unwrap_used)] // an example: a panic is its report
#![allow(missing_docs)]

use cswitch_cluster::{Cluster, LearnedCookie, Remote, StickyIp, TlsSession};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counts the capacities that reach a member.
struct Count(Arc<AtomicUsize>);

impl Remote for Count {
    fn capacity(&self, _: SocketAddr, _: u32, _: Duration) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn sticky_ip(&self, _: &StickyIp, _: Duration) {}
    fn learned_cookie(&self, _: &LearnedCookie, _: Duration) {}
    fn tls_session(&self, _: &TlsSession, _: Duration) {}
}

fn main() {
    let sizes: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().unwrap()).collect();
    let sizes = if sizes.is_empty() { vec![3, 10, 30] } else { sizes };
    println!("| members | all live everywhere | gossip bytes/s per member at rest | capacity on all |");
    println!("|---|---|---|---|");
    for (round, n) in sizes.into_iter().enumerate() {
        let (joined, rate, capacity) = run(n, round);
        println!("| {n} | {joined:.2?} | {rate:.0} | {capacity:.2?} |");
    }
}

fn run(n: usize, round: usize) -> (Duration, f64, Duration) {
    let received = Arc::new(AtomicUsize::new(0));
    let addr = |i: usize| -> SocketAddr {
        let ip = format!("127.{}.{}.{}", 100 + round, 1 + i / 250, 1 + i % 250);
        UdpSocket::bind((ip.as_str(), 0)).unwrap().local_addr().unwrap()
    };
    let first = addr(0);
    let start = Instant::now();
    let members: Vec<Cluster> = (0..n)
        .map(|i| {
            let cfg = config::Cluster {
                node: format!("n{i}"),
                bind: if i == 0 { first } else { addr(i) },
                seeds: if i == 0 { vec![] } else { vec![first] },
                key: Some("converge-example-key-0123".into()),
                gossip_interval: Duration::from_millis(100),
                l4: None,
            };
            Cluster::start(&cfg, "d".into(), Box::new(Count(Arc::clone(&received)))).unwrap()
        })
        .collect();
    let all_live = |m: &Cluster| m.view().nodes.iter().filter(|v| v.live).count() == n;
    while !members.iter().all(all_live) {
        assert!(start.elapsed() < Duration::from_secs(120), "{n} members did not converge in 120 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    let joined = start.elapsed();
    let bytes = |ms: &[Cluster]| -> u64 { ms.iter().map(|m| m.view().gossip.sent_bytes).sum() };
    let (b0, t0) = (bytes(&members), Instant::now());
    std::thread::sleep(Duration::from_secs(3));
    let rate = (bytes(&members) - b0) as f64 / t0.elapsed().as_secs_f64() / n as f64;
    let published = Instant::now();
    members[0].publish_capacity("10.0.0.1:80".parse().unwrap(), 7);
    while received.load(Ordering::Relaxed) < n - 1 {
        assert!(published.elapsed() < Duration::from_secs(60), "capacity not everywhere in 60 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    let capacity = published.elapsed();
    drop(members);
    (joined, rate, capacity)
}
