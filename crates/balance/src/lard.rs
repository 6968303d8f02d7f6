//! LARD and LARD/R: locality-aware request distribution (Pai et al., ASPLOS '98).
//!
//! The key is the request's *target* (URL or path). LARD remembers one server per
//! target: the first request for a target goes to the least-loaded server, later ones
//! follow it, so each target's working set stays in one server's cache. A target moves
//! (to the least-loaded server) when its server's load is above T_high while some server
//! is below T_low, or when its load reaches 2·T_high whatever the others do.
//!
//! LARD/R (replication) remembers a *set* of servers per target and sends each request
//! to the least loaded of the set. When that one is overloaded by the same test, the
//! least-loaded server of the group joins the set and takes the request. The paper drops
//! the set's most loaded member when the set has more than one and has not changed for
//! K = 20 s. This crate has no clock, so the time becomes a count of the target's picks:
//! a set of k servers shrinks after [`STABLE_TURNOVERS`]·T_high·k picks of that target
//! without a change. A set of k holds at most about k·T_high of the target's requests in
//! flight before it grows, so that many picks is at least [`STABLE_TURNOVERS`] complete
//! turnovers of them without overload — the paper's 20 s was likewise many service
//! times. A pick that grew the set is not also a shrink (the paper's pseudo-code would
//! allow both in one step, a swap; a set that just grew is not stable).
//!
//! Load is in-flight requests (`active`) per unit of weight: a server's thresholds are
//! T·wᵢ/w̄, w̄ the mean configured weight, so equal weights compare `active` with T_low
//! and T_high exactly as the paper does. "Least loaded" is the least `(active+1)/weight`,
//! as `wlc` computes it, ties taking turns. Without a key every request goes to the
//! least-loaded server.
//!
//! Bounded tables: 65,536 entries, 4-way set associative (16,384 sets) with LRU inside a
//! set, keyed by the target's XXH3 (the full 64 bits are kept, so two targets share an
//! entry only if their hashes are equal). Evicting a target only costs its locality: its
//! next request is a first sight. LARD/R sets hold at most [`MAX_REPLICAS`] servers;
//! a full set that must grow replaces its most loaded member. A target's server that is
//! not eligible (down, draining, already tried) counts as overloaded: the target moves.
//! Entries follow servers by name across rebuilds; entries of removed servers are
//! dropped.

use std::collections::HashMap;

use xxhash_rust::xxh3::xxh3_64;

use crate::journal::Journal;
use crate::lc::pick_least;
use crate::rr::eligible;
use crate::{Candidate, Member, Params, Scheduler};

/// Entries per set of the table.
const WAYS: usize = 4;
/// Sets in the table; `SETS · WAYS` = 65,536 targets remembered.
const SETS: usize = 16_384;
/// Most servers a LARD/R target is replicated on.
const MAX_REPLICAS: usize = 8;
/// LARD/R's stand-in for K: turnovers of a set's in-flight requests before it shrinks.
const STABLE_TURNOVERS: u32 = 16;

/// LARD: one server per target.
#[derive(Debug)]
pub(crate) struct Lard {
    table: Table<u32>,
    load: Load,
    journal: Journal,
}

impl Lard {
    pub(crate) fn new(params: &Params) -> Self {
        Lard { table: Table::default(), load: Load::new(params), journal: Journal::default() }
    }
}

