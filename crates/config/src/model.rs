//! The validated configuration. Every field has its default here and in `docs/config.md`.

use balance::SchedulerKind;
pub use balance::{CapClass, Params};
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
    /// `[[listener]]`, at least one (none needed on a node with `[cluster.l4]`).
    pub listeners: Vec<Listener>,
    /// `[[group]]`, at least one (none needed with `[cluster.l4]`); names unique.
    pub groups: Vec<Group>,
    /// `[admin]`: the admin listener (API, metrics, stats page); `None` = off.
    pub admin: Option<Admin>,
    /// `[agents]`: where capacity agents report (UDP); `None` = off.
    pub agents: Option<Agents>,
    /// `[oneway]`: one-way switching's switch-wide settings; `None` = no listener hands
    /// connections off.
    pub oneway: Option<OneWay>,
    /// `[cluster]`: this node's place among cswitch nodes that act as one; `None` = alone.
    pub cluster: Option<Cluster>,
}

/// `[cluster]`: gossip membership with other cswitch nodes (issue 13).
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    /// This node's name, unique in the cluster.
    pub node: String,
    /// UDP address gossip is received on and peers send to.
    pub bind: SocketAddr,
    /// Peers' gossip addresses to join through (empty on the first node).
    pub seeds: Vec<SocketAddr>,
    /// Shared by every node; each datagram carries an HMAC made with it. Mandatory when
    /// `bind` is not loopback.
    pub key: Option<String>,
    /// How often this node gossips with a few peers (default 100ms).
    pub gossip_interval: Duration,
    /// `[cluster.l4]`: this node programs the kernel L4 tier in front of the nodes;
    /// `None` = it does not.
    pub l4: Option<ClusterL4>,
    /// `state_file`: where an operator's `drain` (or `ready`) is kept across a restart;
    /// `None` = a restarted node is ready again.
    pub state_file: Option<std::path::PathBuf>,
}

/// `[cluster.l4]`: the kernel L4 tier this node programs from the live membership
/// (nftables DNAT, ADR 0013).
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterL4 {
    /// The address clients connect to (IPv4), on this host or routed to it.
    pub vip: std::net::Ipv4Addr,
    /// The VIP's TCP ports; each flow goes to a node's gossip address at the same port.
    pub ports: Vec<u16>,
    /// The nodes (by name) that may take flows; empty = every node that serves.
    pub nodes: Vec<String>,
    /// The nftables table (family ip) the tier owns (default `cswitch_l4`).
    pub table: String,
}

/// `[oneway]`: how the switch hands connections to the servers' agents (issue 12).
#[derive(Clone, Debug, PartialEq)]
pub struct OneWay {
    /// The interface clients' packets arrive on (the steering table hooks its ingress).
    pub interface: String,
    /// Shared with the agents; every control connection starts with it.
    pub token: String,
    /// How long the switch waits for an agent's READY before serving the connection
    /// two-way itself (default 50 ms).
    pub handoff_timeout: Duration,
    /// A steered flow with no packet for this long is forgotten (default 10 min; longer
    /// than the servers' keep-alive timeout).
    pub flow_timeout: Duration,
    /// The nftables table the switch owns (default `cswitch`).
    pub table: String,
}

/// How a listener serves a connection once it is routed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// The switch carries the bytes both ways (default).
    #[default]
    TwoWay,
    /// The switch hands the connection to the chosen server's agent, which answers the
    /// client directly (falls back to two-way when the hand-off cannot be made).
    OneWay,
}

impl Mode {
    /// Config name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::TwoWay => "two-way",
            Mode::OneWay => "one-way",
        }
    }
}

/// Where a server's `cswitch agent` takes hand-offs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handoff {
    /// The agent's control address.
    pub agent: SocketAddr,
    /// The server's MAC address on the switch's segment (steered frames go to it).
    pub mac: [u8; 6],
}

