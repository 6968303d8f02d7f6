//! Configs that load: every key written, only the required ones, and the shipped examples.
#![allow(clippy::unwrap_used)] // in tests a panic is the failure report

use balance::SchedulerKind;
use cswitch_config::{
    load, parse, AccessLog, Config, ConnectionPersistence, Global, Group, HashKey, IoModel, Limits, Listener,
    LogField, LogFormat, Params, Protocol, Server, ServerState, Timeouts, WeightSource,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

const FULL: &str = r#"
[global]
workers = 4
grace_period = "1m30s"
uring_multishot = false

[access_log]
enabled = false
format = "json"
path = "logs/access.log"
fields = ["time", "real_client", "status", "user_agent"]
facility = "local3"

[limits]
max_client_connections = 500
max_head_bytes = 8192
max_headers = 50
max_body_bytes = 0
max_queue = 10
retries = 1
pool_idle_per_server = 8
buffer_bytes = 4096
rule_body_bytes = 65536
h2_max_concurrent_streams = 50

[timeouts]
client_head = "5s"
client_idle = "30s"
client_io = "20s"
server_connect = "250ms"
server_response = "2m"
queue = "1s"
tunnel_idle = "2h"
pool_idle = "10s"
sticky_ip = "30m"
tls_session = "5m"

[[listener]]
name = "web"
bind = "127.0.0.1:8080"
protocol = "http"
default_group = "web"
rules = "web.rules"
x_forwarded_for = false
x_forwarded_proto = false

[[listener]]
name = "admin"
bind = "[::1]:0"
default_group = "static"
rules = "/etc/cswitch/admin.rules"

[[group]]
name = "web"
scheduler = "wrr"
servers = [
  { name = "s1", addr = "127.0.0.1:9001", weight = 2, maxconn = 100 },
  { name = "s2", addr = "127.0.0.1:9002" },
]

[[group]]
name = "static"
[[group.servers]]
name = "st1"
addr = "10.0.0.7:80"
weight = 0
"#;

fn server(name: &str, addr: &str, weight: u32, maxconn: u32) -> Server {
    Server {
        name: name.into(),
        addr: addr.parse().unwrap(),
        weight,
        maxconn,
        cookie: name.into(),
        state: ServerState::Ready,
        handoff: None,
        local_addr: None,
    }
}

fn listener(name: &str, bind: &str, group: &str) -> Listener {
    Listener {
        name: name.into(),
        bind: bind.parse().unwrap(),
        protocol: Protocol::Http,
        mode: cswitch_config::Mode::TwoWay,
        default_group: group.into(),
        rules: None,
        x_forwarded_for: true,
        x_forwarded_proto: true,
        trusted_proxies: Vec::new(),
        xml_form_field: None,
        connection_persistence: ConnectionPersistence::PerRequest,
        preallocate: false,
        tls: None,
        mail: cswitch_config::MailOptions::default(),
        http2: cswitch_config::Http2::default(),
    }
}

fn group(name: &str, scheduler: SchedulerKind, servers: Vec<Server>) -> Group {
    Group {
        name: name.into(),
        scheduler,
        hash_key: HashKey::Url,
        params: Params::default(),
        persistence: None,
        health: None,
        passive: None,
        slow_start: Duration::ZERO,
        drain_timeout: Duration::from_secs(300),
        weights: WeightSource::Config,
        reuse: cswitch_config::Reuse::Safe,
        server_protocol: cswitch_config::ServerProtocol::Http1,
        servers,
    }
}

fn expected_full() -> Config {
    let secs = Duration::from_secs;
    Config {
        source: PathBuf::from("/etc/cswitch/cswitch.toml"),
        global: Global { workers: 4, grace_period: secs(90), io: IoModel::Uring, uring_multishot: false },
        access_log: AccessLog {
            enabled: false,
            format: LogFormat::Json,
            path: Some(PathBuf::from("/etc/cswitch/logs/access.log")),
            fields: vec![LogField::Time, LogField::RealClient, LogField::Status, LogField::UserAgent],
            syslog: None,
            facility: 19,
        },
        limits: Limits {
            max_client_connections: 500,
            max_head_bytes: 8192,
            max_headers: 50,
            max_body_bytes: 0,
            max_queue: 10,
            retries: 1,
            pool_idle_per_server: 8,
            buffer_bytes: 4096,
            rule_body_bytes: 65536,
            h2_max_concurrent_streams: 50,
            h2_connection_bytes: 4 << 20,
        },
        timeouts: Timeouts {
            client_head: secs(5),
            client_idle: secs(30),
            client_io: secs(20),
            server_connect: Duration::from_millis(250),
            server_response: secs(120),
            queue: secs(1),
            tunnel_idle: secs(7200),
            pool_idle: secs(10),
            sticky_ip: secs(1800),
            tls_session: secs(300),
        },
        listeners: vec![
            Listener {
                rules: Some(PathBuf::from("/etc/cswitch/web.rules")),
                x_forwarded_for: false,
                x_forwarded_proto: false,
                ..listener("web", "127.0.0.1:8080", "web")
            },
            Listener {
                rules: Some(PathBuf::from("/etc/cswitch/admin.rules")),
                ..listener("admin", "[::1]:0", "static")
            },
        ],
        groups: vec![
            group(
                "web",
                SchedulerKind::WeightedRoundRobin,
                vec![server("s1", "127.0.0.1:9001", 2, 100), server("s2", "127.0.0.1:9002", 1, 0)],
            ),
            group(
                "static",
                SchedulerKind::WeightedLeastConnections,
                vec![server("st1", "10.0.0.7:80", 0, 0)],
            ),
        ],
        admin: None,
        agents: None,
        oneway: None,
        cluster: None,
    }
}

#[test]
fn full_config_parses_to_the_expected_values() {
    let config = parse(FULL, Path::new("/etc/cswitch/cswitch.toml")).unwrap();
    assert_eq!(config, expected_full());
}

const MINIMAL: &str = r#"
[[listener]]
name = "web"
bind = "127.0.0.1:8080"
default_group = "web"

[[group]]
name = "web"
servers = [{ name = "s1", addr = "127.0.0.1:9001" }]
"#;

#[test]
fn minimal_config_gets_every_default() {
    let config = parse(MINIMAL, Path::new("cswitch.toml")).unwrap();
    let secs = Duration::from_secs;
    let expected = Config {
        source: PathBuf::from("cswitch.toml"),
        global: Global { workers: 0, grace_period: secs(30), io: IoModel::Uring, uring_multishot: true },
        access_log: AccessLog {
            enabled: true,
            format: LogFormat::Text,
            path: None,
            fields: LogField::DEFAULT_TEXT.to_vec(),
            syslog: None,
            facility: 16,
        },
        limits: Limits {
            max_client_connections: 10_000,
            max_head_bytes: 16_384,
            max_headers: 100,
            max_body_bytes: 1 << 30,
            max_queue: 100,
            retries: 2,
            pool_idle_per_server: 64,
            buffer_bytes: 16_384,
            rule_body_bytes: 1 << 20,
            h2_max_concurrent_streams: 100,
            h2_connection_bytes: 4 << 20,
        },
        timeouts: Timeouts {
            client_head: secs(10),
            client_idle: secs(60),
            client_io: secs(60),
            server_connect: secs(5),
            server_response: secs(60),
            queue: secs(5),
            tunnel_idle: secs(3600),
            pool_idle: secs(30),
            sticky_ip: secs(600),
            tls_session: secs(600),
        },
        listeners: vec![listener("web", "127.0.0.1:8080", "web")],
        groups: vec![group(
            "web",
            SchedulerKind::WeightedLeastConnections,
            vec![server("s1", "127.0.0.1:9001", 1, 0)],
        )],
        admin: None,
        agents: None,
        oneway: None,
        cluster: None,
    };
    assert_eq!(config, expected);
}

#[test]
fn http2_is_offered_by_default_and_can_be_switched_off() {
    let config = parse(MINIMAL, Path::new("cswitch.toml")).unwrap();
    let l = &config.listeners[0];
    assert!(l.http2.h2c && l.takes_h2_preface(), "h2c on by default");
    assert_eq!(l.http2.alpn, ["h2", "http/1.1"]);
    let off = MINIMAL.replace("default_group", "h2c = false\ndefault_group");
    let config = parse(&off, Path::new("cswitch.toml")).unwrap();
    assert!(!config.listeners[0].takes_h2_preface());
}

#[test]
fn empty_sections_and_inline_sections_take_defaults() {
    let text = format!("timeouts = {{ queue = \"2s\" }}\n[global]\n[limits]\n{MINIMAL}");
    let config = parse(&text, Path::new("c.toml")).unwrap();
    let defaults = parse(MINIMAL, Path::new("c.toml")).unwrap();
    assert_eq!(config.global, defaults.global);
    assert_eq!(config.limits, defaults.limits);
    assert_eq!(config.timeouts.queue, Duration::from_secs(2));
    assert_eq!(config.timeouts.pool_idle, defaults.timeouts.pool_idle);
}

#[test]
fn rules_path_without_a_directory_stays_relative() {
    let text = MINIMAL.replace("default_group", "rules = \"web.rules\"\ndefault_group");
    let config = parse(&text, Path::new("cswitch.toml")).unwrap();
    assert_eq!(config.listeners[0].rules, Some(PathBuf::from("web.rules")));
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(name)
}

#[test]
fn shipped_example_loads() {
    let config = match load(&example("cswitch.toml")) {
        Ok(config) => config,
        Err(e) => panic!("{e}"),
    };
    let protocols: Vec<Protocol> = config.listeners.iter().map(|l| l.protocol).collect();
    assert_eq!(protocols, [Protocol::Http, Protocol::Tls, Protocol::Smtp]);
    assert_eq!(config.listeners[0].bind, "127.0.0.1:8080".parse().unwrap());
    let names: Vec<&str> = config.groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["web", "web-tls", "mx"]);
    assert_eq!(config.groups[0].scheduler, SchedulerKind::WeightedLeastConnections);
    assert_eq!(config.groups[0].servers.len(), 3);
    assert!(config.groups[0].persistence.is_some() && config.groups[0].health.is_some());
    assert_eq!(config.groups[1].scheduler, SchedulerKind::Consistent);
    assert!(config.admin.is_some() && config.agents.is_some());
}

