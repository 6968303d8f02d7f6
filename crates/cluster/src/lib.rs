//! Many cswitch nodes as one (issue 13): membership, liveness and shared state by gossip.
//!
//! Owns this node's membership in `[cluster]`: it runs chitchat (Scuttlebutt dissemination,
//! phi-accrual failure detection; ADR 0011 says why this library) over a UDP transport that
//! authenticates every datagram with the cluster key, publishes what this node knows that
//! others need (its config digest, the capacities its agents report), and hands what other
//! nodes publish to the switch through one callback. The switch and the admin API use only
//! [`Cluster`] and [`View`]; nothing here knows the data plane.
//!
//! Layout: `node` (the thread, the tick: publish, observe, apply), `admission` (cluster-wide
//! `maxconn`: counts published, the others' summed), `auth` (the sealed UDP
//! transport), `keys` (the gossip keys and their text; a leaf), `digest` (what a config
//! digest covers), `view` (what operators see), `stats` (the transport's counters),
//! `serving` (whether this node takes new flows: ready or draining), `joining` (a joining
//! node's `ready` waits for the other nodes' tables), `l4` (the kernel L4
//! tier a node with `[cluster.l4]` programs from the membership; `l4/nft` its table,
//! `l4/host` what a host lacks to run it).
//!
//! Shared now: membership and liveness, config digests, agents' capacities, `STICKY_IP`
//! entries, learned session cookies, TLS session IDs, learning schedulers' assignments,
//! in-flight counts of servers with a `maxconn`, whether each node takes flows from the L4
//! tier (`serve`) and, from a node running the tier, the nodes its kernel sends flows to.

mod admission;
mod auth;
mod digest;
mod joining;
mod keys;
mod l4;
mod node;
mod serving;
mod stats;
mod view;

pub use admission::{Admission, InFlight};
pub use digest::config_digest;
pub use keys::{Learned, LearnedCookie, StickyIp, TlsSession};
pub use l4::host::{missing as l4_missing, Lack};
pub use node::Remote;
pub use serving::Serving;
pub use stats::Counts;
pub use view::{L4View, NodeView, View};

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use tokio::sync::oneshot;

