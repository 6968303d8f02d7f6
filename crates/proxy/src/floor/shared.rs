//! What every worker, the health thread and the admin API share: the current snapshot,
//! the counters, the tables of `floor::tables`, the open-connection count, the
//! shutdown signal and a binary upgrade's hand-over. Everything here is atomic, sharded or swapped whole (no lock on the
//! data path); `snapshot_writer` serialises the writers of new snapshots.

use crate::floor::live::ListenerLive;
use crate::floor::snapshot::Snapshot;
use crate::floor::stats::Stats;
use crate::floor::tables::last_server::LastServer;
use crate::floor::tables::sticky_ip::StickyIp;
use crate::floor::tables::tls_sessions::TlsSessions;
use arc_swap::ArcSwap;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;
use tokio::sync::Notify;

/// State shared by all workers and the control thread.
pub struct Shared {
    /// Current config generation.
    pub snapshot: ArcSwap<Snapshot>,
    /// Counters.
    pub stats: Stats,
    /// Client connections open, all workers.
    pub client_conns: AtomicUsize,
    /// Set once on SIGTERM / shutdown.
    pub shutting_down: AtomicBool,
    /// Woken once when `shutting_down` is set.
    pub shutdown_notify: Notify,
    /// Client addresses a `STICKY_IP` rule pinned to a server.
    pub sticky_ip: StickyIp,
    /// The last server each client address used (pre-allocation).
    pub last_server: LastServer,
    /// TLS session IDs servers issued → server (passthrough listeners).
    pub tls_sessions: TlsSessions,
    /// Bumped whenever the health control loop changes an effective weight: schedulers
    /// rebuild when it moves.
    pub weights_epoch: std::sync::atomic::AtomicU64,
    /// Per-listener traffic, in config order.
    pub listeners: Vec<ListenerLive>,
    /// When the switch started.
    pub started: std::time::Instant,
    /// Held by whoever builds and stores a new snapshot (reload, admin edits, the health
    /// loop dropping servers that finished leaving), so no update is lost between them.
    pub snapshot_writer: std::sync::Mutex<()>,
    /// Set once a binary upgrade's new process serves: the workers stop accepting and
    /// give their idle connections to it (`floor::handover`), unless taken back (read it
    /// through [`Shared::handing_over`]).
    pub handover: std::sync::OnceLock<crate::floor::handover::Handover>,
    /// This node's membership in `[cluster]`, set once at start when configured.
    pub cluster: std::sync::OnceLock<Arc<cluster::Cluster>>,
}

impl Shared {
    /// The binary upgrade's hand-over, while it runs (not before, nor once taken back).
    pub fn handing_over(&self) -> Option<&crate::floor::handover::Handover> {
        self.handover.get().filter(|h| h.active())
    }

    /// Shares a TLS session ID `server` just issued with the cluster; nothing without
    /// `[cluster]`.
    pub fn share_tls_session(&self, id: &[u8], server: u64) {
        let Some(node) = self.cluster.get() else { return };
        let snap = self.snapshot.load();
        let Some(g) = snap.group_of(server) else { return };
        let group = &snap.groups[g];
        let Some(s) = group.servers.iter().find(|s| s.id == server) else { return };
        let entry =
            cluster::TlsSession { id: id.to_vec(), group: group.name.clone(), server: s.name.clone() };
        node.publish_tls_session(&entry, snap.config.timeouts.tls_session);
    }

    /// Shares a `STICKY_IP` decision this node just made (a new or changed entry) with the
    /// cluster, by names every node can resolve; nothing without `[cluster]`.
    pub fn share_sticky_ip(&self, listener: usize, client: std::net::IpAddr, server: u64) {
        let Some(node) = self.cluster.get() else { return };
        let snap = self.snapshot.load();
        let (Some(l), Some(g)) = (snap.config.listeners.get(listener), snap.group_of(server)) else { return };
        let group = &snap.groups[g];
        let Some(s) = group.servers.iter().find(|s| s.id == server) else { return };
        let (listener, group, server) = (l.name.clone(), group.name.clone(), s.name.clone());
        let entry = cluster::StickyIp { listener, client, group, server };
        node.publish_sticky_ip(&entry, snap.config.timeouts.sticky_ip);
    }

    /// Rebuilds the current snapshot from its own config (generation + 1): servers that
    /// finished leaving drop out. Rules and everything else carry over.
    pub fn rebuild_snapshot(&self) {
        let _writer = self.snapshot_writer.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.snapshot.load_full();
        let parts = crate::floor::snapshot::ListenerParts {
            rules: current.listeners.iter().map(|l| l.rules.clone()).collect(),
            tls: current.listeners.iter().map(|l| l.tls.clone()).collect(),
        };
        let generation = current.generation + 1;
        let next = Snapshot::build(current.config.clone(), parts, Some(&current), generation);
        self.snapshot.store(Arc::new(next));
        tracing::info!(
            generation,
            cause = "health loop: servers that finished leaving dropped",
            "config generation live"
        );
    }
}
