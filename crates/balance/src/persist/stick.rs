//! [`StickTable`]: a bounded, expiring, concurrent map from a session key to a server.
//!
//! Sharded so workers rarely meet on a lock: a key's 64-bit hash picks its shard (high
//! half) and is also the shard's index key, so the key itself is hashed once per call and
//! stored once (in its node). Each shard keeps its entries in a slab of nodes threaded on
//! an intrusive doubly-linked list, most recently used first: get and put are O(1), the
//! least recently used entry is the list's tail, and a freed node is reused, so steady
//! state allocates nothing beyond the key a caller hands to `put`.
//!
//! Entries idle for the table's `idle` time (or older than its `max_life`) are dead:
//! `get` removes them when it meets them, and every `put` first drains a few dead entries
//! from the cold end, so they do not crowd out live ones.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher, RandomState};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Shards of a table built by [`StickTable::new`].
pub const DEFAULT_SHARDS: usize = 16;

/// Most shards [`StickTable::with_shards`] makes (more are pointless and cost memory).
const MAX_SHARDS: usize = 4096;

/// Dead entries a `put` removes from its shard's cold end before inserting: bounded
/// work per call, yet dead entries drain at least as fast as new ones arrive.
const PURGE_PER_PUT: usize = 2;

/// "No node": list ends, chain ends, empty free list.
const NIL: u32 = u32::MAX;

/// A concurrent map key → server id with LRU eviction at a size bound and idle expiry.
///
/// Shared by all workers (`&self` everywhere). Times are passed in, never read: the
/// table is pure apart from its locks.
pub struct StickTable<K> {
    shards: Box<[Mutex<Shard<K>>]>,
    /// Seeded once per table: the shard and index hash of every key.
    hasher: RandomState,
    /// Entries over all shards, kept beside the locks so an empty table costs no lock.
    len: AtomicUsize,
    capacity: usize,
    shard_capacity: usize,
    idle: Duration,
    max_life: Option<Duration>,
}

/// One entry, or (with `key == None`) a free slot whose `next` links the free list.
struct Node<K> {
    key: Option<K>,
    hash: u64,
    server: u64,
    created: Instant,
    used: Instant,
    /// Towards the hot end (more recently used).
    prev: u32,
    /// Towards the cold end; for a free slot, the next free slot.
    next: u32,
    /// The next node whose key has the same 64-bit hash (rare).
    chain: u32,
}

/// One shard: index hash → first node of that hash, the slab, and the LRU list.
struct Shard<K> {
    index: HashMap<u64, u32, BuildHasherDefault<HashIsKey>>,
    nodes: Vec<Node<K>>,
    free: u32,
    head: u32,
    tail: u32,
    len: usize,
}

/// The index keys are already uniform 64-bit hashes: hashing them again is waste.
#[derive(Default)]
struct HashIsKey(u64);

impl Hasher for HashIsKey {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl<K: Hash + Eq + Clone> StickTable<K> {
    /// A table of at most about `capacity` entries over [`DEFAULT_SHARDS`] shards.
    ///
    /// Each shard holds `ceil(capacity / shards)` entries, so a skewed key set can evict
    /// in one shard slightly before the table as a whole is full. Entries unused for
    /// `idle` are dead (`Duration::MAX`: never), as are entries older than `max_life`
    /// since they were created or last moved to another server. `capacity == 0` keeps
    /// nothing.
    pub fn new(capacity: usize, idle: Duration, max_life: Option<Duration>) -> Self {
        Self::with_shards(capacity, idle, max_life, DEFAULT_SHARDS)
    }

    /// As [`StickTable::new`] with `shards` shards (at least 1, at most 4096). One shard
    /// gives an exact LRU over the whole table (tests, small tables).
    pub fn with_shards(capacity: usize, idle: Duration, max_life: Option<Duration>, shards: usize) -> Self {
        let shards = shards.clamp(1, MAX_SHARDS);
        let shard_capacity = capacity.div_ceil(shards).min(NIL as usize - 1);
        Self {
            shards: (0..shards).map(|_| Mutex::new(Shard::new())).collect(),
            hasher: RandomState::new(),
            len: AtomicUsize::new(0),
            capacity,
            shard_capacity,
            idle,
            max_life,
        }
    }

    /// The server `key` sticks to, refreshing its last use; `None` when absent or dead
    /// (a dead entry is removed on the way).
    pub fn get<Q>(&self, key: &Q, now: Instant) -> Option<u64>
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        if self.is_empty() {
            return None;
        }
        let hash = self.hasher.hash_one(key);
        let mut guard = self.lock(hash);
        let shard = &mut *guard;
        let i = shard.find(hash, key)?;
        if self.dead(&shard.nodes[i as usize], now) {
            shard.remove(i);
            self.len.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        let node = &mut shard.nodes[i as usize];
        node.used = node.used.max(now);
        let server = node.server;
        shard.touch(i);
        Some(server)
    }

