//! The runtime snapshot: everything a request needs from the configuration, built off the
//! data path and swapped in atomically on reload (DESIGN.md §3). Requests load it once and
//! finish on it, so a reload never changes a request in flight.
//!
//! Server runtimes (load counters, the maxconn semaphore, the pool key) are carried over
//! from the previous snapshot when a server keeps its group, name and address, so counters
//! and pooled connections survive reloads.

use crate::balancing::{shared_slot, SchedSlot};
use crate::live::{now_ms, Live};
use crate::persist::PersistRt;
use balance::{Params, SchedulerKind};
use config::Config;
use config::{ConnectionPersistence, HashKey, ServerState, WeightSource};
use http1::HeadLimits;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// One server as the data path sees it.
pub struct ServerRt {
    /// Stable id: the key of this server's connection pools.
    pub id: u64,
    /// Name in its group.
    pub name: String,
    /// Address.
    pub addr: SocketAddr,
    /// Weight (from config; the schedulers use `live.effective_weight`).
    pub weight: AtomicU32,
    /// Administrative state (from config; [`ServerRt::state`]).
    state: AtomicU8,
    /// `now_ms()` the server was removed from the config (0 = it is in the config): it
    /// stays in its group, draining, until it is idle or `drain_timeout` passes.
    pub leaving_since_ms: AtomicU64,
    /// Health, capacity and traffic figures.
    pub live: Live,
    /// Requests in flight to this server, across workers (lc/wlc read it).
    pub active: AtomicU32,
    /// Requests waiting for a slot (maxconn reached).
    pub queued: AtomicUsize,
    /// `maxconn` slots; `None` = unlimited.
    pub slots: Option<Arc<Semaphore>>,
    /// `maxconn` (0 = unlimited).
    pub maxconn: u32,
    /// Token naming this server in persistence cookies.
    pub cookie: String,
}

impl ServerRt {
    /// Administrative state in force.
    pub fn state(&self) -> ServerState {
        match self.state.load(Ordering::Relaxed) {
            1 => ServerState::Drain,
            2 => ServerState::Maint,
            _ => ServerState::Ready,
        }
    }

    /// Whether the server was removed from the config and is draining before it goes.
    pub fn leaving(&self) -> bool {
        self.leaving_since_ms.load(Ordering::Relaxed) != 0
    }

    /// Whether a leaving server may go now: nothing in flight or queued, or its drain
    /// timeout passed.
    pub fn done_leaving(&self, drain_timeout: Duration, now: u64) -> bool {
        let since = self.leaving_since_ms.load(Ordering::Relaxed);
        let timeout = u64::try_from(drain_timeout.as_millis()).unwrap_or(u64::MAX);
        let idle = self.active.load(Ordering::Relaxed) == 0 && self.queued.load(Ordering::Relaxed) == 0;
        since != 0 && (idle || now.saturating_sub(since) >= timeout)
    }

    fn set_state(&self, state: ServerState) {
        let code = match state {
            ServerState::Ready => 0,
            ServerState::Drain => 1,
            ServerState::Maint => 2,
        };
        if self.state.swap(code, Ordering::Relaxed) != code && state == ServerState::Drain {
            self.live.drain_since_ms.store(now_ms().max(1), Ordering::Relaxed);
        }
    }
}

/// One group as the data path sees it.
pub struct GroupRt {
    /// Name.
    pub name: String,
    /// Scheduler used when no rule picks a server.
    pub scheduler: SchedulerKind,
    /// Its tunables.
    pub params: Params,
    /// What keyed schedulers read from a request.
    pub hash_key: HashKey,
    /// The one scheduler instance all workers share, for schedulers that learn a table.
    pub shared: Option<Arc<Mutex<SchedSlot>>>,
    /// Session persistence, if configured.
    pub persistence: Option<Arc<PersistRt>>,
    /// Active health checks, if configured.
    pub health: Option<config::Health>,
    /// Passive checks, if configured.
    pub passive: Option<config::Passive>,
    /// Weight ramp-up time of a server that becomes usable.
    pub slow_start: Duration,
    /// How long a draining server keeps its sticky traffic.
    pub drain_timeout: Duration,
    /// Where weights come from.
    pub weights: WeightSource,
    /// Servers in config order.
    pub servers: Vec<Arc<ServerRt>>,
}

