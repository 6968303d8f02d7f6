//! How the gossip scales, measured in one process: N members (each its own thread and
//! runtime, as in `cswitch run`) on 127.0.x.y loopback addresses, all joining through the
//! first. Prints the time until every member sees all N live, the gossip bytes per second
//! per member at rest, the time a capacity published on one member takes to reach all, and,
//! while one member writes `STICKY_IP` entries at 1,000 per second for 2 s (a busy node's
//! stick table), the gossip bytes per second per member and the time from the last write
//! until every member has taken all 2,000. Every wait is bounded (120 s to converge, 60 s
//! for the rest).
//!
//! `cargo run --release -p cswitch-cluster --example converge -- 3 10 30 60 100 200`
#![allow(clippy::unwrap_used)] // an example: a panic is its report
#![allow(missing_docs)]

use cswitch_cluster::{Cluster, LearnedCookie, Remote, StickyIp, TlsSession};
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counts the capacities and sticky entries that reach a member.
struct Count(Arc<AtomicUsize>, Arc<AtomicUsize>);

impl Remote for Count {
    fn capacity(&self, _: SocketAddr, _: u32, _: Duration) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn sticky_ip(&self, _: &StickyIp, _: Duration) {
        self.1.fetch_add(1, Ordering::Relaxed);
    }
    fn learned_cookie(&self, _: &LearnedCookie, _: Duration) {}
    fn tls_session(&self, _: &TlsSession, _: Duration) {}
}

fn main() {
    let sizes: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().unwrap()).collect();
    let sizes = if sizes.is_empty() { vec![3, 10, 30] } else { sizes };
    println!(
        "| members | all live everywhere | bytes/s per member at rest | capacity on all | \
         bytes/s per member, 1k writes/s | all writes on all, after the last |"
    );
    println!("|---|---|---|---|---|---|");
    for (round, n) in sizes.into_iter().enumerate() {
        let r = run(n, round);
        println!(
            "| {n} | {:.2?} | {:.0} | {:.2?} | {:.0} | {} |",
            r.joined,
            r.rest_rate,
            r.capacity,
            r.write_rate,
            r.writes.map_or("not within 60 s".into(), |d| format!("{d:.2?}"))
        );
    }
}

struct Figures {
    joined: Duration,
    rest_rate: f64,
    capacity: Duration,
    write_rate: f64,
    writes: Option<Duration>,
}

/// Entries written in the write phase, and at what rate.
const WRITES: usize = 2000;
const WRITES_PER_S: u64 = 1000;

fn run(n: usize, round: usize) -> Figures {
    let received = Arc::new(AtomicUsize::new(0));
    let sticky = Arc::new(AtomicUsize::new(0));
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
                state_file: None,
                l4: None,
            };
            let count = Count(Arc::clone(&received), Arc::clone(&sticky));
            Cluster::start(&cfg, "d".into(), Box::new(count)).unwrap()
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
    let (b0, t0) = (bytes(&members), Instant::now());
    for i in 0..WRITES {
        let due = t0 + Duration::from_micros(i as u64 * 1_000_000 / WRITES_PER_S);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let client = std::net::IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 | i as u32));
        let entry = StickyIp { listener: "web".into(), client, group: "web".into(), server: "s1".into() };
        members[0].publish_sticky_ip(&entry, Duration::from_secs(300));
    }
    let last_write = Instant::now();
    let write_rate = (bytes(&members) - b0) as f64 / t0.elapsed().as_secs_f64() / n as f64;
    let mut writes = None;
    while last_write.elapsed() < Duration::from_secs(60) {
        if sticky.load(Ordering::Relaxed) >= (n - 1) * WRITES {
            writes = Some(last_write.elapsed());
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(members);
    Figures { joined, rest_rate: rate, capacity, write_rate, writes }
}
