//! One replay: a trace through one algorithm on N servers, each with an LRU cache.
//!
//! The model, kept deliberately simple:
//! - servers `srv01`..`srvNN`, weight 1, no `maxconn`, always usable;
//! - load: the last `inflight_per_server × N` requests are "in flight" and everything
//!   older has completed (a closed system with that many clients, requests finishing in
//!   the order they started, all taking the same time whatever their size or whether
//!   they hit). A server's `active` count is how many of those it was given. Schedulers
//!   that read load (`lc`, `p2c`, `lard`, bounded-load consistent…) see it; hashing
//!   ones ignore it;
//! - caching: each server keeps an LRU of `cache_bytes`; a request hits when its object
//!   is in the chosen server's cache, otherwise its bytes are read "from disk" and the
//!   object is inserted. Caches start empty (cold misses count).

use balance::{Candidate, Member, Params, Scheduler, SchedulerKind};

use crate::lru::Lru;
use crate::trace::Trace;

/// An algorithm to simulate: a scheduler kind with its parameters and a label for
/// reports.
#[derive(Clone, Debug)]
pub struct Algo {
    /// Report label: the config name, or e.g. `consistent+bl125`.
    pub label: String,
    /// The scheduler.
    pub kind: SchedulerKind,
    /// Its parameters.
    pub params: Params,
}

impl Algo {
    /// `kind` with default parameters.
    pub fn new(kind: SchedulerKind) -> Self {
        Algo { label: kind.name().into(), kind, params: Params::default() }
    }

    /// Consistent hashing with bounded load: no server above `factor` % of the mean.
    pub fn bounded(factor: u32) -> Self {
        Algo {
            label: format!("consistent+bl{factor}"),
            kind: SchedulerKind::Consistent,
            params: Params { hash_balance_factor: factor, ..Params::default() },
        }
    }

    /// The default set: every keyed kind, consistent with bounded load (125 %), and
    /// `rr`, `wrr`, `lc`, `p2c` for reference.
    pub fn defaults() -> Vec<Algo> {
        let reference = ["rr", "wrr", "lc", "p2c"].iter().filter_map(|n| SchedulerKind::from_name(n));
        let keyed = SchedulerKind::ALL.iter().copied().filter(SchedulerKind::uses_key);
        Self::with_bounded(reference.chain(keyed))
    }

    /// Every kind, plus consistent with bounded load (125 %).
    pub fn all() -> Vec<Algo> {
        Self::with_bounded(SchedulerKind::ALL.iter().copied())
    }

    /// `kinds` in order, with `consistent+bl125` right after `consistent`.
    fn with_bounded(kinds: impl Iterator<Item = SchedulerKind>) -> Vec<Algo> {
        let mut out = Vec::new();
        for kind in kinds {
            out.push(Algo::new(kind));
            if kind == SchedulerKind::Consistent {
                out.push(Algo::bounded(125));
            }
        }
        out
    }

    /// `default`, `all`, or a comma list of config names and `consistent+bl<N>`.
    pub fn parse_list(spec: &str) -> Result<Vec<Algo>, String> {
        match spec.trim() {
            "default" => return Ok(Self::defaults()),
            "all" => return Ok(Self::all()),
            _ => {}
        }
        spec.split(',').map(str::trim).filter(|s| !s.is_empty()).map(Self::parse_one).collect()
    }

    fn parse_one(name: &str) -> Result<Algo, String> {
        if let Some(f) = name.strip_prefix("consistent+bl") {
            return match f.parse::<u32>() {
                Ok(f) if f > 100 => Ok(Algo::bounded(f)),
                _ => {
                    Err(format!("`{name}`: the bound must be a percentage above 100, e.g. consistent+bl125"))
                }
            };
        }
        SchedulerKind::from_name(name).map(Algo::new).ok_or_else(|| {
            format!(
                "unknown algorithm `{name}` (one of: {}, consistent+bl<N>)",
                SchedulerKind::NAMES.join(", ")
            )
        })
    }

    /// A fresh scheduler; [`Scheduler::rebuild`] still to be called.
    pub fn build(&self) -> Box<dyn Scheduler> {
        self.kind.build(&self.params)
    }

