//! Replication lag under a stick-table write rate, measured through a running switch:
//! this program joins a running `cswitch run` node's cluster as one more member (same key),
//! writes `STICKY_IP` entries at RATE per second for SECS seconds (as a busy node does), and
//! polls the node's `/metrics` every 5 ms for `cswitch_cluster_sticky_entries_total` (the
//! entries it took from the gossip and applied to its table). Entries are applied in the
//! order they were written (Scuttlebutt delivers a node's writes in version order), so entry
//! i arrived by the first poll at which the counter passed i: its lag is that poll's time
//! less the time it was written. Prints p50, p99 and the largest lag, and the gossip bytes
//! per second this member sent and received. The node must have a listener and a group
//! named `web` with a server `s1` (bench/cluster_lag.sh starts one).
//!
//! `cargo run --release -p cswitch-cluster --example lag -- GOSSIP_BIND NODE_GOSSIP NODE_ADMIN TOKEN KEY [RATE] [SECS]`
#![allow(clippy::unwrap_used)] // an example: a panic is its report
#![allow(missing_docs)]

use cswitch_cluster::{Cluster, LearnedCookie, Remote, StickyIp, TlsSession};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

struct Ignore;

impl Remote for Ignore {
    fn capacity(&self, _: SocketAddr, _: u32, _: Duration) {}
    fn sticky_ip(&self, _: &StickyIp, _: Duration) {}
    fn learned_cookie(&self, _: &LearnedCookie, _: Duration) {}
    fn tls_session(&self, _: &TlsSession, _: Duration) {}
}

/// The node's applied-entries counter, read from `/metrics`.
fn applied(admin: SocketAddr, token: &str) -> u64 {
    let mut s = TcpStream::connect(admin).unwrap();
    let req = format!(
        "GET /metrics HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    body.lines()
        .find_map(|l| l.strip_prefix("cswitch_cluster_sticky_entries_total "))
        .map_or(0, |v| v.trim().parse::<f64>().unwrap() as u64)
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [bind, node, admin, token, key] = [0, 1, 2, 3, 4].map(|i| args[i].clone());
    let rate: u64 = args.get(5).map_or(1000, |r| r.parse().unwrap());
    let secs: u64 = args.get(6).map_or(5, |s| s.parse().unwrap()).min(60);
    let admin: SocketAddr = admin.parse().unwrap();
    let cfg = config::Cluster {
        node: "lag-writer".into(),
        bind: bind.parse().unwrap(),
        seeds: vec![node.parse().unwrap()],
        key: Some(key),
        gossip_interval: Duration::from_millis(100),
        state_file: None,
        l4: None,
    };
    let me = Cluster::start(&cfg, "lag".into(), Box::new(Ignore)).unwrap();
    let start = Instant::now();
    while me.view().nodes.iter().filter(|n| n.live).count() < 2 {
        assert!(start.elapsed() < Duration::from_secs(10), "the node did not become live in 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let base = applied(admin, &token);
    let total = rate * secs;
    let gossip0 = me.view().gossip.clone();
    let written = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let t0 = Instant::now();
            let mut at = Vec::with_capacity(total as usize);
            for i in 0..total {
                let due = t0 + Duration::from_micros(i * 1_000_000 / rate);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let n = u32::try_from(i).unwrap();
                let client = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 | n));
                let entry =
                    StickyIp { listener: "web".into(), client, group: "web".into(), server: "s1".into() };
                me.publish_sticky_ip(&entry, Duration::from_secs(120));
                at.push(Instant::now());
            }
            at
        });
        let mut polls: Vec<(Instant, u64)> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(secs + 15);
        loop {
            let got = applied(admin, &token) - base;
            polls.push((Instant::now(), got));
            if got >= total || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        (writer.join().unwrap(), polls)
    });
    let gossip1 = me.view().gossip.clone();
    let (at, polls) = written;
    let mut lags: Vec<Duration> = Vec::with_capacity(at.len());
    let mut p = 0;
    for (i, written) in at.iter().enumerate() {
        while p < polls.len() && polls[p].1 <= i as u64 {
            p += 1;
        }
        let Some((seen, _)) = polls.get(p) else { break };
        lags.push(seen.saturating_duration_since(*written));
    }
    lags.sort();
    let elapsed = secs as f64;
    println!(
        "{} of {total} entries applied at {rate}/s over {secs} s: lag p50 {:?}, p99 {:?}, max {:?}; \
         writer's gossip {:.0} B/s out, {:.0} B/s in",
        lags.len(),
        quantile(&lags, 0.5),
        quantile(&lags, 0.99),
        lags.last().unwrap(),
        (gossip1.sent_bytes - gossip0.sent_bytes) as f64 / elapsed,
        (gossip1.received_bytes - gossip0.received_bytes) as f64 / elapsed,
    );
    me.stop();
}
