//! The runtime snapshot: everything a request needs from the configuration, built off the
//! data path and swapped in atomically on reload (DESIGN.md §3). Requests load it once and
//! finish on it, so a reload never changes a request in flight.
//!
//! Server runtimes (load counters, the maxconn semaphore, the pool key) are carried over
//! from the previous snapshot when a server keeps its group, name and address, so counters
//! and pooled connections survive reloads.

use crate::floor::group::{build_group, GroupRt};
use crate::floor::live::now_ms;
use config::Config;
use config::ConnectionPersistence;
use http1::HeadLimits;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

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
        let node = config.cluster.as_ref().map(|c| c.node.clone());
        let groups: Vec<Arc<GroupRt>> = config
            .groups
            .iter()
            .map(|g| {
                let old = previous.and_then(|p| p.groups.iter().find(|o| o.name == g.name));
                let group = build_group(g, old.map(|o| &**o), generation, node.as_deref());
                // Weights and states take effect with the snapshot, not a tick later.
                let now = now_ms();
                let capacities: Vec<Option<u32>> =
                    group.servers.iter().map(|s| s.fresh_capacity(now, silent_after, now)).collect();
                group.apply_weights(&capacities, now);
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