/// `[admin]`
#[derive(Clone, Debug, PartialEq)]
pub struct Admin {
    /// Address of the admin listener (HTTP).
    pub bind: SocketAddr,
    /// Bearer token required on every request; mandatory when `bind` is not loopback.
    pub token: Option<String>,
}

/// `[agents]`: capacity reports from `cswitch agent` (seed 004 §3.3).
#[derive(Clone, Debug, PartialEq)]
pub struct Agents {
    /// UDP address reports are sent to.
    pub bind: SocketAddr,
    /// Token every report must carry; mandatory when `bind` is not loopback.
    pub token: Option<String>,
    /// A server whose agent has been silent this long gets capacity 0 (default 2s).
    pub silent_after: Duration,
}

/// `[global]`: process-wide settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Global {
    /// Worker threads, each with its own SO_REUSEPORT listeners (default 0 = one per core).
    pub workers: usize,
    /// On SIGTERM, how long in-flight requests may run before the process exits (default 30s).
    pub grace_period: Duration,
    /// How plain HTTP client sockets and server connections do their I/O (default uring,
    /// epoll where the kernel refuses io_uring).
    pub io: IoModel,
    /// On the ring, one multishot receive per socket (default true) where the kernel takes
    /// its byte limit; false: one receive per wait for bytes, as on kernels without it.
    pub uring_multishot: bool,
}

/// `[global] io`: how plain HTTP client sockets do their I/O.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoModel {
    /// Readiness through tokio's epoll (every socket).
    Epoll,
    /// Completions through a per-worker io_uring for plain HTTP client sockets of two-way
    /// listeners (epoll stays for the rest, and wherever the kernel refuses io_uring).
    Uring,
}

impl IoModel {
    /// As the config spells it.
    pub fn name(self) -> &'static str {
        match self {
            IoModel::Epoll => "epoll",
            IoModel::Uring => "uring",
        }
    }
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
    /// File to append to; `None` (default) = stdout (or syslog when `syslog` is set).
    pub path: Option<PathBuf>,
    /// What each line holds, in order (default: [`LogField::DEFAULT_TEXT`] or
    /// [`LogField::DEFAULT_JSON`]).
    pub fields: Vec<LogField>,
    /// Send lines to a syslog server instead of a file (RFC 5424).
    pub syslog: Option<SyslogTarget>,
    /// Syslog facility code (default 16, `local0`).
    pub facility: u8,
}

impl AccessLog {
    /// Whether a line holds `field` (the switch collects some values only when it does).
    pub fn wants(&self, field: LogField) -> bool {
        self.enabled && self.fields.contains(&field)
    }
}

/// Where syslog lines go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyslogTarget {
    /// A syslog server over UDP (`udp://IP:port`).
    Udp(SocketAddr),
    /// A local datagram socket (`unix:/dev/log`).
    Unix(PathBuf),
}

/// One value an access-log line can hold; `name` is how `fields` and JSON keys spell it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogField {
    /// When the request ended (RFC 3339, UTC, milliseconds).
    Time,
    /// The client's address and port, as the switch saw it.
    Client,
    /// The client's IP after `X-Forwarded-For` from the listener's `trusted_proxies`.
    RealClient,
    /// The listener's name.
    Listener,
    /// The label of the rule that decided.
    Rule,
    /// What chose the server: an entry (`sticky_ip_port`, `sticky_ip`, `persistence`,
    /// `tls_session`) or `scheduler`.
    ChosenBy,
    /// The group's name.
    Group,
    /// The server's name.
    Server,
    /// Method, target and version in one string (nginx's `$request`).
    Request,
    /// The method (`TLS`, `SMTP`, `POP3`, `IMAP` for sessions).
    Method,
    /// The request-target (for sessions: SNI, recipient, user).
    Target,
    /// The HTTP version (`HTTP/1.1`).
    Version,
    /// The `Host` header.
    Host,
    /// The `User-Agent` header.
    UserAgent,
    /// Status sent to the client.
    Status,
    /// Bytes read from the client.
    BytesIn,
    /// Bytes written to the client.
    BytesOut,
    /// Time to connect to the server (milliseconds; near 0 for a pooled connection).
    ConnectMs,
    /// Time to the server's first response byte (milliseconds).
    TtfbMs,
    /// Total time (milliseconds).
    TotalMs,
    /// Other servers tried after a failure.
    Retries,
    /// The TLS server name the client sent.
    Sni,
    /// The TLS version of the client connection.
    TlsVersion,
    /// Why the request failed or was refused.
    Error,
}

