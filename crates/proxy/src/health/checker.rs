//! The active check loop of one server: probe every `interval` (plus jitter), count
//! consecutive passes and failures, and move the server down after `fall` failures and up
//! after `rise` passes. A pass also ends a passive-check back-off early.

use super::probe;
use crate::floor::live::Health;
use crate::floor::server::ServerRt;
use crate::floor::shared::Shared;
use crate::floor::stats::Counter;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Checks `server` with `health` until the task is aborted.
pub async fn run(server: Arc<ServerRt>, health: config::Health, group: String, shared: Arc<Shared>) {
    let stats = &shared.stats;
    let addr = SocketAddr::new(server.addr.ip(), health.port.unwrap_or(server.addr.port()));
    let mut passes = 0u32;
    let mut failures = 0u32;
    let mut rng = balance_seed(server.id);
    loop {
        let verdict = match tokio::time::timeout(health.timeout, probe::run(&health.check, addr)).await {
            Ok(result) => result,
            Err(_) => Err(format!("no answer within {:?}", health.timeout)),
        };
        let live = &server.live;
        match verdict {
            Ok(()) => {
                failures = 0;
                passes = passes.saturating_add(1);
                let was = live.health();
                if was == Health::Unchecked || (was == Health::Down && passes >= health.rise) {
                    if was == Health::Down {
                        tracing::info!(group, server = %server.name, "server up: health check passed {passes} times");
                    }
                    live.set_health(Health::Up, "");
                }
                if live.passive_out_until.swap(0, Ordering::Relaxed) != 0 {
                    live.passive_failures.store(0, Ordering::Relaxed);
                }
            }
            Err(reason) => {
                passes = 0;
                failures = failures.saturating_add(1);
                stats.inc(Counter::HealthCheckFailures);
                live.check_failures.fetch_add(1, Ordering::Relaxed);
                let down = live.health() == Health::Down || failures >= health.fall;
                if down && live.health() != Health::Down {
                    stats.inc(Counter::ServersDown);
                    tracing::warn!(group, server = %server.name, reason, "server down: {failures} health checks failed");
                }
                live.set_health(if down { Health::Down } else { live.health() }, &reason);
            }
        }
        tokio::time::sleep(health.interval + jitter(&mut rng, health.jitter)).await;
    }
}

/// A per-server seed so jittered checks of different servers do not line up.
fn balance_seed(id: u64) -> u64 {
    id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA076_1D64_78BD_642F
}

/// A random extra wait up to `max` (xorshift: quality does not matter here).
fn jitter(state: &mut u64, max: Duration) -> Duration {
    if max.is_zero() {
        return Duration::ZERO;
    }
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    let max_us = u64::try_from(max.as_micros()).unwrap_or(u64::MAX).max(1);
    Duration::from_micros(*state % max_us)
}
