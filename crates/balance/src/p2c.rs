//! Power of two choices (Mitzenmacher, "The power of two choices in randomized load
//! balancing", 2001): draw two distinct eligible servers at random and send the request
//! to the less loaded of the two.
//!
//! One random choice leaves the busiest server with Θ(log n / log log n) more than the
//! mean; two choices bring that down to Θ(log log n), nearly as good as scanning all
//! servers, while a stale or shared load figure cannot send a whole burst to the same
//! "least loaded" server, since each request compares a different random pair.
//!
//! The two are drawn uniformly, not by weight; weight enters the comparison, which is
//! SED's `(active + 1) / weight` (cross-multiplied, as in `sed.rs`), so with equal weights
//! it is plain fewer-active, and a heavier server wins the pairs it is drawn into until
//! it carries proportionally more. Drawing by weight as well would count weight twice.
//! Equal loads go to the first drawn, so ties stay random.

use std::cmp::Ordering;

use crate::rng::Rng;
use crate::rr::eligible;
use crate::sed::expected_delay;
use crate::{Candidate, Member, Params, Scheduler};

/// Power of two choices with a generator of its own.
#[derive(Debug)]
pub(crate) struct PowerOfTwo {
    rng: Rng,
}

impl PowerOfTwo {
    pub(crate) fn new(_: &Params) -> Self {
        PowerOfTwo { rng: Rng::new() }
    }
}

impl Scheduler for PowerOfTwo {
    fn rebuild(&mut self, _: &[Member<'_>]) {}

    fn pick(&mut self, servers: &[Candidate], _key: Option<&[u8]>) -> Option<usize> {
        let count = servers.iter().filter(|c| eligible(c)).count();
        if count < 2 {
            return servers.iter().position(eligible);
        }
        // Two distinct ranks among the eligible: the second is drawn from the other
        // count - 1 and shifted past the first.
        let a = self.rng.below(count as u64) as usize;
        let mut b = self.rng.below(count as u64 - 1) as usize;
        if b >= a {
            b += 1;
        }
        let (x, y) = if count == servers.len() { (a, b) } else { nth_eligible_pair(servers, a, b)? };
        match expected_delay(&servers[y], &servers[x]) {
            Ordering::Less => Some(y),
            _ => Some(x),
        }
    }
}

/// Indices of the `a`-th and `b`-th eligible servers (`a != b`, both below the number of
/// eligible servers), found in one pass.
fn nth_eligible_pair(servers: &[Candidate], a: usize, b: usize) -> Option<(usize, usize)> {
    let mut indices = servers.iter().enumerate().filter(|(_, c)| eligible(c)).map(|(i, _)| i);
    let (lo, hi) = (a.min(b), a.max(b));
    let first = indices.nth(lo)?;
    let second = indices.nth(hi - lo - 1)?;
    Some(if a < b { (first, second) } else { (second, first) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(weight: u32, active: u32) -> Candidate {
        Candidate { weight, active, usable: true, ..Candidate::default() }
    }

    fn seeded() -> PowerOfTwo {
        PowerOfTwo { rng: Rng::from_seed(3) }
    }

    #[test]
    fn of_two_the_less_loaded_always() {
        let mut s = seeded();
        for _ in 0..200 {
            assert_eq!(s.pick(&[server(1, 5), server(1, 4)], None), Some(1));
            // (3+1)/4 < (1+1)/1: weight counts.
            assert_eq!(s.pick(&[server(1, 1), server(4, 3)], None), Some(1));
        }
    }

    #[test]
    fn never_the_busiest_and_idle_ties_spread() {
        let mut s = seeded();
        let mut servers = [server(1, 9), server(1, 0), server(1, 0), server(1, 0), server(1, 0)];
        servers[1].usable = false;
        let mut counts = [0u32; 5];
        for _ in 0..3000 {
            counts[s.pick(&servers, None).expect("eligible servers")] += 1;
        }
        assert_eq!(counts[..2], [0, 0]);
        // Three idle equals take 1000 each (σ ≈ 26).
        assert!(counts[2..].iter().all(|&c| (880..1120).contains(&c)), "{counts:?}");
    }

    #[test]
    fn one_or_no_eligible_server() {
        let mut s = seeded();
        assert_eq!(s.pick(&[], None), None);
        assert_eq!(s.pick(&[server(0, 0), server(3, 7)], None), Some(1));
        assert_eq!(s.pick(&[server(0, 0), Candidate { usable: false, ..server(3, 0) }], None), None);
    }

    #[test]
    fn pair_ranks_map_to_eligible_indices_in_draw_order() {
        let mut servers = [server(1, 0); 6];
        servers[0].usable = false;
        servers[3].weight = 0;
        // Eligible: 1, 2, 4, 5.
        assert_eq!(nth_eligible_pair(&servers, 0, 3), Some((1, 5)));
        assert_eq!(nth_eligible_pair(&servers, 2, 1), Some((4, 2)));
    }
}
