//! Property tests over the public API: every scheduler, reached through
//! `SchedulerKind::build`, against random groups and random membership changes.

use cswitch_balance::{Candidate, Params, Scheduler, SchedulerKind};
use proptest::prelude::*;

mod common;
use common::{build, eligible, rebuild};

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
        maxconn: 0,
    })
}

/// A request key: absent, or a few bytes.
fn key() -> impl Strategy<Value = Option<Vec<u8>>> {
    prop::option::weighted(0.8, prop::collection::vec(any::<u8>(), 0..24))
}

/// A sequence of groups: a few memberships (length and weights), each for a run of picks
/// in which load and usability change from one pick to the next — as in a running
/// switch, where membership changes are rare (and rebuilding a Maglev table is not cheap).
fn group_sequence() -> impl Strategy<Value = Vec<Vec<Candidate>>> {
    let epoch = prop::collection::vec(0u32..6, 0..7).prop_flat_map(|weights| {
        let n = weights.len();
        let step = prop::collection::vec((0u32..8, prop::bool::weighted(0.8)), n);
        prop::collection::vec(step, 1..12).prop_map(move |steps| {
            let server = |(w, (active, usable)): (&u32, (u32, bool))| Candidate {
                weight: *w,
                active,
                usable,
                maxconn: 0,
            };
            steps
                .into_iter()
                .map(|step| weights.iter().zip(step).map(server).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        })
    });
    prop::collection::vec(epoch, 1..6).prop_map(|epochs| epochs.into_iter().flatten().collect())
}

/// Rebuilds a scheduler only when the group's membership (length, weights) changed.
#[derive(Default)]
struct Members(Option<Vec<u32>>);

impl Members {
    fn sync(&mut self, s: &mut dyn Scheduler, group: &[Candidate]) {
        let weights: Vec<u32> = group.iter().map(|c| c.weight).collect();
        if self.0.as_ref() != Some(&weights) {
            rebuild(s, group);
            self.0 = Some(weights);
        }
    }
}

fn up(weight: u32) -> Candidate {
    Candidate { weight, active: 0, usable: true, maxconn: 0 }
}

proptest! {
    #[test]
    fn wrr_gives_each_server_its_weight_per_cycle(
        weights in prop::collection::vec(0u32..10, 1..8),
        cycles in 1usize..4,
    ) {
        let servers: Vec<_> = weights.iter().map(|&w| up(w)).collect();
        let total: u32 = weights.iter().sum();
        let mut s = build(SchedulerKind::WeightedRoundRobin, &servers);
        let mut counts = vec![0u32; servers.len()];
        for _ in 0..cycles * total as usize {
            let i = s.pick(&servers, None).expect("a server has weight");
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
        let mut s = build(SchedulerKind::RoundRobin, &servers);
        let mut counts = vec![0usize; servers.len()];
        for _ in 0..live * rounds {
            counts[s.pick(&servers, None).expect("a usable server")] += 1;
        }
        for (c, &u) in counts.iter().zip(&usable) {
            prop_assert_eq!(*c, if u { rounds } else { 0 });
        }
    }

    #[test]
    fn picks_only_eligible_and_none_only_when_none_is(
        kind in kinds(),
        groups in group_sequence(),
        key in key(),
    ) {
        let mut s = kind.build(&Params::default());
        let mut members = Members::default();
        for group in &groups {
            members.sync(&mut *s, group);
            match s.pick(group, key.as_deref()) {
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
                    .prop_map(|(weight, active, usable)| Candidate { weight, active, usable, maxconn: 0 }),
                4,
            ),
            1..40,
        ),
        key in key(),
    ) {
        let mut s = kind.build(&Params::default());
        let mut members = Members::default();
        for group in &groups {
            members.sync(&mut *s, group);
            if let Some(i) = s.pick(group, key.as_deref()) {
                prop_assert!(eligible(&group[i]));
            }
        }
    }

    #[test]
    fn least_connections_picks_a_minimizer(groups in group_sequence()) {
        let mut s = SchedulerKind::LeastConnections.build(&Params::default());
        let mut members = Members::default();
        for group in &groups {
            members.sync(&mut *s, group);
            if let Some(i) = s.pick(group, None) {
                let min = group.iter().filter(|c| eligible(c)).map(|c| c.active).min();
                prop_assert_eq!(Some(group[i].active), min);
            }
        }
    }

    #[test]
    fn weighted_least_connections_picks_a_minimizer(groups in group_sequence()) {
        let mut s = SchedulerKind::WeightedLeastConnections.build(&Params::default());
        let ratio = |c: &Candidate| f64::from(c.active) / f64::from(c.weight);
        let mut members = Members::default();
        for group in &groups {
            members.sync(&mut *s, group);
            if let Some(i) = s.pick(group, None) {
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
        let mut s = build(kind, &servers);
        let mut counts = vec![0usize; n];
        for _ in 0..n * rounds {
            counts[s.pick(&servers, None).expect("idle servers")] += 1;
        }
        prop_assert!(counts.iter().all(|&c| c == rounds), "{counts:?}");
    }

    #[test]
    fn all_unusable_gives_none(
        kind in kinds(),
        group in prop::collection::vec(candidate(), 0..7),
        key in key(),
    ) {
        let dead: Vec<_> = group.iter().map(|c| Candidate { usable: false, ..*c }).collect();
        prop_assert_eq!(build(kind, &dead).pick(&dead, key.as_deref()), None);
    }
}

#[test]
fn names_round_trip_and_build() {
    for name in SchedulerKind::NAMES {
        let kind = SchedulerKind::from_name(name).expect("listed name");
        assert_eq!(kind.name(), *name);
        assert_eq!(build(kind, &[up(1)]).pick(&[up(1)], Some(b"/k")), Some(0));
        assert_eq!(build(kind, &[up(1)]).pick(&[up(1)], None), Some(0));
    }
    assert_eq!(SchedulerKind::from_name("roundrobin"), None);
}
