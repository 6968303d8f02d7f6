//! The switch's side of `[cluster]`: joins gossip at start, and takes the capacities other
//! nodes' agents reported as if this node's own agents had sent them (dated by their age at
//! the origin, so `silent_after` counts from the agent's report, not from its arrival here).

use crate::floor::live::now_ms;
use crate::floor::shared::Shared;
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Starts this node's membership when the config has `[cluster]`.
pub fn join(shared: &Arc<Shared>) -> std::io::Result<()> {
    let snap = shared.snapshot.load();
    let Some(cfg) = &snap.config.cluster else { return Ok(()) };
    // Weak: the gossip thread must not keep the switch alive after it stops.
    let weak: Weak<Shared> = Arc::downgrade(shared);
    let sink: cluster::CapacitySink = Box::new(move |server, capacity, age: Duration| {
        let Some(shared) = weak.upgrade() else { return };
        let age_ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
        let at = now_ms().saturating_sub(age_ms).max(1);
        if super::agents::apply(&shared, server, capacity, at) {
            shared.stats.inc(crate::Counter::ClusterCapacities);
        }
    });
    let digest = cluster::config_digest(&snap.config);
    let node = cluster::Cluster::start(cfg, digest, sink)
        .map_err(|e| std::io::Error::new(e.kind(), format!("[cluster] cannot start: {e}")))?;
    let _ = shared.cluster.set(Arc::new(node));
    Ok(())
}

/// Shares the new config's digest after a reload.
pub fn config_changed(shared: &Shared, config: &config::Config) {
    if let Some(node) = shared.cluster.get() {
        node.publish_digest(cluster::config_digest(config));
    }
}

/// Leaves gossip (at shutdown): the other nodes see this one dead within ~1.2 s.
pub fn leave(shared: &Shared) {
    if let Some(node) = shared.cluster.get() {
        node.stop();
    }
}
