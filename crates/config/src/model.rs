//! The validated configuration. Every field has its default here and in `docs/config.md`.

use balance::SchedulerKind;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// A whole validated configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The file it came from.
    pub source: PathBuf,
    /// `[global]`
    pub global: Global,
    /// `[access_log]`
    pub access_log: AccessLog,
    /// `[limits]`
    pub limits: Limits,
    /// `[timeouts]`
    pub timeouts: Timeouts,
    /// `[[listener]]`, at least one.
    pub listeners: Vec<Listener>,
    /// `[[group]]`, at least one; names unique.
    pub groups: Vec<Group>,
}

/// `[global]`: process-wide settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Global {
    /// Worker threads, each with its own SO_REUSEPORT listeners (default 0 = one per core).
    pub workers: usize,
    /// On SIGTERM, how long in-flight requests may run before the process exits (default 30s).
    pub grace_period: Duration,
}

/// Access-log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// One readable line per request.
    Text,
    /// One JSON object per line.
    Json,
}

/// `[access_log]`
#[derive(Clone, Debug, PartialEq)]
pub struct AccessLog {
    /// Default true.
    pub enabled: bool,
    /// Default text.
    pub format: LogFormat,
    /// File to append to; `None` (default) = stdout.
    pub path: Option<PathBuf>,
}

/// `[limits]`: admission control (seed 003 §2.2).
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Client connections open at once, per process (default 10000); more are closed at accept.
    pub max_client_connections: usize,
    /// Largest request head (default 16384 bytes) → 431 beyond it. Also the response-head limit.
    pub max_head_bytes: usize,
    /// Most header fields in a head (default 100) → 431 beyond it.
    pub max_headers: usize,
    /// Largest request body (default 1 GiB; 0 = unlimited) → 413 beyond it.
    pub max_body_bytes: u64,
    /// Requests waiting for a full server (maxconn reached), per server (default 100) → 503 beyond.
    pub max_queue: usize,
    /// Other servers tried after a connect failure (default 2).
    pub retries: u32,
    /// Idle pooled connections kept per server per worker (default 64).
    pub pool_idle_per_server: usize,
    /// Size of each connection's I/O buffer (default 16384 bytes).
    pub buffer_bytes: usize,
    /// Body bytes read before deciding, when a rule reads the body (default 1 MiB) → 413 beyond.
    pub rule_body_bytes: usize,
}

/// `[timeouts]`; written in the file as "500ms", "10s", "5m", "1h".
#[derive(Clone, Debug, PartialEq)]
pub struct Timeouts {
    /// Whole request head must arrive within this after its first byte (slowloris) (default 10s).
    pub client_head: Duration,
    /// Keep-alive: idle time between requests on a client connection (default 60s).
    pub client_idle: Duration,
    /// Client silent while sending a body or not reading a response (default 60s).
    pub client_io: Duration,
    /// TCP connect to a server (default 5s).
    pub server_connect: Duration,
    /// From request sent to first response byte, and between response reads (default 60s).
    pub server_response: Duration,
    /// Waiting in a full server's queue (default 5s) → 503.
    pub queue: Duration,
    /// Idle time of an upgraded (WebSocket) tunnel (default 1h).
    pub tunnel_idle: Duration,
    /// Idle pooled server connections are closed after this (default 30s).
    pub pool_idle: Duration,
    /// How long a `STICKY_IP` rule keeps a client address on its server (default 10m).
    pub sticky_ip: Duration,
}

/// Protocol a listener speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.0 and 1.1.
    Http,
}

/// `[[listener]]`
#[derive(Clone, Debug, PartialEq)]
pub struct Listener {
    /// Unique name (access log, metrics).
    pub name: String,
    /// Address to listen on.
    pub bind: SocketAddr,
    /// Default http.
    pub protocol: Protocol,
    /// Group that gets a request no rule routes; must name a `[[group]]`.
    pub default_group: String,
    /// Rule file (resolved relative to the config file); used by the rule-language issue.
    pub rules: Option<PathBuf>,
    /// Append the client address to `X-Forwarded-For` (default true).
    pub x_forwarded_for: bool,
    /// Set `X-Forwarded-Proto` (default true; value "http").
    pub x_forwarded_proto: bool,
    /// For urlencoded bodies, the form field that carries the XML the rules read
    /// (default: the first field whose value starts with `<`).
    pub xml_form_field: Option<String>,
}

/// `[[group]]`
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// Unique name.
    pub name: String,
    /// How servers are picked (default wlc).
    pub scheduler: SchedulerKind,
    /// At least one; names unique within the group.
    pub servers: Vec<Server>,
}

/// One server of a group (`servers = [ { … }, … ]`).
#[derive(Clone, Debug, PartialEq)]
pub struct Server {
    /// Unique within its group.
    pub name: String,
    /// Address to connect to.
    pub addr: SocketAddr,
    /// Default 1; 0 means the server gets no new requests.
    pub weight: u32,
    /// Requests in flight at once to this server (default 0 = unlimited); more wait in a queue.
    pub maxconn: u32,
}
