//! The running member: chitchat on its own thread and single-threaded runtime (away from
//! the workers), and a tick that publishes this node's state (config digest, beat, the
//! capacities its agents reported, its in-flight counts), hands fresh capacities and the
//! others' counts to the switch, and refreshes the operator's [`View`].

use crate::admission::{self, Admission, InFlight};
use crate::auth::SealedUdp;
use crate::keys::{self, wall_ms, Learned, LearnedCookie, StickyIp, TlsSession};
use crate::serving::{self, Serving};
use crate::stats::Stats;
use crate::view::{NodeView, View};
use arc_swap::ArcSwap;
use chitchat::{spawn_chitchat, Chitchat, ChitchatConfig, ChitchatId, FailureDetectorConfig, NodeState};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// What the switch does with what other nodes share. Each call carries the entry's age at
/// its origin (measured on the origin's clock), so lifetimes count from the origin's event.
pub trait Remote: Send + Sync {
    /// An agent reported `capacity` for `server` to another node.
    fn capacity(&self, server: SocketAddr, capacity: u32, age: Duration);
    /// Another node pinned a client to a server (`STICKY_IP`).
    fn sticky_ip(&self, entry: &StickyIp, age: Duration);
    /// A server behind another node set a session cookie its group learns.
    fn learned_cookie(&self, entry: &LearnedCookie, age: Duration);
    /// A server behind another node issued a TLS session ID (passthrough).
    fn tls_session(&self, entry: &TlsSession, age: Duration);
    /// A learning scheduler on another node assigned a key to a server.
    fn learned(&self, _entry: &Learned) {}
    /// This node's requests in flight to each server with a `maxconn` (read every tick,
    /// published when changed).
    fn in_flight(&self) -> Vec<InFlight> {
        Vec::new()
    }
    /// What the other live nodes hold (every tick): the switch sets its slot limits.
    fn admission(&self, _others: &Admission) {}
}

/// Phi accrual's threshold. chitchat computes phi as silence / mean interval between
/// heartbeat news of a node, and news of each node arrives more often than once per gossip
/// interval (every exchange carries it), so at 100 ms a dead node is declared after ~0.7 to
/// 1.6 s (measured ~0.7 s with three nodes): inside seed 004's 2 s, with room for a busy
/// host's pauses before a live node is wrongly declared dead.
const PHI_THRESHOLD: f64 = 16.0;

/// What this node will publish at its next tick.
#[derive(Default)]
struct Pending {
    digest: Option<String>,
    capacities: HashMap<SocketAddr, (u32, u64)>,
    /// Sticky entries and learned cookies by key: (value, wall ms when the origin should
    /// delete it).
    sticky: HashMap<String, (String, u64)>,
}

/// State shared by the handle and the tick.
pub(crate) struct Inner {
    pending: Mutex<Pending>,
    view: ArcSwap<View>,
    pub(crate) stats: Arc<Stats>,
    /// Whether this node takes flows from the L4 tier (`serve`).
    pub(crate) serving: serving::Own,
    /// Whether this node has the other nodes' tables yet: its `ready` waits for it.
    joining: crate::joining::Joining,
    /// The L4 tier, on a node with `[cluster.l4]`.
    pub(crate) l4: Option<crate::l4::Tier>,
}

impl Inner {
    pub(crate) fn publish_capacity(&self, server: SocketAddr, capacity: u32) {
        if let Ok(mut p) = self.pending.lock() {
            p.capacities.insert(server, (capacity, wall_ms()));
        }
    }

