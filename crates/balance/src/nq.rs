//! Never queue, after IPVS (`ip_vs_nq.c`): when some eligible server is idle (no request
//! in flight) the request goes to an idle one, else to the shortest expected delay
//! (`sed.rs`).
//!
//! An idle server serves the request at once, whatever its speed, so it beats a faster
//! one with a queue. IPVS takes the first idle server in list order; here the idle
//! servers are ranked like SED ranks them, `1 / weight`, so the heaviest idle server goes
//! first and equal ones take turns, instead of every burst landing on the first server.

use crate::lc::pick_least;
use crate::sed::expected_delay;
use crate::{Candidate, Member, Params, Scheduler};

/// Never queue with round-robin tie-breaking.
#[derive(Debug, Default)]
pub(crate) struct NeverQueue {
    /// Where the next scan starts; moves past each pick so ties rotate.
    next: usize,
}

impl NeverQueue {
    pub(crate) fn new(_: &Params) -> Self {
        Self::default()
    }
}

impl Scheduler for NeverQueue {
    fn rebuild(&mut self, _: &[Member<'_>]) {}

    fn pick(&mut self, servers: &[Candidate], _key: Option<&[u8]>) -> Option<usize> {
        // One scan: idle before busy (false < true), then by expected delay.
        pick_least(servers, &mut self.next, |a, b| {
            (a.active != 0).cmp(&(b.active != 0)).then_with(|| expected_delay(a, b))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(weight: u32, active: u32) -> Candidate {
        Candidate { weight, active, usable: true, ..Candidate::default() }
    }

    #[test]
    fn idle_beats_a_shorter_expected_delay() {
        let mut s = NeverQueue::default();
        // SED would take the second, (1+1)/100 < (0+1)/1; never queue takes the idle one.
        assert_eq!(s.pick(&[server(1, 0), server(100, 1)], None), Some(0));
        // No idle server: SED, (4+1)/10 < (1+1)/2.
        assert_eq!(s.pick(&[server(2, 1), server(10, 4)], None), Some(1));
    }

    #[test]
    fn heaviest_idle_first_equal_idle_in_turn() {
        let mut s = NeverQueue::default();
        let servers = [server(1, 0), server(3, 0), server(3, 0), server(5, 2)];
        let picks: Vec<_> = (0..4).filter_map(|_| s.pick(&servers, None)).collect();
        assert_eq!(picks, [1, 2, 1, 2]);
        let mut busy_or_out = servers;
        busy_or_out[1].usable = false;
        busy_or_out[2].weight = 0;
        assert_eq!(s.pick(&busy_or_out, None), Some(0));
        busy_or_out[0].usable = false;
        assert_eq!(s.pick(&busy_or_out, None), Some(3));
        busy_or_out[3].usable = false;
        assert_eq!(s.pick(&busy_or_out, None), None);
    }
}