impl LogField {
    /// Every field, in the JSON default order.
    pub const ALL: [LogField; 24] = [
        LogField::Time,
        LogField::Client,
        LogField::RealClient,
        LogField::Listener,
        LogField::Rule,
        LogField::ChosenBy,
        LogField::Group,
        LogField::Server,
        LogField::Request,
        LogField::Method,
        LogField::Target,
        LogField::Version,
        LogField::Host,
        LogField::UserAgent,
        LogField::Status,
        LogField::BytesIn,
        LogField::BytesOut,
        LogField::ConnectMs,
        LogField::TtfbMs,
        LogField::TotalMs,
        LogField::Retries,
        LogField::Sni,
        LogField::TlsVersion,
        LogField::Error,
    ];

    /// The text format's default line.
    pub const DEFAULT_TEXT: [LogField; 13] = [
        LogField::Time,
        LogField::Client,
        LogField::Listener,
        LogField::Rule,
        LogField::Group,
        LogField::Server,
        LogField::Request,
        LogField::Status,
        LogField::BytesIn,
        LogField::BytesOut,
        LogField::TtfbMs,
        LogField::TotalMs,
        LogField::Error,
    ];

    /// The JSON format's default object: every field but `request`, which repeats
    /// `method`, `target` and `version`.
    pub fn default_json() -> Vec<LogField> {
        Self::ALL.into_iter().filter(|f| *f != LogField::Request).collect()
    }

    /// Its name in `fields` and as a JSON key.
    pub fn name(self) -> &'static str {
        match self {
            LogField::Time => "time",
            LogField::Client => "client",
            LogField::RealClient => "real_client",
            LogField::Listener => "listener",
            LogField::Rule => "rule",
            LogField::ChosenBy => "chosen_by",
            LogField::Group => "group",
            LogField::Server => "server",
            LogField::Request => "request",
            LogField::Method => "method",
            LogField::Target => "target",
            LogField::Version => "version",
            LogField::Host => "host",
            LogField::UserAgent => "user_agent",
            LogField::Status => "status",
            LogField::BytesIn => "bytes_in",
            LogField::BytesOut => "bytes_out",
            LogField::ConnectMs => "connect_ms",
            LogField::TtfbMs => "ttfb_ms",
            LogField::TotalMs => "total_ms",
            LogField::Retries => "retries",
            LogField::Sni => "sni",
            LogField::TlsVersion => "tls_version",
            LogField::Error => "error",
        }
    }

    /// The field named `name`.
    pub fn from_name(name: &str) -> Option<LogField> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
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
    /// Streams an HTTP/2 client may have open at once (default 100, as HAProxy's
    /// `tune.h2.max-concurrent-streams` and nginx's `http2_max_concurrent_streams`).
    pub h2_max_concurrent_streams: usize,
    /// What one HTTP/2 client connection may make the switch hold: its streams' header
    /// blocks and the bytes on their way through (default 4 MiB).
    pub h2_connection_bytes: usize,
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
    /// How long a TLS session ID learned from a ServerHello keeps resuming clients on its
    /// server, counted from its last use (default 10m).
    pub tls_session: Duration,
}

