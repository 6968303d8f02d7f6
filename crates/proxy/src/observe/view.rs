//! What the switch shows the operator: read-only, serialisable views of the running state
//! (status, groups, servers with health, weights, capacities and traffic, stick tables,
//! rules with hit counts). The admin API serves them as JSON and derives the metrics from
//! them; nothing here is on the request path.

use crate::floor::group::GroupRt;
pub use crate::floor::live::quantile_us;
use crate::floor::live::LATENCY_BOUNDS_US;
use crate::floor::server::ServerRt;
use crate::floor::shared::Shared;
use crate::floor::snapshot::Snapshot;
use crate::floor::stats::Counter;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// `GET /api/status`.
#[derive(Clone, Debug, Serialize)]
pub struct StatusView {
    /// cswitch version.
    pub version: &'static str,
    /// Seconds since start.
    pub uptime_secs: f64,
    /// Config generation (0 at start, +1 per applied reload or admin change).
    pub generation: u64,
    /// The config file.
    pub config_file: String,
    /// Client connections open, all listeners.
    pub connections: u64,
    /// Listeners.
    pub listeners: Vec<ListenerView>,
    /// Every process counter by name (see `Counter`).
    pub counters: BTreeMap<&'static str, u64>,
    /// One-way: flows steered to servers now (the steering table's live entries); absent
    /// without a one-way listener.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steering_flows: Option<u64>,
}

/// One listener.
#[derive(Clone, Debug, Serialize)]
pub struct ListenerView {
    /// Name.
    pub name: String,
    /// Address bound.
    pub bind: String,
    /// Protocol.
    pub protocol: &'static str,
    /// Default group.
    pub default_group: String,
    /// Client connections open now.
    pub connections: u64,
    /// Requests read.
    pub requests: u64,
    /// Responses by class (`1xx` … `5xx`).
    pub responses: BTreeMap<&'static str, u64>,
    /// Bytes from clients.
    pub bytes_in: u64,
    /// Bytes to clients.
    pub bytes_out: u64,
    /// Requests and connections of this listener refused or failed, by reason (the
    /// counters with `Counter::is_refusal`).
    pub refusals: BTreeMap<&'static str, u64>,
}

/// `GET /api/groups`.
#[derive(Clone, Debug, Serialize)]
pub struct GroupView {
    /// Name.
    pub name: String,
    /// Scheduler name.
    pub scheduler: &'static str,
    /// Where weights come from: `config` or `agent`.
    pub weights: &'static str,
    /// Active check kind, if any (`tcp`, `http`, …).
    pub health_check: Option<&'static str>,
    /// Persistence mode, if any.
    pub persistence: Option<&'static str>,
    /// Slow start, ms.
    pub slow_start_ms: u64,
    /// Drain timeout, ms.
    pub drain_timeout_ms: u64,
    /// Servers in the group.
    pub servers: usize,
    /// Servers taking new requests now (effective weight > 0).
    pub servers_usable: usize,
    /// Requests in flight, all servers.
    pub active: u64,
    /// Requests sent, all servers.
    pub requests: u64,
}

/// `GET /api/servers`: one entry per server of every group.
#[derive(Clone, Debug, Serialize)]
pub struct ServerView {
    /// Group.
    pub group: String,
    /// Name.
    pub name: String,
    /// Address as configured (its `addr`; a HashNAT node reaches its own at `local_addr`).
    pub addr: String,
    /// Administrative state: ready, drain, maint.
    pub state: &'static str,
    /// Active check verdict: up, down, unchecked.
    pub health: &'static str,
    /// Why the last check failed ("" when it passed).
    pub last_check: String,
    /// Taken out by passive checks now.
    pub passive_out: bool,
    /// Configured weight.
    pub weight: u32,
    /// Weight the schedulers use now (0 = no new requests).
    pub effective_weight: u32,
    /// Last capacity an agent reported, if any.
    pub capacity: Option<u32>,
    /// Milliseconds since that report.
    pub agent_age_ms: Option<u64>,
    /// Sticky / persistent traffic still allowed.
    pub sticky_ok: bool,
    /// Requests in flight.
    pub active: u32,
    /// Requests waiting for a slot.
    pub queued: usize,
    /// `maxconn` (0 = unlimited).
    pub maxconn: u32,
    /// Slots this node may hold now: `maxconn`, or in a cluster its share of it.
    pub maxconn_here: u32,
    /// Requests sent.
    pub requests: u64,
    /// Responses by class (`1xx` … `5xx`).
    pub responses: BTreeMap<&'static str, u64>,
    /// Connect failures and unanswered requests.
    pub failures: u64,
    /// Active health checks that failed.
    pub check_failures: u64,
    /// Bytes from clients to this server.
    pub bytes_in: u64,
    /// Bytes from this server to clients.
    pub bytes_out: u64,
    /// Latency histogram since start.
    pub latency: LatencyView,
    /// Median latency since start, µs.
    pub p50_us: Option<u64>,
    /// 90th percentile, µs.
    pub p90_us: Option<u64>,
    /// 99th percentile, µs.
    pub p99_us: Option<u64>,
}

