//! First available, as HAProxy's `balance first`: the first eligible server, in member
//! order, that still has room below its `maxconn` (0 = no limit, so such a server takes
//! everything that reaches it).
//!
//! Filling servers in order keeps the fewest of them busy, so the rest can be powered
//! down or scaled in. When every eligible server is full, the one with the least
//! `active / maxconn` takes the request (the first of equals, to keep the order): the
//! scheduler never refuses; queueing for a full server is the proxy's job.

use crate::rr::eligible;
use crate::{Candidate, Member, Params, Scheduler};

/// First server with room, in member order.
#[derive(Debug, Default)]
pub(crate) struct First;

impl First {
    pub(crate) fn new(_: &Params) -> Self {
        Self
    }
}

impl Scheduler for First {
    fn rebuild(&mut self, _: &[Member<'_>]) {}

    fn pick(&mut self, servers: &[Candidate], _key: Option<&[u8]>) -> Option<usize> {
        // The least loaded of the full servers seen so far, in case all are full.
        let mut least_full: Option<usize> = None;
        for (i, c) in servers.iter().enumerate() {
            if !eligible(c) {
                continue;
            }
            if c.maxconn == 0 || c.active < c.maxconn {
                return Some(i);
            }
            match least_full {
                Some(b) if !less_full(c, &servers[b]) => {}
                _ => least_full = Some(i),
            }
        }
        least_full
    }
}

/// `a.active / a.maxconn < b.active / b.maxconn`, cross-multiplied in `u64` (exact, no
/// overflow). Both maxconns are non-zero here: a server without a limit is never full.
fn less_full(a: &Candidate, b: &Candidate) -> bool {
    u64::from(a.active) * u64::from(b.maxconn) < u64::from(b.active) * u64::from(a.maxconn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(maxconn: u32, active: u32) -> Candidate {
        Candidate { weight: 1, active, maxconn, usable: true }
    }

    #[test]
    fn fills_in_order() {
        let mut s = First;
        assert_eq!(s.pick(&[server(2, 0), server(2, 0)], None), Some(0));
        assert_eq!(s.pick(&[server(2, 1), server(2, 0)], None), Some(0));
        assert_eq!(s.pick(&[server(2, 2), server(2, 0)], None), Some(1));
        // No limit: the first server takes everything.
        assert_eq!(s.pick(&[server(0, 1000), server(2, 0)], None), Some(0));
    }

    #[test]
    fn skips_ineligible_and_overflows_to_the_least_full() {
        let mut s = First;
        let mut servers = [server(1, 0), server(4, 4), server(2, 3), server(10, 12)];
        servers[0].usable = false;
        // All full: 4/4 = 1, 3/2 = 1.5, 12/10 = 1.2.
        assert_eq!(s.pick(&servers, None), Some(1));
        servers[1].weight = 0;
        assert_eq!(s.pick(&servers, None), Some(3));
        let equal = [server(2, 4), server(1, 2)];
        assert_eq!(s.pick(&equal, None), Some(0));
        assert_eq!(s.pick(&[server(u32::MAX, u32::MAX), server(1, u32::MAX)], None), Some(0));
        assert_eq!(s.pick(&[], None), None);
    }
}
