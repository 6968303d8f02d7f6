//! Property tests over the public API: every scheduler, reached through
//! `SchedulerKind::build`, against random groups and random membership changes.

use cswitch_balance::{Candidate, SchedulerKind};
use proptest::prelude::*;

fn kinds() -> impl Strategy<Value = SchedulerKind> {
    prop::sample::select(
        SchedulerKind::NAMES.iter().filter_map(|n| SchedulerKind::from_name(n)).collect::<Vec<_>>(),
    )
}

fn candidate() -> impl Strategy<Value = Candidate> {
    (0u32..6, 0u32..8, prop::bool::weighted(0.8)).prop_map(|(weight, active, usable)| Candidate {
        weight,
        active,
        usable,
    })
}

/// A sequence of groups: lengths and usability change from one pick to the next.
fn group_sequence() -> impl Strategy<Value = Vec<Vec<Candidate>>> {
    prop::collection::vec(prop::collection::vec(candidate(), 0..7), 1..60)
}

fn eligible(c: &Candidate) -> bool {
    c.usable && c.weight > 0
}

fn up(weight: u32) -> Candidate {
    Candidate { weight, active: 0, usable: true }
}

proptest! {
    #[test]
    fn wrr_gives_each_server_its_weight_per_cycle(
        weights in prop::collection::vec(0u32..10, 1..8),
        cycles in 1usize..4,
    ) {
        let servers: Vec<_> = weights.iter().map(|&w| up(w)).collect();
        let total: u32 = weights.iter().sum();
        let mut s = SchedulerKind::WeightedRoundRobin.build();
        let mut counts = vec![0u32; servers.len()];
        for _ in 0..cycles * total as usize {
            let i = s.pick(&servers).expect("a server has weight");
            counts[i] += 1;
        }
        let expected: Vec<u32> = weights.iter().map(|&w| w * cycles as u32).collect();
        prop_assert_eq!(counts, expected);
    }

    #[test]
    fn rr_shares_equally_among_usable(
        usable in prop::collection::vec(any::<bool>(), 1..8),
        rounds in 1usize..5,
    ) {
        let servers: Vec<_> = usable
            .iter()
            .map(|&u| Candidate { usable: u, ..up(1) })
            .collect();
        let live = usable.iter().filter(|&&u| u).count();
        let mut s = SchedulerKind::RoundRobin.build();
        let mut counts = vec![0usize; servers.len()];
        for _ in 0..live * rounds {
            counts[s.pick(&servers).expect("a usable server")] += 1;
        }
        for (c, &u) in counts.iter().zip(&usable) {
            prop_assert_eq!(*c, if u { rounds } else { 0 });
        }
    }

    #[test]
    fn picks_only_eligible_and_none_only_when_none_is(
        kind in kinds(),
        groups in group_sequence(),
    ) {
        let mut s = kind.build();
        for group in &groups {
            match s.pick(group) {
                Some(i) => prop_assert!(eligible(&group[i]), "{kind:?} picked {i} of {group:?}"),
                None => prop_assert!(!group.iter().any(eligible), "{kind:?} gave up on {group:?}"),
            }
        }
    }

    #[test]
    fn huge_weights_under_churn_never_overflow(
        kind in kinds(),
        groups in prop::collection::vec(
            prop::collection::vec(
                (prop::sample::select(vec![0, 1, u32::MAX - 1, u32::MAX]), any::<u32>(), any::<bool>())
                    .prop_map(|(weight, active, usable)| Candidate { weight, active, usable }),
                4,
            ),
            1..400,
        ),
    ) {
        let mut s = kind.build();
        for group in &groups {
            if let Some(i) = s.pick(group) {
                prop_assert!(eligible(&group[i]));
            }
        }
    }

    #[test]
    fn least_connections_picks_a_minimizer(groups in group_sequence()) {
        let mut s = SchedulerKind::LeastConnections.build();
        for group in &groups {
            if let Some(i) = s.pick(group) {
                let min = group.iter().filter(|c| eligible(c)).map(|c| c.active).min();
                prop_assert_eq!(Some(group[i].active), min);
            }
        }
    }

    #[test]
    fn weighted_least_connections_picks_a_minimizer(groups in group_sequence()) {
        let mut s = SchedulerKind::WeightedLeastConnections.build();
        let ratio = |c: &Candidate| (f64::from(c.active) + 1.0) / f64::from(c.weight);
        for group in &groups {
            if let Some(i) = s.pick(group) {
                let picked = ratio(&group[i]);
                for c in group.iter().filter(|c| eligible(c)) {
                    // Small integers: the float ratios are exact enough to compare.
                    prop_assert!(picked <= ratio(c), "picked {i} of {group:?}");
                }
            }
        }
    }

    #[test]
    fn equal_servers_share_under_least_connections(
        kind in prop::sample::select(vec![
            SchedulerKind::LeastConnections,
            SchedulerKind::WeightedLeastConnections,
        ]),
        n in 1usize..8,
        rounds in 1usize..4,
    ) {
        let servers = vec![up(2); n];
        let mut s = kind.build();
        let mut counts = vec![0usize; n];
        for _ in 0..n * rounds {
            counts[s.pick(&servers).expect("idle servers")] += 1;
        }
        prop_assert!(counts.iter().all(|&c| c == rounds), "{counts:?}");
    }

    #[test]
    fn all_unusable_gives_none(kind in kinds(), group in prop::collection::vec(candidate(), 0..7)) {
        let dead: Vec<_> = group.iter().map(|c| Candidate { usable: false, ..*c }).collect();
        prop_assert_eq!(kind.build().pick(&dead), None);
    }
}

#[test]
fn names_round_trip_and_build() {
    for name in SchedulerKind::NAMES {
        let kind = SchedulerKind::from_name(name).expect("listed name");
        assert_eq!(kind.name(), *name);
        assert_eq!(kind.build().pick(&[up(1)]), Some(0));
    }
    assert_eq!(SchedulerKind::from_name("random"), None);
}