impl Scheduler for Lard {
    fn rebuild(&mut self, members: &[Member<'_>]) {
        let renumber = self.load.rebuild(members);
        self.table.remap(|server| renumber_one(&renumber, *server).map(|s| *server = s).is_some());
    }

    fn pick(&mut self, servers: &[Candidate], key: Option<&[u8]>) -> Option<usize> {
        let Some(key) = key else { return self.load.least(servers) };
        let hash = xxh3_64(key);
        if let Some(server) = self.table.get(hash) {
            let i = *server as usize;
            if !self.load.must_move(servers, i) {
                return Some(i);
            }
            let n = self.load.least(servers)?;
            if let Some(stored) = index(n) {
                *server = stored;
                self.journal.note(hash, n);
            }
            return Some(n);
        }
        let n = self.load.least(servers)?;
        if let Some(stored) = index(n) {
            self.table.insert(hash, stored);
            self.journal.note(hash, n);
        }
        Some(n)
    }

    fn shares_state(&self) -> bool {
        true
    }

    fn keep_learned(&mut self) {
        self.journal.start();
    }

    fn drain_learned(&mut self, out: &mut Vec<(u64, usize)>) {
        self.journal.drain(out);
    }

    fn teach(&mut self, hash: u64, member: usize) {
        let Some(stored) = index(member).filter(|_| member < self.load.members()) else { return };
        match self.table.get(hash) {
            Some(server) => *server = stored,
            None => self.table.insert(hash, stored),
        }
    }
}

/// LARD/R: a set of servers per target.
#[derive(Debug)]
pub(crate) struct LardReplicated {
    table: Table<Replicas>,
    load: Load,
    journal: Journal,
}

impl LardReplicated {
    pub(crate) fn new(params: &Params) -> Self {
        LardReplicated { table: Table::default(), load: Load::new(params), journal: Journal::default() }
    }
}

impl Scheduler for LardReplicated {
    fn rebuild(&mut self, members: &[Member<'_>]) {
        let renumber = self.load.rebuild(members);
        self.table.remap(|set| {
            let mut kept = Replicas::default();
            for &s in set.members() {
                if let Some(s) = renumber_one(&renumber, u32::from(s)).and_then(|s| u16::try_from(s).ok()) {
                    kept.push(s);
                }
            }
            kept.stable = set.stable;
            *set = kept;
            set.len > 0
        });
    }

    fn pick(&mut self, servers: &[Candidate], key: Option<&[u8]>) -> Option<usize> {
        let Some(key) = key else { return self.load.least(servers) };
        let hash = xxh3_64(key);
        let Some(set) = self.table.get(hash) else {
            let n = self.load.least(servers)?;
            if let Some(stored) = index(n).and_then(|s| u16::try_from(s).ok()) {
                let mut set = Replicas::default();
                set.push(stored);
                self.table.insert(hash, set);
                self.journal.note(hash, n);
            }
            return Some(n);
        };
        let (best, worst) = set.extremes(servers);
        match best {
            Some(n) if !self.load.must_move(servers, n) => {
                set.stable = set.stable.saturating_add(1);
                let shrink_after =
                    STABLE_TURNOVERS.saturating_mul(self.load.high).saturating_mul(u32::from(set.len));
                if set.len > 1 && set.stable > shrink_after {
                    set.remove(worst);
                    set.stable = 0;
                }
                Some(n)
            }
            _ => {
                let p = self.load.least(servers)?;
                if let Some(stored) = u16::try_from(p).ok().filter(|&s| !set.contains(s)) {
                    if usize::from(set.len) == MAX_REPLICAS {
                        set.remove(worst);
                    }
                    set.push(stored);
                    set.stable = 0;
                    self.journal.note(hash, p);
                }
                Some(p)
            }
        }
    }

    fn shares_state(&self) -> bool {
        true
    }

    fn keep_learned(&mut self) {
        self.journal.start();
    }

    fn drain_learned(&mut self, out: &mut Vec<(u64, usize)>) {
        self.journal.drain(out);
    }

    /// Another node's replica joins the target's set (a new target starts with it).
    fn teach(&mut self, hash: u64, member: usize) {
        let Some(stored) = u16::try_from(member).ok().filter(|_| member < self.load.members()) else {
            return;
        };
        match self.table.get(hash) {
            Some(set) if set.contains(stored) => {}
            Some(set) if usize::from(set.len) == MAX_REPLICAS => {
                set.remove(0);
                set.push(stored);
            }
            Some(set) => set.push(stored),
            None => {
                let mut set = Replicas::default();
                set.push(stored);
                self.table.insert(hash, set);
            }
        }
    }
}

/// The servers a LARD/R target is assigned to, and how long the set has been unchanged.
#[derive(Clone, Copy, Debug, Default)]
struct Replicas {
    servers: [u16; MAX_REPLICAS],
    len: u8,
    /// Picks of this target since the set last changed.
    stable: u32,
}

impl Replicas {
    fn members(&self) -> &[u16] {
        &self.servers[..usize::from(self.len)]
    }

    fn contains(&self, s: u16) -> bool {
        self.members().contains(&s)
    }

    fn push(&mut self, s: u16) {
        if usize::from(self.len) < MAX_REPLICAS {
            self.servers[usize::from(self.len)] = s;
            self.len += 1;
        }
    }

    /// Removes the member at position `at` (from [`Replicas::extremes`]).
    fn remove(&mut self, at: usize) {
        let len = usize::from(self.len);
        if at < len {
            self.servers.copy_within(at + 1..len, at);
            self.len -= 1;
        }
    }