/// Protocol a listener speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.0 and 1.1.
    Http,
    /// TLS passthrough: routed on the ClientHello (SNI, ALPN, session ID), bytes untouched.
    Tls,
    /// POP3: the switch takes USER / PASS, routes on the user, replays the login.
    Pop3,
    /// IMAP: the switch takes LOGIN / AUTHENTICATE PLAIN, routes on the user, replays it.
    Imap,
    /// SMTP: the switch takes the envelope, routes on sender and recipients, replays it.
    Smtp,
}

impl Protocol {
    /// Config name.
    pub fn name(&self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Tls => "tls",
            Protocol::Pop3 => "pop3",
            Protocol::Imap => "imap",
            Protocol::Smtp => "smtp",
        }
    }
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
    /// Two-way (default) or one-way.
    pub mode: Mode,
    /// Peers whose `X-Forwarded-For` is believed, for the access log's `real_client`
    /// (default none).
    pub trusted_proxies: Vec<IpNet>,
    /// Set `X-Forwarded-Proto` (default true; value "http").
    pub x_forwarded_proto: bool,
    /// For urlencoded bodies, the form field that carries the XML the rules read
    /// (default: the first field whose value starts with `<`).
    pub xml_form_field: Option<String>,
    /// What happens when the next request on a client connection goes to another server
    /// than the previous one (seed 001 Table 1). Default `per_request`.
    pub connection_persistence: ConnectionPersistence,
    /// Pre-allocation (seed 000 §3.2): on a new connection, get a connection to the server
    /// this client address used last while its request is still being read (default false).
    pub preallocate: bool,
    /// SMTP / POP3 / IMAP settings (defaults elsewhere).
    pub mail: MailOptions,
    /// TLS termination on an HTTP listener: its certificates (the first is the default; a
    /// client's SNI picks the first one valid for that name). `None`: plain HTTP.
    pub tls: Option<Vec<CertKey>>,
    /// HTTP/2 from clients: `alpn` on TLS listeners, `h2c` on plain ones.
    pub http2: Http2,
}

/// What a listener offers of HTTP/2 (HTTP listeners; see `docs/http2.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Http2 {
    /// TLS-terminating listeners: the protocols offered in ALPN, in order of preference
    /// (`h2`, `http/1.1`; default both, `h2` first). Empty on other listeners.
    pub alpn: Vec<String>,
    /// Plain listeners: a connection that opens with the HTTP/2 connection preface is
    /// served as HTTP/2 with prior knowledge (default true).
    pub h2c: bool,
}

impl Default for Http2 {
    fn default() -> Self {
        Http2 { alpn: vec!["h2".into(), "http/1.1".into()], h2c: true }
    }
}

impl Listener {
    /// Whether a connection that opens with the HTTP/2 preface is served as HTTP/2: on a
    /// plain listener with `h2c`, on a TLS one that offers `h2` (a client that knows).
    pub fn takes_h2_preface(&self) -> bool {
        match self.tls {
            Some(_) => self.http2.alpn_h2(),
            None => self.protocol == Protocol::Http && self.http2.h2c,
        }
    }
}

impl Http2 {
    /// Whether a TLS listener offers `h2` in ALPN.
    pub fn alpn_h2(&self) -> bool {
        self.alpn.iter().any(|p| p == "h2")
    }
}

/// An IP network (`10.0.0.0/8`; a bare IP is a /32 or /128).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpNet {
    /// The network address.
    pub addr: std::net::IpAddr,
    /// Prefix length.
    pub prefix: u8,
}

impl IpNet {
    /// Whether `ip` is inside this network.
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        use std::net::IpAddr;
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => prefix_eq(v4(n), v4(a), 32, self.prefix),
            (IpAddr::V6(n), IpAddr::V6(a)) => prefix_eq(u128::from(n), u128::from(a), 128, self.prefix),
            // A v4 client on a dual-stack socket shows as ::ffff:a.b.c.d.
            (IpAddr::V4(n), IpAddr::V6(a)) => {
                a.to_ipv4_mapped().is_some_and(|a| prefix_eq(v4(n), v4(a), 32, self.prefix))
            }
            (IpAddr::V6(_), IpAddr::V4(_)) => false,
        }
    }
}

