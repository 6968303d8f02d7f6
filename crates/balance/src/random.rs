//! Weighted random: each eligible server with probability `weight / sum(weights)`.
//!
//! Stateless apart from the generator, so it needs no coordination between workers and
//! no memory of the group, at the price of short-run unevenness that round robin does not
//! have. Two passes over the candidates and no allocation: one sums the eligible weights,
//! the other finds the server under a uniform draw below that sum.

use crate::rng::Rng;
use crate::rr::eligible;
use crate::{Candidate, Member, Params, Scheduler};

/// Weighted random selection with a generator of its own.
#[derive(Debug)]
pub(crate) struct Random {
    rng: Rng,
}

impl Random {
    pub(crate) fn new(_: &Params) -> Self {
        Random { rng: Rng::new() }
    }
}

impl Scheduler for Random {
    fn rebuild(&mut self, _: &[Member<'_>]) {}

    fn pick(&mut self, servers: &[Candidate], _key: Option<&[u8]>) -> Option<usize> {
        // u64: a group's weights can add up past u32::MAX.
        let total: u64 = servers.iter().map(share).sum();
        if total == 0 {
            return None;
        }
        let r = self.rng.below(total);
        // The pick is the first server whose running sum of shares passes `r`, i.e. the
        // number of servers whose running sum is still at most `r`. Counting them instead
        // of stopping at the first has no branch to mispredict: a third faster with 16.
        let mut sum = 0;
        let mut picked = 0;
        for c in servers {
            sum += share(c);
            picked += usize::from(sum <= r);
        }
        // r < total, so some running sum passes it: `picked` is in range, and its share
        // is not zero, so it is eligible.
        Some(picked)
    }
}

/// The server's weight if it is eligible, else 0.
fn share(c: &Candidate) -> u64 {
    if eligible(c) {
        u64::from(c.weight)
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(weight: u32) -> Candidate {
        Candidate { weight, usable: true, ..Candidate::default() }
    }

    #[test]
    fn shares_follow_weights() {
        let mut s = Random { rng: Rng::from_seed(1) };
        let mut servers = [server(1), server(3), server(9), server(4)];
        servers[2].usable = false;
        let mut counts = [0u32; 4];
        for _ in 0..8000 {
            counts[s.pick(&servers, None).expect("eligible servers")] += 1;
        }
        // Expected 1000, 3000, 0, 4000; about 5 standard deviations of slack.
        assert!((850..1150).contains(&counts[0]), "{counts:?}");
        assert!((2780..3220).contains(&counts[1]), "{counts:?}");
        assert_eq!(counts[2], 0);
        assert!((3780..4220).contains(&counts[3]), "{counts:?}");
    }

    #[test]
    fn none_when_nothing_eligible_and_huge_weights_add_up() {
        let mut s = Random::new(&Params::default());
        assert_eq!(s.pick(&[], None), None);
        assert_eq!(s.pick(&[server(0), Candidate { usable: false, ..server(5) }], None), None);
        let huge = [server(u32::MAX), server(u32::MAX), server(0), server(u32::MAX)];
        for _ in 0..100 {
            assert!(matches!(s.pick(&huge, None), Some(0 | 1 | 3)));
        }
    }
}