    /// True when the scheduler learns a table (`htrr`, `lard`, `lard_r`): several switch
    /// nodes then disagree unless they share it.
    pub fn kind_learns(&self) -> bool {
        self.build().shares_state()
    }

    /// True when the algorithm places by key, so "keys moved" means something.
    pub fn keyed(&self) -> bool {
        self.kind.uses_key()
    }
}

/// `srv01`, `srv02`, … `srvNN`.
pub fn server_names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("srv{i:02}")).collect()
}

/// Tells `s` its members are `names`, weight 1 each.
pub fn rebuild(s: &mut dyn Scheduler, names: &[String]) {
    let members: Vec<Member<'_>> = names.iter().map(|name| Member { name, weight: 1, maxconn: 0 }).collect();
    s.rebuild(&members);
}

/// Idle, usable candidates of weight 1.
pub fn idle(n: usize) -> Vec<Candidate> {
    vec![Candidate { weight: 1, active: 0, maxconn: 0, usable: true }; n]
}

/// The in-flight window: the servers of the last `capacity` assignments, kept as
/// `active` counts in the candidates.
#[derive(Debug)]
pub struct Inflight {
    ring: Vec<usize>,
    next: usize,
    capacity: usize,
}

impl Inflight {
    /// An empty window of `capacity` requests (0 = no load model: `active` stays 0).
    pub fn new(capacity: usize) -> Self {
        Inflight { ring: Vec::with_capacity(capacity), next: 0, capacity }
    }

    /// Records that `server` got a request: it counts as active, and the oldest request
    /// of a full window completes.
    pub fn assign(&mut self, servers: &mut [Candidate], server: usize) {
        if self.capacity == 0 {
            return;
        }
        if self.ring.len() < self.capacity {
            self.ring.push(server);
        } else {
            let done = std::mem::replace(&mut self.ring[self.next], server);
            servers[done].active -= 1;
            self.next = (self.next + 1) % self.capacity;
        }
        servers[server].active += 1;
    }
}

/// What one replay measured, per cache size where it depends on the cache.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    /// Requests each server got.
    pub requests: Vec<u64>,
    /// Bytes each server sent.
    pub bytes: Vec<u64>,
    /// Requests the scheduler placed nowhere (`pick` returned `None`; should be 0).
    pub unplaced: u64,
    /// Per cache size (in the order given): the caches' results.
    pub caches: Vec<CacheStats>,
}

/// Cache results summed over the servers, for one cache size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Cache size per server, bytes.
    pub capacity: u64,
    /// Requests served from a cache.
    pub hits: u64,
    /// Bytes served from a cache.
    pub hit_bytes: u64,
    /// Bytes read from disk (the misses' sizes).
    pub disk_bytes: u64,
}

impl Replay {
    /// Max over mean of requests per server (1 = perfectly even).
    pub fn imbalance(&self) -> f64 {
        max_over_mean(&self.requests)
    }

    /// Max over mean of bytes per server.
    pub fn byte_imbalance(&self) -> f64 {
        max_over_mean(&self.bytes)
    }

    /// Requests placed on a server.
    pub fn placed(&self) -> u64 {
        self.requests.iter().sum()
    }
}

fn max_over_mean(v: &[u64]) -> f64 {
    let total: u64 = v.iter().sum();
    let max = v.iter().copied().max().unwrap_or(0);
    if total == 0 {
        return 0.0;
    }
    max as f64 * v.len() as f64 / total as f64
}

