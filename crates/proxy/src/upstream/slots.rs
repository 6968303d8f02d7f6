//! Phase "queue": the per-server `maxconn` slots with their bounded queue, the in-flight
//! count the least-connection schedulers read, and the servers a request already tried.

use crate::floor::failure::{Failure, Refusal};
use crate::floor::server::ServerRt;
use crate::floor::snapshot::Snapshot;
use crate::floor::stats::{Counter, Stats};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Servers already tried for this request (by index in the group; groups larger than 128
/// servers fold indexes, which only means a server may be retried).
#[derive(Default)]
pub struct Tried(u128);

impl Tried {
    /// Marks server `i` as tried.
    pub fn insert(&mut self, i: usize) {
        self.0 |= 1u128 << (i % 128);
    }

    /// Whether server `i` was tried.
    pub fn contains(&self, i: usize) -> bool {
        self.0 & (1u128 << (i % 128)) != 0
    }
}

/// Counts a request as in flight on a server while it lives (lc / wlc read the count).
pub struct ActiveGuard<'a>(&'a ServerRt);

impl<'a> ActiveGuard<'a> {
    /// Starts counting.
    pub fn new(server: &'a ServerRt) -> Self {
        server.active.fetch_add(1, Ordering::Relaxed);
        ActiveGuard(server)
    }
}

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Phase "queue": takes one of the server's `maxconn` slots (in a cluster, this node's share
/// of them), waiting in a bounded queue for at most `timeouts.queue` (seed 003 §2.2's
/// overload refusal is the 503 here).
pub async fn acquire_slot(
    server: &ServerRt,
    snap: &Snapshot,
    stats: &Stats,
) -> Result<Option<OwnedSemaphorePermit>, Failure> {
    let Some(slots) = &server.slots else { return Ok(None) };
    while let Ok(permit) = Arc::clone(slots).try_acquire_owned() {
        if !server.settle_debt() {
            server.note_held();
            return Ok(Some(permit));
        }
        permit.forget();
    }
    let max_queue = snap.config.limits.max_queue;
    if server.queued.fetch_add(1, Ordering::AcqRel) >= max_queue {
        server.queued.fetch_sub(1, Ordering::AcqRel);
        stats.inc(Counter::QueueFull);
        tracing::warn!(server = %server.name, max_queue, "request refused: server queue full");
        return Err(Failure::internal(Refusal::new(503, "server queue full")));
    }
    let wait = tokio::time::timeout(snap.config.timeouts.queue, wait_for_slot(server, slots));
    let result = wait.await;
    server.queued.fetch_sub(1, Ordering::AcqRel);
    match result {
        Ok(Some(permit)) => Ok(Some(permit)),
        Ok(None) | Err(_) => {
            stats.inc(Counter::QueueTimeout);
            tracing::warn!(server = %server.name, "request refused: queue timeout");
            Err(Failure::internal(Refusal::new(503, "timed out waiting for a server slot")))
        }
    }
}

/// Waits for a permit that does not go to pay the slots' debt (`None`: semaphore closed).
async fn wait_for_slot(server: &ServerRt, slots: &Arc<Semaphore>) -> Option<OwnedSemaphorePermit> {
    loop {
        let permit = Arc::clone(slots).acquire_owned().await.ok()?;
        if !server.settle_debt() {
            server.note_held();
            return Some(permit);
        }
        permit.forget();
    }
}
