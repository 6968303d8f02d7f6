//! CARP, the Cache Array Routing Protocol (Valloppillil & Ross, draft-vinod-carp-v1-03,
//! 1998; the `CARP` column of seed 002), as Squid implements it.
//!
//! Every server gets a score for the key, and the highest score wins: rendezvous (highest
//! random weight) hashing. A server joining takes from each other server only the keys it
//! now outscores them on; a server leaving gives its keys to each key's runner-up. No
//! table, no ring, one pass over the servers per pick.
//!
//! The draft's own 32-bit hash functions are part of the protocol (two CARP proxies must
//! agree on every URL), so they are implemented here as written, with wrapping `u32`
//! arithmetic and `ROTATE_LEFT` = [`u32::rotate_left`]:
//!
//! - member hash: `h += ROTATE_LEFT(h, 19) + c` over the name's bytes, then
//!   `h += h * 0x62531965; h = ROTATE_LEFT(h, 21)`;
//! - URL hash: `h += ROTATE_LEFT(h, 19) + c` over the key's bytes (bytes are unsigned;
//!   Squid adds C `char`s, signed on x86, which differs only for non-ASCII bytes);
//! - combined: `x = url ^ member; x += x * 0x62531965; x = ROTATE_LEFT(x, 21)`.
//!
//! Weights enter as the draft's load factor multipliers. With `P_k` the relative load
//! (`weight / Σ weight`) of the `K` weighted servers sorted ascending:
//! `X_1 = (K·P_1)^(1/K)`, and for `k > 1`
//! `X_k = ((K−k+1)(P_k − P_{k−1}) / (X_1⋯X_{k−1}) + X_{k−1}^(K−k+1))^(1/(K−k+1))`.
//! The score is `combined × X_k` as a float. Equal weights give `X = 1` for everyone
//! (plain rendezvous hashing, minimal key movement); unequal weights make every
//! multiplier depend on every weight, so adding a server then also shifts some keys
//! between the others. The draft asks for 32-bit floats; `f64` (as Squid) is used, and
//! `powf` is the platform's: a last-bit difference between C libraries could only flip
//! a key whose two best scores agree to 16 digits. Weight 0 means multiplier 0, never
//! picked.
//!
//! The draft's combination is weak in one known way: `x · 0x62531966` (the `+=` form) is
//! even, and its bits 1–10 depend only on bits 0–9 of `x`; after `ROTATE_LEFT(·, 21)` those
//! are the score's top ten bits. So which server wins a key is decided mostly by the low
//! ten bits of `url ^ member`, and the shares carry a bias that depends on the servers'
//! names (not on the keys): the hashing tests measure 0.81–1.15 of the fair share over 16
//! equal servers, and 0.85–1.17 of `w/Σw` for weights 1, 2, 3, 4. It is kept: two CARP
//! implementations must agree on every placement, and that is what the draft specifies.

use crate::keyhash::NoKey;
use crate::rr::eligible;
use crate::{Candidate, Member, Params, Scheduler};

/// The draft's multiplier constant.
const CARP_MULT: u32 = 0x6253_1965;

/// CARP's hash of a member proxy's name.
fn member_hash(name: &str) -> u32 {
    let mut h = url_hash(name.as_bytes());
    h = h.wrapping_add(h.wrapping_mul(CARP_MULT));
    h.rotate_left(21)
}

/// CARP's hash of a URL (here: the request key).
fn url_hash(key: &[u8]) -> u32 {
    key.iter().fold(0u32, |h, &c| h.wrapping_add(h.rotate_left(19).wrapping_add(u32::from(c))))
}

/// CARP's combination of a URL hash with a member hash.
fn combined_hash(url: u32, member: u32) -> u32 {
    let x = url ^ member;
    x.wrapping_add(x.wrapping_mul(CARP_MULT)).rotate_left(21)
}

/// The draft's load factor multipliers for `weights` (0 for weight 0), in member order.
fn load_multipliers(weights: &[u32]) -> Vec<f64> {
    let total: f64 = weights.iter().map(|&w| f64::from(w)).sum();
    let mut order: Vec<usize> = (0..weights.len()).filter(|&i| weights[i] > 0).collect();
    order.sort_by_key(|&i| weights[i]);
    let mut multipliers = vec![0.0; weights.len()];
    let big_k = order.len();
    let (mut p_last, mut x_last, mut product) = (0.0, 0.0, 1.0);
    for (k, &i) in order.iter().enumerate() {
        // K − k + 1 with k counted from 1; X_0 = 0 makes the first step X_1 = (K·P_1)^(1/K).
        let kk1 = (big_k - k) as f64;
        let p = f64::from(weights[i]) / total;
        let mut x = kk1 * (p - p_last) / product;
        x += f64::powf(x_last, kk1);
        x = x.powf(1.0 / kk1);
        multipliers[i] = x;
        product *= x;
        x_last = x;
        p_last = p;
    }
    multipliers
}

