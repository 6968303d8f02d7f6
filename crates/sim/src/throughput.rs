//! Seed 002's throughput against the number of servers, with 1..k switch nodes in front
//! (an L4 tier spreading requests over them): each switch node runs its own instance of
//! the scheduler and sees only its own requests in flight, as separate cswitch processes
//! do; with `share`, learning schedulers (`htrr`, `lard`, `lard_r`) hand every assignment
//! to the other nodes at once (what `[cluster]` does, with no lag), through the same
//! `drain_learned` / `teach` hooks the switch uses.
//!
//! Throughput comes from a cost model of the servers, not from measuring anything: a
//! request served from a server's cache costs [`Costs::hit_us`] plus its bytes at
//! [`Costs::net_mb_s`]; a miss adds [`Costs::miss_us`] and its bytes at
//! [`Costs::disk_mb_s`]. The servers work in parallel; the busiest one finishes last, so
//! the cluster's rate is requests ÷ the busiest server's time. The switches cost nothing
//! here (seed 002 runs them on the servers; their CPU is not its bottleneck either).
//! Defaults model seed 002's era of servers: 100 Mb/s network, one disk (10 ms per read,
//! 20 MB/s).

use crate::lru::Lru;
use crate::run::{idle, rebuild, server_names, Algo, Inflight};
use crate::trace::Trace;
use balance::Scheduler;

/// What serving a request costs a server.
#[derive(Clone, Copy, Debug)]
pub struct Costs {
    /// Fixed cost of any request, µs (parsing, a cache lookup, sending headers).
    pub hit_us: f64,
    /// Added to a miss: the disk's positioning time, µs.
    pub miss_us: f64,
    /// Network bandwidth of one server, MB/s (= bytes per µs).
    pub net_mb_s: f64,
    /// Disk bandwidth of one server, MB/s.
    pub disk_mb_s: f64,
}

impl Default for Costs {
    fn default() -> Self {
        Costs { hit_us: 100.0, miss_us: 10_000.0, net_mb_s: 12.5, disk_mb_s: 20.0 }
    }
}

impl Costs {
    fn of(&self, size: u64, hit: bool) -> f64 {
        let send = self.hit_us + size as f64 / self.net_mb_s;
        match hit {
            true => send,
            false => send + self.miss_us + size as f64 / self.disk_mb_s,
        }
    }
}

/// One algorithm on `servers` servers behind `switches` switch nodes, one cache size.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Algorithm label (`+shared` when learned tables were shared).
    pub algorithm: String,
    /// Switch nodes.
    pub switches: usize,
    /// Servers.
    pub servers: usize,
    /// Cache per server, bytes.
    pub cache_bytes: u64,
    /// Requests per second of the cluster (the model's).
    pub rate: f64,
    /// Share of requests served from a cache.
    pub hit_ratio: f64,
}

/// The cluster one replay models.
#[derive(Clone, Copy, Debug)]
pub struct Setup {
    /// Servers.
    pub servers: usize,
    /// Switch nodes taking requests in turn (at least 1).
    pub switches: usize,
    /// Whether learning schedulers share their tables between the switch nodes.
    pub share: bool,
    /// In flight per server (the load window, shared out over the switch nodes).
    pub inflight_per_server: u32,
}

/// Replays `trace` through `setup.switches` instances of `algo` taking requests in turn,
/// on `setup.servers` servers with one LRU each per cache size; one [`Point`] per cache
/// size.
pub fn replay(trace: &Trace, algo: &Algo, setup: Setup, cache_bytes: &[u64], costs: &Costs) -> Vec<Point> {
    let Setup { servers, switches, share, inflight_per_server } = setup;
    let names = server_names(servers);
    let switches = switches.max(1);
    let mut nodes: Vec<Box<dyn Scheduler>> = (0..switches)
        .map(|_| {
            let mut s = algo.build();
            rebuild(&mut *s, &names);
            if share {
                s.keep_learned();
            }
            s
        })
        .collect();
    let mut views = vec![idle(servers); switches];
    let window = (inflight_per_server as usize * servers).div_ceil(switches);
    let mut windows: Vec<Inflight> = (0..switches).map(|_| Inflight::new(window)).collect();
    let mut caches: Vec<Vec<Lru>> = cache_bytes.iter().map(|&c| vec![Lru::new(c); servers]).collect();
    let mut busy = vec![vec![0f64; servers]; cache_bytes.len()];
    let mut hits = vec![0u64; cache_bytes.len()];
    let (mut placed, mut learned) = (0u64, Vec::new());
    for (i, &id) in trace.requests().iter().enumerate() {
        let at = i % switches;
        let Some(s) = nodes[at].pick(&views[at], Some(trace.key(id))) else { continue };
        windows[at].assign(&mut views[at], s);
        placed += 1;
        if share {
            nodes[at].drain_learned(&mut learned);
            for (_, node) in nodes.iter_mut().enumerate().filter(|(o, _)| *o != at) {
                for &(hash, member) in &learned {
                    node.teach(hash, member);
                }
            }
            learned.clear();
        }
        let size = trace.size(id);
        for c in 0..cache_bytes.len() {
            let hit = caches[c][s].access(id, size);
            hits[c] += u64::from(hit);
            busy[c][s] += costs.of(size, hit);
        }
    }
    let label =
        if share && algo.kind_learns() { format!("{}+shared", algo.label) } else { algo.label.clone() };
    cache_bytes
        .iter()
        .enumerate()
        .map(|(c, &cache)| {
            let busiest = busy[c].iter().copied().fold(0.0, f64::max);
            Point {
                algorithm: label.clone(),
                switches,
                servers,
                cache_bytes: cache,
                rate: if busiest > 0.0 { placed as f64 * 1e6 / busiest } else { 0.0 },
                hit_ratio: if placed > 0 { hits[c] as f64 / placed as f64 } else { 0.0 },
            }
        })
        .collect()
}

