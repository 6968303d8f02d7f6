//! `GET /metrics`: the OpenMetrics text exposition (prometheus-client's encoder), built at
//! each scrape from the switch's views, so there is no second set of counters to keep in
//! step with the data path. Everything is encoded by one [`Collector`] holding the views
//! taken at the scrape: prometheus-client's own metric types hold live values and have no
//! way to be set from a finished histogram, so the latency histograms are written from the
//! view's bucket bounds and counts through `MetricEncoder::encode_histogram` (which makes
//! the counts cumulative and adds `+Inf`).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::{Registry, Unit};
use proxy::view::{GroupView, RulesView, ServerView, StatusView};
use proxy::Counter;
use std::fmt;

/// What prometheus-client's text encoder writes (it always ends with `# EOF`).
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The exposition, `# EOF` line included.
pub(crate) fn render(switch: &proxy::Switch) -> Vec<u8> {
    let scrape = Scrape {
        status: switch.status(),
        groups: switch.groups(),
        servers: switch.servers(),
        rules: switch.rules(),
        handoff: switch.handoff_timing(),
        cluster: switch.cluster(),
    };
    let mut registry = Registry::default();
    registry.register_collector(Box::new(scrape));
    let mut out = String::new();
    match prometheus_client::encoding::text::encode(&mut out, &registry) {
        Ok(()) => out.into_bytes(),
        // Writing to a String cannot fail; keep the scrape valid if it ever does.
        Err(_) => b"# EOF\n".to_vec(),
    }
}

/// The views one scrape is made of.
#[derive(Debug)]
struct Scrape {
    status: StatusView,
    groups: Vec<GroupView>,
    servers: Vec<ServerView>,
    rules: Vec<RulesView>,
    handoff: proxy::HandoffTimingView,
    cluster: Option<std::sync::Arc<cluster::View>>,
}

type Labels = Vec<(&'static str, String)>;

/// One metric family: name (without `_total`), help, unit, and its samples.
struct Family<'a, M> {
    name: &'a str,
    help: &'a str,
    unit: Option<Unit>,
    samples: Vec<(Labels, M)>,
}

impl<'a, M: EncodeMetric + TypedMetric> Family<'a, M> {
    fn new(name: &'a str, help: &'a str) -> Self {
        Family { name, help, unit: None, samples: Vec::new() }
    }

    fn unit(mut self, unit: Unit) -> Self {
        self.unit = Some(unit);
        self
    }

    fn add(&mut self, labels: Labels, metric: M) {
        self.samples.push((labels, metric));
    }

    fn encode(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        let mut family = encoder.encode_descriptor(self.name, self.help, self.unit.as_ref(), M::TYPE)?;
        if let [(labels, metric)] = self.samples.as_slice() {
            if labels.is_empty() {
                // `name 1`, not `name{} 1`.
                return metric.encode(family);
            }
        }
        for (labels, metric) in &self.samples {
            metric.encode(family.encode_family(labels)?)?;
        }
        Ok(())
    }
}

fn counter(v: u64) -> ConstCounter<u64> {
    ConstCounter::new(v)
}

fn gauge(v: i64) -> ConstGauge<i64> {
    ConstGauge::new(v)
}

fn gauge_u(v: u64) -> ConstGauge<i64> {
    ConstGauge::new(i64::try_from(v).unwrap_or(i64::MAX))
}

/// Label values escaped as the text format wants (prometheus-client 0.22 writes them as
/// they are; names are restricted by the config, rule labels need not be).
fn value(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn server_labels(s: &ServerView) -> Labels {
    vec![("group", value(&s.group)), ("server", value(&s.name))]
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        self.encode_process(&mut encoder)?;
        self.encode_listeners(&mut encoder)?;
        self.encode_groups(&mut encoder)?;
        self.encode_server_traffic(&mut encoder)?;
        self.encode_server_state(&mut encoder)?;
        self.encode_latency(&mut encoder)?;
        self.encode_handoff_timing(&mut encoder)?;
        self.encode_cluster(&mut encoder)?;
        self.encode_rules(&mut encoder)
    }
}

