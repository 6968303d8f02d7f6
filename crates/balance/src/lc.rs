//! Least connections: the eligible server with the fewest requests in flight.
//!
//! Also holds [`pick_least`], the tie-breaking scan that weighted least connections
//! shares: equal servers take turns, so an idle group is spread like round robin instead
//! of piling every request on the first server.

use std::cmp::Ordering;

use crate::rr::eligible;
use crate::{Candidate, Member, Params, Scheduler};

/// Least connections with round-robin tie-breaking.
#[derive(Debug, Default)]
pub(crate) struct LeastConnections {
    /// Where the next scan starts; moves past each pick so ties rotate.
    next: usize,
}

impl LeastConnections {
    pub(crate) fn new(_: &Params) -> Self {
        Self::default()
    }
}

impl Scheduler for LeastConnections {
    fn rebuild(&mut self, _: &[Member<'_>]) {}

    fn pick(&mut self, servers: &[Candidate], _key: Option<&[u8]>) -> Option<usize> {
        // One integer per server — (active, distance from the cursor) — and its minimum:
        // no data-dependent branch, which the generic scan's comparator would cost here.
        let n = servers.len();
        let start = self.next % n.max(1);
        let (_, best) = servers
            .iter()
            .enumerate()
            .filter(|(_, c)| eligible(c))
            .map(|(i, c)| {
                let distance = if i >= start { i - start } else { i + n - start };
                ((u64::from(c.active) << 32) | distance as u64, i)
            })
            .min()?;
        self.next = best + 1;
        Some(best)
    }
}

/// The eligible server that `cmp` orders first, scanning from `*next` round the slice so
/// the first of several equal servers is the one after the previous pick.
/// Advances `*next` past the pick.
pub(crate) fn pick_least(
    servers: &[Candidate],
    next: &mut usize,
    cmp: impl Fn(&Candidate, &Candidate) -> Ordering,
) -> Option<usize> {
    if servers.is_empty() {
        return None;
    }
    // One division per pick, not one per server: scan `start..` then `..start`.
    let start = *next % servers.len();
    let (before, from) = servers.split_at(start);
    let order = from.iter().enumerate().map(|(i, c)| (i + start, c)).chain(before.iter().enumerate());
    let mut best: Option<(usize, &Candidate)> = None;
    for (i, c) in order {
        if !eligible(c) {
            continue;
        }
        match best {
            Some((_, b)) if cmp(c, b) != Ordering::Less => {}
            _ => best = Some((i, c)),
        }
    }
    let (b, _) = best?;
    *next = b + 1;
    Some(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(active: u32) -> Candidate {
        Candidate { weight: 1, active, usable: true, ..Candidate::default() }
    }

    #[test]
    fn fewest_active_wins_and_ties_rotate() {
        let mut s = LeastConnections::default();
        assert_eq!(s.pick(&[up(3), up(1), up(2)], None), Some(1));
        let idle = [up(0), up(0), up(0)];
        let picks: Vec<_> = (0..4).filter_map(|_| s.pick(&idle, None)).collect();
        assert_eq!(picks, [2, 0, 1, 2]);
    }

    #[test]
    fn ignores_unusable_and_zero_weight() {
        let mut s = LeastConnections::default();
        let mut servers = [up(0), up(0), up(9)];
        servers[0].usable = false;
        servers[1].weight = 0;
        assert_eq!(s.pick(&servers, None), Some(2));
        servers[2].usable = false;
        assert_eq!(s.pick(&servers, None), None);
    }
}
