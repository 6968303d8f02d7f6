//! Process-wide counters: every refusal and failure is counted by reason, so the operator
//! (and tests) can see what happened. Atomics only; the admin issue exports them.

use std::sync::atomic::{AtomicU64, Ordering};

/// What is counted. `name()` is the stable label used in logs and, later, metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Counter {
    /// Client connections accepted.
    Accepted,
    /// Client connections closed at accept: `max_client_connections` reached.
    RefusedConnLimit,
    /// Requests whose head was read completely.
    Requests,
    /// Requests refused with 400 (malformed / smuggling).
    BadRequest,
    /// 431: head too large or too many fields.
    HeadTooLarge,
    /// 413: body too large.
    BodyTooLarge,
    /// 501: unknown transfer coding.
    NotImplemented,
    /// 505: unsupported HTTP version.
    BadVersion,
    /// 408: head not complete within `client_head`.
    HeadTimeout,
    /// Keep-alive connections closed after `client_idle`.
    IdleTimeout,
    /// Client stalled sending a body or reading a response.
    ClientTimeout,
    /// 503: the server's queue was full.
    QueueFull,
    /// 503: waited longer than `timeouts.queue`.
    QueueTimeout,
    /// 503: no usable server in the group.
    NoServer,
    /// Connect to a server failed (refused, reset, unreachable).
    ConnectFailed,
    /// Connect to a server timed out.
    ConnectTimeout,
    /// A request was sent again to another (or a fresh) server connection.
    Retries,
    /// 502: server answered with a malformed response.
    BadResponse,
    /// 502: server closed or reset before a complete response.
    ServerAborted,
    /// 504: server did not answer within `server_response`.
    ServerTimeout,
    /// Server connections taken from the pool.
    PoolReuse,
    /// New server connections opened.
    ServerConnects,
    /// Upgrades (WebSocket) tunnelled.
    Tunnels,
    /// Config reloads applied.
    Reloads,
    /// Config reloads refused (invalid file).
    ReloadsFailed,
    /// Requests refused by a rule's `deny()`.
    RuleDenied,
    /// Connections closed by a rule's `drop()`.
    RuleDropped,
    /// Requests answered by a rule's `redirect()`.
    RuleRedirects,
    /// Client connections closed after a change of server (`connection_persistence = "close"`).
    ServerChangeCloses,
    /// Requests answered 302/307 on a change of server (`connection_persistence = "redirect"`).
    ServerChangeRedirects,
    /// Requests sent where a persistence entry (cookie, stick table) said.
    PersistenceHits,
    /// Server connections opened ahead of the request (`preallocate`).
    Preallocated,
    /// Requests that went to the pre-allocated server's connection.
    PreallocatedUsed,
    /// Active health checks that failed.
    HealthCheckFailures,
    /// Servers taken down by active checks.
    ServersDown,
    /// Servers taken out by passive checks.
    PassiveOuts,
    /// Capacity reports applied.
    AgentReports,
    /// Capacity reports refused (malformed, wrong token, unknown server).
    AgentReportsRejected,
}

const COUNTERS: usize = Counter::AgentReportsRejected as usize + 1;

impl Counter {
    /// Stable snake_case label.
    pub fn name(&self) -> &'static str {
        use Counter::*;
        match self {
            Accepted => "accepted",
            RefusedConnLimit => "refused_conn_limit",
            Requests => "requests",
            BadRequest => "bad_request",
            HeadTooLarge => "head_too_large",
            BodyTooLarge => "body_too_large",
            NotImplemented => "not_implemented",
            BadVersion => "bad_version",
            HeadTimeout => "head_timeout",
            IdleTimeout => "idle_timeout",
            ClientTimeout => "client_timeout",
            QueueFull => "queue_full",
            QueueTimeout => "queue_timeout",
            NoServer => "no_server",
            ConnectFailed => "connect_failed",
            ConnectTimeout => "connect_timeout",
            Retries => "retries",
            BadResponse => "bad_response",
            ServerAborted => "server_aborted",
            ServerTimeout => "server_timeout",
            PoolReuse => "pool_reuse",
            ServerConnects => "server_connects",
            Tunnels => "tunnels",
            Reloads => "reloads",
            ReloadsFailed => "reloads_failed",
            RuleDenied => "rule_denied",
            RuleDropped => "rule_dropped",
            RuleRedirects => "rule_redirects",
            ServerChangeCloses => "server_change_closes",
            ServerChangeRedirects => "server_change_redirects",
            PersistenceHits => "persistence_hits",
            Preallocated => "preallocated",
            PreallocatedUsed => "preallocated_used",
            HealthCheckFailures => "health_check_failures",
            ServersDown => "servers_down",
            PassiveOuts => "passive_outs",
            AgentReports => "agent_reports",
            AgentReportsRejected => "agent_reports_rejected",
        }
    }

    /// Every counter, in declaration order.
    pub const ALL: [Counter; COUNTERS] = {
        use Counter::*;
        [
            Accepted,
            RefusedConnLimit,
            Requests,
            BadRequest,
            HeadTooLarge,
            BodyTooLarge,
            NotImplemented,
            BadVersion,
            HeadTimeout,
            IdleTimeout,
            ClientTimeout,
            QueueFull,
            QueueTimeout,
            NoServer,
            ConnectFailed,
            ConnectTimeout,
            Retries,
            BadResponse,
            ServerAborted,
            ServerTimeout,
            PoolReuse,
            ServerConnects,
            Tunnels,
            Reloads,
            ReloadsFailed,
            RuleDenied,
            RuleDropped,
            RuleRedirects,
            ServerChangeCloses,
            ServerChangeRedirects,
            PersistenceHits,
            Preallocated,
            PreallocatedUsed,
            HealthCheckFailures,
            ServersDown,
            PassiveOuts,
            AgentReports,
            AgentReportsRejected,
        ]
    };

    /// True for the counters that count a request or connection refused or failed (the
    /// metrics' "refusals by reason").
    pub fn is_refusal(&self) -> bool {
        use Counter::*;
        matches!(
            self,
            RefusedConnLimit
                | BadRequest
                | HeadTooLarge
                | BodyTooLarge
                | NotImplemented
                | BadVersion
                | HeadTimeout
                | ClientTimeout
                | QueueFull
                | QueueTimeout
                | NoServer
                | BadResponse
                | ServerAborted
                | ServerTimeout
                | RuleDenied
                | RuleDropped
        )
    }
}

/// All counters.
pub struct Stats {
    counts: [AtomicU64; COUNTERS],
}

impl Default for Stats {
    fn default() -> Self {
        Stats { counts: std::array::from_fn(|_| AtomicU64::new(0)) }
    }
}

impl Stats {
    /// Adds one.
    pub fn inc(&self, c: Counter) {
        self.counts[c as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Current value.
    pub fn get(&self, c: Counter) -> u64 {
        self.counts[c as usize].load(Ordering::Relaxed)
    }
}
