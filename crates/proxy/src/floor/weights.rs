//! The control loop's verdict per server: the weight the schedulers use now and whether
//! sticky traffic may still go there, from the administrative state, the checks, slow
//! start and the agents' capacities. Pure functions over plain inputs, so every rule is
//! unit-tested; `GroupRt::apply_weights`
//! writes the verdicts into the servers' live state.

use crate::floor::live::{Health, NOT_USABLE};
use balance::SchedulerKind;
use config::ServerState;
use std::time::Duration;

/// Slow start ramps in this many equal steps (so schedulers rebuild a bounded number of times).
const RAMP_STEPS: u64 = 10;
/// Agent capacities become weights on this scale for schedulers other than `sieve`.
const AGENT_WEIGHT_SCALE: u64 = 256;

/// Whether a server may get new requests, before weights are considered.
pub fn usable(state: ServerState, health: Health, passive_out: bool) -> bool {
    state == ServerState::Ready && health != Health::Down && !passive_out
}

/// Whether sticky / persistent requests may still go to a server: not in maintenance, not
/// down, and, when draining, not past the drain timeout.
pub fn sticky_ok(
    state: ServerState,
    health: Health,
    passive_out: bool,
    drained_for: Duration,
    timeout: Duration,
) -> bool {
    let alive = health != Health::Down && !passive_out;
    match state {
        ServerState::Ready => alive,
        ServerState::Drain => alive && drained_for < timeout,
        ServerState::Maint => false,
    }
}

/// `base` ramped over `slow_start`: `ramping_for` into the ramp, the weight is
/// ⌈step/10⌉ of `base` (at least 1), full once the ramp is over.
pub fn ramp(base: u32, ramping_for: Duration, slow_start: Duration) -> u32 {
    if base == 0 || slow_start.is_zero() || ramping_for >= slow_start {
        return base;
    }
    let step = (ramping_for.as_millis() * u128::from(RAMP_STEPS) / slow_start.as_millis()) as u64 + 1;
    u32::try_from(u64::from(base) * step / RAMP_STEPS).unwrap_or(base).max(1)
}

/// A group's base weight for a server whose agent reported `capacity` (`None`: silent).
/// `sieve` takes capacities as they are; the other schedulers get them scaled to
/// 1..=256 of the group's largest fresh capacity, so the ratios survive.
pub fn agent_weight(capacity: Option<u32>, largest: u32, scheduler: SchedulerKind) -> u32 {
    let Some(c) = capacity.filter(|&c| c > 0) else { return 0 };
    if scheduler == SchedulerKind::Sieve || largest == 0 {
        return c;
    }
    let scaled = (u64::from(c) * AGENT_WEIGHT_SCALE).div_ceil(u64::from(largest));
    u32::try_from(scaled).unwrap_or(1).max(1)
}

/// The ramp start after this tick: unusable servers wait ([`NOT_USABLE`]); a server that
/// has just become usable starts its ramp now; a running ramp continues.
pub fn next_ramp_start(current: u64, usable: bool, now: u64) -> u64 {
    match (usable, current) {
        (false, _) => NOT_USABLE,
        (true, NOT_USABLE) => now.max(1),
        (true, other) => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn only_ready_healthy_servers_take_new_requests() {
        assert!(usable(ServerState::Ready, Health::Up, false));
        assert!(usable(ServerState::Ready, Health::Unchecked, false));
        assert!(!usable(ServerState::Ready, Health::Down, false));
        assert!(!usable(ServerState::Ready, Health::Up, true));
        assert!(!usable(ServerState::Drain, Health::Up, false));
        assert!(!usable(ServerState::Maint, Health::Up, false));
    }

    #[test]
    fn draining_servers_keep_sticky_traffic_until_the_timeout() {
        assert!(sticky_ok(ServerState::Drain, Health::Up, false, S(10), S(60)));
        assert!(!sticky_ok(ServerState::Drain, Health::Up, false, S(60), S(60)));
        assert!(!sticky_ok(ServerState::Drain, Health::Down, false, S(1), S(60)));
        assert!(!sticky_ok(ServerState::Maint, Health::Up, false, S(0), S(60)));
        assert!(sticky_ok(ServerState::Ready, Health::Up, false, S(0), S(60)));
        assert!(!sticky_ok(ServerState::Ready, Health::Up, true, S(0), S(60)));
    }

    #[test]
    fn slow_start_ramps_in_ten_steps() {
        assert_eq!(ramp(100, S(0), S(10)), 10);
        assert_eq!(ramp(100, Duration::from_millis(4_500), S(10)), 50);
        assert_eq!(ramp(100, S(10), S(10)), 100);
        assert_eq!(ramp(1, S(0), S(10)), 1, "never below 1");
        assert_eq!(ramp(100, S(0), S(0)), 100, "off");
        assert_eq!(ramp(0, S(1), S(10)), 0);
    }

    #[test]
    fn agent_capacities_scale_for_weighted_schedulers_and_not_for_sieve() {
        let c = Some(1 << 20);
        assert_eq!(agent_weight(c, 1 << 20, SchedulerKind::Sieve), 1 << 20);
        assert_eq!(agent_weight(c, 1 << 20, SchedulerKind::WeightedRoundRobin), 256);
        assert_eq!(agent_weight(Some(1 << 19), 1 << 20, SchedulerKind::WeightedRoundRobin), 128);
        assert_eq!(agent_weight(Some(1), 1 << 20, SchedulerKind::WeightedRoundRobin), 1);
        assert_eq!(agent_weight(None, 1 << 20, SchedulerKind::Sieve), 0, "silent: capacity 0");
    }

    #[test]
    fn ramp_starts_when_a_server_becomes_usable() {
        assert_eq!(next_ramp_start(0, true, 500), 0, "usable from the start: no ramp");
        assert_eq!(next_ramp_start(0, false, 500), NOT_USABLE);
        assert_eq!(next_ramp_start(NOT_USABLE, true, 700), 700);
        assert_eq!(next_ramp_start(700, true, 900), 700);
    }
}