fn v4(ip: std::net::Ipv4Addr) -> u128 {
    u128::from(u32::from(ip))
}

/// Whether the top `prefix` of `width` bits of `a` and `b` are equal.
fn prefix_eq(a: u128, b: u128, width: u32, prefix: u8) -> bool {
    let p = u32::from(prefix).min(width);
    p == 0 || (a ^ b) >> (width - p) == 0
}

/// A mail listener's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MailOptions {
    /// The name in the greeting and the EHLO answer (default "cswitch").
    pub hostname: String,
    /// SMTP: the text after 550 when a rule denies a sender or recipient (default
    /// "5.7.1 rejected by policy").
    pub deny_text: String,
    /// SMTP: send XCLIENT (the client's address and name) when the server offers it
    /// (default true).
    pub xclient: bool,
}

impl Default for MailOptions {
    fn default() -> Self {
        MailOptions {
            hostname: "cswitch".into(),
            deny_text: "5.7.1 rejected by policy".into(),
            xclient: true,
        }
    }
}

/// One certificate chain and its private key, PEM files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertKey {
    /// The certificate chain (leaf first).
    pub cert: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// `connection_persistence` of a listener.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionPersistence {
    /// Every request routed on its own; server connections pooled (default).
    PerRequest,
    /// The response before a change of server carries `Connection: close`: the client
    /// reconnects, and its next connection starts on the new server.
    Close,
    /// A request that would change server is answered 302 to its own URL with
    /// `Connection: close`; the client retries on a new connection.
    Redirect,
    /// One-way listeners (their default): the connection stays with the server it was
    /// handed to; its agent relays every later request there.
    Pin,
    /// One-way listeners: a later request the rules send to another group moves the
    /// connection to a server of that group, through the switch.
    Migrate,
}

/// `[[group]]`
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    /// Unique name.
    pub name: String,
    /// How servers are picked (default wlc).
    pub scheduler: SchedulerKind,
    /// What keyed schedulers (hashing, lard, cap, sieve) read from a request (default url).
    pub hash_key: HashKey,
    /// Scheduler tunables (`virtual_nodes`, `hash_balance_factor`, `lard_low`, …).
    pub params: Params,
    /// Session persistence (`persistence = { mode = "…", … }`), if any.
    pub persistence: Option<Persistence>,
    /// Active health checks (`health = { check = "http", … }`), if any.
    pub health: Option<Health>,
    /// Passive checks on live traffic (`passive = { failures = 3, … }`), if any.
    pub passive: Option<Passive>,
    /// A server that comes back (or joins) has its weight ramped up over this (default 0 = at once).
    pub slow_start: Duration,
    /// A draining server keeps its in-flight and sticky traffic at most this long (default 5m).
    pub drain_timeout: Duration,
    /// Where weights come from: the config, or the servers' capacity agents.
    pub weights: WeightSource,
    /// Which requests may ride a pooled server connection (default safe).
    pub reuse: Reuse,
    /// The protocol spoken to the servers (default HTTP/1.1; `h2` for gRPC).
    pub server_protocol: ServerProtocol,
    /// At least one; names unique within the group.
    pub servers: Vec<Server>,
}

/// `hash_key` of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HashKey {
    /// The request-target as sent.
    Url,
    /// The path (target without the query).
    Path,
    /// The Host field.
    Host,
    /// The client address (its octets).
    SrcIp,
    /// A request header's value (`header:Name`).
    Header(String),
    /// A cookie's value (`cookie:Name`).
    Cookie(String),
    /// A query parameter's value, undecoded (`arg:name`).
    Arg(String),
}

