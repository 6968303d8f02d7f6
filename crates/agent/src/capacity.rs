//! The capacity function of seed 004 §4.2: g(x) = C·e^(−k·x), never below 1.

/// Capacity of an idle server by default: 2^20, which lets 4096 servers be summed in a
/// `u32` without overflow (seed 004 §4.2).
pub const DEFAULT_C: f64 = 1_048_576.0;

/// Load at which the default function reaches 1: the paper saw up to ~18,000 sockets in
/// TIME_WAIT and chose k so that g(20000) = 1, i.e. k ≈ 0.00069.
pub const DEFAULT_X_MAX: f64 = 20_000.0;

/// g(x) = C·e^(−k·x): the capacity a host announces for a load x.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CapacityFn {
    /// Capacity at zero load.
    pub c: f64,
    /// Decay per unit of load; 0 makes the capacity constant.
    pub k: f64,
}

impl CapacityFn {
    /// The function with g(0) = `c` and g(`x_max`) = 1, i.e. k = ln(c) / x_max.
    /// `x_max` should be positive and `c` at least 1.
    pub fn new(c: f64, x_max: f64) -> Self {
        CapacityFn { c, k: c.ln() / x_max }
    }

    /// The function with an explicit decay `k` (should be finite and ≥ 0).
    pub fn with_k(c: f64, k: f64) -> Self {
        CapacityFn { c, k }
    }

    /// g(`load`), truncated to an integer. Values below 1 become 1, as in the paper: a
    /// loaded but live host still takes a trickle, and only silence means capacity 0.
    /// A negative (or NaN) load counts as 0.
    pub fn capacity(&self, load: f64) -> u32 {
        // f64::max ignores NaN, so a NaN load also becomes 0.
        let x = load.max(0.0);
        let g = self.c * (-self.k * x).exp();
        if g.is_nan() || g < 1.0 {
            return 1;
        }
        // `as` saturates at u32::MAX, which is the clamp we want.
        g as u32
    }
}

impl Default for CapacityFn {
    /// The paper's function: C = 1048576, g(20000) = 1.
    fn default() -> Self {
        CapacityFn::new(DEFAULT_C, DEFAULT_X_MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_host_gets_c() {
        assert_eq!(CapacityFn::default().capacity(0.0), 1_048_576);
        assert_eq!(CapacityFn::new(1000.0, 50.0).capacity(0.0), 1000);
    }

    #[test]
    fn x_max_gives_one() {
        assert_eq!(CapacityFn::default().capacity(DEFAULT_X_MAX), 1);
        assert_eq!(CapacityFn::new(1000.0, 50.0).capacity(50.0), 1);
    }

    #[test]
    fn default_k_is_the_papers() {
        let k = CapacityFn::default().k;
        assert!((k - 0.00069).abs() < 0.000005, "k = {k}");
    }

    #[test]
    fn values_in_docs_agent_md() {
        let g = CapacityFn::default();
        let table = [(0.0, 1_048_576), (1000.0, 524_288), (5000.0, 32_768), (10_000.0, 1024), (15_000.0, 32)];
        for (x, want) in table {
            assert_eq!(g.capacity(x), want, "g({x})");
        }
    }

    #[test]
    fn monotone_non_increasing_and_never_below_one() {
        let g = CapacityFn::default();
        let mut prev = u32::MAX;
        for i in 0..=30_000 {
            let c = g.capacity(f64::from(i));
            assert!(c <= prev, "g({i}) = {c} > {prev}");
            assert!(c >= 1);
            prev = c;
        }
    }

    #[test]
    fn huge_loads_give_one() {
        let g = CapacityFn::default();
        for x in [1e6, 1e12, 1e300, f64::MAX, f64::INFINITY] {
            assert_eq!(g.capacity(x), 1, "load {x}");
        }
    }

    #[test]
    fn negative_and_nan_load_count_as_zero() {
        let g = CapacityFn::default();
        assert_eq!(g.capacity(-5.0), g.capacity(0.0));
        assert_eq!(g.capacity(f64::NEG_INFINITY), g.capacity(0.0));
        assert_eq!(g.capacity(f64::NAN), g.capacity(0.0));
    }

    #[test]
    fn clamps_to_u32() {
        assert_eq!(CapacityFn::with_k(1e12, 0.0).capacity(10.0), u32::MAX);
        assert_eq!(CapacityFn::with_k(7.0, 0.0).capacity(1e9), 7);
    }
}
