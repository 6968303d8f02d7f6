//! Choosing and reaching a server: the scheduler pick over live load counters, the
//! per-server `maxconn` slots with their bounded queue, and connect-or-reuse.

use crate::prealloc::Prealloc;
use crate::respond::Refusal;
use crate::snapshot::{ServerRt, Snapshot};
use crate::stats::{Counter, Stats};
use crate::worker::Worker;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

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

/// Phase "queue": takes one of the server's `maxconn` slots, waiting in a bounded queue
/// for at most `timeouts.queue` (seed 003 §2.2's overload refusal is the 503 here).
pub async fn acquire_slot(
    server: &ServerRt,
    snap: &Snapshot,
    stats: &Stats,
) -> Result<Option<OwnedSemaphorePermit>, Refusal> {
    let Some(slots) = &server.slots else { return Ok(None) };
    if let Ok(permit) = Arc::clone(slots).try_acquire_owned() {
        return Ok(Some(permit));
    }
    let max_queue = snap.config.limits.max_queue;
    if server.queued.fetch_add(1, Ordering::AcqRel) >= max_queue {
        server.queued.fetch_sub(1, Ordering::AcqRel);
        stats.inc(Counter::QueueFull);
        tracing::warn!(server = %server.name, max_queue, "request refused: server queue full");
        return Err(Refusal::new(503, "server queue full"));
    }
    let wait = tokio::time::timeout(snap.config.timeouts.queue, Arc::clone(slots).acquire_owned());
    let result = wait.await;
    server.queued.fetch_sub(1, Ordering::AcqRel);
    match result {
        Ok(Ok(permit)) => Ok(Some(permit)),
        Ok(Err(_)) | Err(_) => {
            stats.inc(Counter::QueueTimeout);
            tracing::warn!(server = %server.name, "request refused: queue timeout");
            Err(Refusal::new(503, "timed out waiting for a server slot"))
        }
    }
}

/// Phase "connect": an idle pooled connection to the server, else `prealloc` (a connection
/// to it started at accept), else a new one.
/// Returns the stream and whether it was reused.
pub async fn connect(
    worker: &Worker,
    snap: &Snapshot,
    server: &ServerRt,
    prealloc: Option<Prealloc>,
) -> Result<(TcpStream, bool), Refusal> {
    let stats = &worker.shared.stats;
    if let Some(stream) = worker.pools.take(server.id) {
        stats.inc(Counter::PoolReuse);
        return Ok((stream, true));
    }
    if let Some(early) = prealloc {
        if let Some(stream) = early.finish(snap.config.timeouts.server_connect).await {
            stats.inc(Counter::PreallocatedUsed);
            return Ok((stream, false));
        }
    }
    stats.inc(Counter::ServerConnects);
    let timeout = snap.config.timeouts.server_connect;
    match tokio::time::timeout(timeout, TcpStream::connect(server.addr)).await {
        Ok(Ok(stream)) => {
            let _ = stream.set_nodelay(true);
            Ok((stream, false))
        }
        Ok(Err(_)) => {
            stats.inc(Counter::ConnectFailed);
            Err(Refusal::new(502, "could not connect to server"))
        }
        Err(_) => {
            stats.inc(Counter::ConnectTimeout);
            Err(Refusal::new(504, "server connect timed out"))
        }
    }
}