    /// The least-loaded eligible member (a server index), and the position in the set of
    /// the member to drop first: an ineligible one, else the most loaded other than the
    /// least loaded.
    fn extremes(&self, servers: &[Candidate]) -> (Option<usize>, usize) {
        let live = |s: u16| servers.get(usize::from(s)).filter(|c| eligible(c));
        let mut best: Option<usize> = None;
        for (at, &s) in self.members().iter().enumerate() {
            if let Some(c) = live(s) {
                match best {
                    Some(b) if !less_loaded(c, &servers[usize::from(self.servers[b])]) => {}
                    _ => best = Some(at),
                }
            }
        }
        let mut worst = None;
        for (at, &s) in self.members().iter().enumerate().filter(|&(at, _)| Some(at) != best) {
            let Some(c) = live(s) else { return (best.map(|b| usize::from(self.servers[b])), at) };
            match worst {
                Some(w) if !less_loaded(&servers[usize::from(self.servers[w])], c) => {}
                _ => worst = Some(at),
            }
        }
        (best.map(|b| usize::from(self.servers[b])), worst.unwrap_or(0))
    }
}

/// Thresholds per server and the least-loaded scan.
#[derive(Debug)]
struct Load {
    /// T_low and T_high as configured (for servers the last rebuild did not list).
    low: u32,
    high: u32,
    /// Per member: T·wᵢ/w̄.
    lows: Vec<u32>,
    highs: Vec<u32>,
    /// Member names, to carry table entries over a rebuild.
    names: Vec<String>,
    /// Where the next least-loaded scan starts, so ties rotate.
    next: usize,
}

impl Load {
    /// Members at the last rebuild.
    fn members(&self) -> usize {
        self.names.len()
    }

    fn new(params: &Params) -> Self {
        Load {
            low: params.lard_low,
            high: params.lard_high,
            lows: Vec::new(),
            highs: Vec::new(),
            names: Vec::new(),
            next: 0,
        }
    }

    /// Takes the new members; returns, per old member index, its new index (or `None`).
    fn rebuild(&mut self, members: &[Member<'_>]) -> Vec<Option<u32>> {
        let index: HashMap<&str, usize> = members.iter().enumerate().map(|(i, m)| (m.name, i)).collect();
        let renumber = self
            .names
            .iter()
            .map(|name| index.get(name.as_str()).and_then(|&i| u32::try_from(i).ok()))
            .collect();
        let weighted = members.iter().filter(|m| m.weight > 0);
        let total: u128 = weighted.clone().map(|m| u128::from(m.weight)).sum();
        let count = weighted.count() as u128;
        let scale = |t: u32, w: u32| match total {
            0 => t,
            _ => {
                u32::try_from((u128::from(t) * u128::from(w) * count + total / 2) / total).unwrap_or(u32::MAX)
            }
        };
        self.lows = members.iter().map(|m| scale(self.low, m.weight)).collect();
        self.highs = members.iter().map(|m| scale(self.high, m.weight)).collect();
        self.names = members.iter().map(|m| m.name.to_string()).collect();
        renumber
    }

    fn thresholds(&self, i: usize) -> (u32, u32) {
        match (self.lows.get(i), self.highs.get(i)) {
            (Some(&low), Some(&high)) => (low, high),
            _ => (self.low, self.high),
        }
    }

    /// LARD's test for moving a target off server `i`: above T_high while some server is
    /// below T_low, or at 2·T_high or more. An ineligible server always fails it.
    fn must_move(&self, servers: &[Candidate], i: usize) -> bool {
        let Some(c) = servers.get(i).filter(|c| eligible(c)) else { return true };
        let (_, high) = self.thresholds(i);
        if c.active <= high {
            return false;
        }
        if u64::from(c.active) >= 2 * u64::from(high) {
            return true;
        }
        servers.iter().enumerate().any(|(j, c)| eligible(c) && c.active < self.thresholds(j).0)
    }

    /// The least-loaded eligible server, by `(active+1)/weight`.
    fn least(&mut self, servers: &[Candidate]) -> Option<usize> {
        pick_least(servers, &mut self.next, |a, b| {
            (u64::from(a.active) + 1)
                .saturating_mul(u64::from(b.weight))
                .cmp(&(u64::from(b.active) + 1).saturating_mul(u64::from(a.weight)))
        })
    }
}

/// `a` carries strictly less load per unit of weight than `b`.
fn less_loaded(a: &Candidate, b: &Candidate) -> bool {
    u64::from(a.active) * u64::from(b.weight) < u64::from(b.active) * u64::from(a.weight)
}

fn index(i: usize) -> Option<u32> {
    u32::try_from(i).ok()
}

fn renumber_one(renumber: &[Option<u32>], old: u32) -> Option<u32> {
    renumber.get(old as usize).copied().flatten()
}

/// A bounded target → value map: set associative, LRU within a set, full hash as tag.
#[derive(Debug)]
struct Table<V> {
    /// Hash of the target per entry; 0 = empty (a target hashing to 0 is stored as 1).
    tags: Vec<u64>,
    values: Vec<V>,
    /// One bit per set that may hold entries, so a rebuild visits only those: groups
    /// that change often (and tests) do not pay for 65,536 empty entries each time.
    used: Vec<u64>,
}

impl<V> Default for Table<V> {
    fn default() -> Self {
        Table { tags: Vec::new(), values: Vec::new(), used: Vec::new() }
    }
}

impl<V: Copy + Default> Table<V> {
    /// The entry of `hash`, made the most recently used of its set.
    fn get(&mut self, hash: u64) -> Option<&mut V> {
        let (tag, set) = Self::place(hash);
        let base = set * WAYS;
        let way = self.tags.get(base..base + WAYS)?.iter().position(|&t| t == tag)?;
        self.tags[base..=base + way].rotate_right(1);
        self.values[base..=base + way].rotate_right(1);
        Some(&mut self.values[base])
    }