    pub(crate) fn publish_sticky_ip(&self, entry: &StickyIp, lifetime: Duration) {
        let now = wall_ms();
        let key = keys::sticky_key(&entry.listener, entry.client);
        let value = keys::sticky_value(&entry.group, &entry.server, now);
        let ends = now.saturating_add(u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX));
        if let Ok(mut p) = self.pending.lock() {
            p.sticky.insert(key, (value, ends));
        }
    }

    pub(crate) fn publish_learned(&self, entry: &LearnedCookie, lifetime: Duration) {
        let now = wall_ms();
        let key = keys::learned_key(&entry.group, &entry.value);
        let value = format!("{} {now}", entry.server);
        let ends = now.saturating_add(u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX));
        if let Ok(mut p) = self.pending.lock() {
            // Withdrawn like sticky entries: one table of expiries for both.
            p.sticky.insert(key, (value, ends));
        }
    }

    pub(crate) fn publish_tls_session(&self, entry: &TlsSession, lifetime: Duration) {
        let now = wall_ms();
        let value = keys::sticky_value(&entry.group, &entry.server, now);
        self.publish_withdrawn(keys::tls_key(&entry.id), value, now, lifetime);
    }

    pub(crate) fn publish_assignment(&self, entry: &Learned, lifetime: Duration) {
        let now = wall_ms();
        let value = format!("{} {now}", entry.server);
        self.publish_withdrawn(keys::sched_key(&entry.group, entry.hash), value, now, lifetime);
    }

    /// An entry the origin deletes `lifetime` after `now`.
    fn publish_withdrawn(&self, key: String, value: String, now: u64, lifetime: Duration) {
        let ends = now.saturating_add(u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX));
        if let Ok(mut p) = self.pending.lock() {
            p.sticky.insert(key, (value, ends));
        }
    }

    pub(crate) fn publish_digest(&self, digest: String) {
        if let Ok(mut p) = self.pending.lock() {
            p.digest = Some(digest);
        }
    }

    pub(crate) fn view(&self) -> Arc<View> {
        self.view.load_full()
    }
}

/// Starts chitchat on a new thread; returns once the gossip socket is bound (or failed).
pub(crate) fn spawn(
    cfg: &config::Cluster,
    bound: Option<std::net::UdpSocket>,
    digest: String,
    remote: Box<dyn Remote>,
) -> std::io::Result<(Arc<Inner>, oneshot::Sender<()>, std::thread::JoinHandle<()>)> {
    let stats = Arc::new(Stats::default());
    let l4 = cfg.l4.as_ref().map(crate::l4::Tier::start).transpose()?;
    let view = View { node: cfg.node.clone(), config_digest: digest.clone(), ..View::default() };
    let inner = Arc::new(Inner {
        pending: Mutex::new(Pending { digest: Some(digest), ..Pending::default() }),
        view: ArcSwap::from_pointee(view),
        stats: Arc::clone(&stats),
        serving: serving::Own::default(),
        joining: crate::joining::Joining::new(!cfg.seeds.is_empty()),
        l4,
    });
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let transport = SealedUdp::new(cfg.key.as_deref(), stats).with_socket(bound);
    let handle = runtime
        .block_on(spawn_chitchat(chitchat_config(cfg), Vec::new(), &transport))
        .map_err(|e| std::io::Error::other(format!("{e:#}")))?;
    let (stop, stopped) = oneshot::channel();
    let tick = cfg.gossip_interval.min(Duration::from_millis(100));
    let shared = Arc::clone(&inner);
    let thread = std::thread::Builder::new().name("cswitch-cluster".into()).spawn(move || {
        runtime.block_on(async move {
            drive(&handle, &shared, remote.as_ref(), tick, stopped).await;
            if let Err(e) = handle.shutdown().await {
                tracing::debug!(error = %e, "gossip stopped with an error");
            }
        })
    })?;
    Ok((inner, stop, thread))
}

fn chitchat_config(cfg: &config::Cluster) -> ChitchatConfig {
    let failure_detector_config = FailureDetectorConfig {
        phi_threshold: PHI_THRESHOLD,
        initial_interval: cfg.gossip_interval,
        // A dead node stays listed (as dead) this long, then is forgotten.
        dead_node_grace_period: Duration::from_secs(3600),
        ..FailureDetectorConfig::default()
    };
    ChitchatConfig {
        chitchat_id: ChitchatId::new(cfg.node.clone(), wall_ms(), cfg.bind),
        cluster_id: "cswitch".into(),
        gossip_interval: cfg.gossip_interval,
        listen_addr: cfg.bind,
        seed_nodes: cfg.seeds.iter().map(ToString::to_string).collect(),
        failure_detector_config,
        // Deleted entries (expired sticky ones) leave tombstones this long; a peer away for
        // longer is sent the whole state again.
        marked_for_deletion_grace_period: Duration::from_secs(120),
        catchup_callback: None,
        extra_liveness_predicate: None,
    }
}

/// Ticks until `stopped` fires.
async fn drive(
    handle: &chitchat::ChitchatHandle,
    inner: &Inner,
    remote: &dyn Remote,
    tick: Duration,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut seen = Seen::default();
    let mut expiries: HashMap<String, u64> = HashMap::new();
    let mut in_flight: HashMap<String, u32> = HashMap::new();
    let mut interval = tokio::time::interval(tick);
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            _ = interval.tick() => {}
        }
        let chitchat = handle.chitchat();
        let mut c = chitchat.lock().await;
        publish(&mut c, inner, &mut expiries);
        admission::publish(c.self_node_state(), &mut in_flight, remote.in_flight());
        let mut view = observe(&c, &mut seen, remote, inner);
        if !inner.joining.done() {
            let (peers, received) = tables_received(&c, &seen);
            inner.joining.tick(peers, received);
        }
        let others = admit(&c);
        drop(c);
        remote.admission(&others);
        if let Some(tier) = &inner.l4 {
            tier.offer(crate::l4::plan(tier.cfg(), &view.nodes));
            view.l4 = Some(tier.view());
        }
        inner.view.store(Arc::new(view));
    }
}

