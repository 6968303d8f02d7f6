//! Shortest expected delay, as IPVS does it (`ip_vs_sed.c`, after Jiang et al.'s
//! "Design and implementation of LVS"): the eligible server with the least
//! `(active + 1) / weight`, the time the new request would wait if a server of weight `w`
//! serves its `active + 1` requests at rate `w`.
//!
//! The `+ 1` is the point: it counts the request being placed, so an idle heavy server
//! beats an idle light one, and a light server only gets work once the heavy ones have
//! enough. Ratios are compared by cross-multiplying in `u64`, exact and overflow-free for
//! `u32` inputs. IPVS takes the first of equal servers; here they take turns (the shared
//! scan of [`pick_least`]), so an idle group of equals is spread rather than piled.

use std::cmp::Ordering;

use crate::lc::pick_least;
use crate::{Candidate, Member, Params, Scheduler};

/// Shortest expected delay with round-robin tie-breaking.
#[derive(Debug, Default)]
pub(crate) struct ShortestExpectedDelay {
    /// Where the next scan starts; moves past each pick so ties rotate.
    next: usize,
}

impl ShortestExpectedDelay {
    pub(crate) fn new(_: &Params) -> Self {
        Self::default()
    }
}

impl Scheduler for ShortestExpectedDelay {
    fn rebuild(&mut self, _: &[Member<'_>]) {}

    fn pick(&mut self, servers: &[Candidate], _key: Option<&[u8]>) -> Option<usize> {
        pick_least(servers, &mut self.next, expected_delay)
    }
}

/// Orders two servers by `(active + 1) / weight`: `(a+1)·wb` against `(b+1)·wa`.
/// Each product is below 2^64 since both factors are at most 2^32.
pub(crate) fn expected_delay(a: &Candidate, b: &Candidate) -> Ordering {
    let side = |c: &Candidate, other_weight: u32| (u64::from(c.active) + 1) * u64::from(other_weight);
    side(a, b.weight).cmp(&side(b, a.weight))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(weight: u32, active: u32) -> Candidate {
        Candidate { weight, active, usable: true, ..Candidate::default() }
    }

    #[test]
    fn idle_heavy_server_first_then_by_expected_delay() {
        let mut s = ShortestExpectedDelay::default();
        // (0+1)/3 < (0+1)/1.
        assert_eq!(s.pick(&[server(1, 0), server(3, 0)], None), Some(1));
        // (2+1)/3 = 1 = (0+1)/1: a tie, taken in turn from after the last pick.
        assert_eq!(s.pick(&[server(1, 0), server(3, 2)], None), Some(0));
        // (3+1)/3 > (0+1)/1.
        assert_eq!(s.pick(&[server(1, 0), server(3, 3)], None), Some(0));
        // (5+1)/4 = 1.5 < (1+1)/1 = 2, though it has five times the requests.
        assert_eq!(s.pick(&[server(1, 1), server(4, 5)], None), Some(1));
    }

    #[test]
    fn skips_ineligible_rotates_ties_and_does_not_overflow() {
        let mut s = ShortestExpectedDelay::default();
        let mut servers = [server(2, 1), server(2, 1), server(9, 0), server(0, 0)];
        servers[2].usable = false;
        let picks: Vec<_> = (0..4).filter_map(|_| s.pick(&servers, None)).collect();
        assert_eq!(picks, [0, 1, 0, 1]);
        assert_eq!(s.pick(&[server(0, 0)], None), None);
        assert_eq!(s.pick(&[server(u32::MAX, u32::MAX), server(1, u32::MAX - 1)], None), Some(0));
        assert_eq!(s.pick(&[server(u32::MAX, u32::MAX), server(1, 0)], None), Some(1));
    }
}
