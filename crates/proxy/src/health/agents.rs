//! The receiving end of `cswitch agent` reports (seed 004 §3.3): a UDP socket; each valid
//! report (right token) stores the capacity and the time in every server with the
//! reported address. The control loop turns them into weights and treats a server whose
//! last report is older than `silent_after` as capacity 0. In a cluster, an accepted
//! report is also published to the other nodes.

use crate::floor::live::now_ms;
use crate::floor::shared::Shared;
use crate::floor::stats::Counter;
use agent::wire::{token_matches, Report};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::net::UdpSocket;

/// Receives reports until the task is aborted.
pub async fn receive(shared: Arc<Shared>, socket: UdpSocket) {
    let mut buf = [0u8; 1024];
    loop {
        let (n, from) = match socket.recv_from(&mut buf).await {
            Ok(pair) => pair,
            Err(e) => {
                tracing::warn!(error = %e, "agent socket receive failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        match accept(&shared, &buf[..n]) {
            Ok(()) => shared.stats.inc(Counter::AgentReports),
            Err(reason) => {
                shared.stats.inc(Counter::AgentReportsRejected);
                tracing::debug!(%from, reason, "agent report rejected");
            }
        }
    }
}

/// Applies one datagram; `Err` says why it was refused.
fn accept(shared: &Shared, datagram: &[u8]) -> Result<(), String> {
    let report = Report::parse(datagram).map_err(|e| e.to_string())?;
    let snap = shared.snapshot.load();
    let expected = snap.config.agents.as_ref().and_then(|a| a.token.as_deref());
    if let Some(token) = expected {
        if !token_matches(token, report.token.as_deref()) {
            return Err("wrong or missing token".into());
        }
    }
    if !apply(shared, report.server, report.capacity, now_ms().max(1)) {
        return Err(format!("no server has address {}", report.server));
    }
    // Every other node of the cluster weighs by it too (`health::cluster`).
    if let Some(cluster) = shared.cluster.get() {
        cluster.publish_capacity(report.server, report.capacity);
    }
    Ok(())
}

/// Stores `capacity`, reported at `at_ms` (`now_ms()` clock), in every server with address
/// `server`; false when there is none.
pub(super) fn apply(shared: &Shared, server: SocketAddr, capacity: u32, at_ms: u64) -> bool {
    let snap = shared.snapshot.load();
    let mut found = false;
    for s in snap.groups.iter().flat_map(|g| g.servers.iter()).filter(|s| s.known_as == server) {
        s.live.capacity.store(capacity, Ordering::Relaxed);
        s.live.reported_at_ms.store(at_ms, Ordering::Relaxed);
        found = true;
    }
    found
}
