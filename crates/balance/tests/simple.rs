//! Property tests for the load-driven and random schedulers (`sed`, `nq`, `first`,
//! `random`, `p2c`) through the public API: `SchedulerKind::from_name`, `build`,
//! `rebuild`, `pick`.

use cswitch_balance::{Candidate, Params, Scheduler, SchedulerKind};
use proptest::prelude::*;

mod common;
use common::{eligible, rebuild};

const NAMES: [&str; 5] = ["sed", "nq", "first", "random", "p2c"];

fn kind(name: &str) -> SchedulerKind {
    SchedulerKind::from_name(name).expect("a listed scheduler")
}

fn kinds() -> impl Strategy<Value = SchedulerKind> {
    prop::sample::select(NAMES.iter().map(|n| kind(n)).collect::<Vec<_>>())
}

fn candidate() -> impl Strategy<Value = Candidate> {
    (0u32..6, 0u32..8, 0u32..6, prop::bool::weighted(0.8))
        .prop_map(|(weight, active, maxconn, usable)| Candidate { weight, active, maxconn, usable })
}

fn group() -> impl Strategy<Value = Vec<Candidate>> {
    prop::collection::vec(candidate(), 0..8)
}

/// A scheduler named `name` with default parameters, told about `group`.
fn build(name: &str, group: &[Candidate]) -> Box<dyn Scheduler> {
    common::build(kind(name), group)
}

/// SED's `(active + 1) / weight`; exact enough for the small integers generated here.
fn delay(c: &Candidate) -> f64 {
    (f64::from(c.active) + 1.0) / f64::from(c.weight)
}

fn up(weight: u32, active: u32) -> Candidate {
    Candidate { weight, active, maxconn: 0, usable: true }
}

proptest! {
    #[test]
    fn picks_only_eligible_and_none_only_when_none_is(
        kind in kinds(),
        groups in prop::collection::vec(group(), 1..40),
    ) {
        let mut s = kind.build(&Params::default());
        for group in &groups {
            rebuild(&mut *s, group);
            match s.pick(group, None) {
                Some(i) => prop_assert!(eligible(&group[i]), "{kind:?} picked {i} of {group:?}"),
                None => prop_assert!(!group.iter().any(eligible), "{kind:?} gave up on {group:?}"),
            }
        }
    }

    #[test]
    fn extreme_weights_loads_and_limits_never_overflow(
        kind in kinds(),
        groups in prop::collection::vec(
            prop::collection::vec(
                (
                    prop::sample::select(vec![0, 1, u32::MAX - 1, u32::MAX]),
                    prop::sample::select(vec![0, 1, u32::MAX - 1, u32::MAX]),
                    prop::sample::select(vec![0, 1, u32::MAX]),
                    any::<bool>(),
                )
                    .prop_map(|(weight, active, maxconn, usable)| Candidate { weight, active, maxconn, usable }),
                0..6,
            ),
            1..100,
        ),
    ) {
        let mut s = kind.build(&Params::default());
        for group in &groups {
            rebuild(&mut *s, group);
            match s.pick(group, None) {
                Some(i) => prop_assert!(eligible(&group[i]), "{kind:?} picked {i} of {group:?}"),
                None => prop_assert!(!group.iter().any(eligible), "{kind:?} gave up on {group:?}"),
            }
        }
    }

    #[test]
    fn sed_picks_a_minimizer_of_expected_delay(groups in prop::collection::vec(group(), 1..40)) {
        let mut s = build("sed", &[]);
        for group in &groups {
            rebuild(&mut *s, group);
            if let Some(i) = s.pick(group, None) {
                for c in group.iter().filter(|c| eligible(c)) {
                    prop_assert!(delay(&group[i]) <= delay(c), "picked {i} of {group:?}");
                }
            }
        }
    }

    #[test]
    fn nq_picks_the_heaviest_idle_server_else_a_sed_minimizer(
        groups in prop::collection::vec(group(), 1..40),
    ) {
        let mut s = build("nq", &[]);
        for group in &groups {
            rebuild(&mut *s, group);
            let Some(i) = s.pick(group, None) else { continue };
            let any_idle = group.iter().any(|c| eligible(c) && c.active == 0);
            prop_assert_eq!(group[i].active == 0, any_idle, "picked {} of {:?}", i, group);
            for c in group.iter().filter(|c| eligible(c) && (c.active == 0) == any_idle) {
                prop_assert!(delay(&group[i]) <= delay(c), "picked {i} of {group:?}");
            }
        }
    }

    #[test]
    fn first_fills_servers_in_order(
        group in prop::collection::vec(candidate(), 1..8),
        picks in 1usize..40,
    ) {
        // Start empty and count each pick as a request that stays.
        let mut group: Vec<_> = group.into_iter().map(|c| Candidate { active: 0, ..c }).collect();
        let mut s = build("first", &group);
        for _ in 0..picks {
            let Some(i) = s.pick(&group, None) else {
                prop_assert!(!group.iter().any(eligible));
                break;
            };
            let full = |c: &Candidate| c.maxconn != 0 && c.active >= c.maxconn;
            let has_room = group.iter().any(|c| eligible(c) && !full(c));
            if has_room {
                prop_assert!(!full(&group[i]), "picked full {i} of {group:?}");
                for c in group[..i].iter().filter(|c| eligible(c)) {
                    prop_assert!(full(c), "picked {i} before filling {c:?} in {group:?}");
                }
            }
            group[i].active += 1;
        }
    }

    #[test]
    fn p2c_of_two_never_picks_the_more_loaded(
        a in (1u32..10, 0u32..50),
        b in (1u32..10, 0u32..50),
    ) {
        let group = [up(a.0, a.1), up(b.0, b.1)];
        let mut s = build("p2c", &group);
        for _ in 0..20 {
            let i = s.pick(&group, None).expect("two eligible servers");
            prop_assert!(delay(&group[i]) <= delay(&group[1 - i]), "picked {i} of {group:?}");
        }
    }

    #[test]
    fn p2c_never_picks_a_unique_busiest(group in group()) {
        let mut s = build("p2c", &group);
        let live: Vec<usize> = (0..group.len()).filter(|&i| eligible(&group[i])).collect();
        let Some(&busiest) = live.iter().max_by(|&&x, &&y| delay(&group[x]).total_cmp(&delay(&group[y])))
        else {
            return Ok(());
        };
        let unique = live.iter().filter(|&&i| delay(&group[i]) == delay(&group[busiest])).count() == 1;
        if live.len() >= 2 && unique {
            for _ in 0..20 {
                prop_assert_ne!(s.pick(&group, None), Some(busiest), "{:?}", group);
            }
        }
    }
}

