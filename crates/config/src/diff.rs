//! What changed between two configs. Reload logs each [`Change`] and refuses the ones it
//! cannot apply in place (a listener's new bind address); the admin API's mutations are
//! expressed with the same type, so both go down one path.
//!
//! Listeners, groups and servers are matched by name, so renaming one reads as a removal
//! and an addition, and reordering entries is not a change.

use crate::duration;
use crate::{AccessLog, Config, Global, Group, Limits, Listener, LogField, LogFormat, Server, Timeouts};
use balance::SchedulerKind;
use std::fmt;

/// One difference between an old and a new [`Config`].
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// `[global]` differs.
    Global {
        /// Before.
        old: Global,
        /// After.
        new: Global,
    },
    /// `[access_log]` differs.
    AccessLog {
        /// Before.
        old: AccessLog,
        /// After.
        new: AccessLog,
    },
    /// `[limits]` differs.
    Limits {
        /// Before.
        old: Limits,
        /// After.
        new: Limits,
    },
    /// `[timeouts]` differs.
    Timeouts {
        /// Before.
        old: Timeouts,
        /// After.
        new: Timeouts,
    },
    /// A listener whose name is only in the new config.
    ListenerAdded(Listener),
    /// A listener whose name is only in the old config.
    ListenerRemoved(Listener),
    /// A listener in both configs with some field changed (see [`Change::changes_bind`]).
    ListenerChanged {
        /// Before.
        old: Listener,
        /// After.
        new: Listener,
    },
    /// A group whose name is only in the new config (its servers are not listed apart).
    GroupAdded(Group),
    /// A group whose name is only in the old config.
    GroupRemoved(Group),
    /// A group in both configs whose scheduler changed.
    SchedulerChanged {
        /// The group's name.
        group: String,
        /// Before.
        old: SchedulerKind,
        /// After.
        new: SchedulerKind,
    },
    /// A group's settings other than the scheduler and servers changed (`hash_key`, the
    /// scheduler tunables, `persistence`, `health`, `passive`, `slow_start`,
    /// `drain_timeout`, `weights`); the keys that changed are listed.
    BalancingChanged {
        /// The group's name.
        group: String,
        /// Names of the keys that changed.
        keys: Vec<&'static str>,
    },
    /// A server added to a group present in both configs.
    ServerAdded {
        /// The group's name.
        group: String,
        /// The new server.
        server: Server,
    },
    /// A server removed from a group present in both configs.
    ServerRemoved {
        /// The group's name.
        group: String,
        /// The server as it was.
        server: Server,
    },
    /// `[admin]` or `[agents]` differs (`section` names which); a new bind address
    /// needs a restart, a token or timeout is applied in place.
    Service {
        /// "admin", "agents", "oneway" or "cluster".
        section: &'static str,
        /// Whether the bind address changed (or the section was added or removed).
        rebinds: bool,
    },
    /// A server in both configs whose addr, weight, maxconn, cookie or state changed.
    ServerChanged {
        /// The group's name.
        group: String,
        /// Before.
        old: Server,
        /// After.
        new: Server,
    },
}

impl Change {
    /// True when a listener kept its name but not its bind address. Applying that needs the
    /// listening sockets re-created, which reload refuses (restart instead).
    pub fn changes_bind(&self) -> bool {
        matches!(self, Change::ListenerChanged { old, new } if old.bind != new.bind)
    }

    /// True when only a restart can apply the change: a bind address change, a different
    /// worker count or I/O model (workers, their sockets and rings are made once at start).
    pub fn needs_restart(&self) -> bool {
        match self {
            Change::Global { old, new } => {
                old.workers != new.workers || old.io != new.io || old.uring_multishot != new.uring_multishot
            }
            Change::Service { rebinds, .. } => *rebinds,
            other => other.changes_bind(),
        }
    }
}