/// Replays `trace` through `algo` on `n` servers, with one LRU per server for each of
/// `cache_bytes` (the placement does not depend on the cache, so one replay serves all
/// sizes). `inflight_per_server` sizes the load window (see the module doc).
pub fn replay(trace: &Trace, algo: &Algo, n: usize, cache_bytes: &[u64], inflight_per_server: u32) -> Replay {
    let mut sched = algo.build();
    rebuild(&mut *sched, &server_names(n));
    let mut servers = idle(n);
    let mut window = Inflight::new(inflight_per_server as usize * n);
    let mut caches: Vec<Vec<Lru>> = cache_bytes.iter().map(|&c| vec![Lru::new(c); n]).collect();
    let mut stats: Vec<CacheStats> =
        cache_bytes.iter().map(|&capacity| CacheStats { capacity, ..CacheStats::default() }).collect();
    let mut out = Replay { requests: vec![0; n], bytes: vec![0; n], unplaced: 0, caches: Vec::new() };
    for &id in trace.requests() {
        let Some(s) = sched.pick(&servers, Some(trace.key(id))) else {
            out.unplaced += 1;
            continue;
        };
        let size = trace.size(id);
        window.assign(&mut servers, s);
        out.requests[s] += 1;
        out.bytes[s] += size;
        for (per_server, st) in caches.iter_mut().zip(&mut stats) {
            if per_server[s].access(id, size) {
                st.hits += 1;
                st.hit_bytes += size;
            } else {
                st.disk_bytes += size;
            }
        }
    }
    out.caches = stats;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace(text: &str) -> Trace {
        Trace::parse_plain("t", text).unwrap()
    }

    #[test]
    fn round_robin_spreads_and_each_server_caches_what_it_saw() {
        // rr on 2 servers: /a goes to srv01 and srv02 alternately, so only its third and
        // fourth requests hit.
        let t = trace("/a 10\n/a 10\n/a 10\n/a 10\n");
        let r = replay(&t, &Algo::new(SchedulerKind::RoundRobin), 2, &[100, 5], 0);
        assert_eq!(r.requests, [2, 2]);
        assert_eq!(r.imbalance(), 1.0);
        assert_eq!(r.caches[0], CacheStats { capacity: 100, hits: 2, hit_bytes: 20, disk_bytes: 20 });
        assert_eq!(r.caches[1], CacheStats { capacity: 5, hits: 0, hit_bytes: 0, disk_bytes: 40 });
    }

    #[test]
    fn one_server_takes_everything() {
        let t = Trace::zipf(50, 500, 0.8);
        for algo in [SchedulerKind::RoundRobin, SchedulerKind::LeastConnections] {
            let r = replay(&t, &Algo::new(algo), 1, &[u64::MAX], 8);
            assert_eq!(r.requests, [500]);
            assert_eq!(
                r.caches[0].hits,
                500 - t.requests().iter().collect::<std::collections::HashSet<_>>().len() as u64
            );
        }
    }

    #[test]
    fn window_counts_the_last_assignments() {
        let mut servers = idle(3);
        let mut w = Inflight::new(3);
        for s in [0, 0, 1, 2, 2] {
            w.assign(&mut servers, s);
        }
        // in flight: 1, 2, 2
        assert_eq!(servers.iter().map(|c| c.active).collect::<Vec<_>>(), [0, 1, 2]);
        let mut off = Inflight::new(0);
        off.assign(&mut servers, 0);
        assert_eq!(servers[0].active, 0);
    }

    #[test]
    fn least_connections_sees_the_window() {
        // With a window, lc is as even as rr; the load model must reach the scheduler.
        let t = Trace::zipf(100, 3000, 0.8);
        let r = replay(&t, &Algo::new(SchedulerKind::LeastConnections), 4, &[], 8);
        assert!(r.imbalance() < 1.05, "{:?}", r.requests);
    }

    #[test]
    fn algorithm_lists() {
        let d: Vec<String> = Algo::defaults().into_iter().map(|a| a.label).collect();
        assert_eq!(&d[..4], ["rr", "wrr", "lc", "p2c"]);
        assert!(d.contains(&"md5".to_string()) && d.contains(&"consistent+bl125".to_string()));
        assert!(!d.contains(&"wlc".to_string()));
        let all = Algo::all();
        assert_eq!(all.len(), SchedulerKind::ALL.len() + 1);
        let l = Algo::parse_list("rr, consistent+bl150,jump").unwrap();
        assert_eq!(
            l.iter().map(|a| a.label.as_str()).collect::<Vec<_>>(),
            ["rr", "consistent+bl150", "jump"]
        );
        assert_eq!(l[1].params.hash_balance_factor, 150);
        assert!(Algo::parse_list("rr,nope").unwrap_err().contains("nope"));
        assert!(Algo::parse_list("consistent+bl50").is_err());
    }
}
