//! Smooth weighted round robin, as nginx does it (`ngx_http_upstream_get_peer`).
//!
//! Each pick adds every eligible server's weight to its running score, takes the highest
//! score, and charges the winner the total weight. Over any run of `sum(weights)` picks
//! from a fresh state each server is picked exactly `weight` times, and the picks are
//! interleaved (5,1,1 gives `a a b a c a a`, not `a a a a a b c`).

use crate::rr::eligible;
use crate::{Candidate, Member, Params, Scheduler};

/// Smooth weighted round robin with one running score per server.
#[derive(Debug, Default)]
pub(crate) struct WeightedRoundRobin {
    /// Running score per server, same order as the candidates. `i64` because scores go
    /// negative and a server's score can reach a multiple of the total weight.
    current: Vec<i64>,
    /// Member names, same order: a rebuild carries each score over by name.
    names: Vec<String>,
}

impl WeightedRoundRobin {
    pub(crate) fn new(_: &Params) -> Self {
        Self::default()
    }
}

impl Scheduler for WeightedRoundRobin {
    fn rebuild(&mut self, members: &[Member<'_>]) {
        let score = |name: &str| self.names.iter().position(|n| n == name).map_or(0, |i| self.current[i]);
        let current: Vec<i64> = members.iter().map(|m| score(m.name)).collect();
        self.names = members.iter().map(|m| m.name.to_string()).collect();
        self.current = current;
    }

    fn pick(&mut self, servers: &[Candidate], _key: Option<&[u8]>) -> Option<usize> {
        if self.current.len() != servers.len() {
            // Not rebuilt for this group: start from zero scores. Resizing keeps the
            // allocation when the group shrinks, so steady state never allocates.
            self.current.clear();
            self.current.resize(servers.len(), 0);
        }
        let mut total: i64 = 0;
        let mut best: Option<usize> = None;
        for (i, c) in servers.iter().enumerate() {
            if !eligible(c) {
                continue;
            }
            self.current[i] += i64::from(c.weight);
            total += i64::from(c.weight);
            // Strictly greater: ties go to the earlier server, as in nginx.
            match best {
                Some(b) if self.current[i] <= self.current[b] => {}
                _ => best = Some(i),
            }
        }
        let b = best?;
        self.current[b] -= total;
        Some(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(weight: u32) -> Candidate {
        Candidate { weight, active: 0, usable: true, ..Candidate::default() }
    }

    #[test]
    fn nginx_example_sequence() {
        let mut s = WeightedRoundRobin::default();
        let servers = [up(5), up(1), up(1)];
        let picks: Vec<_> = (0..7).filter_map(|_| s.pick(&servers, None)).collect();
        assert_eq!(picks, [0, 0, 1, 0, 2, 0, 0]);
    }

    #[test]
    fn skips_unusable_and_resets_on_resize() {
        let mut s = WeightedRoundRobin::default();
        let mut servers = vec![up(2), up(1)];
        servers[0].usable = false;
        assert_eq!(s.pick(&servers, None), Some(1));
        assert_eq!(s.pick(&servers, None), Some(1));
        servers.push(up(0));
        servers[0].usable = true;
        let picks: Vec<_> = (0..3).filter_map(|_| s.pick(&servers, None)).collect();
        assert_eq!(picks, [0, 1, 0]);
        assert_eq!(s.pick(&[up(0), up(0)], None), None);
    }
}