/// One listener's settings.
pub struct ListenerRt {
    /// Name.
    pub name: String,
    /// Protocol spoken.
    pub protocol: config::Protocol,
    /// Index into `Snapshot::groups` of the default group.
    pub default_group: usize,
    /// Append the client address to X-Forwarded-For.
    pub x_forwarded_for: bool,
    /// Set X-Forwarded-Proto.
    pub x_forwarded_proto: bool,
    /// Compiled rules, if the listener has a rule file.
    pub rules: Option<Arc<rules::RuleSet>>,
    /// Times each rule decided a request (by rule index); carried across reloads while the
    /// labels stay the same.
    pub rule_hits: Arc<[AtomicU64]>,
    /// What a change of server on a keep-alive connection does.
    pub connection_persistence: ConnectionPersistence,
    /// Open a connection to the client address's last server while its request is read.
    pub preallocate: bool,
    /// TLS termination (HTTP listeners with `tls`) or STARTTLS (mail listeners).
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Mail listener settings.
    pub mail: config::MailOptions,
}

/// What each listener needs besides its config, made (and checked) before a snapshot is
/// built: compiled rules and TLS acceptors, one entry per listener in config order.
#[derive(Default)]
pub struct ListenerParts {
    /// Compiled rules (`None`: no rule file).
    pub rules: Vec<Option<Arc<rules::RuleSet>>>,
    /// TLS acceptors (`None`: plain).
    pub tls: Vec<Option<tokio_rustls::TlsAcceptor>>,
}

/// The whole runtime view of one config generation.
pub struct Snapshot {
    /// Increases by one per applied reload.
    pub generation: u64,
    /// The config it was built from.
    pub config: Config,
    /// Listeners, in config order.
    pub listeners: Vec<ListenerRt>,
    /// Groups, in config order.
    pub groups: Vec<Arc<GroupRt>>,
    /// Head limits derived from `[limits]`.
    pub head_limits: HeadLimits,
    /// Body limit (`u64::MAX` = unlimited).
    pub max_body: u64,
}

static NEXT_SERVER_ID: AtomicU64 = AtomicU64::new(1);

impl Snapshot {
    /// Builds a snapshot from a validated config and its listeners' compiled rules (one
    /// entry per listener, in order), reusing server runtimes of `previous`.
    pub fn build(
        config: Config,
        parts: ListenerParts,
        previous: Option<&Snapshot>,
        generation: u64,
    ) -> Snapshot {
        let ListenerParts { mut rules, mut tls } = parts;
        rules.resize(config.listeners.len(), None);
        tls.resize(config.listeners.len(), None);
        let silent_after = config.agents.as_ref().map_or(Duration::from_secs(2), |a| a.silent_after);
        let groups: Vec<Arc<GroupRt>> = config
            .groups
            .iter()
            .map(|g| {
                let group = build_group(g, previous, generation);
                // Weights and states take effect with the snapshot, not a tick later.
                let now = now_ms();
                let capacities: Vec<Option<u32>> = group
                    .servers
                    .iter()
                    .map(|s| crate::health::weights::fresh_capacity(s, now, silent_after, now))
                    .collect();
                crate::health::weights::apply(&group, &capacities, now);
                Arc::new(group)
            })
            .collect();
        let listeners = config
            .listeners
            .iter()
            .zip(rules)
            .zip(tls)
            .map(|((l, rules), tls)| ListenerRt {
                tls,
                rule_hits: rule_hits(rules.as_deref(), previous.and_then(|p| p.listener(&l.name))),
                name: l.name.clone(),
                protocol: l.protocol,
                mail: l.mail.clone(),
                // Validated by config: default_group names an existing group.
                default_group: groups.iter().position(|g| g.name == l.default_group).unwrap_or(0),
                x_forwarded_for: l.x_forwarded_for,
                x_forwarded_proto: l.x_forwarded_proto,
                rules,
                connection_persistence: l.connection_persistence,
                preallocate: l.preallocate,
            })
            .collect();
        let limits = &config.limits;
        let head_limits =
            HeadLimits { max_head_bytes: limits.max_head_bytes, max_headers: limits.max_headers };
        let max_body = if limits.max_body_bytes == 0 { u64::MAX } else { limits.max_body_bytes };
        Snapshot { generation, listeners, groups, head_limits, max_body, config }
    }

    /// The listener named `name`.
    pub fn listener(&self, name: &str) -> Option<&ListenerRt> {
        self.listeners.iter().find(|l| l.name == name)
    }

    /// Group `index` (an index taken from this snapshot).
    pub fn group(&self, index: usize) -> &Arc<GroupRt> {
        &self.groups[index]
    }

    /// The group holding the server with this id (ids are unique across groups).
    pub fn group_of(&self, id: u64) -> Option<usize> {
        self.groups.iter().position(|g| g.servers.iter().any(|s| s.id == id))
    }

    /// Whether group `group` still has the server with this id (sticky entries outlive
    /// reloads and must be checked).
    pub fn has_server(&self, group: usize, id: u64) -> bool {
        self.groups.get(group).is_some_and(|g| g.servers.iter().any(|s| s.id == id))
    }
}