#[test]
fn demo_config_loads() {
    let config = match load(&example("demo.toml")) {
        Ok(config) => config,
        Err(e) => panic!("{e}"),
    };
    let with_rules =
        Listener { rules: Some(example("demo.rules")), ..listener("web", "127.0.0.1:8080", "web") };
    assert_eq!(config.listeners, vec![with_rules]);
    let names: Vec<&str> = config.groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, ["web", "static", "premium"]);
    let group = &config.groups[0];
    assert_eq!(group.scheduler, SchedulerKind::WeightedLeastConnections);
    let addrs: Vec<String> = group.servers.iter().map(|s| s.addr.to_string()).collect();
    assert_eq!(addrs, ["127.0.0.1:9001", "127.0.0.1:9002", "127.0.0.1:9003"]);
}

#[test]
fn example_documents_every_key() {
    let docs = std::fs::read_to_string(example("../docs/config.md")).unwrap();
    let example = std::fs::read_to_string(example("cswitch.toml")).unwrap();
    for key in [
        "workers",
        "grace_period",
        "enabled",
        "format",
        "path",
        "max_client_connections",
        "max_head_bytes",
        "max_headers",
        "max_body_bytes",
        "max_queue",
        "retries",
        "pool_idle_per_server",
        "buffer_bytes",
        "client_head",
        "client_idle",
        "client_io",
        "server_connect",
        "server_response",
        "queue",
        "tunnel_idle",
        "pool_idle",
        "name",
        "bind",
        "protocol",
        "default_group",
        "rules",
        "x_forwarded_for",
        "x_forwarded_proto",
        "scheduler",
        "servers",
        "addr",
        "weight",
        "maxconn",
    ] {
        assert!(docs.contains(&format!("`{key}`")), "docs/config.md lacks `{key}`");
        assert!(example.contains(&format!("{key} =")), "example lacks {key}");
    }
    // Balancing keys: documented (the example keeps to the common ones).
    for key in [
        "hash_key",
        "virtual_nodes",
        "hash_balance_factor",
        "lard_low",
        "lard_high",
        "cap_classes",
        "sieve_extra_functions",
        "persistence",
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
        "connection_persistence",
        "preallocate",
        "alpn",
        "h2c",
    ] {
        assert!(docs.contains(&format!("`{key}`")), "docs/config.md lacks `{key}`");
    }
    for name in cswitch_balance_names() {
        assert!(docs.contains(&format!("| `{name}`")), "docs/config.md lacks scheduler `{name}`");
    }
}

fn cswitch_balance_names() -> Vec<&'static str> {
    SchedulerKind::NAMES.iter().copied().filter(|n| !n.starts_with("lard")).collect()
}
