//! The keys each table may hold, and where an unknown key belongs. A leaf: the readers of
//! every section import these tables, and this file imports none of them, so the table of
//! homes for "`retries` belongs in [limits]" can name every section without a loop.

pub(crate) const TOP_KEYS: &[&str] = &[
    "global",
    "access_log",
    "limits",
    "timeouts",
    "listener",
    "group",
    "admin",
    "agents",
    "oneway",
    "cluster",
];
pub(crate) const GLOBAL_KEYS: &[&str] = &["workers", "grace_period", "io", "uring_multishot"];
pub(crate) const ACCESS_LOG_KEYS: &[&str] = &["enabled", "format", "path", "fields", "syslog", "facility"];
pub(crate) const LIMITS_KEYS: &[&str] = &[
    "max_client_connections",
    "max_head_bytes",
    "max_headers",
    "max_body_bytes",
    "max_queue",
    "retries",
    "pool_idle_per_server",
    "buffer_bytes",
    "rule_body_bytes",
    "h2_max_concurrent_streams",
    "h2_connection_bytes",
];
pub(crate) const TIMEOUTS_KEYS: &[&str] = &[
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
    "mode",
    "default_group",
    "rules",
    "x_forwarded_for",
    "x_forwarded_proto",
    "trusted_proxies",
    "xml_form_field",
    "connection_persistence",
    "preallocate",
    "tls",
    "alpn",
    "h2c",
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
    "reuse",
    "server_protocol",
];
pub(crate) const SERVER_KEYS: &[&str] =
    &["name", "addr", "weight", "maxconn", "cookie", "state", "agent", "mac", "local_addr"];
pub(crate) const PERSISTENCE_KEYS: &[&str] = &[
    "mode",
    "cookie",
    "indirect",
    "nocache",
    "httponly",
    "secure",
    "domain",
    "max_idle",
    "max_life",
    "timeout",
    "netmask",
    "netmask_v6",
    "header",
    "param",
    "table_size",
];
pub(crate) const CAP_CLASS_KEYS: &[&str] = &["name", "patterns"];
pub(crate) const HEALTH_KEYS: &[&str] = &[
    "check",
    "interval",
    "timeout",
    "rise",
    "fall",
    "jitter",
    "port",
    "method",
    "path",
    "host",
    "expect_status",
    "expect_body",
];
pub(crate) const PASSIVE_KEYS: &[&str] = &["failures", "on_5xx", "backoff"];
pub(crate) const ADMIN_KEYS: &[&str] = &["bind", "token", "token_file"];
pub(crate) const AGENTS_KEYS: &[&str] = &["bind", "token", "token_file", "silent_after"];
pub(crate) const ONEWAY_KEYS: &[&str] =
    &["interface", "token", "token_file", "handoff_timeout", "flow_timeout", "table"];
pub(crate) const CLUSTER_KEYS: &[&str] =
    &["node", "bind", "seeds", "key", "key_file", "gossip_interval", "state_file", "l4"];
pub(crate) const CLUSTER_L4_KEYS: &[&str] = &["vip", "ports", "nodes", "table"];
/// One entry of a listener's `tls`.
pub(crate) const CERT_KEYS: &[&str] = &["cert", "key"];

/// For an unknown key: the section where a key of that name lives, if any.
pub(crate) fn home_of(key: &str) -> Option<String> {
    let homes: [(&str, &[&str]); 15] = [
        ("[global]", GLOBAL_KEYS),
        ("[access_log]", ACCESS_LOG_KEYS),
        ("[limits]", LIMITS_KEYS),
        ("[timeouts]", TIMEOUTS_KEYS),
        ("[[listener]]", LISTENER_KEYS),
        ("[[group]]", GROUP_KEYS),
        ("a server of a [[group]]", SERVER_KEYS),
        ("a group's persistence", PERSISTENCE_KEYS),
        ("a group's health", HEALTH_KEYS),
        ("a group's passive", PASSIVE_KEYS),
        ("[admin]", ADMIN_KEYS),
        ("[agents]", AGENTS_KEYS),
        ("[oneway]", ONEWAY_KEYS),
        ("[cluster]", CLUSTER_KEYS),
        ("[cluster.l4]", CLUSTER_L4_KEYS),
    ];
    let (home, _) = homes.iter().find(|(_, keys)| keys.contains(&key))?;
    Some(format!("`{key}` belongs in {home}"))
}
