//! The switch's side of `[cluster]`: joins gossip at start, and takes what other nodes
//! share as if it had happened here — an agent's capacity report, a `STICKY_IP` decision, a
//! session cookie a server set, a TLS session ID it issued —
//! dated by its age at the origin, so `silent_after` and `timeouts.sticky_ip` count from
//! the event, not from its arrival here. (What this node shares is published where it
//! happens: `agents` for reports, `Shared::share_sticky_ip` for decisions.) It also runs
//! cluster-wide admission: it tells the gossip how many slots this node holds on each
//! server with a `maxconn`, and sets each such server's slot limit from what the other
//! nodes hold (`cluster::Admission::limit`).

use crate::floor::live::now_ms;
use crate::floor::shared::Shared;
use cluster::{Admission, InFlight, Learned, LearnedCookie, StickyIp, TlsSession};
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// Starts this node's membership when the config has `[cluster]`, on the gossip socket a
/// binary upgrade's old process handed over (`inherited`) when it is bound where the config
/// says, else on a new one. Returns a second descriptor of the socket, for the next
/// upgrade.
pub fn join(
    shared: &Arc<Shared>,
    inherited: Option<std::net::UdpSocket>,
) -> std::io::Result<Option<std::net::UdpSocket>> {
    let snap = shared.snapshot.load();
    let Some(cfg) = &snap.config.cluster else { return Ok(None) };
    let socket = match inherited.filter(|s| s.local_addr().is_ok_and(|a| a == cfg.bind)) {
        Some(socket) => socket,
        None => std::net::UdpSocket::bind(cfg.bind).map_err(|e| {
            std::io::Error::new(e.kind(), format!("[cluster] cannot bind {}/udp: {e}", cfg.bind))
        })?,
    };
    let copy = socket.try_clone()?;
    // Weak: the gossip thread must not keep the switch alive after it stops.
    let remote = Box::new(Apply(Arc::downgrade(shared)));
    let digest = cluster::config_digest(&snap.config);
    let node = cluster::Cluster::start_on(cfg, socket, digest, remote)?;
    // The listeners are bound (and listening) before this runs, so the L4 tier may send
    // flows once the other nodes' tables are here; a node without listeners (one that only
    // runs the tier) takes none. An operator's drain before a restart holds (`state_file`).
    if !snap.config.listeners.is_empty() {
        let serving = node.kept_serving().unwrap_or(cluster::Serving::Ready);
        if serving == cluster::Serving::Draining {
            tracing::warn!(
                "cluster: drained before this start (state_file): no new flow from the L4 tier until \
                 `cswitch ctl cluster ready`"
            );
        }
        node.set_serving(serving);
    }
    let _ = shared.cluster.set(Arc::new(node));
    Ok(Some(copy))
}

/// Drains this node from the L4 tier (no new flows; open connections finish) or makes it
/// ready again. `None` without `[cluster]`, or on a node that serves no listener.
pub fn set_serving(shared: &Shared, serving: cluster::Serving) -> Option<cluster::Serving> {
    let node = shared.cluster.get()?;
    node.serving()?;
    if node.serving() != Some(serving) {
        tracing::info!(serving = serving.as_str(), "cluster: this node's L4 serving state changed");
    }
    if let Err(e) = node.set_serving_kept(serving) {
        tracing::warn!(error = %e, "cluster: the serving state is not kept across a restart");
    }
    Some(serving)
}

/// Shares the new config's digest after a reload.
pub fn config_changed(shared: &Shared, config: &config::Config) {
    if let Some(node) = shared.cluster.get() {
        node.publish_digest(cluster::config_digest(config));
    }
}

/// Before a clean stop: drains this node from the cluster's L4 tier and waits (up to
/// `limit`) until the tier sends it no new flow, so the stop fails no connection.
pub fn leave_l4_tier(shared: &Shared, limit: Duration) {
    let Some(node) = shared.cluster.get() else { return };
    if node.serving().is_none() {
        return;
    }
    let start = Instant::now();
    if node.leave_l4_tier(limit) {
        tracing::info!(
            took_ms = start.elapsed().as_millis(),
            "cluster: drained, the L4 tier sends no new flow here"
        );
    } else {
        tracing::warn!(?limit, "cluster: an L4 tier still lists this node; stopping anyway");
    }
}