impl Scrape {
    fn encode_process(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let s = &self.status;
        let mut info = Family::new("cswitch_build_info", "cswitch version (always 1)");
        info.add(vec![("version", value(s.version))], gauge(1));
        info.encode(e)?;
        let mut uptime = Family::new("cswitch_uptime", "Time since the switch started").unit(Unit::Seconds);
        uptime.add(Vec::new(), ConstGauge::new(s.uptime_secs));
        uptime.encode(e)?;
        let mut generation = Family::new("cswitch_config_generation", "Config generation in force");
        generation.add(Vec::new(), gauge_u(s.generation));
        generation.encode(e)?;
        let mut conns = Family::new("cswitch_client_connections", "Client connections open, all listeners");
        conns.add(Vec::new(), gauge_u(s.connections));
        conns.encode(e)?;
        if let Some(n) = s.steering_flows {
            let mut flows = Family::new(
                "cswitch_steering_flows",
                "One-way flows steered to servers now (entries of the steering table)",
            );
            flows.add(Vec::new(), gauge_u(n));
            flows.encode(e)?;
        }
        encode_os_process(e)?;
        self.encode_counters(e)
    }

    /// The process counters that are not refusals, each in its own family (see
    /// [`family_of`]); several counters share a family only where their sum means
    /// something, told apart by a label.
    fn encode_counters(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let mut families: Vec<Family<ConstCounter<u64>>> = Vec::new();
        for c in Counter::ALL {
            let Some((name, help, label)) = family_of(c) else { continue };
            let at = match families.iter().position(|f| f.name == name) {
                Some(at) => at,
                None => {
                    families.push(Family::new(name, help));
                    families.len() - 1
                }
            };
            let labels = label.map_or_else(Vec::new, |(k, v)| vec![(k, v.to_string())]);
            let n = self.status.counters.get(c.name()).copied().unwrap_or(0);
            families[at].add(labels, counter(n));
        }
        families.iter().try_for_each(|f| f.encode(e))
    }

    fn encode_listeners(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let mut requests = Family::new("cswitch_listener_requests", "Requests read");
        let mut responses = Family::new("cswitch_listener_responses", "Responses sent, by status class");
        let mut refusals =
            Family::new("cswitch_listener_refusals", "Requests and connections refused or failed, by reason");
        let mut received =
            Family::new("cswitch_listener_received", "Bytes received from clients").unit(Unit::Bytes);
        let mut sent = Family::new("cswitch_listener_sent", "Bytes sent to clients").unit(Unit::Bytes);
        let mut conns = Family::new("cswitch_listener_connections", "Client connections open");
        for l in &self.status.listeners {
            let labels = || vec![("listener", value(&l.name))];
            requests.add(labels(), counter(l.requests));
            for (class, n) in &l.responses {
                let mut with_class = labels();
                with_class.push(("class", class.to_string()));
                responses.add(with_class, counter(*n));
            }
            for (reason, n) in &l.refusals {
                let mut with_reason = labels();
                with_reason.push(("reason", reason.to_string()));
                refusals.add(with_reason, counter(*n));
            }
            received.add(labels(), counter(l.bytes_in));
            sent.add(labels(), counter(l.bytes_out));
            conns.add(labels(), gauge_u(l.connections));
        }
        for f in [&requests, &responses, &refusals, &received, &sent] {
            f.encode(e)?;
        }
        conns.encode(e)
    }

    fn encode_groups(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let mut servers = Family::new("cswitch_group_servers", "Servers in the group");
        let mut usable = Family::new("cswitch_group_servers_usable", "Servers taking new requests now");
        for g in &self.groups {
            let labels = || vec![("group", value(&g.name))];
            servers.add(labels(), gauge_u(g.servers as u64));
            usable.add(labels(), gauge_u(g.servers_usable as u64));
        }
        servers.encode(e)?;
        usable.encode(e)
    }

