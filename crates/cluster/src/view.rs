//! What an operator sees of the cluster (`GET /api/cluster`, `cswitch ctl cluster`): every
//! node this one knows, live or dead, with the config digest it runs and how fresh its
//! state is here, and the L4 tier as its node runs it (`L4View`).

use crate::serving::Serving;
use crate::stats::Counts;
use std::net::SocketAddr;

/// The cluster as this node sees it.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct View {
    /// This node's name.
    pub node: String,
    /// This node's config digest.
    pub config_digest: String,
    /// Every known node, this one included, by name.
    pub nodes: Vec<NodeView>,
    /// The gossip transport's counters.
    pub gossip: Counts,
    /// The L4 tier this node programs (`[cluster.l4]`), if it does.
    pub l4: Option<L4View>,
}

/// One node.
#[derive(Clone, Debug, serde::Serialize)]
pub struct NodeView {
    /// Its `[cluster] node`.
    pub name: String,
    /// Its gossip address.
    pub gossip: SocketAddr,
    /// When it started (ms since the epoch): a restarted node comes back as a new generation.
    pub generation: u64,
    /// Whether this is the node answering.
    pub is_self: bool,
    /// Alive by the failure detector (always true for this node).
    pub live: bool,
    /// The config digest it published (`None` until its state has arrived).
    pub config_digest: Option<String>,
    /// Whether its digest differs from this node's.
    pub drift: bool,
    /// Milliseconds since its state last advanced here: its replication lag plus up to one
    /// tick (`None` for this node, or before anything arrived).
    pub lag_ms: Option<u64>,
    /// How many servers' capacities it shares (agents report to it).
    pub capacities: usize,
    /// How many `STICKY_IP` entries it shares (decided there, not yet expired).
    pub sticky_ip: usize,
    /// How many learned session cookies it shares.
    pub learned_cookies: usize,
    /// How many TLS session IDs it shares.
    pub tls_sessions: usize,
    /// How many learning schedulers' assignments (`htrr`, `lard`) it shares.
    pub assignments: usize,
    /// Whether the L4 tier may send it new flows (`None`: it serves no listener).
    pub serving: Option<Serving>,
    /// Whether it runs the L4 tier (`[cluster.l4]`).
    pub runs_l4: bool,
    /// If it runs the tier: the nodes its kernel sends new flows to.
    pub l4_targets: Vec<String>,
}

/// What operators see of the tier (`GET /api/cluster`, `l4`).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct L4View {
    /// The VIP and its ports.
    pub vip: String,
    /// The VIP's TCP ports.
    pub ports: Vec<u16>,
    /// The nftables table (family ip).
    pub table: String,
    /// The nodes new flows go to now, as loaded into the kernel.
    pub targets: Vec<String>,
    /// Dead nodes' addresses whose flows are reset.
    pub gone: Vec<String>,
    /// Changes loaded since start (the first one included).
    pub changes: u64,
    /// When the last change was loaded (ms since the epoch; 0 before the first).
    pub changed_at_ms: u64,
    /// How long loading it took (µs).
    pub load_us: u64,
    /// Why the last load failed (cleared by the next success).
    pub error: Option<String>,
    /// Flows to dead nodes that never got an answer, deleted from conntrack so their
    /// clients' SYN retransmits reach a live node.
    pub unanswered_forgotten: u64,
    /// Whether this host forwards IPv4 (`net.ipv4.ip_forward`); without it no flow passes.
    pub forwarding: bool,
}
