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
        self.encode_counters(e)
    }

    /// The process counters: reloads on their own, refusals by reason, the rest as events.
    fn encode_counters(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let get = |c: Counter| self.status.counters.get(c.name()).copied().unwrap_or(0);
        let mut reloads = Family::new("cswitch_reloads", "Config reloads and admin edits applied");
        reloads.add(Vec::new(), counter(get(Counter::Reloads)));
        reloads.encode(e)?;
        let mut failed = Family::new("cswitch_reloads_failed", "Config reloads refused");
        failed.add(Vec::new(), counter(get(Counter::ReloadsFailed)));
        failed.encode(e)?;
        let mut refusals =
            Family::new("cswitch_refusals", "Requests and connections refused or failed, by reason");
        let mut events = Family::new("cswitch_events", "Other process events, by kind");
        for c in Counter::ALL {
            if matches!(c, Counter::Reloads | Counter::ReloadsFailed) {
                continue;
            }
            let (family, key) =
                if c.is_refusal() { (&mut refusals, "reason") } else { (&mut events, "event") };
            family.add(vec![(key, c.name().to_string())], counter(get(c)));
        }
        refusals.encode(e)?;
        events.encode(e)
    }

    fn encode_listeners(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let mut requests = Family::new("cswitch_listener_requests", "Requests read");
        let mut responses = Family::new("cswitch_listener_responses", "Responses sent, by status class");
        let mut received = Family::new("cswitch_listener_receive", "Bytes from clients").unit(Unit::Bytes);
        let mut sent = Family::new("cswitch_listener_transmit", "Bytes to clients").unit(Unit::Bytes);
        let mut conns = Family::new("cswitch_listener_connections", "Client connections open");
        for l in &self.status.listeners {
            let labels = || vec![("listener", value(&l.name))];
            requests.add(labels(), counter(l.requests));
            for (class, n) in &l.responses {
                let mut with_class = labels();
                with_class.push(("class", class.to_string()));
                responses.add(with_class, counter(*n));
            }
            received.add(labels(), counter(l.bytes_in));
            sent.add(labels(), counter(l.bytes_out));
            conns.add(labels(), gauge_u(l.connections));
        }
        for f in [&requests, &responses, &received, &sent] {
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
        let mut received =
            Family::new("cswitch_server_receive", "Bytes from clients to the server").unit(Unit::Bytes);
        let mut sent =
            Family::new("cswitch_server_transmit", "Bytes from the server to clients").unit(Unit::Bytes);
        let mut active = Family::new("cswitch_server_active", "Requests in flight");
        let mut queued = Family::new("cswitch_server_queued", "Requests waiting for a slot (maxconn)");
        for s in &self.servers {
            requests.add(server_labels(s), counter(s.requests));
            for (class, n) in &s.responses {
                let mut labels = server_labels(s);
                labels.push(("class", class.to_string()));
                responses.add(labels, counter(*n));
            }
            failures.add(server_labels(s), counter(s.failures));
            received.add(server_labels(s), counter(s.bytes_in));
            sent.add(server_labels(s), counter(s.bytes_out));
            active.add(server_labels(s), gauge(i64::from(s.active)));
            queued.add(server_labels(s), gauge_u(s.queued as u64));
        }
        for f in [&requests, &responses, &failures, &received, &sent] {
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