/// Everything that differs from `old` to `new`, sections first, then listeners, then groups
/// (removed and changed in the old order, added in the new order). `source` is ignored.
pub fn diff(old: &Config, new: &Config) -> Vec<Change> {
    let mut changes = Vec::new();
    if old.global != new.global {
        let (old, new) = (old.global.clone(), new.global.clone());
        changes.push(Change::Global { old, new });
    }
    if old.access_log != new.access_log {
        let (old, new) = (old.access_log.clone(), new.access_log.clone());
        changes.push(Change::AccessLog { old, new });
    }
    if old.limits != new.limits {
        let (old, new) = (old.limits.clone(), new.limits.clone());
        changes.push(Change::Limits { old, new });
    }
    if old.timeouts != new.timeouts {
        let (old, new) = (old.timeouts.clone(), new.timeouts.clone());
        changes.push(Change::Timeouts { old, new });
    }
    let admin_bind = |c: &Config| c.admin.as_ref().map(|a| a.bind);
    if old.admin != new.admin {
        changes.push(Change::Service { section: "admin", rebinds: admin_bind(old) != admin_bind(new) });
    }
    let agents_bind = |c: &Config| c.agents.as_ref().map(|a| a.bind);
    if old.agents != new.agents {
        changes.push(Change::Service { section: "agents", rebinds: agents_bind(old) != agents_bind(new) });
    }
    // The steering table lives on one interface under one name: moving it needs a restart.
    let steering = |c: &Config| c.oneway.as_ref().map(|o| (o.interface.clone(), o.table.clone()));
    if old.oneway != new.oneway {
        changes.push(Change::Service { section: "oneway", rebinds: steering(old) != steering(new) });
    }
    // Membership is joined once at start: any change to `[cluster]` applies on restart.
    if old.cluster != new.cluster {
        changes.push(Change::Service { section: "cluster", rebinds: true });
    }
    listeners(&old.listeners, &new.listeners, &mut changes);
    groups(&old.groups, &new.groups, &mut changes);
    changes
}

fn listeners(old: &[Listener], new: &[Listener], changes: &mut Vec<Change>) {
    for before in old {
        match new.iter().find(|l| l.name == before.name) {
            None => changes.push(Change::ListenerRemoved(before.clone())),
            Some(after) if after != before => {
                changes.push(Change::ListenerChanged { old: before.clone(), new: after.clone() })
            }
            Some(_) => {}
        }
    }
    for after in new.iter().filter(|l| !old.iter().any(|o| o.name == l.name)) {
        changes.push(Change::ListenerAdded(after.clone()));
    }
}

fn groups(old: &[Group], new: &[Group], changes: &mut Vec<Change>) {
    for before in old {
        let Some(after) = new.iter().find(|g| g.name == before.name) else {
            changes.push(Change::GroupRemoved(before.clone()));
            continue;
        };
        if before.scheduler != after.scheduler {
            changes.push(Change::SchedulerChanged {
                group: before.name.clone(),
                old: before.scheduler,
                new: after.scheduler,
            });
        }
        let keys = balancing_keys(before, after);
        if !keys.is_empty() {
            changes.push(Change::BalancingChanged { group: before.name.clone(), keys });
        }
        servers(&before.name, &before.servers, &after.servers, changes);
    }
    for after in new.iter().filter(|g| !old.iter().any(|o| o.name == g.name)) {
        changes.push(Change::GroupAdded(after.clone()));
    }
}

fn balancing_keys(old: &Group, new: &Group) -> Vec<&'static str> {
    let mut keys = Vec::new();
    if old.hash_key != new.hash_key {
        keys.push("hash_key");
    }
    if old.params != new.params {
        keys.push("scheduler tunables");
    }
    if old.persistence != new.persistence {
        keys.push("persistence");
    }
    let pairs: [(&'static str, bool); 7] = [
        ("health", old.health != new.health),
        ("passive", old.passive != new.passive),
        ("slow_start", old.slow_start != new.slow_start),
        ("drain_timeout", old.drain_timeout != new.drain_timeout),
        ("weights", old.weights != new.weights),
        ("reuse", old.reuse != new.reuse),
        ("server_protocol", old.server_protocol != new.server_protocol),
    ];
    keys.extend(pairs.iter().filter(|(_, changed)| *changed).map(|(key, _)| *key));
    keys
}

fn servers(group: &str, old: &[Server], new: &[Server], changes: &mut Vec<Change>) {
    let group = group.to_string();
    for before in old {
        match new.iter().find(|s| s.name == before.name) {
            None => changes.push(Change::ServerRemoved { group: group.clone(), server: before.clone() }),
            Some(after) if after != before => changes.push(Change::ServerChanged {
                group: group.clone(),
                old: before.clone(),
                new: after.clone(),
            }),
            Some(_) => {}
        }
    }
    for after in new.iter().filter(|s| !old.iter().any(|o| o.name == s.name)) {
        changes.push(Change::ServerAdded { group: group.clone(), server: after.clone() });
    }
}

