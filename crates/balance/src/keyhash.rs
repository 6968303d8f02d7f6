//! The stable hashes every hashing scheduler shares, and what they do without a key.
//!
//! A request key is hashed once, with XXH3-64 (`xxhash_rust::xxh3`): fast on short keys
//! and fixed by its specification, so a key lands on the same server whatever Rust
//! release or platform built the proxy. std's `Hasher`s promise no such thing (SipHash's
//! output is not a stability guarantee, and `RandomState` is seeded per process), so
//! nothing here touches them: placements are effectively part of the on-disk format of
//! every cache behind the balancer.
//!
//! The `md5`, `consistent` (ring points) and `carp` methods hash with what their sources
//! specify instead (MD5, ketama's MD5, CARP's own function): those live in their files.
//!
//! When a request has no key, hashing schedulers fall back to plain round robin over the
//! eligible servers ([`NoKey`]), so keyless traffic is spread rather than piled on one
//! server.

use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use crate::rr::eligible;
use crate::Candidate;

/// The hash of a request key.
pub(crate) fn key_hash(key: &[u8]) -> u64 {
    xxh3_64(key)
}

/// The hash of a server name: the server's fixed place for name-based methods.
pub(crate) fn name_hash(name: &str) -> u64 {
    xxh3_64(name.as_bytes())
}

/// Mixes two hashes into a third that depends on both in every bit: a server's name hash
/// with a key hash (rendezvous-style scores), or a key hash with a retry salt.
///
/// XXH3 over the first value's little-endian bytes, seeded by the second: the byte order
/// is spelled out so the result is the same on every platform.
pub(crate) fn combine(a: u64, b: u64) -> u64 {
    xxh3_64_with_seed(&a.to_le_bytes(), b)
}

/// A 64-bit hash as a point on a 32-bit ring: its high half (XXH3's bits are equally good
/// everywhere; the high half is what `fast_range` would use too).
pub(crate) fn ring_point(hash: u64) -> u32 {
    (hash >> 32) as u32
}

/// `hash` mapped onto `0..n` without a division (Lemire's multiply-shift), as uniform as
/// `hash % n` for any `n` far below 2⁶⁴.
pub(crate) fn fast_range(hash: u64, n: usize) -> usize {
    ((u128::from(hash) * n as u128) >> 64) as usize
}

/// True when `i` names an eligible candidate. Tables built on `rebuild` may name an index
/// past a shorter slice when the proxy has not rebuilt yet; such an entry is skipped.
pub(crate) fn eligible_at(servers: &[Candidate], i: usize) -> bool {
    servers.get(i).is_some_and(eligible)
}

/// The first eligible candidate in member order: the last resort of every method.
pub(crate) fn first_eligible(servers: &[Candidate]) -> Option<usize> {
    servers.iter().position(eligible)
}

/// Round robin over the eligible servers, for requests without a key.
///
/// Same behaviour as `rr`: the cursor remembers where the last pick stopped, so a server
/// skipped while unusable does not shift everyone else's turn.
#[derive(Debug, Default)]
pub(crate) struct NoKey {
    /// Index to try first on the next pick (taken modulo the slice length).
    next: usize,
}

impl NoKey {
    /// The next eligible server in turn, or `None` when none is eligible.
    pub(crate) fn pick(&mut self, servers: &[Candidate]) -> Option<usize> {
        let n = servers.len();
        let picked = (0..n).map(|step| (self.next + step) % n).find(|&i| eligible(&servers[i]))?;
        self.next = picked + 1;
        Some(picked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::up;

    #[test]
    fn hashes_are_pinned() {
        // XXH3's published test vector for the empty input: if this changes, the crate
        // no longer computes XXH3 and every placement in every cluster moves.
        assert_eq!(key_hash(b""), 0x2D06_8005_38D3_94C2);
        assert_eq!(name_hash("web1"), key_hash(b"web1"));
        assert_ne!(combine(1, 2), combine(2, 1));
        assert_eq!(ring_point(0xAABB_CCDD_0011_2233), 0xAABB_CCDD);
    }

    #[test]
    fn fast_range_stays_in_range() {
        assert_eq!(fast_range(0, 7), 0);
        assert_eq!(fast_range(u64::MAX, 7), 6);
        assert_eq!(fast_range(u64::MAX / 2, 2), 0);
        assert_eq!(fast_range(u64::MAX / 2 + 1, 2), 1);
    }

    #[test]
    fn no_key_rotates_over_eligible() {
        let mut rr = NoKey::default();
        let mut servers = [up(), up(), up()];
        servers[1].usable = false;
        let picks: Vec<_> = (0..4).filter_map(|_| rr.pick(&servers)).collect();
        assert_eq!(picks, [0, 2, 0, 2]);
        assert_eq!(rr.pick(&[]), None);
        assert!(!eligible_at(&servers, 1) && !eligible_at(&servers, 3) && eligible_at(&servers, 2));
        assert_eq!(first_eligible(&servers[1..]), Some(1));
    }
}
