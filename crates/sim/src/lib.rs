//! Offline simulation of the schedulers of `cswitch-balance` (`cswitch simulate`).
//!
//! Owns the replay of a URL trace through every hashing and locality algorithm on 1..N
//! servers, each with an LRU cache, and the figures seed 002 compares: load imbalance,
//! cache hit ratio, bytes read from disk, and the share of keys that move when a server
//! joins or leaves. Pure computation over a trace in memory; the binary does the I/O of
//! arguments and output files.
//!
//! Layout: `trace.rs` (SURGE, plain `URL [size]` and generated Zipf traces), `lru.rs`
//! (byte-capacity LRU per server), `run.rs` (one replay and its load model; the
//! algorithm list), `movement.rs` (keys moved on membership changes), `report.rs`
//! (tables and CSV), `throughput.rs` (seed 002's requests per second against servers, behind
//! 1..k switch nodes, from a cost model of the servers). [`simulate`] runs the whole grid.

pub mod lru;
pub mod movement;
pub mod report;
pub mod run;
pub mod throughput;
pub mod trace;

pub use report::Row;
pub use run::Algo;
pub use trace::Trace;

use movement::{moved_share, Change};

/// What to simulate.
#[derive(Clone, Debug)]
pub struct Options {
    /// Server counts, in report order.
    pub servers: Vec<usize>,
    /// Cache per server, bytes; each size gets its own rows from the same replay.
    pub cache_bytes: Vec<u64>,
    /// Algorithms, in report order.
    pub algorithms: Vec<Algo>,
    /// Size of the in-flight window per server (see [`run`]).
    pub inflight_per_server: u32,
}

/// In-flight requests per server when none is given: between LARD's default low (25)
/// and high (65) thresholds, so LARD neither idles nor sheds all the time.
pub const DEFAULT_INFLIGHT_PER_SERVER: u32 = 32;

/// Runs every algorithm on every server count; rows by algorithm, then servers, then
/// cache size. `progress` hears of each replay before it starts.
pub fn simulate(trace: &Trace, opts: &Options, progress: &mut dyn FnMut(&Algo, usize)) -> Vec<Row> {
    let keys: Vec<&[u8]> = trace.keys().collect();
    let mut rows = Vec::new();
    for algo in &opts.algorithms {
        for &n in &opts.servers {
            progress(algo, n);
            let r = run::replay(trace, algo, n, &opts.cache_bytes, opts.inflight_per_server);
            let moved = |change| {
                let make = || algo.build();
                algo.keyed().then(|| moved_share(&make, &keys, n, change, opts.inflight_per_server)).flatten()
            };
            let [add, last, middle] = Change::ALL.map(moved);
            let requests = r.placed();
            for c in &r.caches {
                let requested = c.hit_bytes + c.disk_bytes;
                rows.push(Row {
                    algorithm: algo.label.clone(),
                    servers: n,
                    cache_bytes: c.capacity,
                    requests,
                    unplaced: r.unplaced,
                    imbalance: r.imbalance(),
                    byte_imbalance: r.byte_imbalance(),
                    hit_ratio: ratio(c.hits, requests),
                    byte_hit_ratio: ratio(c.hit_bytes, requested),
                    disk_bytes: c.disk_bytes,
                    moved_add: add,
                    moved_remove_last: last,
                    moved_remove_middle: middle,
                });
            }
        }
    }
    rows
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use balance::SchedulerKind;

    #[test]
    fn grid_of_rows() {
        let trace = Trace::zipf(200, 2000, 0.8);
        let opts = Options {
            servers: vec![1, 3],
            cache_bytes: vec![1 << 20, 64 << 10],
            algorithms: vec![
                Algo::new(SchedulerKind::RoundRobin),
                Algo::new(SchedulerKind::LeastConnections),
            ],
            inflight_per_server: 4,
        };
        let mut seen = Vec::new();
        let rows = simulate(&trace, &opts, &mut |a, n| seen.push((a.label.clone(), n)));
        assert_eq!(seen.len(), 4);
        assert_eq!(rows.len(), 8);
        for r in &rows {
            assert_eq!(r.requests, 2000);
            assert!(r.hit_ratio > 0.0 && r.hit_ratio < 1.0, "{r:?}");
            assert_eq!(r.moved_add, None, "not keyed");
        }
        // a bigger cache never hits less (same placement, LRU is a stack algorithm)
        for pair in rows.chunks(2) {
            assert!(pair[0].hit_ratio >= pair[1].hit_ratio);
            assert!(pair[0].disk_bytes <= pair[1].disk_bytes);
        }
        // one server: every algorithm sees the same cache
        assert_eq!(rows[0].hit_ratio, rows[4].hit_ratio);
    }
}