    fn encode_server_traffic(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let mut requests = Family::new("cswitch_server_requests", "Requests sent to the server");
        let mut responses =
            Family::new("cswitch_server_responses", "Responses from the server, by status class");
        let mut failures = Family::new("cswitch_server_failures", "Connect failures and unanswered requests");
        let mut checks =
            Family::new("cswitch_server_health_check_failures", "Active health checks that failed");
        let mut received = Family::new("cswitch_server_received", "Bytes the server received from clients")
            .unit(Unit::Bytes);
        let mut sent =
            Family::new("cswitch_server_sent", "Bytes the server sent to clients").unit(Unit::Bytes);
        let mut active = Family::new(
            "cswitch_server_active_requests",
            "Requests (connection-level protocols: sessions) in flight on the server",
        );
        let mut queued =
            Family::new("cswitch_server_queued_requests", "Requests waiting for a slot (maxconn)");
        for s in &self.servers {
            requests.add(server_labels(s), counter(s.requests));
            for (class, n) in &s.responses {
                let mut labels = server_labels(s);
                labels.push(("class", class.to_string()));
                responses.add(labels, counter(*n));
            }
            failures.add(server_labels(s), counter(s.failures));
            checks.add(server_labels(s), counter(s.check_failures));
            received.add(server_labels(s), counter(s.bytes_in));
            sent.add(server_labels(s), counter(s.bytes_out));
            active.add(server_labels(s), gauge(i64::from(s.active)));
            queued.add(server_labels(s), gauge_u(s.queued as u64));
        }
        for f in [&requests, &responses, &failures, &checks, &received, &sent] {
            f.encode(e)?;
        }
        active.encode(e)?;
        queued.encode(e)
    }

    fn encode_server_state(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let mut up =
            Family::new("cswitch_server_up", "1 unless the active or passive checks took the server out");
        let mut state = Family::new(
            "cswitch_server_state",
            "Administrative state: 1 on the series of the state in force",
        );
        let mut weight = Family::new("cswitch_server_weight", "Configured weight");
        let mut effective = Family::new("cswitch_server_effective_weight", "Weight the schedulers use now");
        let mut capacity =
            Family::new("cswitch_server_capacity", "Last capacity the server's agent reported");
        for s in &self.servers {
            up.add(server_labels(s), gauge(i64::from(s.health != "down" && !s.passive_out)));
            for name in ["ready", "drain", "maint"] {
                let mut labels = server_labels(s);
                labels.push(("state", name.to_string()));
                state.add(labels, gauge(i64::from(s.state == name)));
            }
            weight.add(server_labels(s), gauge(i64::from(s.weight)));
            effective.add(server_labels(s), gauge(i64::from(s.effective_weight)));
            if let Some(c) = s.capacity {
                capacity.add(server_labels(s), gauge(i64::from(c)));
            }
        }
        for f in [&up, &state, &weight, &effective, &capacity] {
            f.encode(e)?;
        }
        Ok(())
    }

    fn encode_latency(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let mut latency = Family::new(
            "cswitch_server_latency",
            "Time from the start of a request (its head arriving) to the end of its response",
        )
        .unit(Unit::Seconds);
        for s in &self.servers {
            latency.add(server_labels(s), Buckets::from_view(&s.latency));
        }
        latency.encode(e)
    }

    /// One-way hand-offs by phase, and their CPU; absent until the first hand-off.
    fn encode_handoff_timing(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let t = &self.handoff;
        if t.phases.iter().all(|p| p.counts.iter().all(|&c| c == 0)) {
            return Ok(());
        }
        let mut phases = Family::new(
            "cswitch_handoff_phase",
            "Time each phase of a one-way hand-off took (agent, freeze, dump, ready, flip, go, total)",
        )
        .unit(Unit::Seconds);
        for p in &t.phases {
            phases.add(vec![("phase", p.phase.to_string())], Buckets::from_micros(&p.counts, p.sum_secs));
        }
        phases.encode(e)?;
        let mut cpu = Family::new(
            "cswitch_handoff_cpu",
            "Switch CPU time spent on completed hand-offs (the wait for the agent excluded)",
        )
        .unit(Unit::Seconds);
        cpu.add(Vec::new(), ConstCounter::new(t.cpu_secs));
        cpu.encode(e)?;
        let mut done =
            Family::new("cswitch_handoff_timed", "Completed hand-offs the CPU and total time cover");
        done.add(Vec::new(), ConstCounter::new(t.done));
        done.encode(e)
    }

