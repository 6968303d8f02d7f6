//! Modified consistent hashing: the ketama ring of `consistent`, with ring points in
//! proportion to each server's weight (the `MOD_CH` column of seed 002).
//!
//! Seed 002's text describing the modification is unreadable (garbled Korean); what its
//! tables show is a consistent-hashing variant meant for servers of unequal capacity. The
//! established way to get that from a ring is the one here (HAProxy's consistent hashing
//! does the same): a server of weight `w` gets `virtual_nodes × w` points, so its share of
//! the circle, and of the keys, is about `w / Σw`.
//!
//! Points are the first `virtual_nodes × w` of the server's ketama sequence, so raising a
//! weight only adds points (keys move to that server and nowhere else) and lowering it
//! only removes some (only its keys move). A server of weight 0 has no points.
//!
//! The heaviest server's count is capped at `MAX_POINTS_PER_MEMBER` (10,240 = 160 × 64):
//! past that (weights above 64 at the default 160 points, e.g. weights like 100 and 50),
//! every count is scaled by the same factor, `w × 10,240 / w_max` (at least 1 point), so
//! shares still follow weights, a ring never grows beyond 10,240 points per server, and a
//! rebuild stays cheap even for weights near `u32::MAX`. While scaling is in force, a
//! change of the heaviest weight rescales everyone, moving keys in proportion to the
//! points gained or lost. Bounded load is not applied: `hash_balance_factor` is a
//! `consistent` setting.

use crate::consistent::{Ring, MAX_POINTS_PER_MEMBER};
use crate::keyhash::{key_hash, NoKey};
use crate::{Candidate, Member, Params, Scheduler};

/// A ketama ring with `virtual_nodes × weight` points per server.
#[derive(Debug, Default)]
pub(crate) struct ModifiedConsistent {
    ring: Ring,
    /// Points per unit of weight (`Params::virtual_nodes`).
    virtual_nodes: u32,
    /// Round robin for requests without a key.
    no_key: NoKey,
}

impl ModifiedConsistent {
    pub(crate) fn new(params: &Params) -> Self {
        ModifiedConsistent { virtual_nodes: params.virtual_nodes, ..Self::default() }
    }
}

impl Scheduler for ModifiedConsistent {
    fn rebuild(&mut self, members: &[Member<'_>]) {
        let per_weight = u64::from(self.virtual_nodes);
        let w_max = members.iter().map(|m| u64::from(m.weight)).max().unwrap_or(0);
        let scaled = per_weight.saturating_mul(w_max) > MAX_POINTS_PER_MEMBER;
        self.ring.rebuild(members, |m| {
            let w = u64::from(m.weight);
            match (scaled, w) {
                (false, _) => per_weight * w,
                (true, 0) => 0,
                (true, _) => (w * MAX_POINTS_PER_MEMBER / w_max).max(1),
            }
        });
    }

    fn pick(&mut self, servers: &[Candidate], key: Option<&[u8]>) -> Option<usize> {
        match key {
            Some(key) => self.ring.pick(servers, key_hash(key), |_| true),
            None => self.no_key.pick(servers),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(weight: u32) -> Candidate {
        Candidate { weight, active: 0, usable: true, ..Candidate::default() }
    }

    #[test]
    fn points_follow_weight() {
        let mut s = ModifiedConsistent::new(&Params::default());
        let m = |name, weight| Member { name, weight, maxconn: 0 };
        s.rebuild(&[m("a", 1), m("b", 3), m("c", 0)]);
        assert_eq!(s.ring.len(), 4 * 160);
        let servers = [up(1), up(3), up(0)];
        let mut counts = [0u32; 3];
        for i in 0..4000 {
            counts[s.pick(&servers, Some(format!("/{i}").as_bytes())).unwrap_or(2)] += 1;
        }
        assert_eq!(counts[2], 0);
        assert!((2600..3400).contains(&counts[1]), "{counts:?}");
    }

    #[test]
    fn huge_weights_are_scaled_to_the_cap() {
        let mut s = ModifiedConsistent::new(&Params::default());
        let m = |name, weight| Member { name, weight, maxconn: 0 };
        s.rebuild(&[m("a", 4_000_000_000), m("b", 2_000_000_000), m("c", 1)]);
        assert_eq!(s.ring.len() as u64, MAX_POINTS_PER_MEMBER + MAX_POINTS_PER_MEMBER / 2 + 1);
        s.rebuild(&[m("a", 100), m("b", 50)]);
        assert_eq!(s.ring.len(), 10_240 + 5_120);
    }

    #[test]
    fn raising_a_weight_moves_keys_only_to_that_server() {
        let mut s = ModifiedConsistent::new(&Params::default());
        let m = |name, weight| Member { name, weight, maxconn: 0 };
        s.rebuild(&[m("a", 1), m("b", 1)]);
        let servers = [up(1), up(1)];
        let keys: Vec<String> = (0..500).map(|i| format!("/{i}")).collect();
        let before: Vec<_> = keys.iter().map(|k| s.pick(&servers, Some(k.as_bytes()))).collect();
        s.rebuild(&[m("a", 1), m("b", 2)]);
        for (k, was) in keys.iter().zip(before) {
            let now = s.pick(&servers, Some(k.as_bytes()));
            assert!(now == was || now == Some(1));
        }
    }
}