/// A group's session persistence.
#[derive(Clone, Debug, PartialEq)]
pub struct Persistence {
    /// How clients are recognised.
    pub mode: PersistMode,
    /// Entries in the group's stick table (source, header, url_param, learn; default 100000).
    pub table_size: usize,
}

/// The persistence modes (seed 001 §IV, and HAProxy's).
#[derive(Clone, Debug, PartialEq)]
pub enum PersistMode {
    /// The switch sets a cookie naming the server.
    Insert(InsertCookie),
    /// The server's session cookie value is prefixed with the server's tag on the way out,
    /// and restored on the way in.
    Prefix {
        /// The server's session cookie.
        cookie: String,
    },
    /// The switch learns the session-cookie values servers set.
    Learn {
        /// The server's session cookie.
        cookie: String,
        /// Unused entries expire after this (default 30m).
        timeout: Duration,
    },
    /// Seed 001's cookie-name rewriting (names of at least 8 characters).
    Rename {
        /// The server's session cookie.
        cookie: String,
    },
    /// Source-address affinity.
    Source {
        /// Unused entries expire after this (default 30m).
        timeout: Duration,
        /// IPv4 prefix length the address is masked to (default 32).
        netmask_v4: u8,
        /// IPv6 prefix length (default 128).
        netmask_v6: u8,
    },
    /// Affinity on a request header's value.
    Header {
        /// Header name.
        name: String,
        /// Unused entries expire after this (default 30m).
        timeout: Duration,
    },
    /// Affinity on a query parameter's value.
    UrlParam {
        /// Parameter name.
        name: String,
        /// Unused entries expire after this (default 30m).
        timeout: Duration,
    },
}

/// `mode = "insert"` options (as HAProxy's `cookie … insert`).
#[derive(Clone, Debug, PartialEq)]
pub struct InsertCookie {
    /// Cookie name.
    pub cookie: String,
    /// Remove the cookie from requests before they reach the server (default true).
    pub indirect: bool,
    /// Add `Cache-Control: private` to responses that set the cookie (default true).
    pub nocache: bool,
    /// `HttpOnly` (default true).
    pub httponly: bool,
    /// `Secure` (default false).
    pub secure: bool,
    /// `Domain`, if any.
    pub domain: Option<String>,
    /// Cookie unused for this long is ignored (default: none).
    pub max_idle: Option<Duration>,
    /// Cookie older than this is ignored (default: none).
    pub max_life: Option<Duration>,
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
    /// The token naming this server in persistence cookies (default: its name).
    pub cookie: String,
    /// Administrative state (default ready).
    pub state: ServerState,
    /// Its agent, for one-way listeners (`agent` and `mac`); `None`: served two-way.
    pub handoff: Option<Handoff>,
    /// HashNAT (`docs/cluster.md`): on the node whose `[cluster] node` is this server's
    /// name, requests go to this address (the host's own server) instead of `addr` (the
    /// node's peer listener, which the other nodes forward to). Needs `[cluster]`.
    pub local_addr: Option<SocketAddr>,
}

impl Server {
    /// Where node `node` (its `[cluster] node`, if any) sends this server's requests.
    pub fn connect_addr(&self, node: Option<&str>) -> SocketAddr {
        match (self.local_addr, node) {
            (Some(local), Some(node)) if node == self.name => local,
            _ => self.addr,
        }
    }
}

/// A server's administrative state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerState {
    /// Takes traffic (when healthy).
    Ready,
    /// No new requests and no new sticky entries; in-flight and sticky traffic continue
    /// until the server is empty or the group's `drain_timeout` passes.
    Drain,
    /// Maintenance: no traffic at all, sticky included; checks keep running.
    Maint,
}

impl ServerState {
    /// Config and API name.
    pub fn name(&self) -> &'static str {
        match self {
            ServerState::Ready => "ready",
            ServerState::Drain => "drain",
            ServerState::Maint => "maint",
        }
    }

    /// The state a config / API name denotes.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "ready" => Some(ServerState::Ready),
            "drain" => Some(ServerState::Drain),
            "maint" => Some(ServerState::Maint),
            _ => None,
        }
    }
}

