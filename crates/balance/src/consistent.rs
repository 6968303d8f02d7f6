//! Consistent hashing on a ketama ring, with optional bounded load.
//!
//! Karger et al. (STOC '97; the `MIT_CH` column of seed 002) place servers and keys on a
//! circle and give each key to the first server clockwise from it. One point per server
//! splits the circle very unevenly, so each server gets many "virtual nodes"; their places
//! are libketama's (last.fm, 2007): MD5 of `"<name>-<i>"` for `i = 0, 1, …`, each digest
//! giving four 32-bit points (bytes 0–3, 4–7, 8–11, 12–15, little-endian). `consistent`
//! gives every server `virtual_nodes` points (160, ketama's count) whatever its weight;
//! `modch` reuses the same [`Ring`] with points proportional to weight.
//!
//! Points depend on nothing but the server's name, so when a server joins only the keys
//! that fall on its points move (to it), and when one leaves only its own keys move, to
//! the next server clockwise. Order in the group does not matter either: points are sorted
//! by value, and two servers landing on the very same point are ordered by name.
//!
//! A key is hashed with XXH3 (not ketama's MD5, which alone costs more than a whole pick
//! should: see `md5`); the hash's high 32 bits are its point, a binary search finds the
//! first ring point at or after it, and the walk goes clockwise past points of ineligible
//! servers. So a server that is down hands its keys to its ring successors, spread over
//! many servers by its many points.
//!
//! Bounded load (Mirrokni, Thorup, Zadimoghaddam, "Consistent Hashing with Bounded Loads",
//! SODA 2018; HAProxy's `hash-balance-factor`): with `hash_balance_factor = c` percent, a
//! server may take a request only if `active + 1 ≤ ⌈c/100 · (A + 1) / E⌉`, where `A` is
//! the in-flight total of the `E` eligible servers; the walk moves on past a server that is
//! full. Counting only eligible servers keeps the bound reachable: the least-loaded of them
//! always passes for any `c ≥ 100`, so values below 100 are taken as 100. Hot keys thus
//! spill over to the next servers on the ring instead of melting their home server, and no
//! server's load after a pick exceeds `c/100` of the mean, rounded up. The cap is the same
//! for every server: the ring gives them equal shares, so equal caps are what "mean" means.

use std::collections::{HashMap, HashSet};

use md5::{Digest, Md5};

use crate::keyhash::{eligible_at, first_eligible, key_hash, ring_point, NoKey};
use crate::rr::eligible;
use crate::{Candidate, Member, Params, Scheduler};

/// Ceiling on one server's ring points: ketama's 160 times 64. Keeps a huge
/// `virtual_nodes` or weight from building a ring of billions of points (`modch` scales
/// weights down to it, see there): at most 10,240 points of 8 bytes per server.
pub(crate) const MAX_POINTS_PER_MEMBER: u64 = 160 * 64;

/// A sorted ring of `(point, member index)`.
///
/// The index is a `u32`, not a `u16`: the pair is padded to 8 bytes either way.
#[derive(Debug, Default)]
pub(crate) struct Ring {
    points: Vec<(u32, u32)>,
    /// Each server's ketama points generated so far, in ketama order, by name: weight
    /// changes and re-adds cost no MD5 (servers that leave are dropped).
    sequences: HashMap<String, Vec<u32>>,
    /// `(name, points)` of the last rebuild: rebuilding the same ring is a no-op.
    last: Vec<(String, usize)>,
}

/// The first `n` ketama points of `name`, extending the cached sequence as needed.
fn ketama_points<'c>(cache: &'c mut HashMap<String, Vec<u32>>, name: &str, n: usize) -> &'c [u32] {
    let seq = cache.entry(name.to_string()).or_default();
    let mut label = String::new();
    while seq.len() < n {
        label.clear();
        label.push_str(name);
        label.push('-');
        label.push_str(&(seq.len() / 4).to_string());
        let digest = Md5::digest(label.as_bytes());
        seq.extend(digest.chunks_exact(4).map(|q| u32::from_le_bytes([q[0], q[1], q[2], q[3]])));
    }
    &seq[..n]
}

