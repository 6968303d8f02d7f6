//! Round robin: every usable server in turn, whatever its load or weight.

use crate::{Candidate, Member, Params, Scheduler};

/// Round robin over the usable servers.
///
/// The cursor remembers where the last pick stopped rather than counting picks, so a
/// server skipped while unusable does not shift everyone else's turn.
#[derive(Debug, Default)]
pub(crate) struct RoundRobin {
    /// Index to try first on the next pick (taken modulo the slice length).
    next: usize,
}

impl RoundRobin {
    pub(crate) fn new(_: &Params) -> Self {
        Self::default()
    }
}

impl Scheduler for RoundRobin {
    fn rebuild(&mut self, _: &[Member<'_>]) {}

    fn pick(&mut self, servers: &[Candidate], _key: Option<&[u8]>) -> Option<usize> {
        let n = servers.len();
        let picked = (0..n).map(|step| (self.next + step) % n).find(|&i| eligible(&servers[i]))?;
        self.next = picked + 1;
        Some(picked)
    }
}

/// A server every scheduler may pick: usable and with a non-zero weight.
pub(crate) fn eligible(c: &Candidate) -> bool {
    c.usable && c.weight > 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(weight: u32) -> Candidate {
        Candidate { weight, active: 0, usable: true, ..Candidate::default() }
    }

    #[test]
    fn cycles_and_skips_unusable_and_zero_weight() {
        let mut s = RoundRobin::default();
        let mut servers = [up(1), up(5), up(0), up(1)];
        servers[1].usable = false;
        let picks: Vec<_> = (0..4).filter_map(|_| s.pick(&servers, None)).collect();
        assert_eq!(picks, [0, 3, 0, 3]);
        servers[1].usable = true;
        let picks: Vec<_> = (0..3).filter_map(|_| s.pick(&servers, None)).collect();
        assert_eq!(picks, [0, 1, 3]);
    }

    #[test]
    fn none_without_candidates() {
        let mut s = RoundRobin::default();
        assert_eq!(s.pick(&[], None), None);
        assert_eq!(s.pick(&[up(0)], None), None);
    }
}