/// One line for the reload log, naming each field that changed with its old and new value.
impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::Global { old, new } => section(f, "global", &global_fields(old, new)),
            Change::AccessLog { old, new } => section(f, "access_log", &log_fields(old, new)),
            Change::Limits { old, new } => section(f, "limits", &limits_fields(old, new)),
            Change::Timeouts { old, new } => section(f, "timeouts", &timeout_fields(old, new)),
            Change::ListenerAdded(l) => write!(f, "listener `{}` added ({})", l.name, l.bind),
            Change::ListenerRemoved(l) => write!(f, "listener `{}` removed", l.name),
            Change::ListenerChanged { old, new } => {
                write!(f, "listener `{}` changed: ", old.name)?;
                f.write_str(&listener_fields(old, new).join(", "))
            }
            Change::GroupAdded(g) => {
                let n = g.servers.len();
                let servers = if n == 1 { "server" } else { "servers" };
                write!(f, "group `{}` added ({n} {servers})", g.name)
            }
            Change::GroupRemoved(g) => write!(f, "group `{}` removed", g.name),
            Change::SchedulerChanged { group, old, new } => {
                let (old, new) = (old.name(), new.name());
                write!(f, "group `{group}` changed: scheduler {old} → {new}")
            }
            Change::BalancingChanged { group, keys } => {
                write!(f, "group `{group}` changed: {}", keys.join(", "))
            }
            Change::Service { section, rebinds: true } => {
                write!(f, "[{section}] bind changed (applied on restart)")
            }
            Change::Service { section, rebinds: false } => write!(f, "[{section}] changed"),
            Change::ServerAdded { group, server } => {
                let (name, addr) = (&server.name, server.addr);
                write!(f, "server `{name}` ({addr}) added to group `{group}`")
            }
            Change::ServerRemoved { group, server } => {
                write!(f, "server `{}` removed from group `{group}`", server.name)
            }
            Change::ServerChanged { group, old, new } => {
                write!(f, "server `{}` of group `{group}` changed: ", old.name)?;
                f.write_str(&server_fields(old, new).join(", "))
            }
        }
    }
}

fn section(f: &mut fmt::Formatter<'_>, name: &str, fields: &[String]) -> fmt::Result {
    write!(f, "[{name}] changed: {}", fields.join(", "))
}

/// Pushes `name old → new` when the two differ.
fn field(out: &mut Vec<String>, name: &str, old: impl fmt::Display, new: impl fmt::Display) {
    let (old, new) = (old.to_string(), new.to_string());
    if old != new {
        out.push(format!("{name} {old} → {new}"));
    }
}

fn global_fields(a: &Global, b: &Global) -> Vec<String> {
    let mut out = Vec::new();
    field(&mut out, "workers", a.workers, b.workers);
    let grace = |g: &Global| duration::format(g.grace_period);
    field(&mut out, "grace_period", grace(a), grace(b));
    field(&mut out, "io", a.io.name(), b.io.name());
    field(&mut out, "uring_multishot", a.uring_multishot, b.uring_multishot);
    out
}

fn log_fields(a: &AccessLog, b: &AccessLog) -> Vec<String> {
    let format = |l: &AccessLog| match l.format {
        LogFormat::Text => "text",
        LogFormat::Json => "json",
    };
    let path = |l: &AccessLog| l.path.as_ref().map_or("stdout".to_string(), |p| p.display().to_string());
    let mut out = Vec::new();
    field(&mut out, "enabled", a.enabled, b.enabled);
    field(&mut out, "format", format(a), format(b));
    field(&mut out, "path", path(a), path(b));
    // The default follows the format: a format change alone is not a fields change.
    let names = |l: &AccessLog| {
        let default = match l.format {
            LogFormat::Text => LogField::DEFAULT_TEXT.to_vec(),
            LogFormat::Json => LogField::default_json(),
        };
        if l.fields == default {
            return "default".to_string();
        }
        l.fields.iter().map(|f| f.name()).collect::<Vec<_>>().join(" ")
    };
    field(&mut out, "fields", names(a), names(b));
    let syslog = |l: &AccessLog| match &l.syslog {
        None => "off".to_string(),
        Some(crate::SyslogTarget::Udp(a)) => format!("udp://{a}"),
        Some(crate::SyslogTarget::Unix(p)) => format!("unix:{}", p.display()),
    };
    field(&mut out, "syslog", syslog(a), syslog(b));
    field(&mut out, "facility", a.facility, b.facility);
    out
}

