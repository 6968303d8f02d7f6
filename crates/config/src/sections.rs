//! The single-table sections: `[global]`, `[access_log]`, `[limits]`, `[timeouts]`.
//! Each is optional and each key has its default (the same as in `model.rs` and
//! `docs/config.md`).

use crate::diag::Sink;
use crate::walk::Table;
use crate::{AccessLog, Global, Limits, LogFormat, Timeouts};
use std::path::Path;
use std::time::Duration;

pub(crate) const TOP_KEYS: &[&str] =
    &["global", "access_log", "limits", "timeouts", "listener", "group", "admin", "agents"];
const GLOBAL_KEYS: &[&str] = &["workers", "grace_period"];
const ACCESS_LOG_KEYS: &[&str] = &["enabled", "format", "path"];
const LIMITS_KEYS: &[&str] = &[
    "max_client_connections",
    "max_head_bytes",
    "max_headers",
    "max_body_bytes",
    "max_queue",
    "retries",
    "pool_idle_per_server",
    "buffer_bytes",
    "rule_body_bytes",
];
const TIMEOUTS_KEYS: &[&str] = &[
    "client_head",
    "client_idle",
    "client_io",
    "server_connect",
    "server_response",
    "queue",
    "tunnel_idle",
    "pool_idle",
    "sticky_ip",
    "tls_session",
];
pub(crate) const LISTENER_KEYS: &[&str] = &[
    "name",
    "bind",
    "protocol",
    "default_group",
    "rules",
    "x_forwarded_for",
    "x_forwarded_proto",
    "xml_form_field",
    "connection_persistence",
    "preallocate",
    "tls",
    "hostname",
    "deny_text",
    "xclient",
];
pub(crate) const GROUP_KEYS: &[&str] = &[
    "name",
    "scheduler",
    "servers",
    "hash_key",
    "virtual_nodes",
    "hash_balance_factor",
    "lard_low",
    "lard_high",
    "cap_classes",
    "sieve_extra_functions",
    "persistence",
    "health",
    "passive",
    "slow_start",
    "drain_timeout",
    "weights",
];
pub(crate) const SERVER_KEYS: &[&str] = &["name", "addr", "weight", "maxconn", "cookie", "state"];

/// For an unknown key: the section where a key of that name lives, if any.
pub(crate) fn home_of(key: &str) -> Option<String> {
    use crate::health::{ADMIN_KEYS, AGENTS_KEYS, HEALTH_KEYS, PASSIVE_KEYS};
    let homes: [(&str, &[&str]); 12] = [
        ("[global]", GLOBAL_KEYS),
        ("[access_log]", ACCESS_LOG_KEYS),
        ("[limits]", LIMITS_KEYS),
        ("[timeouts]", TIMEOUTS_KEYS),
        ("[[listener]]", LISTENER_KEYS),
        ("[[group]]", GROUP_KEYS),
        ("a server of a [[group]]", SERVER_KEYS),
        ("a group's persistence", crate::balancing::PERSISTENCE_KEYS),
        ("a group's health", HEALTH_KEYS),
        ("a group's passive", PASSIVE_KEYS),
        ("[admin]", ADMIN_KEYS),
        ("[agents]", AGENTS_KEYS),
    ];
    let (home, _) = homes.iter().find(|(_, keys)| keys.contains(&key))?;
    Some(format!("`{key}` belongs in {home}"))
}

const MIB: i64 = 1024 * 1024;

pub(crate) fn global(root: &Table, sink: &mut Sink) -> Global {
    let section = root.section(sink, "global");
    let Some(t) = section else {
        return Global { workers: 0, grace_period: Duration::from_secs(30) };
    };
    t.reject_unknown(sink, GLOBAL_KEYS, home_of);
    Global {
        workers: to_usize(t.int_or(sink, "workers", 0, 0..=256)),
        grace_period: t.duration_or(sink, "grace_period", Duration::from_secs(30), true),
    }
}