/// Hit counters for `rules`: the previous listener's when its rules have the same labels.
fn rule_hits(rules: Option<&rules::RuleSet>, previous: Option<&ListenerRt>) -> Arc<[AtomicU64]> {
    let labels = |r: Option<&rules::RuleSet>| -> Vec<String> {
        r.map_or_else(Vec::new, |r| (0..r.len()).filter_map(|i| r.label(i).map(str::to_string)).collect())
    };
    if let Some(p) = previous {
        if labels(p.rules.as_deref()) == labels(rules) {
            return Arc::clone(&p.rule_hits);
        }
    }
    (0..rules.map_or(0, |r| r.len())).map(|_| AtomicU64::new(0)).collect()
}

fn build_group(group: &config::Group, previous: Option<&Snapshot>, generation: u64) -> GroupRt {
    let old = previous.and_then(|p| p.groups.iter().find(|g| g.name == group.name));
    let mut servers: Vec<Arc<ServerRt>> = group
        .servers
        .iter()
        .map(|s| {
            let kept = old.and_then(|g| {
                g.servers.iter().find(|o| {
                    o.name == s.name && o.addr == s.addr && o.maxconn == s.maxconn && o.cookie == s.cookie
                })
            });
            match kept {
                Some(rt) => {
                    rt.weight.store(s.weight, Ordering::Relaxed);
                    rt.leaving_since_ms.store(0, Ordering::Relaxed);
                    rt.set_state(s.state);
                    Arc::clone(rt)
                }
                // A server that joins a running switch ramps up (slow start); one there
                // from the start takes its full weight at once.
                None => Arc::new(new_server(s, (generation > 0).then_some(group.slow_start))),
            }
        })
        .collect();
    if let Some(old) = old {
        let going: Vec<Arc<ServerRt>> = leaving(old, &servers, group.drain_timeout).collect();
        servers.extend(going);
    }
    let mut rt = GroupRt {
        name: group.name.clone(),
        scheduler: group.scheduler,
        params: group.params.clone(),
        hash_key: group.hash_key.clone(),
        shared: None,
        persistence: None,
        health: group.health.clone(),
        passive: group.passive.clone(),
        slow_start: group.slow_start,
        drain_timeout: group.drain_timeout,
        weights: group.weights,
        servers,
    };
    rt.shared = shared_slot(&rt, old.map(|g| &**g), generation);
    let previous = old.and_then(|g| g.persistence.as_ref());
    rt.persistence = group.persistence.as_ref().map(|p| PersistRt::build(p, previous, &rt));
    rt
}

/// Servers of the previous group that the new config no longer has: they stay, draining
/// (no new requests, no sticky traffic), until their in-flight requests are done or the
/// group's drain timeout passes. A new server of the same name replaces a leaving one at
/// once. (To move sticky sessions off gently first, set `state = "drain"`, then remove.)
fn leaving<'a>(
    old: &'a GroupRt,
    kept: &'a [Arc<ServerRt>],
    drain_timeout: Duration,
) -> impl Iterator<Item = Arc<ServerRt>> + 'a {
    let now = now_ms().max(1);
    old.servers
        .iter()
        .filter(move |o| !kept.iter().any(|k| Arc::ptr_eq(k, o) || k.name == o.name))
        .filter(move |o| !o.done_leaving(drain_timeout, now))
        .map(move |o| {
            if o.leaving_since_ms.load(Ordering::Relaxed) == 0 {
                o.leaving_since_ms.store(now, Ordering::Relaxed);
                tracing::info!(server = %o.name, "server removed from the config: draining before it goes");
            }
            o.set_state(ServerState::Drain);
            Arc::clone(o)
        })
}

/// A server runtime; `joins` is the group's slow start when the server joins a running
/// switch (it then starts at the bottom of its ramp).
fn new_server(s: &config::Server, joins: Option<Duration>) -> ServerRt {
    let mut weight = s.weight;
    if let Some(slow_start) = joins {
        weight = crate::health::weights::ramp(s.weight, Duration::ZERO, slow_start);
    }
    let live = Live::new(weight);
    if joins.is_some() {
        live.ramp_from_ms.store(now_ms().max(1), Ordering::Relaxed);
    }
    let rt = ServerRt {
        id: NEXT_SERVER_ID.fetch_add(1, Ordering::Relaxed),
        name: s.name.clone(),
        addr: s.addr,
        weight: AtomicU32::new(s.weight),
        state: AtomicU8::new(0),
        leaving_since_ms: AtomicU64::new(0),
        live,
        active: AtomicU32::new(0),
        queued: AtomicUsize::new(0),
        slots: (s.maxconn > 0).then(|| Arc::new(Semaphore::new(s.maxconn as usize))),
        maxconn: s.maxconn,
        cookie: s.cookie.clone(),
    };
    rt.set_state(s.state);
    if s.state != ServerState::Ready {
        // Not usable until the control loop says so.
        rt.live.effective_weight.store(0, Ordering::Relaxed);
    }
    rt
}