/// A latency histogram: `counts[i]` requests took at most `bounds_us[i]` (and more than
/// the bound before); the last count has no bound.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyView {
    /// Upper bounds, µs.
    pub bounds_us: &'static [u64],
    /// Requests per bucket (one more than bounds).
    pub counts: Vec<u64>,
    /// Sum of all latencies, µs.
    pub sum_us: u64,
}

/// `GET /api/stick-tables`.
#[derive(Clone, Debug, Serialize)]
pub struct StickTableView {
    /// `group:<name>` for a group's persistence, `sticky_ip` for the rules' table.
    pub name: String,
    /// Persistence mode or `sticky_ip`.
    pub kind: &'static str,
    /// Entries held (expired ones not yet swept included); `None` for cookie modes, which
    /// keep their state in the clients' cookies.
    pub entries: Option<usize>,
    /// Most entries kept.
    pub capacity: Option<usize>,
}

/// `GET /api/rules`: one per listener.
#[derive(Clone, Debug, Serialize)]
pub struct RulesView {
    /// Listener.
    pub listener: String,
    /// Rule file, if any.
    pub file: Option<String>,
    /// Rules in file order.
    pub rules: Vec<RuleHits>,
}

/// One rule and how often it decided a request.
#[derive(Clone, Debug, Serialize)]
pub struct RuleHits {
    /// Index in the file.
    pub index: usize,
    /// Label.
    pub label: String,
    /// Requests it decided.
    pub hits: u64,
}

fn classes(counts: &[AtomicU64; 5]) -> BTreeMap<&'static str, u64> {
    const NAMES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];
    NAMES.iter().zip(counts).map(|(n, c)| (*n, c.load(Ordering::Relaxed))).collect()
}

pub(crate) fn status(shared: &Shared, addrs: &[(String, std::net::SocketAddr)]) -> StatusView {
    let snap = shared.snapshot.load();
    let listeners = snap
        .config
        .listeners
        .iter()
        .zip(&shared.listeners)
        .enumerate()
        .map(|(index, (l, live))| ListenerView {
            name: l.name.clone(),
            bind: addrs.iter().find(|(n, _)| *n == l.name).map_or(l.bind, |(_, a)| *a).to_string(),
            protocol: l.protocol.name(),
            default_group: l.default_group.clone(),
            connections: live.connections.load(Ordering::Relaxed),
            requests: live.requests.load(Ordering::Relaxed),
            responses: classes(&live.responses),
            bytes_in: live.bytes_in.load(Ordering::Relaxed),
            bytes_out: live.bytes_out.load(Ordering::Relaxed),
            refusals: Counter::ALL
                .iter()
                .filter(|c| c.is_refusal())
                .map(|c| (c.name(), shared.stats.refusals_on(index, *c)))
                .collect(),
        })
        .collect();
    StatusView {
        version: env!("CARGO_PKG_VERSION"),
        uptime_secs: shared.started.elapsed().as_secs_f64(),
        generation: snap.generation,
        config_file: snap.config.source.display().to_string(),
        connections: shared.client_conns.load(Ordering::Relaxed) as u64,
        listeners,
        counters: Counter::ALL.iter().map(|c| (c.name(), shared.stats.get(*c))).collect(),
        steering_flows: crate::handoff::life::live_flows(),
    }
}

pub(crate) fn groups(snap: &Snapshot) -> Vec<GroupView> {
    snap.groups.iter().map(|g| group(g)).collect()
}

