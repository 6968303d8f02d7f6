//! A small, fast pseudo-random generator for the schedulers that draw (`random`, `p2c`):
//! wyrand (Wang Yi, from wyhash, public domain; the constants of wyhash up to final 3,
//! as the fastrand crate and Zig's std use them). A Weyl sequence whose every step is one
//! add and one 64×64→128-bit multiply; it passes PractRand and BigCrush.
//!
//! Written by hand because it is a few dozen lines: the `rand` crate would bring a tree
//! of crates and OS-entropy plumbing for what a scheduler needs, which is speed (a draw
//! per pick, a few nanoseconds) and independence between instances, not secrecy. Not for
//! anything an attacker must not be able to predict.
//!
//! Bounded draws use Lemire's multiply-and-reject ("Fast random integer generation in an
//! interval", ACM TOMACS 2019): no division on the common path and no modulo bias.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counts the generators made in this process, so two made at the same stack depth (and
/// hence the same stack address) still start from different states.
static INSTANCES: AtomicU64 = AtomicU64::new(0);

/// wyrand's additive constant (odd, so the state visits all 2^64 values).
const WY_ADD: u64 = 0xa076_1d64_78bd_642f;
/// wyrand's xor constant for the second multiplicand.
const WY_XOR: u64 = 0xe703_7ed1_a0b4_28db;

/// wyrand generator state. Not `Clone`: two copies would draw the same numbers.
#[derive(Debug)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    /// A generator seeded from the instance counter and the address of a local variable.
    ///
    /// The counter makes instances of one process differ; the stack address, randomized
    /// by ASLR, makes processes differ. No clock and no OS entropy: the crate stays pure.
    pub(crate) fn new() -> Self {
        let local = 0u8;
        let addr = std::ptr::addr_of!(local) as usize as u64;
        let n = INSTANCES.fetch_add(1, Ordering::Relaxed);
        Self::from_seed(mix(n.wrapping_mul(WY_ADD) ^ mix(addr)))
    }

    /// A generator starting from `seed`: the same seed gives the same sequence.
    pub(crate) fn from_seed(seed: u64) -> Self {
        Rng { state: seed }
    }

    /// The next 64 uniformly distributed bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(WY_ADD);
        let t = u128::from(self.state) * u128::from(self.state ^ WY_XOR);
        ((t >> 64) as u64) ^ (t as u64)
    }

    /// A uniform integer in `0..n` (Lemire's method); `n` = 0 gives 0.
    ///
    /// The high half of `x · n` is the draw; the low half tells whether `x` fell in the
    /// few values that would make some results more likely, which are redrawn. The
    /// threshold's division only happens when the low half is below `n`, i.e. with
    /// probability `n / 2^64`.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }
}

/// SplitMix64's finalizer: a bijection that spreads nearby seeds (consecutive counters,
/// aligned addresses) over the whole state space.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wyrand_reference_values() {
        // From the C `wyrand` of wyhash (constants of versions up to final 3, the ones
        // fastrand and Zig's std use), seed 0.
        let mut r = Rng::from_seed(0);
        let first: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
        assert_eq!(first, [0x111c_b3a7_8f59_a58e, 0xceab_d938_ff4e_856d, 0x61fb_5131_8f47_d2a4]);
    }

    #[test]
    fn instances_differ() {
        let (mut a, mut b) = (Rng::new(), Rng::new());
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        assert_ne!(xs, ys);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = Rng::from_seed(42);
        let mut seen = [0u32; 7];
        for _ in 0..7000 {
            let x = r.below(7);
            seen[x as usize] += 1;
        }
        // Each bucket expects 1000; 6 standard deviations is about ±190.
        assert!(seen.iter().all(|&c| (800..1200).contains(&c)), "{seen:?}");
        assert_eq!(r.below(1), 0);
        assert_eq!(r.below(0), 0);
        assert!(r.below(u64::MAX) < u64::MAX);
    }

    #[test]
    fn below_is_unbiased_where_modulo_would_not_be() {
        // n = 3·2^62: `x % n` would give the low third of the range twice the mass.
        let n = 3u64 << 62;
        let mut r = Rng::from_seed(7);
        let low = (0..30_000).filter(|_| r.below(n) < n / 3).count();
        // Unbiased: 10,000 expected (σ ≈ 82); modulo would give about 15,000.
        assert!((9_500..10_500).contains(&low), "{low}");
    }
}
