//! Hash-table round robin (the `HT_RR` column of seed 002): a key seen for the first time
//! goes to the next server in round robin, and the balancer remembers where it sent it,
//! so later requests for the same key go to the same server.
//!
//! New keys are spread as evenly as round robin spreads requests, and nothing moves when
//! servers join: remembered keys stay, new keys start including the new server. When a
//! server leaves, only its keys are forgotten (and assigned anew, round robin over the
//! survivors). The price is memory and shared state: every worker must see the same table
//! ([`Scheduler::shares_state`] is true), and the table is bounded.
//!
//! The table holds 65,536 keys as 8,192 sets of 8 ways, one 64-byte cache line per set,
//! indexed by the low 13 bits of the key's XXH3 hash and tagged with its high 32 bits
//! (45 bits of identity: two live keys are confused once in 3 × 10¹³ pairs, and then
//! merely share a server). Within a set the ways are kept most-recently-used first; a new
//! key takes a free way or evicts the least recently used key of its set, which is then
//! assigned anew if it comes back. Eight ways keep evictions negligible until the table is
//! well filled (10,000 random keys: none expected; 65,536: about 40 % of the sets
//! overflow). A pick never allocates: the table is allocated once, when built.
//!
//! A remembered server that is not eligible (down, draining, already tried) gets the key
//! reassigned round robin, and the table remembers the new server, where the object will
//! now be cached. Weights are ignored except that a server of weight 0 gets no key.
//! Entries hold member indices; `rebuild` remaps them by name, so reordering the group
//! moves nothing.

use crate::journal::Journal;
use crate::keyhash::{eligible_at, key_hash, NoKey};
use crate::{Candidate, Member, Params, Scheduler};

/// Ways per set: 8 × 8-byte entries fill one cache line.
const WAYS: usize = 8;
/// Sets in the table: 8,192 × 8 = 65,536 keys.
const SETS: usize = 8_192;
/// `member` of a free way.
const FREE: u32 = u32::MAX;

/// One remembered key: the high half of its hash and its server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    tag: u32,
    member: u32,
}

/// One set of ways, most recently used first.
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
struct Set([Entry; WAYS]);

const FREE_SET: Set = Set([Entry { tag: 0, member: FREE }; WAYS]);

/// Keys assigned round robin on first sight, then remembered.
#[derive(Debug, Default)]
pub(crate) struct HashTableRoundRobin {
    sets: Vec<Set>,
    /// Member names at the last rebuild, to remap entries by name.
    names: Vec<String>,
    /// Assigns new keys, and picks for requests without a key.
    rr: NoKey,
    /// New and changed assignments, for a cluster to share.
    journal: Journal,
}

impl HashTableRoundRobin {
    pub(crate) fn new(_: &Params) -> Self {
        HashTableRoundRobin { sets: vec![FREE_SET; SETS], ..Self::default() }
    }
}

impl Set {
    /// Makes way `w` the most recently used, holding `entry`.
    fn promote(&mut self, w: usize, entry: Entry) {
        self.0[..=w].rotate_right(1);
        self.0[0] = entry;
    }

    /// Inserts `entry` as most recently used, into a free way or over the least recently
    /// used one.
    fn insert(&mut self, entry: Entry) {
        let w = self.0.iter().position(|e| e.member == FREE).unwrap_or(WAYS - 1);
        self.promote(w, entry);
    }
}