fn group(g: &GroupRt) -> GroupView {
    let sum = |f: &dyn Fn(&ServerRt) -> u64| g.servers.iter().map(|s| f(s)).sum::<u64>();
    GroupView {
        name: g.name.clone(),
        scheduler: g.scheduler.name(),
        weights: match g.weights {
            config::WeightSource::Config => "config",
            config::WeightSource::Agent => "agent",
        },
        health_check: g.health.as_ref().map(|h| match h.check {
            config::Check::Tcp => "tcp",
            config::Check::Http(_) => "http",
            config::Check::Smtp => "smtp",
            config::Check::Pop3 => "pop3",
            config::Check::Imap => "imap",
        }),
        persistence: g.persistence.as_ref().map(|p| p.table_size().0),
        slow_start_ms: g.slow_start.as_millis() as u64,
        drain_timeout_ms: g.drain_timeout.as_millis() as u64,
        servers: g.servers.len(),
        servers_usable: g
            .servers
            .iter()
            .filter(|s| s.live.effective_weight.load(Ordering::Relaxed) > 0)
            .count(),
        active: sum(&|s| u64::from(s.active.load(Ordering::Relaxed))),
        requests: sum(&|s| s.live.requests.load(Ordering::Relaxed)),
    }
}

pub(crate) fn servers(snap: &Snapshot) -> Vec<ServerView> {
    let now = crate::floor::live::now_ms();
    snap.groups.iter().flat_map(|g| g.servers.iter().map(move |s| server(g, s, now))).collect()
}

fn server(g: &GroupRt, s: &ServerRt, now: u64) -> ServerView {
    let live = &s.live;
    let (counts, sum_us) = live.latency();
    let reported = live.reported_at_ms.load(Ordering::Relaxed);
    ServerView {
        group: g.name.clone(),
        name: s.name.clone(),
        addr: s.known_as.to_string(),
        state: s.state().name(),
        health: live.health().name(),
        last_check: live.last_check(),
        passive_out: live.passive_out(now),
        weight: s.weight.load(Ordering::Relaxed),
        effective_weight: live.effective_weight.load(Ordering::Relaxed),
        capacity: (reported != 0).then(|| live.capacity.load(Ordering::Relaxed)),
        agent_age_ms: (reported != 0).then(|| now.saturating_sub(reported)),
        sticky_ok: live.sticky_ok.load(Ordering::Relaxed),
        active: s.active.load(Ordering::Relaxed),
        queued: s.queued.load(Ordering::Relaxed),
        maxconn: s.maxconn,
        maxconn_here: s.slot_limit(),
        requests: live.requests.load(Ordering::Relaxed),
        responses: classes(&live.responses),
        failures: live.failures.load(Ordering::Relaxed),
        check_failures: live.check_failures.load(Ordering::Relaxed),
        bytes_in: live.bytes_in.load(Ordering::Relaxed),
        bytes_out: live.bytes_out.load(Ordering::Relaxed),
        p50_us: quantile_us(&counts, 0.5),
        p90_us: quantile_us(&counts, 0.9),
        p99_us: quantile_us(&counts, 0.99),
        latency: LatencyView { bounds_us: &LATENCY_BOUNDS_US, counts, sum_us },
    }
}

pub(crate) fn stick_tables(shared: &Shared, snap: &Snapshot) -> Vec<StickTableView> {
    let mut out: Vec<StickTableView> = snap
        .groups
        .iter()
        .filter_map(|g| {
            let (kind, size) = g.persistence.as_ref()?.table_size();
            Some(StickTableView {
                name: format!("group:{}", g.name),
                kind,
                entries: size.map(|s| s.0),
                capacity: size.map(|s| s.1),
            })
        })
        .collect();
    out.push(StickTableView {
        name: "sticky_ip".into(),
        kind: "sticky_ip",
        entries: Some(shared.sticky_ip.len()),
        capacity: None,
    });
    out.push(StickTableView {
        name: "tls_sessions".into(),
        kind: "tls_session_id",
        entries: Some(shared.tls_sessions.len()),
        capacity: Some(crate::floor::tables::tls_sessions::TLS_SESSIONS_CAPACITY),
    });
    out
}

pub(crate) fn rules(snap: &Snapshot) -> Vec<RulesView> {
    snap.config
        .listeners
        .iter()
        .zip(&snap.listeners)
        .map(|(cfg, l)| RulesView {
            listener: l.name.clone(),
            file: cfg.rules.as_ref().map(|p| p.display().to_string()),
            rules: l.rules.as_deref().map_or_else(Vec::new, |r| {
                (0..r.len())
                    .map(|index| RuleHits {
                        index,
                        label: r.label(index).unwrap_or("").to_string(),
                        hits: l.rule_hits.get(index).map_or(0, |h| h.load(Ordering::Relaxed)),
                    })
                    .collect()
            }),
        })
        .collect()
}
