//! Weighted least connections, as IPVS does it (`ip_vs_wlc.c`): the eligible server
//! with the least `(active + 1) / weight`.
//!
//! The `+ 1` counts the request being placed, so an idle heavy server beats an idle light
//! one. Ratios are compared by cross-multiplying in `u64` (`(a+1)·wb` against
//! `(b+1)·wa`), which is exact and cannot overflow for `u32` inputs.

use crate::lc::pick_least;
use crate::{Candidate, Scheduler};

/// Weighted least connections with round-robin tie-breaking.
#[derive(Debug, Default)]
pub(crate) struct WeightedLeastConnections {
    /// Where the next scan starts; moves past each pick so ties rotate.
    next: usize,
}

impl Scheduler for WeightedLeastConnections {
    fn pick(&mut self, servers: &[Candidate]) -> Option<usize> {
        pick_least(servers, &mut self.next, |a, b| load(a, b.weight).cmp(&load(b, a.weight)))
    }
}

/// `(c.active + 1) · other_weight`: one side of the cross-multiplied ratio comparison.
fn load(c: &Candidate, other_weight: u32) -> u64 {
    (u64::from(c.active) + 1) * u64::from(other_weight)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(weight: u32, active: u32) -> Candidate {
        Candidate { weight, active, usable: true }
    }

    #[test]
    fn weight_scales_load() {
        let mut s = WeightedLeastConnections::default();
        // (3+1)/4 = 1 beats (1+1)/1 = 2 though it has more connections.
        assert_eq!(s.pick(&[server(1, 1), server(4, 3)]), Some(1));
        // Idle: the heavier server first, (0+1)/3 < (0+1)/1.
        assert_eq!(s.pick(&[server(1, 0), server(3, 0)]), Some(1));
    }

    #[test]
    fn ties_rotate_and_extremes_do_not_overflow() {
        let mut s = WeightedLeastConnections::default();
        let tied = [server(2, 1), server(4, 3), server(0, 0)];
        let picks: Vec<_> = (0..3).filter_map(|_| s.pick(&tied)).collect();
        assert_eq!(picks, [0, 1, 0]);
        let big = [server(u32::MAX, u32::MAX), server(1, 0)];
        assert_eq!(s.pick(&big), Some(1));
    }
}