impl Scheduler for HashTableRoundRobin {
    fn rebuild(&mut self, members: &[Member<'_>]) {
        if self.names.len() == members.len() && self.names.iter().zip(members).all(|(n, m)| n == m.name) {
            return; // Weights only: nothing to remap.
        }
        let remap: Vec<u32> = self
            .names
            .iter()
            .map(|old| {
                let new = members.iter().position(|m| m.name == old);
                new.and_then(|i| u32::try_from(i).ok()).unwrap_or(FREE)
            })
            .collect();
        for entry in self.sets.iter_mut().flat_map(|s| s.0.iter_mut()) {
            if entry.member != FREE {
                entry.member = remap.get(entry.member as usize).copied().unwrap_or(FREE);
            }
        }
        self.names = members.iter().map(|m| m.name.to_string()).collect();
    }

    fn pick(&mut self, servers: &[Candidate], key: Option<&[u8]>) -> Option<usize> {
        let Some(key) = key else {
            return self.rr.pick(servers);
        };
        if self.sets.is_empty() {
            return self.rr.pick(servers);
        }
        let hash = key_hash(key);
        let set = &mut self.sets[(hash as usize) & (SETS - 1)];
        let tag = (hash >> 32) as u32;
        let known = set.0.iter().position(|e| e.member != FREE && e.tag == tag);
        if let Some(w) = known {
            let remembered = set.0[w].member as usize;
            let member = if eligible_at(servers, remembered) { remembered } else { self.rr.pick(servers)? };
            set.promote(w, Entry { tag, member: member as u32 });
            if member != remembered {
                self.journal.note(hash, member);
            }
            return Some(member);
        }
        let member = self.rr.pick(servers)?;
        set.insert(Entry { tag, member: member as u32 });
        self.journal.note(hash, member);
        Some(member)
    }

    fn keep_learned(&mut self) {
        self.journal.start();
    }

    fn drain_learned(&mut self, out: &mut Vec<(u64, usize)>) {
        self.journal.drain(out);
    }

    fn teach(&mut self, hash: u64, member: usize) {
        let Ok(member) = u32::try_from(member) else { return };
        if self.sets.is_empty() || member as usize >= self.names.len() {
            return;
        }
        let set = &mut self.sets[(hash as usize) & (SETS - 1)];
        let tag = (hash >> 32) as u32;
        match set.0.iter().position(|e| e.member != FREE && e.tag == tag) {
            Some(w) => set.promote(w, Entry { tag, member }),
            None => set.insert(Entry { tag, member }),
        }
    }

    fn shares_state(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{members, up};

    #[test]
    fn htrr_journals_new_keys_and_learns_others() {
        let (mut a, mut b) =
            (HashTableRoundRobin::new(&Params::default()), HashTableRoundRobin::new(&Params::default()));
        a.rebuild(&members(&["a", "b", "c"]));
        b.rebuild(&members(&["a", "b", "c"]));
        a.keep_learned();
        let servers = [up(), up(), up()];
        let picked: Vec<_> =
            ["/1", "/2", "/3"].iter().map(|k| a.pick(&servers, Some(k.as_bytes()))).collect();
        let mut learned = Vec::new();
        a.drain_learned(&mut learned);
        assert_eq!(learned.len(), 3);
        // b's round robin starts elsewhere; taught, it answers as a did.
        b.pick(&servers, None);
        for (hash, member) in learned {
            b.teach(hash, member);
        }
        let at_b: Vec<_> = ["/1", "/2", "/3"].iter().map(|k| b.pick(&servers, Some(k.as_bytes()))).collect();
        assert_eq!(at_b, picked);
        let mut again = Vec::new();
        b.drain_learned(&mut again);
        assert!(again.is_empty(), "b does not journal (it was not asked to)");
    }

    #[test]
    fn first_sight_round_robin_then_remembered() {
        let mut s = HashTableRoundRobin::new(&Params::default());
        s.rebuild(&members(&["a", "b", "c"]));
        let servers = [up(), up(), up()];
        let first: Vec<_> =
            ["/1", "/2", "/3", "/4"].iter().map(|k| s.pick(&servers, Some(k.as_bytes()))).collect();
        assert_eq!(first, [Some(0), Some(1), Some(2), Some(0)]);
        let again: Vec<_> =
            ["/3", "/1", "/4", "/2"].iter().map(|k| s.pick(&servers, Some(k.as_bytes()))).collect();
        assert_eq!(again, [Some(2), Some(0), Some(0), Some(1)]);
        assert!(s.shares_state());
    }

    #[test]
    fn rebuild_remaps_by_name_and_forgets_the_removed() {
        let mut s = HashTableRoundRobin::new(&Params::default());
        s.rebuild(&members(&["a", "b", "c"]));
        let servers = [up(), up(), up()];
        for k in ["/1", "/2", "/3"] {
            s.pick(&servers, Some(k.as_bytes()));
        }
        s.rebuild(&members(&["c", "a"]));
        let two = [up(), up()];
        assert_eq!(s.pick(&two, Some(b"/1")), Some(1)); // "a"
        assert_eq!(s.pick(&two, Some(b"/3")), Some(0)); // "c"
        let reassigned = s.pick(&two, Some(b"/2"));
        assert!(reassigned.is_some());
        assert_eq!(s.pick(&two, Some(b"/2")), reassigned);
    }

    #[test]
    fn ineligible_remembered_server_is_replaced() {
        let mut s = HashTableRoundRobin::new(&Params::default());
        s.rebuild(&members(&["a", "b"]));
        let mut servers = [up(), up()];
        assert_eq!(s.pick(&servers, Some(b"/k")), Some(0));
        servers[0].usable = false;
        assert_eq!(s.pick(&servers, Some(b"/k")), Some(1));
        servers[0].usable = true;
        assert_eq!(s.pick(&servers, Some(b"/k")), Some(1));
    }

    #[test]
    fn a_full_set_evicts_its_least_recently_used_key() {
        let mut set = FREE_SET;
        for tag in 0..WAYS as u32 {
            set.insert(Entry { tag, member: 0 });
        }
        set.promote(WAYS - 1, Entry { tag: 0, member: 1 }); // tag 0 used again
        set.insert(Entry { tag: 99, member: 2 });
        let tags: Vec<u32> = set.0.iter().map(|e| e.tag).collect();
        assert_eq!(tags, [99, 0, 7, 6, 5, 4, 3, 2]);
    }
}