impl Ring {
    /// Rebuilds the ring for `members`, giving member `m` `count(m)` points (capped at
    /// [`MAX_POINTS_PER_MEMBER`]). Reuses the ring's allocation.
    pub(crate) fn rebuild(&mut self, members: &[Member<'_>], count: impl Fn(&Member<'_>) -> u64) {
        let counts: Vec<usize> =
            members.iter().map(|m| count(m).min(MAX_POINTS_PER_MEMBER) as usize).collect();
        let same = self.last.len() == members.len()
            && self
                .last
                .iter()
                .zip(members.iter().zip(&counts))
                .all(|((n, c), (m, k))| n == m.name && c == k);
        if same {
            return;
        }
        // Ties on a point go by name, not index, so the group's order never decides a
        // placement: sort (point, rank of name) pairs packed in a u64.
        let mut by_name: Vec<usize> = (0..members.len()).collect();
        by_name.sort_by_key(|&i| members[i].name);
        let mut packed: Vec<u64> = Vec::with_capacity(counts.iter().sum());
        for (rank, &i) in by_name.iter().enumerate() {
            let points = ketama_points(&mut self.sequences, members[i].name, counts[i]);
            packed.extend(points.iter().map(|&p| (u64::from(p) << 32) | rank as u64));
        }
        packed.sort_unstable();
        self.points.clear();
        self.points.extend(packed.iter().filter_map(|&k| {
            let index = u32::try_from(by_name[(k & 0xFFFF_FFFF) as usize]).ok()?;
            Some(((k >> 32) as u32, index))
        }));
        let names: HashSet<&str> = members.iter().map(|m| m.name).collect();
        self.sequences.retain(|name, _| names.contains(name.as_str()));
        self.last = members.iter().zip(&counts).map(|(m, &c)| (m.name.to_string(), c)).collect();
    }

    /// Walks clockwise from the key's point and returns the first eligible server that
    /// `admit` accepts; if none does, the first eligible server met; if the ring meets no
    /// eligible server at all (eligible servers without points), the first eligible one.
    pub(crate) fn pick(
        &self,
        servers: &[Candidate],
        hash: u64,
        admit: impl Fn(&Candidate) -> bool,
    ) -> Option<usize> {
        let point = ring_point(hash);
        let start = self.points.partition_point(|&(p, _)| p < point);
        let (wrapped, clockwise) = self.points.split_at(start);
        let mut first_seen = None;
        for &(_, member) in clockwise.iter().chain(wrapped) {
            let i = member as usize;
            if !eligible_at(servers, i) {
                continue;
            }
            if admit(&servers[i]) {
                return Some(i);
            }
            first_seen.get_or_insert(i);
        }
        first_seen.or_else(|| first_eligible(servers))
    }

    /// Number of points on the ring.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.points.len()
    }
}

/// Ketama consistent hashing, `virtual_nodes` points per server, bounded load optional.
#[derive(Debug, Default)]
pub(crate) struct Consistent {
    ring: Ring,
    /// Points per server (`Params::virtual_nodes`).
    virtual_nodes: u32,
    /// `Params::hash_balance_factor`: 0 = unbounded, else at least 100.
    balance_factor: u32,
    /// Round robin for requests without a key.
    no_key: NoKey,
}

impl Consistent {
    pub(crate) fn new(params: &Params) -> Self {
        let balance_factor = match params.hash_balance_factor {
            0 => 0,
            c => c.max(100),
        };
        Consistent { virtual_nodes: params.virtual_nodes, balance_factor, ..Self::default() }
    }
}

/// The bounded-load cap, `⌈c/100 · (A + 1) / E⌉`, for the eligible servers of `servers`;
/// `None` when none is eligible.
fn load_cap(servers: &[Candidate], factor: u32) -> Option<u64> {
    let (count, total) = servers
        .iter()
        .filter(|c| eligible(c))
        .fold((0u128, 0u128), |(n, a), c| (n + 1, a + u128::from(c.active)));
    if count == 0 {
        return None;
    }
    let cap = (u128::from(factor) * (total + 1)).div_ceil(100 * count);
    Some(u64::try_from(cap).unwrap_or(u64::MAX))
}