/// Tables: per cache size, one row per algorithm and switch count, one column per server
/// count, in requests per second.
pub fn text(points: &[Point], servers: &[usize], costs: &Costs) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "throughput model: per request {} µs + bytes at {} MB/s; a miss adds {} µs + bytes at {} MB/s; \
         rate = requests / busiest server's time",
        costs.hit_us, costs.net_mb_s, costs.miss_us, costs.disk_mb_s
    );
    let mut caches: Vec<u64> = points.iter().map(|p| p.cache_bytes).collect();
    caches.dedup();
    caches.sort_unstable();
    caches.dedup();
    for cache in caches {
        let _ = writeln!(out, "\nrequests per second, {} MiB cache per server", crate::report::mib(cache));
        let header: Vec<String> = servers.iter().map(|n| format!("{n:>7}")).collect();
        let _ = writeln!(out, "| {:<18} | switches | {} |", "algorithm", header.join(" | "));
        let _ = writeln!(out, "|---|---|{}", "---|".repeat(servers.len()));
        let mut keys: Vec<(String, usize)> = Vec::new();
        for p in points.iter().filter(|p| p.cache_bytes == cache) {
            if !keys.contains(&(p.algorithm.clone(), p.switches)) {
                keys.push((p.algorithm.clone(), p.switches));
            }
        }
        for (algorithm, switches) in keys {
            let cells: Vec<String> = servers
                .iter()
                .map(|&n| {
                    points
                        .iter()
                        .find(|p| {
                            p.cache_bytes == cache
                                && p.algorithm == algorithm
                                && p.switches == switches
                                && p.servers == n
                        })
                        .map_or("-".into(), |p| format!("{:>7.0}", p.rate))
                })
                .collect();
            let _ = writeln!(out, "| {algorithm:<18} | {switches:>8} | {} |", cells.join(" | "));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use balance::SchedulerKind;

    #[test]
    fn hashing_scales_with_servers_and_round_robin_does_not_when_caches_are_small() {
        let t = Trace::zipf(2000, 40_000, 0.8);
        let costs = Costs::default();
        let cache = [t.distinct_bytes() / 8];
        let setup = |servers| Setup { servers, switches: 1, share: false, inflight_per_server: 8 };
        let rate = |kind, n| replay(&t, &Algo::new(kind), setup(n), &cache, &costs)[0].rate;
        let (rr1, rr8) = (rate(SchedulerKind::RoundRobin, 1), rate(SchedulerKind::RoundRobin, 8));
        let (h1, h8) = (rate(SchedulerKind::Md5, 1), rate(SchedulerKind::Md5, 8));
        assert!((rr1 - h1).abs() < 1e-6, "one server: the same work");
        assert!(h8 / h1 > rr8 / rr1 * 1.5, "md5 ×{:.1}, rr ×{:.1}", h8 / h1, rr8 / rr1);
    }

    #[test]
    fn separate_learned_tables_lose_locality_and_sharing_them_restores_it() {
        let t = Trace::zipf(2000, 40_000, 0.8);
        let costs = Costs::default();
        let cache = [t.distinct_bytes() / 8];
        let htrr = Algo::new(SchedulerKind::HashTableRoundRobin);
        let setup = |switches, share| Setup { servers: 8, switches, share, inflight_per_server: 8 };
        let one = replay(&t, &htrr, setup(1, false), &cache, &costs)[0].clone();
        let four = replay(&t, &htrr, setup(4, false), &cache, &costs)[0].clone();
        let shared = replay(&t, &htrr, setup(4, true), &cache, &costs)[0].clone();
        assert!(four.hit_ratio < one.hit_ratio - 0.05, "{four:?} vs {one:?}");
        assert!((shared.hit_ratio - one.hit_ratio).abs() < 0.01, "{shared:?} vs {one:?}");
        assert_eq!(shared.algorithm, "htrr+shared");
    }
}
