//! Passive checks: live traffic reports connect failures (and, where configured, 5xx
//! answers); `failures` in a row take the server out for `backoff` at once, without
//! waiting for the control loop. A success resets the count.

use crate::floor::group::GroupRt;
use crate::floor::live::now_ms;
use crate::floor::server::ServerRt;
use crate::floor::stats::{Counter, Stats};
use std::sync::atomic::{AtomicU64, Ordering};

/// A request to `server` failed (connect failure, no answer, or a counted 5xx).
pub fn on_failure(group: &GroupRt, server: &ServerRt, stats: &Stats, epoch: &AtomicU64) {
    let live = &server.live;
    live.failures.fetch_add(1, Ordering::Relaxed);
    let Some(p) = &group.passive else { return };
    let failures = live.passive_failures.fetch_add(1, Ordering::Relaxed) + 1;
    let now = now_ms();
    if failures < p.failures || live.passive_out(now) {
        return;
    }
    let backoff = u64::try_from(p.backoff.as_millis()).unwrap_or(u64::MAX);
    live.passive_out_until.store(now.saturating_add(backoff).max(1), Ordering::Relaxed);
    live.effective_weight.store(0, Ordering::Relaxed);
    live.sticky_ok.store(false, Ordering::Relaxed);
    epoch.fetch_add(1, Ordering::Release);
    stats.inc(Counter::PassiveOuts);
    tracing::warn!(group = %group.name, server = %server.name, failures, backoff = ?p.backoff,
        "server taken out by passive checks");
}

/// A request to `server` succeeded.
pub fn on_success(server: &ServerRt) {
    if server.live.passive_failures.load(Ordering::Relaxed) != 0 {
        server.live.passive_failures.store(0, Ordering::Relaxed);
    }
}

/// Whether a response with `status` counts as a passive failure for `group`.
pub fn counts_as_failure(group: &GroupRt, status: u16) -> bool {
    group.passive.as_ref().is_some_and(|p| p.on_5xx) && (500..600).contains(&status)
}