    /// `[cluster]`: each known node's liveness and digest drift, and the gossip counters;
    /// absent without `[cluster]`.
    fn encode_cluster(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let Some(c) = &self.cluster else { return Ok(()) };
        let mut live =
            Family::new("cswitch_cluster_node_live", "1 while the cluster node is alive (failure detector)");
        let mut drift = Family::new(
            "cswitch_cluster_node_drift",
            "1 when the node's config digest differs from this node's",
        );
        for n in &c.nodes {
            live.add(vec![("node", value(&n.name))], gauge(i64::from(n.live)));
            drift.add(vec![("node", value(&n.name))], gauge(i64::from(n.drift)));
        }
        live.encode(e)?;
        drift.encode(e)?;
        let g = &c.gossip;
        let mut datagrams = Family::new("cswitch_cluster_gossip_datagrams", "Gossip datagrams, by direction");
        datagrams.add(vec![("direction", "in".into())], counter(g.received));
        datagrams.add(vec![("direction", "out".into())], counter(g.sent));
        datagrams.encode(e)?;
        let mut bytes = Family::new("cswitch_cluster_gossip", "Gossip bytes, by direction").unit(Unit::Bytes);
        bytes.add(vec![("direction", "in".into())], counter(g.received_bytes));
        bytes.add(vec![("direction", "out".into())], counter(g.sent_bytes));
        bytes.encode(e)?;
        let mut refused = Family::new(
            "cswitch_cluster_gossip_refused",
            "Gossip datagrams dropped: missing or wrong authentication tag, or undecodable",
        );
        refused.add(Vec::new(), counter(g.rejected));
        refused.encode(e)
    }

    fn encode_rules(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let mut hits = Family::new("cswitch_rule_hits", "Requests a rule decided");
        for l in &self.rules {
            for r in &l.rules {
                let rule = if r.label.is_empty() { format!("#{}", r.index) } else { r.label.clone() };
                hits.add(vec![("listener", value(&l.listener)), ("rule", value(&rule))], counter(r.hits));
            }
        }
        hits.encode(e)
    }
}

type CounterLabel = Option<(&'static str, &'static str)>;

