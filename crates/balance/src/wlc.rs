//! Weighted least connections, as IPVS does it (`ip_vs_wlc.c`): the eligible server
//! with the least `active / weight`.
//!
//! IPVS counts `active · 256 + inactive`; cswitch has no inactive (idle keep-alive)
//! connections to a server to count, so only `active` remains. Without SED's `+ 1`
//! (`sed.rs`), idle servers tie whatever their weight and take turns. Ratios are compared
//! by cross-multiplying in `u64` (`a·wb` against `b·wa`), which is exact and cannot
//! overflow for `u32` inputs.

use crate::lc::pick_least;
use crate::{Candidate, Member, Params, Scheduler};

/// Weighted least connections with round-robin tie-breaking.
#[derive(Debug, Default)]
pub(crate) struct WeightedLeastConnections {
    /// Where the next scan starts; moves past each pick so ties rotate.
    next: usize,
}

impl WeightedLeastConnections {
    pub(crate) fn new(_: &Params) -> Self {
        Self::default()
    }
}

impl Scheduler for WeightedLeastConnections {
    fn rebuild(&mut self, _: &[Member<'_>]) {}

    fn pick(&mut self, servers: &[Candidate], _key: Option<&[u8]>) -> Option<usize> {
        pick_least(servers, &mut self.next, |a, b| load(a, b.weight).cmp(&load(b, a.weight)))
    }
}

/// `c.active · other_weight`: one side of the cross-multiplied ratio comparison.
fn load(c: &Candidate, other_weight: u32) -> u64 {
    u64::from(c.active) * u64::from(other_weight)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(weight: u32, active: u32) -> Candidate {
        Candidate { weight, active, usable: true, ..Candidate::default() }
    }

    #[test]
    fn weight_scales_load() {
        let mut s = WeightedLeastConnections::default();
        // 3/4 beats 1/1 though it has more connections.
        assert_eq!(s.pick(&[server(1, 1), server(4, 3)], None), Some(1));
        // Idle servers tie whatever their weight (SED would prefer the heavier).
        let idle = [server(1, 0), server(3, 0)];
        let picks: Vec<_> = (0..4).filter_map(|_| s.pick(&idle, None)).collect();
        assert_eq!(picks, [0, 1, 0, 1]);
    }

    #[test]
    fn ties_rotate_and_extremes_do_not_overflow() {
        let mut s = WeightedLeastConnections::default();
        let tied = [server(2, 1), server(4, 2), server(0, 0)];
        let picks: Vec<_> = (0..3).filter_map(|_| s.pick(&tied, None)).collect();
        assert_eq!(picks, [0, 1, 0]);
        let big = [server(u32::MAX, u32::MAX), server(1, 0)];
        assert_eq!(s.pick(&big, None), Some(1));
    }
}
