//! Connection-level forwarding (TLS passthrough, mail logins): pick a server of a group
//! (a preferred one first), take a `maxconn` slot, connect — trying other servers on a
//! connect failure, up to `limits.retries` more — and keep the server counted as busy
//! while the connection lives.

use crate::balancing;
use crate::health::passive;
use crate::snapshot::{ServerRt, Snapshot};
use crate::stats::Counter;
use crate::upstream::{self, ActiveGuard, Tried};
use crate::worker::Worker;
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

/// A connected server; dropping it releases its slot and its in-flight count.
pub struct Upstream<'s> {
    /// Index of the server in its group.
    pub index: usize,
    /// The server.
    pub server: &'s ServerRt,
    /// The connection.
    pub stream: TcpStream,
    _slot: Option<OwnedSemaphorePermit>,
    _active: ActiveGuard<'s>,
}

/// Connects to a server of `group`: `prefer` (a server id) first when it is still there,
/// then the scheduler's picks (fed `key`). `None` when no server could be reached (logged).
pub async fn pick_and_connect<'s>(
    worker: &Worker,
    snap: &'s Snapshot,
    group: usize,
    prefer: Option<u64>,
    key: Option<&[u8]>,
) -> Option<Upstream<'s>> {
    let g = snap.group(group);
    let stats = &worker.shared.stats;
    let mut tried = Tried::default();
    for _ in 0..=snap.config.limits.retries {
        let preferred =
            prefer.and_then(|id| g.servers.iter().position(|s| s.id == id)).filter(|i| !tried.contains(*i));
        let Some(index) = preferred.or_else(|| balancing::pick(worker, snap, group, &tried, key)) else {
            stats.inc(Counter::NoServer);
            tracing::warn!(group = %g.name, "no usable server");
            return None;
        };
        let server = &g.servers[index];
        let slot = upstream::acquire_slot(server, snap, stats).await.ok()?;
        let active = ActiveGuard::new(server);
        // Servers of connection-level listeners are never pooled, so this always connects.
        match upstream::connect(worker, snap, server, None).await {
            Ok((stream, _)) => {
                passive::on_success(server);
                return Some(Upstream { index, server, stream, _slot: slot, _active: active });
            }
            Err(r) => {
                tracing::warn!(server = %server.name, reason = r.reason, "server connect failed");
                passive::on_failure(g, server, stats, &worker.shared.weights_epoch);
                tried.insert(index);
                stats.inc(Counter::Retries);
            }
        }
    }
    None
}
