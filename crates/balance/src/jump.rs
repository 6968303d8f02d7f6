//! Jump consistent hash (Lamping & Veach, "A Fast, Minimal Memory, Consistent Hash
//! Algorithm", 2014).
//!
//! No table and no ring: from the key's 64-bit hash a short pseudo-random sequence of
//! "jumps" decides which of `N` buckets the key is in, in O(log N) steps, such that going
//! from `N` to `N + 1` buckets moves exactly the keys that land in the new bucket (an
//! expected `1/(N+1)`) and nothing else. Perfectly even shares and no memory.
//!
//! The catch is that buckets are positions, not names: bucket `i` is the `i`-th member.
//! The minimal-movement property therefore holds for adding or removing the *last*
//! member. Removing a member in the middle renumbers every member after it, and keys move
//! between them (the hashing tests measure this too). Use `jump` for groups that grow and
//! shrink at the end, or reach for `consistent`/`maglev` otherwise.
//!
//! A bucket whose server is not eligible (down, draining, tried, weight 0) is handled
//! without renumbering: the key's hash is re-mixed with a retry salt and jumped again, up
//! to [`RETRIES`] times, which spreads a dead server's keys evenly over the others and
//! leaves everyone else's keys alone; after that, the next eligible server after the
//! original bucket. Weights are otherwise ignored: jump has no notion of them.

use crate::keyhash::{combine, key_hash, NoKey};
use crate::rr::eligible;
use crate::{Candidate, Member, Params, Scheduler};

/// Re-jumps with a salted hash before walking from the home bucket. Eight retries find an
/// eligible bucket with probability `1 − f⁸` when a fraction `f` of the group is out.
const RETRIES: u64 = 8;

/// The bucket in `0..buckets` of a key with hash `key` (the paper's function, verbatim).
fn jump(mut key: u64, buckets: usize) -> usize {
    let (mut b, mut j): (i64, i64) = (-1, 0);
    let n = i64::try_from(buckets).unwrap_or(i64::MAX);
    while j < n {
        b = j;
        key = key.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((key >> 33) + 1) as f64)) as i64;
    }
    b as usize
}

/// Jump consistent hash over the member order.
#[derive(Debug, Default)]
pub(crate) struct Jump {
    /// Round robin for requests without a key.
    no_key: NoKey,
}

impl Jump {
    pub(crate) fn new(_: &Params) -> Self {
        Self::default()
    }
}

impl Scheduler for Jump {
    fn rebuild(&mut self, _: &[Member<'_>]) {}

    fn pick(&mut self, servers: &[Candidate], key: Option<&[u8]>) -> Option<usize> {
        let Some(key) = key else {
            return self.no_key.pick(servers);
        };
        let n = servers.len();
        if n == 0 {
            return None;
        }
        let hash = key_hash(key);
        let home = jump(hash, n);
        if eligible(&servers[home]) {
            return Some(home);
        }
        for salt in 1..=RETRIES {
            let b = jump(combine(hash, salt), n);
            if eligible(&servers[b]) {
                return Some(b);
            }
        }
        (1..n).map(|step| (home + step) % n).find(|&i| eligible(&servers[i]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::up;

    #[test]
    fn matches_the_reference_implementation() {
        // Published vectors generated from the paper's C++ code, buckets 1, 2, 3, …
        let vectors: [(u64, &[usize]); 4] = [
            (0, &[0; 20]),
            (1, &[0, 0, 0, 0, 0, 0, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 17, 17]),
            (0xDEAD_BEEF, &[0, 1, 2, 3, 3, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 16, 16, 16]),
            (0x0DDC_0FFE_EBAD_F00D, &[0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 15, 15, 15, 15]),
        ];
        for (key, buckets) in vectors {
            let got: Vec<usize> = (1..=buckets.len()).map(|n| jump(key, n)).collect();
            assert_eq!(got, buckets, "key {key:#x}");
        }
    }

    #[test]
    fn even_shares() {
        let mut counts = [0u32; 5];
        for i in 0..50_000u64 {
            counts[jump(combine(i, 0), 5)] += 1;
        }
        assert!(counts.iter().all(|&c| (9_500..10_500).contains(&c)), "{counts:?}");
    }

    #[test]
    fn rejumps_off_an_ineligible_bucket() {
        let mut s = Jump::default();
        let mut servers = [up(), up(), up()];
        let home = s.pick(&servers, Some(b"/a")).unwrap_or(9);
        servers[home].usable = false;
        let other = s.pick(&servers, Some(b"/a")).unwrap_or(9);
        assert!(other != home && other < 3);
        servers = [Candidate { usable: false, ..up() }; 3];
        assert_eq!(s.pick(&servers, Some(b"/a")), None);
    }
}