/// The family (name without `_total`, help, and the label telling it from the other
/// counters of its family) a process counter is exported in; `None` for the counters
/// exported elsewhere: refusals (per listener), `requests` (the listeners' requests) and
/// `health_check_failures` (per server). One match, so a new counter cannot be forgotten.
fn family_of(c: Counter) -> Option<(&'static str, &'static str, CounterLabel)> {
    use Counter::*;
    let conn = "cswitch_connections_evicted";
    let conn_help = "Client connections closed at the limit to admit new ones, by what they were doing";
    let connect_errors = "cswitch_upstream_connect_errors";
    let connect_help = "Connections to servers that could not be opened, by cause";
    let persistence = "cswitch_connection_persistence_actions";
    let persistence_help = "Changes of server answered as `connection_persistence` says, by action";
    let out = "cswitch_servers_taken_out";
    let out_help = "Times servers were taken out of service, by the checks that did it";
    let agents = "cswitch_agent_reports";
    let agents_help = "Capacity reports from agents, by result";
    let fallback = "cswitch_handoff_fallbacks";
    let fallback_help = "One-way hand-offs not made (the connection was served two-way), by reason";
    let migrations = "cswitch_handoff_migrations";
    let migrations_help = "One-way migrate: later requests for another group, by outcome: the connection moved, stayed (same server, no agent, or an answer only the switch gives), or failed to move (served where it was)";
    let forgotten = "cswitch_steering_forgotten";
    let forgotten_help = "One-way flows no longer steered, by why: their agent's report, the client's FIN/RST and quiet, the table's idle timeout, a new connection from the same client port taking the entry over";
    Some(match c {
        Requests | HealthCheckFailures => return None,
        Accepted => ("cswitch_connections_accepted", "Client connections accepted", None),
        EvictedFresh => (conn, conn_help, Some(("state", "fresh"))),
        EvictedIdle => (conn, conn_help, Some(("state", "idle"))),
        IdleTimeout => {
            ("cswitch_connections_idle_closed", "Keep-alive connections closed after `client_idle`", None)
        }
        Parked => (
            "cswitch_connections_parked",
            "Keep-alive connections parked out of the runtime to wait for their next request",
            None,
        ),
        ConnectFailed => (connect_errors, connect_help, Some(("cause", "error"))),
        ConnectTimeout => (connect_errors, connect_help, Some(("cause", "timeout"))),
        ServerConnects => ("cswitch_upstream_connections_opened", "New connections to servers opened", None),
        PoolReuse => ("cswitch_pool_reused", "Server connections taken from the pool", None),
        PoolDiscarded => {
            ("cswitch_pool_discarded", "Pooled connections found closed or unclean when taken", None)
        }
        Preallocated => {
            ("cswitch_preallocated_connections", "Server connections opened ahead of the request", None)
        }
        PreallocatedUsed => {
            ("cswitch_preallocated_used", "Requests sent on a pre-allocated connection", None)
        }
        Retries => ("cswitch_retries", "Requests sent again to another or a fresh server connection", None),
        Tunnels => ("cswitch_tunnels", "Upgraded connections (WebSocket) tunnelled", None),
        RuleRedirects => ("cswitch_rule_redirects", "Requests answered by a rule's redirect()", None),
        ServerChangeCloses => (persistence, persistence_help, Some(("action", "close"))),
        ServerChangeRedirects => (persistence, persistence_help, Some(("action", "redirect"))),
        PersistenceHits => ("cswitch_persistence_hits", "Requests sent where a persistence entry said", None),
        ServersDown => (out, out_help, Some(("by", "active_check"))),
        PassiveOuts => (out, out_help, Some(("by", "passive_check"))),
        AgentReports => (agents, agents_help, Some(("result", "applied"))),
        AgentReportsRejected => (agents, agents_help, Some(("result", "rejected"))),
        ClusterCapacities => (agents, agents_help, Some(("result", "from_cluster"))),
        ClusterAssignments => (
            "cswitch_cluster_assignments",
            "Assignments of learning schedulers (htrr, lard) other cluster nodes made, applied here",
            None,
        ),
        ClusterTlsSessions => (
            "cswitch_cluster_tls_sessions",
            "TLS session IDs other cluster nodes saw issued, applied here",
            None,
        ),
        ClusterLearnedCookies => (
            "cswitch_cluster_learned_cookies",
            "Session cookies other cluster nodes learned (persistence learn), applied here",
            None,
        ),
        ClusterStickyEntries => (
            "cswitch_cluster_sticky_entries",
            "STICKY_IP entries other cluster nodes shared, applied here",
            None,
        ),
        ServerExtraBytes => (
            "cswitch_upstream_responses_with_extra_bytes",
            "Responses after which the server sent bytes beyond the message",
            None,
        ),
        Handoffs => ("cswitch_handoffs", "Connections handed to a server's agent (one-way)", None),
        HandoffNoAgent => (fallback, fallback_help, Some(("reason", "no_agent"))),
        HandoffNotDumped => (fallback, fallback_help, Some(("reason", "not_dumped"))),
        HandoffRefused => (fallback, fallback_help, Some(("reason", "restore_failed"))),
        HandoffTimeout => (fallback, fallback_help, Some(("reason", "ready_timeout"))),
        HandoffFlipFailed => (fallback, fallback_help, Some(("reason", "flip_failed"))),
        HandoffNotOnSegment => (fallback, fallback_help, Some(("reason", "not_on_segment"))),
        SteeringForgotReported => (forgotten, forgotten_help, Some(("reason", "agent_report"))),
        SteeringForgotEnded => (forgotten, forgotten_help, Some(("reason", "ended"))),
        SteeringExpired => (forgotten, forgotten_help, Some(("reason", "idle_timeout"))),
        SteeringReplaced => (forgotten, forgotten_help, Some(("reason", "replaced"))),
        Migrations => (migrations, migrations_help, Some(("outcome", "moved"))),
        MigrationsStayed => (migrations, migrations_help, Some(("outcome", "stayed"))),
        MigrationsFailed => (migrations, migrations_help, Some(("outcome", "failed"))),
        Reloads => ("cswitch_reloads", "Config reloads and admin edits applied", None),
        ReloadsFailed => ("cswitch_reloads_failed", "Config reloads refused", None),
        H2Connections => ("cswitch_h2_connections", "HTTP/2 client connections", None),
        H2Streams => ("cswitch_h2_streams", "HTTP/2 streams opened by clients", None),
        H2ConnectionErrors => {
            ("cswitch_h2_connection_errors", "HTTP/2 client connections ended by a connection error", None)
        }
        H2ServerConnections => (
            "cswitch_h2_server_connections",
            "HTTP/2 connections opened to servers (server_protocol = h2)",
            None,
        ),
        H2MemoryLimit => (
            "cswitch_h2_memory_limit",
            "HTTP/2 streams refused because their connection held limits.h2_connection_bytes",
            None,
        ),
        GrpcStatusAnswers => (
            "cswitch_grpc_status_answers",
            "gRPC calls answered with a gRPC status made from an HTTP status",
            None,
        ),
        // The refusals (`Counter::is_refusal`): per listener, in `encode_listeners`.
        RefusedConnLimit | BadRequest | HeadTooLarge | BodyTooLarge | NotImplemented | BadVersion
        | HeadTimeout | ClientTimeout | QueueFull | QueueTimeout | NoServer | BadResponse | ServerAborted
        | ServerTimeout | RuleDenied | RuleDropped | TlsMalformed | TlsHandshakeFailed
        | ClientAbortedBody | ClientGone | H2Refused => return None,
    })
}