proptest! {
    // Each case draws 20,000 times; fewer cases keep the suite quick.
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Over 20,000 picks each server's share is within 3 percentage points of
    /// weight/sum. The standard deviation of a share is at most 0.35 points here, so
    /// the tolerance is over eight of them: a failure means a bias, not bad luck.
    #[test]
    fn random_shares_follow_weights(
        group in prop::collection::vec(
            (0u32..10, prop::bool::weighted(0.8)).prop_map(|(w, usable)| Candidate { usable, ..up(w, 0) }),
            1..8,
        ),
    ) {
        const PICKS: u32 = 20_000;
        let total: u32 = group.iter().filter(|c| eligible(c)).map(|c| c.weight).sum();
        prop_assume!(total > 0);
        let mut s = build("random", &group);
        let mut counts = vec![0u32; group.len()];
        for _ in 0..PICKS {
            counts[s.pick(&group, None).expect("a server has weight")] += 1;
        }
        for (c, n) in group.iter().zip(&counts) {
            let expected = if eligible(c) { f64::from(c.weight) / f64::from(total) } else { 0.0 };
            let share = f64::from(*n) / f64::from(PICKS);
            prop_assert!((share - expected).abs() <= 0.03, "share {share} vs {expected}: {counts:?} of {group:?}");
        }
    }
}

#[test]
fn p2c_spreads_idle_equals_evenly() {
    let group = vec![up(1, 0); 4];
    let mut s = build("p2c", &group);
    let mut counts = [0u32; 4];
    for _ in 0..20_000 {
        counts[s.pick(&group, None).expect("idle servers")] += 1;
    }
    // 5,000 each expected, σ ≈ 61.
    assert!(counts.iter().all(|&c| (4_600..5_400).contains(&c)), "{counts:?}");
}

#[test]
fn two_random_schedulers_draw_differently() {
    let group = vec![up(1, 0); 8];
    let draws = |mut s: Box<dyn Scheduler>| (0..32).map(|_| s.pick(&group, None)).collect::<Vec<_>>();
    for name in ["random", "p2c"] {
        assert_ne!(draws(build(name, &group)), draws(build(name, &group)), "{name}");
    }
}