/// CARP: highest `combined hash × load factor multiplier` among the eligible servers.
#[derive(Debug, Default)]
pub(crate) struct Carp {
    /// CARP hash of each member's name and its load factor multiplier, member order.
    members: Vec<(u32, f64)>,
    /// Round robin for requests without a key.
    no_key: NoKey,
}

impl Carp {
    pub(crate) fn new(_: &Params) -> Self {
        Self::default()
    }
}

impl Scheduler for Carp {
    fn rebuild(&mut self, members: &[Member<'_>]) {
        let weights: Vec<u32> = members.iter().map(|m| m.weight).collect();
        let multipliers = load_multipliers(&weights);
        self.members = members.iter().zip(multipliers).map(|(m, x)| (member_hash(m.name), x)).collect();
    }

    fn pick(&mut self, servers: &[Candidate], key: Option<&[u8]>) -> Option<usize> {
        let Some(key) = key else {
            return self.no_key.pick(servers);
        };
        let url = url_hash(key);
        // Scores are ≥ 0, so −1 marks "not eligible" and no score yet. Written without an
        // early `continue` so the loop compiles to selects: which server wins is as random
        // as the hash, and a branch per server would be mispredicted half the time.
        let (mut best, mut top) = (usize::MAX, -1.0);
        for (i, (c, &(hash, x))) in servers.iter().zip(&self.members).enumerate() {
            let score = if eligible(c) { f64::from(combined_hash(url, hash)) * x } else { -1.0 };
            // Strictly greater: an exact tie keeps the earlier server.
            if score > top {
                (best, top) = (i, score);
            }
        }
        if best != usize::MAX {
            return Some(best);
        }
        // Candidates the last rebuild did not know (score 0): only when nothing else is.
        let known = self.members.len().min(servers.len());
        servers[known..].iter().position(eligible).map(|i| known + i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::up;

    #[test]
    fn hash_functions_follow_the_draft() {
        // By hand: "ab" → h = 0 + rotl(0,19) + 'a' = 97; h = 97 + rotl(97,19) + 'b'.
        let h1 = 97u32;
        let h2 = h1.wrapping_add(h1.rotate_left(19).wrapping_add(98));
        assert_eq!(url_hash(b"ab"), h2);
        let m = h2.wrapping_add(h2.wrapping_mul(0x6253_1965)).rotate_left(21);
        assert_eq!(member_hash("ab"), m);
        let x = 5u32 ^ m;
        assert_eq!(combined_hash(5, m), x.wrapping_add(x.wrapping_mul(0x6253_1965)).rotate_left(21));
    }

    #[test]
    fn equal_weights_give_unit_multipliers() {
        for x in load_multipliers(&[3, 3, 3, 3]) {
            assert!((x - 1.0).abs() < 1e-12, "{x}");
        }
        let xs = load_multipliers(&[1, 0, 2]);
        assert_eq!(xs[1], 0.0);
        assert!(xs[2] > xs[0] && xs[0] > 0.0);
    }

    #[test]
    fn highest_score_wins_and_unusable_is_skipped() {
        let mut s = Carp::default();
        let m = |name| Member { name, weight: 1, maxconn: 0 };
        s.rebuild(&[m("a"), m("b"), m("c")]);
        let mut servers = [up(), up(), up()];
        let url = url_hash(b"/x");
        let scores: Vec<u32> = s.members.iter().map(|&(h, _)| combined_hash(url, h)).collect();
        let top = (0..3).max_by_key(|&i| scores[i]).unwrap_or(9);
        assert_eq!(s.pick(&servers, Some(b"/x")), Some(top));
        servers[top].usable = false;
        let second = (0..3).filter(|&i| i != top).max_by_key(|&i| scores[i]).unwrap_or(9);
        assert_eq!(s.pick(&servers, Some(b"/x")), Some(second));
    }
}