/// Which requests may ride an idle pooled server connection (HAProxy's `http-reuse`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reuse {
    /// A client connection's first request never rides a server connection another client
    /// used: bytes a server sends late (an unsolicited response) cannot reach a new
    /// client. Its later requests may share (default).
    #[default]
    Safe,
    /// Any request rides any idle connection to its server.
    Always,
    /// A server connection is only ever used again by the client connection that opened it.
    Never,
}

impl Reuse {
    /// Config names.
    pub const NAMES: [&'static str; 3] = ["safe", "always", "never"];

    /// The policy named `name`.
    pub fn from_name(name: &str) -> Option<Reuse> {
        match name {
            "safe" => Some(Reuse::Safe),
            "always" => Some(Reuse::Always),
            "never" => Some(Reuse::Never),
            _ => None,
        }
    }
}

/// The protocol a group's servers are spoken to in (`server_protocol`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ServerProtocol {
    /// HTTP/1.1, over pooled connections (default).
    #[default]
    Http1,
    /// HTTP/2 with prior knowledge (h2c: servers are reached in clear text), streams
    /// multiplexed over one connection per server and worker.
    H2,
}

impl ServerProtocol {
    /// Config names.
    pub const NAMES: [&'static str; 2] = ["http/1.1", "h2"];

    /// The protocol named `name`.
    pub fn from_name(name: &str) -> Option<ServerProtocol> {
        match name {
            "http/1.1" => Some(ServerProtocol::Http1),
            "h2" => Some(ServerProtocol::H2),
            _ => None,
        }
    }
}

/// Where a group's weights come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightSource {
    /// Each server's `weight` (default).
    Config,
    /// The capacities the servers' agents report (`sieve` uses them as they are; other
    /// weighted schedulers get them scaled to 1..=256 of the group's largest).
    Agent,
}

/// A group's active health check.
#[derive(Clone, Debug, PartialEq)]
pub struct Health {
    /// What is checked.
    pub check: Check,
    /// Time between checks of one server (default 2s).
    pub interval: Duration,
    /// A check not finished within this fails (default 1s).
    pub timeout: Duration,
    /// Consecutive successes that bring a down server up (default 2).
    pub rise: u32,
    /// Consecutive failures that take an up server down (default 3).
    pub fall: u32,
    /// Each wait is lengthened by a random time up to this, so checks spread out (default 0).
    pub jitter: Duration,
    /// Port to check instead of the server's own (default: the server's).
    pub port: Option<u16>,
}

/// The kinds of active check.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// A TCP connect succeeds.
    Tcp,
    /// An HTTP request gets an expected status (and body substring).
    Http(HttpCheck),
    /// The server greets with `220`.
    Smtp,
    /// The server greets with `+OK`.
    Pop3,
    /// The server greets with `* OK`.
    Imap,
}

/// `check = "http"` options.
#[derive(Clone, Debug, PartialEq)]
pub struct HttpCheck {
    /// Method (default GET).
    pub method: String,
    /// Path (default "/").
    pub path: String,
    /// Host field (default: the server's address).
    pub host: Option<String>,
    /// Status ranges that pass, inclusive (default 200–399).
    pub expect_status: Vec<(u16, u16)>,
    /// A substring the body must contain, if any (the first 64 KiB are read).
    pub expect_body: Option<String>,
}

/// A group's passive checks: live traffic failures take a server out.
#[derive(Clone, Debug, PartialEq)]
pub struct Passive {
    /// Consecutive failures that take a server out (default 3).
    pub failures: u32,
    /// Count 5xx answers as failures, not only connect failures (default false).
    pub on_5xx: bool,
    /// How long a server stays out unless an active check brings it back first (default 10s).
    pub backoff: Duration,
}