    /// Adds `hash` (not present) as the most recently used of its set, evicting the
    /// least recently used when the set is full. Allocates the table on first use.
    fn insert(&mut self, hash: u64, value: V) {
        if self.tags.is_empty() {
            self.tags = vec![0; SETS * WAYS];
            self.values = vec![V::default(); SETS * WAYS];
            self.used = vec![0; SETS / 64];
        }
        let (tag, set) = Self::place(hash);
        let base = set * WAYS;
        let last = self.tags[base..base + WAYS].iter().position(|&t| t == 0).unwrap_or(WAYS - 1);
        self.tags[base..=base + last].rotate_right(1);
        self.values[base..=base + last].rotate_right(1);
        self.tags[base] = tag;
        self.values[base] = value;
        self.used[set / 64] |= 1 << (set % 64);
    }

    /// Keeps the entries for which `keep` (which may rewrite the value) is true.
    fn remap(&mut self, mut keep: impl FnMut(&mut V) -> bool) {
        for (word, bits) in self.used.iter_mut().enumerate() {
            let mut rest = *bits;
            while rest != 0 {
                let set = word * 64 + rest.trailing_zeros() as usize;
                rest &= rest - 1;
                let ways = set * WAYS..(set + 1) * WAYS;
                for (tag, value) in self.tags[ways.clone()].iter_mut().zip(&mut self.values[ways]) {
                    if *tag != 0 && !keep(value) {
                        *tag = 0;
                    }
                }
                if self.tags[set * WAYS..(set + 1) * WAYS].iter().all(|&t| t == 0) {
                    *bits &= !(1 << (set % 64));
                }
            }
        }
    }