/// Writes what is pending, and the beat, into this node's gossip state, and deletes the
/// sticky entries whose lifetime ended (`expiries`: key → wall ms).
fn publish(c: &mut Chitchat, inner: &Inner, expiries: &mut HashMap<String, u64>) {
    let pending = inner.pending.lock().map(|mut p| std::mem::take(&mut *p)).unwrap_or_default();
    let state = c.self_node_state();
    let now = wall_ms();
    for (key, (value, ends)) in pending.sticky {
        state.set(&key, value);
        expiries.insert(key, ends);
    }
    expiries.retain(|key, ends| {
        let live = *ends > now;
        if !live {
            state.delete(key);
        }
        live
    });
    if let Some(digest) = pending.digest {
        state.set(keys::DIGEST, digest);
    }
    for (server, (capacity, at)) in pending.capacities {
        state.set(keys::cap_key(server), keys::cap_value(capacity, at));
    }
    // `ready` only once the other nodes' tables are here (`joining`); `draining` at once.
    if let Some(serving) = inner.serving.get().filter(|s| *s != Serving::Ready || inner.joining.done()) {
        state.set(serving::SERVE, serving.as_str());
    }
    if let Some(tier) = &inner.l4 {
        state.set(serving::TIER, "l4");
        state.set(serving::L4_TARGETS, tier.view().targets.join(","));
    }
    state.set(keys::BEAT, wall_ms());
}

/// The other live nodes' in-flight counts.
fn admit(c: &Chitchat) -> Admission {
    let me = c.self_chitchat_id();
    let others: Vec<&ChitchatId> = c.live_nodes().filter(|id| *id != me).collect();
    // Ties of name (a restarted node's generations) rank by generation: any fixed order
    // every node computes alike will do.
    let rank =
        others.iter().filter(|id| (&id.node_id, id.generation_id) < (&me.node_id, me.generation_id)).count();
    admission::collect(others.iter().filter_map(|id| c.node_state(id)), others.len() + 1, rank)
}

/// The live other nodes, and how many of them have handed their tables to the switch
/// (their state, up to a `beat`, taken while they were live).
fn tables_received(c: &Chitchat, seen: &Seen) -> (usize, usize) {
    let me = c.self_chitchat_id();
    let peers: Vec<&ChitchatId> = c.live_nodes().filter(|id| *id != me).collect();
    let received = peers.iter().filter(|id| seen.nodes.get(**id).is_some_and(|n| n.handed_up_to > 0)).count();
    (peers.len(), received)
}

/// What this node has already taken from each other node.
#[derive(Default)]
struct Seen {
    nodes: HashMap<ChitchatId, NodeSeen>,
    /// Each other node's liveness at the last tick, to log its changes.
    live: HashMap<ChitchatId, bool>,
}

impl Seen {
    /// Logs a node joining, dying or coming back (once per change).
    fn note_liveness(&mut self, id: &ChitchatId, live: bool) {
        let before = self.live.insert(id.clone(), live);
        match (before, live) {
            (None | Some(false), true) => {
                tracing::info!(node = %id.node_id, gossip = %id.gossip_advertise_addr, "cluster node live")
            }
            (Some(true), false) => {
                tracing::warn!(node = %id.node_id, gossip = %id.gossip_advertise_addr, "cluster node dead")
            }
            _ => {}
        }
    }
}

struct NodeSeen {
    beat_version: u64,
    advanced_at: Instant,
    /// The node's state version up to which its entries were handed to the switch. A node
    /// numbers its writes in order and Scuttlebutt delivers them in that order, so an entry
    /// above the mark is new (no per-entry bookkeeping, nothing to prune).
    handed_up_to: u64,
}