/// This node's running membership. Stops (leaves gossip) on [`Cluster::stop`] or drop.
pub struct Cluster {
    inner: Arc<node::Inner>,
    /// `[cluster] state_file`: where an operator's drain is kept across a restart.
    state_file: Option<std::path::PathBuf>,
    stop: Mutex<Option<oneshot::Sender<()>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Cluster {
    /// Binds the gossip socket and joins through `cfg.seeds`. `digest` is this node's
    /// [`config_digest`]; `remote` gets what other nodes share.
    pub fn start(cfg: &config::Cluster, digest: String, remote: Box<dyn Remote>) -> std::io::Result<Cluster> {
        let (inner, stop, thread) = node::spawn(cfg, None, digest, remote)?;
        tracing::info!(node = %cfg.node, gossip = %cfg.bind, seeds = cfg.seeds.len(), "joined cluster gossip");
        Ok(Cluster {
            inner,
            state_file: cfg.state_file.clone(),
            stop: Mutex::new(Some(stop)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// [`Cluster::start`] on a gossip socket already bound to `cfg.bind`: a binary
    /// upgrade's new process takes over its predecessor's, which the predecessor still
    /// holds (so a second bind would fail). Other nodes see a new generation of this node.
    pub fn start_on(
        cfg: &config::Cluster,
        socket: std::net::UdpSocket,
        digest: String,
        remote: Box<dyn Remote>,
    ) -> std::io::Result<Cluster> {
        let (inner, stop, thread) = node::spawn(cfg, Some(socket), digest, remote)?;
        tracing::info!(node = %cfg.node, gossip = %cfg.bind, seeds = cfg.seeds.len(), "joined cluster gossip");
        Ok(Cluster {
            inner,
            state_file: cfg.state_file.clone(),
            stop: Mutex::new(Some(stop)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Shares an agent's report with every node (at the next tick, within 100 ms).
    pub fn publish_capacity(&self, server: SocketAddr, capacity: u32) {
        self.inner.publish_capacity(server, capacity);
    }

    /// Shares a `STICKY_IP` decision with every node; its origin (this node) withdraws it
    /// after `lifetime` (the listener's `timeouts.sticky_ip`).
    pub fn publish_sticky_ip(&self, entry: &StickyIp, lifetime: std::time::Duration) {
        self.inner.publish_sticky_ip(entry, lifetime);
    }

    /// Shares a session cookie a server set (persistence `learn`); withdrawn after
    /// `lifetime` (the group's learn `timeout`).
    pub fn publish_learned_cookie(&self, entry: &LearnedCookie, lifetime: std::time::Duration) {
        self.inner.publish_learned(entry, lifetime);
    }

    /// Shares a TLS session ID a server issued; withdrawn after `lifetime`
    /// (`timeouts.tls_session`).
    pub fn publish_tls_session(&self, entry: &TlsSession, lifetime: std::time::Duration) {
        self.inner.publish_tls_session(entry, lifetime);
    }

    /// Shares assignments of a learning scheduler (`htrr`, `lard`, `lard_r`); each is
    /// withdrawn from the gossip after `lifetime` (nodes that took it keep it in their
    /// tables).
    pub fn publish_assignments(&self, entries: &[Learned], lifetime: std::time::Duration) {
        for entry in entries {
            self.inner.publish_assignment(entry, lifetime);
        }
    }

    /// Says whether the L4 tier may send this node new flows: [`Serving::Ready`] once its
    /// listeners are bound, [`Serving::Draining`] to take no new flow while open ones
    /// finish. Published at the next tick (within 100 ms).
    pub fn set_serving(&self, serving: Serving) {
        self.inner.serving.set(serving);
    }

    /// What an operator last said (`drain`, `ready`) before this process started, kept in
    /// `[cluster] state_file`; `None` without one, or when it was never said.
    pub fn kept_serving(&self) -> Option<Serving> {
        self.state_file.as_deref().and_then(serving::read_kept)
    }

    /// [`Cluster::set_serving`] on an operator's word, kept in `[cluster] state_file` (if
    /// any) so a restart of this node comes back the same. Applied even when the file
    /// cannot be written (that error is returned).
    pub fn set_serving_kept(&self, serving: Serving) -> std::io::Result<()> {
        self.set_serving(serving);
        match &self.state_file {
            Some(path) => serving::write_kept(path, serving)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
            None => Ok(()),
        }
    }

    /// Before a clean stop: drains this node and waits (at most `limit`) until no live L4
    /// tier sends it new flows any more, so stopping loses no connection. True when none
    /// does (or this node takes no flows); false when `limit` passed first.
    pub fn leave_l4_tier(&self, limit: std::time::Duration) -> bool {
        if self.serving().is_none() {
            return true;
        }
        self.set_serving(Serving::Draining);
        let start = std::time::Instant::now();
        loop {
            let view = self.inner.view();
            let me = view.node.as_str();
            let sends_me = |n: &NodeView| n.runs_l4 && n.live && n.l4_targets.iter().any(|t| t == me);
            if !view.nodes.iter().any(sends_me) {
                return true;
            }
            if start.elapsed() >= limit {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// This node's serving state (`None` until set).
    pub fn serving(&self) -> Option<Serving> {
        self.inner.serving.get()
    }

    /// Shares a new config digest (after a reload).
    pub fn publish_digest(&self, digest: String) {
        self.inner.publish_digest(digest);
    }

    /// The cluster as this node sees it now (refreshed every tick; the L4 tier's part as
    /// the kernel has it this moment).
    pub fn view(&self) -> Arc<View> {
        let view = self.inner.view();
        match &self.inner.l4 {
            Some(tier) => Arc::new(View { l4: Some(tier.view()), ..(*view).clone() }),
            None => view,
        }
    }

    /// [`Cluster::stop`] after a binary upgrade handed this node to a new process: the L4
    /// tier's kernel table stays (the new process installed and programs the same one).
    pub fn stop_handed_over(&self) {
        if let Some(tier) = &self.inner.l4 {
            tier.keep_table();
        }
        self.stop();
    }

    /// Leaves gossip and waits for the thread; other nodes then see this one die.
    pub fn stop(&self) {
        if let Some(stop) = self.stop.lock().ok().and_then(|mut s| s.take()) {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = thread.join();
        }
        if let Some(tier) = &self.inner.l4 {
            tier.stop();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop();
    }
}