    /// The tag and set of a target's hash.
    fn place(hash: u64) -> (u64, usize) {
        (hash.max(1), hash as usize % SETS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(active: u32) -> Candidate {
        Candidate { weight: 1, active, usable: true, ..Candidate::default() }
    }

    fn members(names: &[&'static str]) -> Vec<Member<'static>> {
        names.iter().map(|&name| Member { name, weight: 1, maxconn: 0 }).collect()
    }

    #[test]
    fn lard_journals_its_assignments_and_learns_others() {
        let mut a = Lard::new(&Params::default());
        let mut b = Lard::new(&Params::default());
        let names = members(&["s1", "s2", "s3"]);
        a.rebuild(&names);
        b.rebuild(&names);
        a.keep_learned();
        let servers = [load(5), load(0), load(9)];
        assert_eq!(a.pick(&servers, Some(b"/x")), Some(1));
        let mut learned = Vec::new();
        a.drain_learned(&mut learned);
        assert_eq!(learned, [(xxh3_64(b"/x"), 1)]);
        for (hash, member) in learned {
            b.teach(hash, member);
        }
        // b, left alone, would pick its least loaded (s3 here); taught, it follows a.
        assert_eq!(b.pick(&[load(5), load(4), load(0)], Some(b"/x")), Some(1));
    }

    #[test]
    fn table_is_lru_within_a_set() {
        let mut t: Table<u32> = Table::default();
        // Same set (equal low bits), different tags.
        let h = |i: u64| 7 + i * SETS as u64;
        for i in 0..WAYS as u64 {
            t.insert(h(i), i as u32);
        }
        assert_eq!(t.get(h(0)).copied(), Some(0)); // h(0) is now the most recent
        t.insert(h(9), 9); // evicts h(1), the least recently used
        assert_eq!(t.get(h(1)), None);
        for i in [0, 2, 3, 9] {
            assert_eq!(t.get(h(i)).copied(), Some(i as u32));
        }
    }

    #[test]
    fn thresholds_scale_with_weight() {
        let mut l = Load::new(&Params::default());
        l.rebuild(&[
            Member { name: "a", weight: 1, maxconn: 0 },
            Member { name: "b", weight: 3, maxconn: 0 },
            Member { name: "c", weight: 0, maxconn: 0 },
        ]);
        // w̄ = 2: half and one and a half times 25 and 65.
        assert_eq!(l.thresholds(0), (13, 33));
        assert_eq!(l.thresholds(1), (38, 98));
        assert_eq!(l.thresholds(7), (25, 65));
    }

    #[test]
    fn lard_moves_only_by_the_rule() {
        let mut s = Lard::new(&Params::default());
        s.rebuild(&members(&["a", "b"]));
        let first = s.pick(&[load(0), load(0)], Some(b"/x")).expect("a server");
        let other = 1 - first;
        let mut servers = [load(0), load(0)];
        // Above T_high, but nobody below T_low: stays.
        servers[first] = load(66);
        servers[other] = load(30);
        assert_eq!(s.pick(&servers, Some(b"/x")), Some(first));
        // At 2·T_high: moves even though the other is not below T_low.
        servers[first] = load(130);
        assert_eq!(s.pick(&servers, Some(b"/x")), Some(other));
        // And stays on the new server.
        servers[first] = load(0);
        assert_eq!(s.pick(&servers, Some(b"/x")), Some(other));
    }

    #[test]
    fn lard_drops_entries_of_removed_servers() {
        let mut s = Lard::new(&Params::default());
        s.rebuild(&members(&["a", "b", "c"]));
        let servers = [load(5), load(0), load(9)];
        assert_eq!(s.pick(&servers, Some(b"/x")), Some(1));
        // "b" moves to index 0: the target follows it.
        s.rebuild(&members(&["b", "c"]));
        assert_eq!(s.pick(&[load(50), load(0)], Some(b"/x")), Some(0));
        // "b" is gone: first sight again, least loaded.
        s.rebuild(&members(&["c", "d"]));
        assert_eq!(s.pick(&[load(3), load(1)], Some(b"/x")), Some(1));
    }

    #[test]
    fn replicas_extremes_prefer_dropping_ineligible() {
        let mut set = Replicas::default();
        for s in [0, 1, 2] {
            set.push(s);
        }
        let mut servers = [load(5), load(1), load(9)];
        assert_eq!(set.extremes(&servers), (Some(1), 2));
        servers[0].usable = false;
        assert_eq!(set.extremes(&servers), (Some(1), 0));
        set.remove(0);
        assert_eq!(set.members(), &[1, 2]);
    }

    #[test]
    fn lard_r_shrinks_after_a_stable_run() {
        let params = Params { lard_low: 1, lard_high: 2, ..Params::default() };
        let mut s = LardReplicated::new(&params);
        s.rebuild(&members(&["a", "b"]));
        assert_eq!(s.pick(&[load(0), load(0)], Some(b"/x")), Some(0));
        // a over T_high, b under T_low: b joins.
        assert_eq!(s.pick(&[load(3), load(0)], Some(b"/x")), Some(1));
        // The set {a, b} shrinks after 16·2·2 = 64 stable picks, dropping the most loaded.
        let servers = [load(2), load(1)];
        for _ in 0..64 {
            assert_eq!(s.pick(&servers, Some(b"/x")), Some(1));
        }
        assert_eq!(s.table.get(xxh3_64(b"/x")).map(|set| set.len), Some(2));
        assert_eq!(s.pick(&servers, Some(b"/x")), Some(1));
        assert_eq!(s.table.get(xxh3_64(b"/x")).map(|set| set.members().to_vec()), Some(vec![1]));
    }
}