    /// Makes `key` stick to `server`, as its most recently used entry.
    ///
    /// Overwriting keeps the entry's creation time (its `max_life` clock) unless the
    /// server changes or the old entry was dead. When the shard is full, its least
    /// recently used entry goes.
    pub fn put(&self, key: K, server: u64, now: Instant) {
        if self.shard_capacity == 0 {
            return;
        }
        let hash = self.hasher.hash_one(&key);
        let mut guard = self.lock(hash);
        let shard = &mut *guard;
        if let Some(i) = shard.find(hash, &key) {
            let dead = self.dead(&shard.nodes[i as usize], now);
            let node = &mut shard.nodes[i as usize];
            if dead || node.server != server {
                node.created = now;
            }
            node.server = server;
            node.used = if dead { now } else { node.used.max(now) };
            shard.touch(i);
            return;
        }
        let mut removed = 0;
        while removed < PURGE_PER_PUT
            && shard.tail != NIL
            && self.dead(&shard.nodes[shard.tail as usize], now)
        {
            shard.remove(shard.tail);
            removed += 1;
        }
        if shard.len >= self.shard_capacity && shard.tail != NIL {
            shard.remove(shard.tail);
            removed += 1;
        }
        shard.insert(hash, key, server, now);
        match removed {
            0 => {
                self.len.fetch_add(1, Ordering::Relaxed);
            }
            1 => {}
            n => {
                self.len.fetch_sub(n - 1, Ordering::Relaxed);
            }
        }
    }

    /// Forgets `key`.
    pub fn remove<Q>(&self, key: &Q)
    where
        K: Borrow<Q>,
        Q: ?Sized + Hash + Eq,
    {
        if self.is_empty() {
            return;
        }
        let hash = self.hasher.hash_one(key);
        let mut guard = self.lock(hash);
        let shard = &mut *guard;
        if let Some(i) = shard.find(hash, key) {
            shard.remove(i);
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Drops every entry whose server `keep` refuses: on reload, for servers that left.
    pub fn retain_servers(&self, keep: impl Fn(u64) -> bool) {
        self.remove_where(|node| !keep(node.server));
    }

    /// Removes every dead entry now and returns how many went: for a periodic sweep,
    /// O(len). Not needed for correctness (dead entries are never returned).
    pub fn purge_expired(&self, now: Instant) -> usize {
        self.remove_where(|node| self.dead(node, now))
    }

    /// Entries held, dead ones not yet removed included.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// True when the table holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The size bound the table was built with.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Up to `limit` live entries, most recently used first, with how long each has
    /// been idle: for the admin view. Locks each shard in turn, so it is a near-snapshot.
    pub fn entries(&self, now: Instant, limit: usize) -> Vec<(K, u64, Duration)> {
        let mut out = Vec::new();
        for shard in self.shards.iter() {
            let shard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            let mut i = shard.head;
            let mut taken = 0;
            while i != NIL && taken < limit {
                let node = &shard.nodes[i as usize];
                if let (Some(key), false) = (&node.key, self.dead(node, now)) {
                    out.push((key.clone(), node.server, now.saturating_duration_since(node.used)));
                    taken += 1;
                }
                i = node.next;
            }
        }
        out.sort_by_key(|&(_, _, idle)| idle);
        out.truncate(limit);
        out
    }

    fn lock(&self, hash: u64) -> MutexGuard<'_, Shard<K>> {
        // Multiply-shift on the high half: the low bits stay uniform for the shard's index.
        let shard = ((hash >> 32) * self.shards.len() as u64) >> 32;
        self.shards[shard as usize].lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn dead(&self, node: &Node<K>, now: Instant) -> bool {
        now.saturating_duration_since(node.used) >= self.idle
            || self.max_life.is_some_and(|life| now.saturating_duration_since(node.created) >= life)
    }

    /// Removes the entries `drop` selects from every shard; returns how many.
    fn remove_where(&self, drop: impl Fn(&Node<K>) -> bool) -> usize {
        let mut total = 0;
        for shard in self.shards.iter() {
            let mut guard = shard.lock().unwrap_or_else(PoisonError::into_inner);
            let shard = &mut *guard;
            let mut i = shard.head;
            while i != NIL {
                let next = shard.nodes[i as usize].next;
                if drop(&shard.nodes[i as usize]) {
                    shard.remove(i);
                    self.len.fetch_sub(1, Ordering::Relaxed);
                    total += 1;
                }
                i = next;
            }
        }
        total
    }
}

impl<K> fmt::Debug for StickTable<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StickTable")
            .field("len", &self.len.load(Ordering::Relaxed))
            .field("capacity", &self.capacity)
            .field("shards", &self.shards.len())
            .field("idle", &self.idle)
            .field("max_life", &self.max_life)
            .finish_non_exhaustive()
    }
}

impl<K: Eq> Shard<K> {
    fn new() -> Self {
        Self { index: HashMap::default(), nodes: Vec::new(), free: NIL, head: NIL, tail: NIL, len: 0 }
    }