fn limits_fields(a: &Limits, b: &Limits) -> Vec<String> {
    let mut out = Vec::new();
    let o = &mut out;
    field(o, "max_client_connections", a.max_client_connections, b.max_client_connections);
    field(o, "max_head_bytes", a.max_head_bytes, b.max_head_bytes);
    field(o, "max_headers", a.max_headers, b.max_headers);
    field(o, "max_body_bytes", a.max_body_bytes, b.max_body_bytes);
    field(o, "max_queue", a.max_queue, b.max_queue);
    field(o, "retries", a.retries, b.retries);
    field(o, "pool_idle_per_server", a.pool_idle_per_server, b.pool_idle_per_server);
    field(o, "buffer_bytes", a.buffer_bytes, b.buffer_bytes);
    field(o, "rule_body_bytes", a.rule_body_bytes, b.rule_body_bytes);
    field(o, "h2_max_concurrent_streams", a.h2_max_concurrent_streams, b.h2_max_concurrent_streams);
    field(o, "h2_connection_bytes", a.h2_connection_bytes, b.h2_connection_bytes);
    out
}

fn timeout_fields(a: &Timeouts, b: &Timeouts) -> Vec<String> {
    let pairs = [
        ("client_head", a.client_head, b.client_head),
        ("client_idle", a.client_idle, b.client_idle),
        ("client_io", a.client_io, b.client_io),
        ("server_connect", a.server_connect, b.server_connect),
        ("server_response", a.server_response, b.server_response),
        ("queue", a.queue, b.queue),
        ("tunnel_idle", a.tunnel_idle, b.tunnel_idle),
        ("pool_idle", a.pool_idle, b.pool_idle),
        ("sticky_ip", a.sticky_ip, b.sticky_ip),
        ("tls_session", a.tls_session, b.tls_session),
    ];
    let mut out = Vec::new();
    for (name, old, new) in pairs {
        field(&mut out, name, duration::format(old), duration::format(new));
    }
    out
}

fn listener_fields(a: &Listener, b: &Listener) -> Vec<String> {
    let rules = |l: &Listener| l.rules.as_ref().map_or("none".to_string(), |p| p.display().to_string());
    let mut out = Vec::new();
    field(&mut out, "mode", a.mode.name(), b.mode.name());
    field(&mut out, "bind", a.bind, b.bind);
    field(&mut out, "protocol", a.protocol.name(), b.protocol.name());
    field(&mut out, "default_group", &a.default_group, &b.default_group);
    field(&mut out, "rules", rules(a), rules(b));
    field(&mut out, "x_forwarded_for", a.x_forwarded_for, b.x_forwarded_for);
    field(&mut out, "x_forwarded_proto", a.x_forwarded_proto, b.x_forwarded_proto);
    let nets = |l: &Listener| {
        let v: Vec<String> = l.trusted_proxies.iter().map(|n| format!("{}/{}", n.addr, n.prefix)).collect();
        format!("[{}]", v.join(", "))
    };
    field(&mut out, "trusted_proxies", nets(a), nets(b));
    field(&mut out, "xml_form_field", format!("{:?}", a.xml_form_field), format!("{:?}", b.xml_form_field));
    field(&mut out, "alpn", format!("{:?}", a.http2.alpn), format!("{:?}", b.http2.alpn));
    field(&mut out, "h2c", a.http2.h2c, b.http2.h2c);
    out
}

fn server_fields(a: &Server, b: &Server) -> Vec<String> {
    let mut out = Vec::new();
    field(&mut out, "addr", a.addr, b.addr);
    field(&mut out, "weight", a.weight, b.weight);
    field(&mut out, "maxconn", a.maxconn, b.maxconn);
    field(&mut out, "cookie", &a.cookie, &b.cookie);
    field(&mut out, "state", a.state.name(), b.state.name());
    let local = |s: &Server| s.local_addr.map_or("none".to_string(), |l| l.to_string());
    field(&mut out, "local_addr", local(a), local(b));
    let agent = |s: &Server| s.handoff.map_or("none".to_string(), |h| h.agent.to_string());
    field(&mut out, "agent", agent(a), agent(b));
    let mac =
        |s: &Server| s.handoff.map_or("none".to_string(), |h| h.mac.map(|b| format!("{b:02x}")).join(":"));
    field(&mut out, "mac", mac(a), mac(b));
    out
}

#[cfg(test)]
mod tests;