pub(crate) fn access_log(root: &Table, sink: &mut Sink, base: &Path) -> AccessLog {
    let mut log = AccessLog { enabled: true, format: LogFormat::Text, path: None };
    let Some(t) = root.section(sink, "access_log") else {
        return log;
    };
    t.reject_unknown(sink, ACCESS_LOG_KEYS, home_of);
    log.enabled = t.bool_or(sink, "enabled", true);
    if let Some(format) = t.string(sink, "format") {
        match format.value {
            "text" => log.format = LogFormat::Text,
            "json" => log.format = LogFormat::Json,
            other => {
                let message = format!("unknown access-log format `{other}`; valid: text, json");
                let hint = crate::suggest::hint(other, ["text", "json"]);
                sink.error(&format.span, &format.key, message, hint);
            }
        }
    }
    if let Some(path) = t.string(sink, "path") {
        if path.value.is_empty() {
            let hint = Some("remove `path` to log to stdout".to_string());
            sink.error(&path.span, &path.key, "`path` is empty", hint);
        } else {
            log.path = Some(base.join(path.value));
        }
    }
    log
}

pub(crate) fn limits(root: &Table, sink: &mut Sink) -> Limits {
    let section = root.section(sink, "limits");
    let Some(t) = section else {
        return default_limits();
    };
    t.reject_unknown(sink, LIMITS_KEYS, home_of);
    let d = default_limits();
    let max_body_bytes = to_u64(t.int_or(sink, "max_body_bytes", 1 << 30, 0..=i64::MAX));
    let retries = u32::try_from(t.int_or(sink, "retries", 2, 0..=100)).unwrap_or(2);
    let mut int = |key: &str, default: usize, min: i64, max: i64| {
        to_usize(t.int_or(sink, key, to_i64(default), min..=max))
    };
    Limits {
        max_client_connections: int("max_client_connections", d.max_client_connections, 1, 10_000_000),
        max_head_bytes: int("max_head_bytes", d.max_head_bytes, 1024, MIB),
        max_headers: int("max_headers", d.max_headers, 1, 1000),
        max_body_bytes,
        max_queue: int("max_queue", d.max_queue, 0, 1_000_000),
        retries,
        pool_idle_per_server: int("pool_idle_per_server", d.pool_idle_per_server, 0, 100_000),
        buffer_bytes: int("buffer_bytes", d.buffer_bytes, 1024, 16 * MIB),
        rule_body_bytes: int("rule_body_bytes", d.rule_body_bytes, 0, 64 * MIB),
    }
}

fn default_limits() -> Limits {
    Limits {
        max_client_connections: 10_000,
        max_head_bytes: 16_384,
        max_headers: 100,
        max_body_bytes: 1 << 30,
        max_queue: 100,
        retries: 2,
        pool_idle_per_server: 64,
        buffer_bytes: 16_384,
        rule_body_bytes: 1 << 20,
    }
}

pub(crate) fn timeouts(root: &Table, sink: &mut Sink) -> Timeouts {
    let d = Timeouts {
        client_head: Duration::from_secs(10),
        client_idle: Duration::from_secs(60),
        client_io: Duration::from_secs(60),
        server_connect: Duration::from_secs(5),
        server_response: Duration::from_secs(60),
        queue: Duration::from_secs(5),
        tunnel_idle: Duration::from_secs(3600),
        pool_idle: Duration::from_secs(30),
        sticky_ip: Duration::from_secs(600),
        tls_session: Duration::from_secs(600),
    };
    let Some(t) = root.section(sink, "timeouts") else {
        return d;
    };
    t.reject_unknown(sink, TIMEOUTS_KEYS, home_of);
    // A zero timeout would fire at once and make the proxy unusable, so none may be 0.
    let mut get = |key: &str, default: Duration| t.duration_or(sink, key, default, false);
    Timeouts {
        client_head: get("client_head", d.client_head),
        client_idle: get("client_idle", d.client_idle),
        client_io: get("client_io", d.client_io),
        server_connect: get("server_connect", d.server_connect),
        server_response: get("server_response", d.server_response),
        queue: get("queue", d.queue),
        tunnel_idle: get("tunnel_idle", d.tunnel_idle),
        pool_idle: get("pool_idle", d.pool_idle),
        sticky_ip: get("sticky_ip", d.sticky_ip),
        tls_session: get("tls_session", d.tls_session),
    }
}

// Integer keys are range-checked before conversion, so these never fall back in practice.
pub(crate) fn to_usize(v: i64) -> usize {
    usize::try_from(v).unwrap_or(0)
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn to_i64(v: usize) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}