/// The standard `process_*` families; none where `/proc/self` cannot be read.
fn encode_os_process(e: &mut DescriptorEncoder) -> fmt::Result {
    let Some(p) = crate::process::read() else { return Ok(()) };
    let mut cpu = Family::new("process_cpu", "Total user and system CPU time spent").unit(Unit::Seconds);
    cpu.add(Vec::new(), ConstCounter::new(p.cpu_seconds));
    cpu.encode(e)?;
    let mut rss = Family::new("process_resident_memory", "Resident memory size").unit(Unit::Bytes);
    rss.add(Vec::new(), gauge_u(p.resident_bytes));
    rss.encode(e)?;
    let mut open = Family::new("process_open_fds", "Open file descriptors");
    open.add(Vec::new(), gauge_u(p.open_fds));
    open.encode(e)?;
    if let Some(max) = p.max_fds {
        let mut limit = Family::new("process_max_fds", "Most open file descriptors allowed (soft limit)");
        limit.add(Vec::new(), gauge_u(max));
        limit.encode(e)?;
    }
    let mut start = Family::new("process_start_time", "Start time of the process since the Unix epoch")
        .unit(Unit::Seconds);
    start.add(Vec::new(), ConstGauge::new(p.start_time_seconds));
    start.encode(e)
}

/// A finished histogram: per-bucket (not cumulative) counts with their upper bounds in
/// seconds, the last bound `f64::MAX` (which the encoder writes as `+Inf`).
#[derive(Debug)]
struct Buckets {
    sum: f64,
    count: u64,
    buckets: Vec<(f64, u64)>,
}

impl Buckets {
    fn from_view(v: &proxy::view::LatencyView) -> Buckets {
        let bounds = v.bounds_us.iter().map(|&us| us as f64 / 1e6).chain(std::iter::once(f64::MAX));
        Buckets {
            sum: v.sum_us as f64 / 1e6,
            count: v.counts.iter().sum(),
            buckets: bounds.zip(v.counts.iter().copied()).collect(),
        }
    }
}

impl Buckets {
    /// Per-bucket counts over [`proxy::HANDOFF_BOUNDS_US`] and their sum.
    fn from_micros(counts: &[u64], sum_secs: f64) -> Buckets {
        let bounds =
            proxy::HANDOFF_BOUNDS_US.iter().map(|&us| us as f64 / 1e6).chain(std::iter::once(f64::MAX));
        Buckets {
            sum: sum_secs,
            count: counts.iter().sum(),
            buckets: bounds.zip(counts.iter().copied()).collect(),
        }
    }
}

impl TypedMetric for Buckets {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Buckets {
    fn encode(&self, mut encoder: MetricEncoder) -> fmt::Result {
        encoder.encode_histogram::<NoLabels>(self.sum, self.count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// The exemplar label set type `encode_histogram` asks for; no exemplars are written.
type NoLabels = ();