/// Hands new capacities of live nodes to the switch and builds the view.
fn observe(c: &Chitchat, seen: &mut Seen, remote: &dyn Remote, inner: &Inner) -> View {
    let me = c.self_chitchat_id().clone();
    let live: Vec<&ChitchatId> = c.live_nodes().collect();
    let my_digest = c.node_state(&me).and_then(|s| s.get(keys::DIGEST)).unwrap_or_default().to_string();
    // A node that only runs the L4 tier has no routing config: its digest differs from the
    // others' without drift.
    let tier_only =
        |state: &NodeState| state.get(serving::TIER).is_some() && state.get(serving::SERVE).is_none();
    let i_am_tier_only = inner.l4.is_some() && inner.serving.get().is_none();
    let mut nodes = Vec::new();
    for (id, state) in c.node_states() {
        let is_self = *id == me;
        let is_live = is_self || live.contains(&id);
        if !is_self {
            seen.note_liveness(id, is_live);
        }
        let lag_ms = if is_self { None } else { track(seen, id, state, is_live, remote) };
        let digest = state.get(keys::DIGEST).map(str::to_string);
        let serving = state.get(serving::SERVE).and_then(Serving::parse);
        nodes.push(NodeView {
            name: id.node_id.to_string(),
            gossip: id.gossip_advertise_addr,
            generation: id.generation_id,
            is_self,
            live: is_live,
            drift: !i_am_tier_only && !tier_only(state) && digest.as_deref().is_some_and(|d| d != my_digest),
            runs_l4: state.get(serving::TIER).is_some(),
            l4_targets: state.get(serving::L4_TARGETS).map_or_else(Vec::new, |t| {
                t.split(',').filter(|n| !n.is_empty()).map(str::to_string).collect()
            }),
            config_digest: digest,
            lag_ms,
            capacities: state.iter_prefix(keys::CAP_PREFIX).count(),
            sticky_ip: state.iter_prefix(keys::STICKY_PREFIX).count(),
            learned_cookies: state.iter_prefix(keys::LEARNED_PREFIX).count(),
            tls_sessions: state.iter_prefix(keys::TLS_PREFIX).count(),
            assignments: state.iter_prefix(keys::SCHED_PREFIX).count(),
            serving,
        });
    }
    seen.nodes.retain(|id, _| c.node_state(id).is_some());
    seen.live.retain(|id, _| c.node_state(id).is_some());
    nodes.sort_by(|a, b| (&a.name, a.generation).cmp(&(&b.name, b.generation)));
    View {
        node: me.node_id.to_string(),
        config_digest: my_digest,
        nodes,
        gossip: inner.stats.counts(),
        l4: None,
    }
}

/// Applies a remote node's new capacities (when it is live); returns its lag.
fn track(
    seen: &mut Seen,
    id: &ChitchatId,
    state: &NodeState,
    live: bool,
    remote: &dyn Remote,
) -> Option<u64> {
    let beat = state.get_versioned(keys::BEAT)?;
    let entry = seen.nodes.entry(id.clone()).or_insert_with(|| NodeSeen {
        beat_version: 0,
        advanced_at: Instant::now(),
        handed_up_to: 0,
    });
    if beat.version > entry.beat_version {
        entry.beat_version = beat.version;
        entry.advanced_at = Instant::now();
    }
    if live {
        let origin_now: u64 = beat.value.parse().unwrap_or(0);
        let age = |at: u64| Duration::from_millis(origin_now.saturating_sub(at));
        let mark = entry.handed_up_to;
        let new = |prefix| state.iter_prefix(prefix).filter(move |(_, v)| v.version > mark);
        for (key, value) in new(keys::CAP_PREFIX) {
            if let Some((server, capacity, at)) = keys::parse_cap(key, &value.value) {
                remote.capacity(server, capacity, age(at));
            }
        }
        for (key, value) in new(keys::STICKY_PREFIX) {
            if let Some((sticky, at)) = keys::parse_sticky(key, &value.value) {
                remote.sticky_ip(&sticky, age(at));
            }
        }
        for (key, value) in new(keys::LEARNED_PREFIX) {
            if let Some((cookie, at)) = keys::parse_learned(key, &value.value) {
                remote.learned_cookie(&cookie, age(at));
            }
        }
        for (key, value) in new(keys::SCHED_PREFIX) {
            if let Some((entry, _)) = keys::parse_sched(key, &value.value) {
                remote.learned(&entry);
            }
        }
        for (key, value) in new(keys::TLS_PREFIX) {
            if let Some((session, at)) = keys::parse_tls(key, &value.value) {
                remote.tls_session(&session, age(at));
            }
        }
        entry.handed_up_to = state.max_version();
    }
    Some(u64::try_from(entry.advanced_at.elapsed().as_millis()).unwrap_or(u64::MAX))
}