/// Leaves gossip (at shutdown): the other nodes see this one dead within ~1 s. (After a
/// binary upgrade, while the old process drains, both processes gossip on the one socket,
/// the new one as a new generation of this node; the old one leaves as it exits, and
/// goes on gossiping if it takes the sockets back.)
pub fn leave(shared: &Shared) {
    match shared.cluster.get() {
        // The new process runs the node now, the L4 tier's kernel table included.
        Some(node) if shared.handing_over().is_some() => node.stop_handed_over(),
        Some(node) => node.stop(),
        None => {}
    }
}

/// Applies what other nodes share to this switch's tables.
struct Apply(Weak<Shared>);

impl cluster::Remote for Apply {
    fn in_flight(&self) -> Vec<InFlight> {
        let Some(shared) = self.0.upgrade() else { return Vec::new() };
        let snap = shared.snapshot.load();
        let mut counts = Vec::new();
        for group in &snap.groups {
            for server in group.servers.iter().filter(|s| s.maxconn > 0) {
                let (group, server, count) = (group.name.clone(), server.name.clone(), server.take_peak());
                counts.push(InFlight { group, server, count });
            }
        }
        counts
    }

    fn learned(&self, entry: &Learned) {
        let Some(shared) = self.0.upgrade() else { return };
        let snap = shared.snapshot.load();
        let Some(group) = snap.groups.iter().find(|g| g.name == entry.group) else { return };
        let Some(index) = group.servers.iter().position(|s| s.name == entry.server) else { return };
        let Some(slot) = &group.shared else { return };
        let epoch = shared.weights_epoch.load(std::sync::atomic::Ordering::Acquire);
        let mut slot = slot.lock().unwrap_or_else(|e| e.into_inner());
        // The index is in this snapshot's order: the scheduler must know these members.
        crate::floor::schedulers::sync(&mut slot, group, snap.generation, epoch);
        slot.sched.teach(entry.hash, index);
        shared.stats.inc(crate::Counter::ClusterAssignments);
    }

    fn admission(&self, others: &Admission) {
        let Some(shared) = self.0.upgrade() else { return };
        let snap = shared.snapshot.load();
        for group in &snap.groups {
            for server in group.servers.iter().filter(|s| s.maxconn > 0) {
                let limit = others.limit(&group.name, &server.name, server.maxconn, server.slots_held());
                server.set_slot_limit(limit);
            }
        }
    }

    fn capacity(&self, server: SocketAddr, capacity: u32, age: Duration) {
        let Some(shared) = self.0.upgrade() else { return };
        let age_ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
        let at = now_ms().saturating_sub(age_ms).max(1);
        if super::agents::apply(&shared, server, capacity, at) {
            shared.stats.inc(crate::Counter::ClusterCapacities);
        }
    }

    fn sticky_ip(&self, entry: &StickyIp, age: Duration) {
        let Some(shared) = self.0.upgrade() else { return };
        let snap = shared.snapshot.load();
        let listener = snap.config.listeners.iter().position(|l| l.name == entry.listener);
        let group = snap.groups.iter().find(|g| g.name == entry.group);
        let server = group.and_then(|g| g.servers.iter().find(|s| s.name == entry.server));
        // A node whose config lacks the listener or server ignores the entry (its digest
        // differs: `ctl cluster` shows the drift).
        let (Some(listener), Some(server)) = (listener, server) else { return };
        let decided = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
        shared.sticky_ip.put(listener, entry.client, server.id, decided);
        shared.stats.inc(crate::Counter::ClusterStickyEntries);
    }

    fn tls_session(&self, entry: &TlsSession, age: Duration) {
        let Some(shared) = self.0.upgrade() else { return };
        let snap = shared.snapshot.load();
        let group = snap.groups.iter().find(|g| g.name == entry.group);
        let Some(server) = group.and_then(|g| g.servers.iter().find(|s| s.name == entry.server)) else {
            return;
        };
        let issued = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
        shared.tls_sessions.put_at(entry.id.clone().into_boxed_slice(), server.id, issued);
        shared.stats.inc(crate::Counter::ClusterTlsSessions);
    }

    fn learned_cookie(&self, entry: &LearnedCookie, age: Duration) {
        let Some(shared) = self.0.upgrade() else { return };
        let snap = shared.snapshot.load();
        let Some(group) = snap.groups.iter().find(|g| g.name == entry.group) else { return };
        let server = group.servers.iter().find(|s| s.name == entry.server);
        let (Some(p), Some(server)) = (group.persistence.as_deref(), server) else { return };
        let learned = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
        if crate::floor::persist::learned_elsewhere(p, entry.value.as_bytes(), server.id, learned) {
            shared.stats.inc(crate::Counter::ClusterLearnedCookies);
        }
    }
}