impl Scheduler for Consistent {
    fn rebuild(&mut self, members: &[Member<'_>]) {
        let n = u64::from(self.virtual_nodes);
        self.ring.rebuild(members, |_| n);
    }

    fn pick(&mut self, servers: &[Candidate], key: Option<&[u8]>) -> Option<usize> {
        let Some(key) = key else {
            return self.no_key.pick(servers);
        };
        let hash = key_hash(key);
        if self.balance_factor == 0 {
            return self.ring.pick(servers, hash, |_| true);
        }
        let cap = load_cap(servers, self.balance_factor)?;
        self.ring.pick(servers, hash, |c| u64::from(c.active) < cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{members, up};

    #[test]
    fn ketama_points() {
        let mut ring = Ring::default();
        ring.rebuild(&members(&["a"]), |_| 6);
        assert_eq!(ring.len(), 6);
        let d0 = Md5::digest(b"a-0");
        let first = u32::from_le_bytes([d0[0], d0[1], d0[2], d0[3]]);
        assert!(ring.points.iter().any(|&(p, m)| p == first && m == 0));
        assert!(ring.points.windows(2).all(|w| w[0].0 <= w[1].0));
        ring.rebuild(&members(&["a"]), |_| u64::MAX);
        assert_eq!(ring.len() as u64, MAX_POINTS_PER_MEMBER);
    }

    #[test]
    fn cached_sequences_give_the_same_ring() {
        let mut grown = Ring::default();
        grown.rebuild(&members(&["a", "b"]), |_| 6);
        grown.rebuild(&members(&["a", "b"]), |m| if m.name == "a" { 10 } else { 3 });
        let mut fresh = Ring::default();
        fresh.rebuild(&members(&["a", "b"]), |m| if m.name == "a" { 10 } else { 3 });
        assert_eq!(grown.points, fresh.points);
        assert_eq!(grown.len(), 13);
    }

    #[test]
    fn walks_past_ineligible_and_keeps_others() {
        let mut s = Consistent::new(&Params::default());
        s.rebuild(&members(&["a", "b", "c"]));
        let mut servers = [up(), up(), up()];
        let keys: Vec<String> = (0..200).map(|i| format!("/k{i}")).collect();
        let before: Vec<_> = keys.iter().map(|k| s.pick(&servers, Some(k.as_bytes()))).collect();
        servers[1].usable = false;
        for (k, was) in keys.iter().zip(&before) {
            let now = s.pick(&servers, Some(k.as_bytes()));
            assert_ne!(now, Some(1));
            if *was != Some(1) {
                assert_eq!(now, *was);
            }
        }
    }

    #[test]
    fn order_of_members_does_not_matter() {
        let mut s = Consistent::new(&Params::default());
        let servers = [up(), up(), up()];
        s.rebuild(&members(&["a", "b", "c"]));
        let names = ["a", "b", "c"];
        let abc: Vec<_> =
            (0..100).map(|i| names[s.pick(&servers, Some(format!("{i}").as_bytes())).unwrap_or(9)]).collect();
        s.rebuild(&members(&["c", "a", "b"]));
        let names = ["c", "a", "b"];
        let cab: Vec<_> =
            (0..100).map(|i| names[s.pick(&servers, Some(format!("{i}").as_bytes())).unwrap_or(9)]).collect();
        assert_eq!(abc, cab);
    }

    #[test]
    fn bounded_load_spills_a_hot_key() {
        let params = Params { hash_balance_factor: 125, ..Params::default() };
        let mut s = Consistent::new(&params);
        s.rebuild(&members(&["a", "b", "c", "d"]));
        let mut servers = [up(), up(), up(), up()];
        for _ in 0..40 {
            let i = s.pick(&servers, Some(b"/hot")).unwrap_or(9);
            servers[i].active += 1;
        }
        // Cap after 40 picks is ⌈1.25 · 40 / 4⌉ = 13; the home server holds exactly that.
        assert_eq!(servers.iter().map(|c| c.active).max(), Some(13));
        assert_eq!(load_cap(&servers, 125), Some(13));
    }

    #[test]
    fn factor_below_100_is_100() {
        let s = Consistent::new(&Params { hash_balance_factor: 50, ..Params::default() });
        assert_eq!(s.balance_factor, 100);
        assert_eq!(load_cap(&[up(), up()], 100), Some(1));
    }

    #[test]
    fn eligible_without_points_still_picked() {
        let mut s = Consistent::new(&Params::default());
        s.rebuild(&members(&["a"]));
        let mut servers = [up(), up()];
        servers[0].usable = false;
        assert_eq!(s.pick(&servers, Some(b"k")), Some(1));
        servers[1].usable = false;
        assert_eq!(s.pick(&servers, Some(b"k")), None);
    }
}