    fn find<Q>(&self, hash: u64, key: &Q) -> Option<u32>
    where
        K: Borrow<Q>,
        Q: ?Sized + Eq,
    {
        let mut i = *self.index.get(&hash)?;
        while i != NIL {
            let node = &self.nodes[i as usize];
            if node.key.as_ref().is_some_and(|k| k.borrow() == key) {
                return Some(i);
            }
            i = node.chain;
        }
        None
    }

    fn insert(&mut self, hash: u64, key: K, server: u64, now: Instant) {
        let chain = self.index.get(&hash).copied().unwrap_or(NIL);
        let node =
            Node { key: Some(key), hash, server, created: now, used: now, prev: NIL, next: NIL, chain };
        let i = if self.free == NIL {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        } else {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = node;
            i
        };
        self.index.insert(hash, i);
        self.push_front(i);
        self.len += 1;
    }

    /// Unlinks node `i` from the list, the index and its hash chain, and frees its slot.
    fn remove(&mut self, i: u32) {
        self.unlink(i);
        let (hash, after) = (self.nodes[i as usize].hash, self.nodes[i as usize].chain);
        if let Some(first) = self.index.get_mut(&hash) {
            if *first == i {
                if after == NIL {
                    self.index.remove(&hash);
                } else {
                    *first = after;
                }
            } else {
                let mut j = *first;
                while j != NIL && self.nodes[j as usize].chain != i {
                    j = self.nodes[j as usize].chain;
                }
                if j != NIL {
                    self.nodes[j as usize].chain = after;
                }
            }
        }
        let node = &mut self.nodes[i as usize];
        node.key = None;
        node.next = self.free;
        self.free = i;
        self.len -= 1;
    }

    /// Moves node `i` to the hot end.
    fn touch(&mut self, i: u32) {
        if self.head != i {
            self.unlink(i);
            self.push_front(i);
        }
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next) = (self.nodes[i as usize].prev, self.nodes[i as usize].next);
        match prev {
            NIL => self.head = next,
            p => self.nodes[p as usize].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.nodes[n as usize].prev = prev,
        }
    }

    fn push_front(&mut self, i: u32) {
        let head = self.head;
        let node = &mut self.nodes[i as usize];
        node.prev = NIL;
        node.next = head;
        match head {
            NIL => self.tail = i,
            h => self.nodes[h as usize].prev = i,
        }
        self.head = i;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn get_refreshes_so_the_least_recently_used_goes() {
        let t = StickTable::with_shards(2, HOUR, None, 1);
        let now = Instant::now();
        t.put("a", 1, now);
        t.put("b", 2, now);
        assert_eq!(t.get("a", now), Some(1));
        t.put("c", 3, now);
        assert_eq!((t.get("a", now), t.get("b", now), t.get("c", now)), (Some(1), None, Some(3)));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn idle_and_max_life_expire_at_their_bound() {
        let t = StickTable::with_shards(8, Duration::from_secs(10), Some(Duration::from_secs(25)), 1);
        let t0 = Instant::now();
        t.put("k", 7, t0);
        let just_before = t0 + Duration::from_secs(10) - Duration::from_nanos(1);
        assert_eq!(t.get("k", just_before), Some(7));
        assert_eq!(t.get("k", just_before + Duration::from_secs(9)), Some(7));
        // Overwriting with the same server keeps the creation time: max_life still counts from t0.
        t.put("k", 7, t0 + Duration::from_secs(24));
        assert_eq!(t.get("k", t0 + Duration::from_secs(25)), None);
        assert!(t.is_empty());
    }

    #[test]
    fn moving_to_another_server_restarts_max_life() {
        let t = StickTable::with_shards(8, HOUR, Some(Duration::from_secs(10)), 1);
        let t0 = Instant::now();
        t.put("k", 1, t0);
        t.put("k", 2, t0 + Duration::from_secs(9));
        assert_eq!(t.get("k", t0 + Duration::from_secs(15)), Some(2));
    }

    #[test]
    fn colliding_hashes_chain_and_unchain() {
        let mut s: Shard<&str> = Shard::new();
        let now = Instant::now();
        for (k, server) in [("a", 1), ("b", 2), ("c", 3)] {
            s.insert(42, k, server, now);
        }
        assert_eq!(s.find(42, "b"), Some(1));
        s.remove(1);
        assert_eq!((s.find(42, "a"), s.find(42, "b"), s.find(42, "c")), (Some(0), None, Some(2)));
        s.remove(2);
        s.remove(0);
        assert!(s.index.is_empty());
        assert_eq!((s.head, s.tail, s.len), (NIL, NIL, 0));
    }

    #[test]
    fn zero_capacity_keeps_nothing() {
        let t = StickTable::new(0, HOUR, None);
        t.put(1u32, 1, Instant::now());
        assert_eq!((t.len(), t.get(&1, Instant::now())), (0, None));
    }
}
