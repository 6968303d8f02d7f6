//! A byte-capacity LRU cache of object ids: one per simulated server.
//!
//! Entries live in a `Vec` linked into a doubly linked recency list by index, with a
//! `HashMap` from id to slot, so a lookup, a promotion and an eviction are each O(1)
//! and nothing is allocated once the cache has reached its working size. Freed slots are
//! reused. Only ids and sizes are kept: the simulator counts bytes, it does not hold them.

use std::collections::HashMap;

/// "No slot": the end of the recency list.
const NIL: usize = usize::MAX;

#[derive(Clone, Debug)]
struct Node {
    key: u32,
    size: u64,
    /// Towards the most recently used end.
    prev: usize,
    /// Towards the least recently used end.
    next: usize,
}

/// An LRU cache holding at most `capacity` bytes of objects.
#[derive(Clone, Debug)]
pub struct Lru {
    capacity: u64,
    used: u64,
    index: HashMap<u32, usize>,
    nodes: Vec<Node>,
    free: Vec<usize>,
    /// Most recently used slot.
    head: usize,
    /// Least recently used slot: the next to go.
    tail: usize,
}

impl Lru {
    /// An empty cache of `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        Lru {
            capacity,
            used: 0,
            index: HashMap::new(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
        }
    }

    /// Serves object `key` of `size` bytes: true on a hit (the object becomes the most
    /// recently used); on a miss the object is inserted, evicting least recently used
    /// objects until it fits. An object larger than the whole cache is never cached.
    pub fn access(&mut self, key: u32, size: u64) -> bool {
        if let Some(&slot) = self.index.get(&key) {
            self.unlink(slot);
            self.push_front(slot);
            return true;
        }
        if size > self.capacity {
            return false;
        }
        while self.used + size > self.capacity {
            self.evict();
        }
        let node = Node { key, size, prev: NIL, next: NIL };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.nodes[slot] = node;
                slot
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        self.index.insert(key, slot);
        self.used += size;
        self.push_front(slot);
        false
    }

    /// True when `key` is cached (does not change recency).
    pub fn contains(&self, key: u32) -> bool {
        self.index.contains_key(&key)
    }

    /// Bytes currently cached.
    pub fn used(&self) -> u64 {
        self.used
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Cached ids from the most to the least recently used.
    pub fn keys(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.len());
        let mut at = self.head;
        while at != NIL {
            out.push(self.nodes[at].key);
            at = self.nodes[at].next;
        }
        out
    }

    fn evict(&mut self) {
        let slot = self.tail;
        debug_assert!(slot != NIL, "evicting from an empty cache");
        self.unlink(slot);
        let node = &self.nodes[slot];
        self.used -= node.size;
        self.index.remove(&node.key);
        self.free.push(slot);
    }

    fn unlink(&mut self, slot: usize) {
        let Node { prev, next, .. } = self.nodes[slot];
        match prev {
            NIL => self.head = next,
            p => self.nodes[p].next = next,
        }
        match next {
            NIL => self.tail = prev,
            n => self.nodes[n].prev = prev,
        }
    }

    fn push_front(&mut self, slot: usize) {
        self.nodes[slot].prev = NIL;
        self.nodes[slot].next = self.head;
        match self.head {
            NIL => self.tail = slot,
            h => self.nodes[h].prev = slot,
        }
        self.head = slot;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_after_first_access() {
        let mut c = Lru::new(100);
        assert!(!c.access(1, 10));
        assert!(c.access(1, 10));
        assert_eq!((c.len(), c.used()), (1, 10));
    }

    #[test]
    fn evicts_least_recently_used_by_bytes() {
        let mut c = Lru::new(100);
        c.access(1, 40);
        c.access(2, 40);
        c.access(1, 40); // 1 is now more recent than 2
        assert_eq!(c.keys(), [1, 2]);
        c.access(3, 30); // 110 > 100: 2 goes
        assert_eq!(c.keys(), [3, 1]);
        assert_eq!(c.used(), 70);
        c.access(4, 100); // needs the whole cache: 1 and 3 go
        assert_eq!(c.keys(), [4]);
        assert_eq!(c.used(), 100);
        assert!(!c.contains(1) && !c.contains(3));
    }

    #[test]
    fn several_small_objects_go_for_one_large() {
        let mut c = Lru::new(10);
        for k in 0..10 {
            c.access(k, 1);
        }
        c.access(3, 1);
        c.access(99, 5);
        // the five least recently used (0, 1, 2, 4, 5) made room
        assert_eq!(c.keys(), [99, 3, 9, 8, 7, 6]);
        assert_eq!(c.used(), 10);
    }

    #[test]
    fn too_large_objects_are_not_cached_and_evict_nothing() {
        let mut c = Lru::new(10);
        c.access(1, 5);
        assert!(!c.access(2, 11));
        assert!(!c.access(2, 11));
        assert_eq!(c.keys(), [1]);
    }

    #[test]
    fn slots_are_reused() {
        let mut c = Lru::new(3);
        for k in 0..1000 {
            c.access(k, 1);
        }
        assert_eq!(c.keys(), [999, 998, 997]);
        assert!(c.nodes.len() <= 4);
    }

    #[test]
    fn matches_a_naive_model() {
        // A Vec kept in recency order is the obvious LRU; compare on a pseudo-random mix.
        let mut c = Lru::new(50);
        let mut model: Vec<(u32, u64)> = Vec::new();
        let mut x = 12345u64;
        for _ in 0..5000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let key = ((x >> 33) % 20) as u32;
            let size = u64::from(key % 7) + 1;
            let hit = match model.iter().position(|&(k, _)| k == key) {
                Some(i) => {
                    let e = model.remove(i);
                    model.insert(0, e);
                    true
                }
                None => {
                    while model.iter().map(|e| e.1).sum::<u64>() + size > 50 {
                        model.pop();
                    }
                    model.insert(0, (key, size));
                    false
                }
            };
            assert_eq!(c.access(key, size), hit);
            assert_eq!(c.keys(), model.iter().map(|e| e.0).collect::<Vec<_>>());
        }
    }
}
