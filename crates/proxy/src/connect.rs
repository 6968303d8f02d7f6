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

/// The group a connection-level listener's rules choose for `req` (its default group when
/// it has no rules or none fires); `None` when a rule refuses it (`deny` and `redirect`
/// counted as denied, `drop` as dropped: outside HTTP none can be answered as such). Rule
/// hits are counted.
pub fn route(
    worker: &Worker,
    l: &crate::snapshot::ListenerRt,
    req: &rules::ConnectionRequest<'_>,
) -> Option<usize> {
    use rules::{Action, Outcome};
    let Some(rules) = l.rules.as_deref() else { return Some(l.default_group) };
    let mut state = worker.eval.borrow_mut();
    // Only body fields are ever "not yet known", and these requests have no body.
    let Outcome::Decided(decision) = rules.evaluate(req, &mut state, None) else {
        return Some(l.default_group);
    };
    if let Some(hits) = decision.rule.and_then(|(index, _)| l.rule_hits.get(index)) {
        hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    match decision.action {
        Action::Route { group, .. } => Some(group),
        Action::Default => Some(l.default_group),
        Action::Deny { .. } | Action::Redirect { .. } => {
            worker.shared.stats.inc(Counter::RuleDenied);
            None
        }
        Action::Drop => {
            worker.shared.stats.inc(Counter::RuleDropped);
            None
        }
    }
}
