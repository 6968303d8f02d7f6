//! Process-wide counters: every refusal and failure is counted by reason, so the operator
//! (and tests) can see what happened. Atomics only; the admin listener exports them.
//! Refusals are also counted per listener: the listener is known from the task (see
//! [`Stats::on_listener`]) rather than passed to each of the many places that refuse.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

/// Declares [`Counter`] with its stable labels and the list of all counters, from one
/// table, so a new counter cannot be forgotten in any of them.
macro_rules! counters {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal,)*) => {
        /// What is counted. `name()` is the stable label used in logs and metrics.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(usize)]
        pub enum Counter {
            $($(#[doc = $doc])* $variant,)*
        }

        const COUNTERS: usize = [$(Counter::$variant),*].len();

        impl Counter {
            /// Every counter, in declaration order.
            pub const ALL: [Counter; COUNTERS] = [$(Counter::$variant),*];

            /// Stable snake_case label.
            pub fn name(&self) -> &'static str {
                match self {
                    $(Counter::$variant => $name,)*
                }
            }
        }
    };
}

counters! {
    /// Client connections accepted.
    Accepted => "accepted",
    /// Client connections closed at accept: `max_client_connections` reached.
    RefusedConnLimit => "refused_conn_limit",
    /// Connections closed to admit new ones at the limit: they had not sent a request yet.
    EvictedFresh => "evicted_fresh",
    /// Connections closed to admit new ones at the limit: idle between requests.
    EvictedIdle => "evicted_idle",
    /// Requests whose head was read completely.
    Requests => "requests",
    /// Requests refused with 400 (malformed / smuggling).
    BadRequest => "bad_request",
    /// 431: head too large or too many fields.
    HeadTooLarge => "head_too_large",
    /// 413: body too large.
    BodyTooLarge => "body_too_large",
    /// 501: unknown transfer coding.
    NotImplemented => "not_implemented",
    /// 505: unsupported HTTP version.
    BadVersion => "bad_version",
    /// 408: head not complete within `client_head`.
    HeadTimeout => "head_timeout",
    /// Keep-alive connections closed after `client_idle`.
    IdleTimeout => "idle_timeout",
    /// Keep-alive connections parked out of the runtime to wait for their next request.
    Parked => "parked",
    /// Client stalled sending a body or reading a response.
    ClientTimeout => "client_timeout",
    /// 503: the server's queue was full.
    QueueFull => "queue_full",
    /// 503: waited longer than `timeouts.queue`.
    QueueTimeout => "queue_timeout",
    /// 503: no usable server in the group.
    NoServer => "no_server",
    /// Connect to a server failed (refused, reset, unreachable).
    ConnectFailed => "connect_failed",
    /// Connect to a server timed out.
    ConnectTimeout => "connect_timeout",
    /// A request was sent again to another (or a fresh) server connection.
    Retries => "retries",
    /// 502: server answered with a malformed response.
    BadResponse => "bad_response",
    /// 502: server closed or reset before a complete response.
    ServerAborted => "server_aborted",
    /// 504: server did not answer within `server_response`.
    ServerTimeout => "server_timeout",
    /// Server connections taken from the pool.
    PoolReuse => "pool_reuse",
    /// New server connections opened.
    ServerConnects => "server_connects",
    /// Upgrades (WebSocket) tunnelled.
    Tunnels => "tunnels",
    /// Config reloads applied.
    Reloads => "reloads",
    /// Config reloads refused (invalid file).
    ReloadsFailed => "reloads_failed",
    /// Requests refused by a rule's `deny()`.
    RuleDenied => "rule_denied",
    /// Connections closed by a rule's `drop()`.
    RuleDropped => "rule_dropped",
    /// Requests answered by a rule's `redirect()`.
    RuleRedirects => "rule_redirects",
    /// Client connections closed after a change of server (`connection_persistence = "close"`).
    ServerChangeCloses => "server_change_closes",
    /// Requests answered 302/307 on a change of server (`connection_persistence = "redirect"`).
    ServerChangeRedirects => "server_change_redirects",
    /// Requests sent where a persistence entry (cookie, stick table) said.
    PersistenceHits => "persistence_hits",
    /// Server connections opened ahead of the request (`preallocate`).
    Preallocated => "preallocated",
    /// Requests that went to the pre-allocated server's connection.
    PreallocatedUsed => "preallocated_used",
    /// Active health checks that failed.
    HealthCheckFailures => "health_check_failures",
    /// Servers taken down by active checks.
    ServersDown => "servers_down",
    /// Servers taken out by passive checks.
    PassiveOuts => "passive_outs",
    /// Capacity reports applied.
    AgentReports => "agent_reports",
    /// Capacity reports refused (malformed, wrong token, unknown server).
    AgentReportsRejected => "agent_reports_rejected",
    /// Capacity reports another node of the cluster shared, applied here.
    ClusterCapacities => "cluster_capacities",
    /// `STICKY_IP` entries another node of the cluster shared, applied here.
    ClusterStickyEntries => "cluster_sticky_entries",
    /// Session cookies (persistence `learn`) another node of the cluster learned, applied here.
    ClusterLearnedCookies => "cluster_learned_cookies",
    /// TLS session IDs another node of the cluster saw issued, applied here.
    ClusterTlsSessions => "cluster_tls_sessions",
    /// Assignments of a learning scheduler (`htrr`, `lard`) another node made, applied here.
    ClusterAssignments => "cluster_assignments",
    /// TLS connections closed: the ClientHello was malformed, not TLS, or too large.
    TlsMalformed => "tls_malformed",
    /// TLS handshakes that failed or timed out on a terminating listener.
    TlsHandshakeFailed => "tls_handshake_failed",
    /// Idle pooled server connections dropped when taken: the server had closed them, or
    /// sent bytes nobody asked for.
    PoolDiscarded => "pool_discarded",
    /// Clients that closed in the middle of sending a request body.
    ClientAbortedBody => "client_aborted_body",
    /// Requests abandoned (not retried on another server) because their client had gone.
    ClientGone => "client_gone",
    /// Responses after which the server sent bytes beyond the message (its connection
    /// is closed, never pooled).
    ServerExtraBytes => "server_extra_bytes",
    /// One-way: connections handed to a server's agent (the server answers the client).
    Handoffs => "handoffs",
    /// One-way: hand-offs not made, served two-way instead: no control connection to the
    /// agent (unreachable, or it refused the token).
    HandoffNoAgent => "handoff_no_agent",
    /// One-way fallback: the connection could not be frozen or dumped (repair mode, steering).
    HandoffNotDumped => "handoff_not_dumped",
    /// One-way fallback: the agent could not restore the connection (answered FAILED).
    HandoffRefused => "handoff_refused",
    /// One-way fallback: no READY within `handoff_timeout`.
    HandoffTimeout => "handoff_timeout",
    /// One-way fallback: the steering flip failed.
    HandoffFlipFailed => "handoff_flip_failed",
    /// One-way fallback: the agent's host is not on the switch's L2 segment (routed, or on
    /// another interface than `[oneway] interface`), so steering could not reach it.
    HandoffNotOnSegment => "handoff_not_on_segment",
    /// One-way: steering entries forgotten after the agent reported their connection
    /// closed (and the client was quiet).
    SteeringForgotReported => "steering_forgot_reported",
    /// One-way: steering entries forgotten, unreported, after the client's FIN or RST and
    /// a quiet time.
    SteeringForgotEnded => "steering_forgot_ended",
    /// One-way: steering entries the table's idle timeout (`flow_timeout`) removed.
    SteeringExpired => "steering_expired",
    /// One-way: steering entries taken over by a new connection from the same client port
    /// (its flip replaced them before their end was seen).
    SteeringReplaced => "steering_replaced",
    /// One-way `migrate`: connections moved to a server of another group at a request
    /// boundary.
    Migrations => "migrations",
    /// One-way `migrate`: an agent asked, and the request stayed where it was (the switch
    /// routes it to the same server or host, to a server without an agent, or only the
    /// switch would answer it).
    MigrationsStayed => "migrations_stayed",
    /// One-way `migrate`: a move that failed (freeze, dump, the new agent's restore, the
    /// flip); the old server serves the request.
    MigrationsFailed => "migrations_failed",
    /// HTTP/2 client connections (ALPN `h2`, or the preface on an `h2c` listener).
    H2Connections => "h2_connections",
    /// HTTP/2 streams opened by clients (each a request of its own).
    H2Streams => "h2_streams",
    /// HTTP/2 requests refused before translation to HTTP/1.1 (CR/LF/NUL in a value,
    /// connection-specific fields, `:authority` disagreeing with `host`, a body longer or
    /// shorter than its `content-length`, CONNECT): never forwarded.
    H2Refused => "h2_refused",
    /// HTTP/2 connections ended with a connection error (GOAWAY): malformed frames,
    /// floods the `h2` crate refuses (rapid reset, CONTINUATION, SETTINGS, PING).
    H2ConnectionErrors => "h2_connection_errors",
    /// HTTP/2 connections opened to servers of `server_protocol = "h2"` groups.
    H2ServerConnections => "h2_server_connections",
    /// HTTP/2 streams refused (RST_STREAM ENHANCE_YOUR_CALM) because their connection held
    /// all of `limits.h2_connection_bytes`.
    H2MemoryLimit => "h2_memory_limit",
    /// gRPC calls answered with a gRPC status made from an HTTP status (the switch's
    /// refusals, a server's non-200), in the trailers-only form.
    GrpcStatusAnswers => "grpc_status_answers",
}

impl Counter {
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
                | TlsMalformed
                | TlsHandshakeFailed
                | ClientAbortedBody
                | ClientGone
                | H2Refused
        )
    }
}

tokio::task_local! {
    /// The listener (index in config order) whose accept loop or connection the running
    /// task is: set once where those tasks are spawned, so that a refusal deep in a
    /// protocol wing is counted against its listener without every function between the
    /// accept and the refusal carrying the index.
    static LISTENER: usize;
}

/// All counters.
pub struct Stats {
    counts: [AtomicU64; COUNTERS],
    /// Per listener (config order; listeners are fixed for the life of the process): the
    /// refusals only, indexed like `counts`.
    refusals_by_listener: Box<[[AtomicU64; COUNTERS]]>,
}

impl Stats {
    /// Counters at zero for a switch with `listeners` listeners.
    pub fn new(listeners: usize) -> Stats {
        let zeros = || std::array::from_fn(|_| AtomicU64::new(0));
        Stats { counts: zeros(), refusals_by_listener: (0..listeners).map(|_| zeros()).collect() }
    }

    /// Adds one; a refusal also on the listener of the running task, if it has one.
    pub fn inc(&self, c: Counter) {
        self.counts[c as usize].fetch_add(1, Ordering::Relaxed);
        if c.is_refusal() {
            let listener = LISTENER.try_with(|l| *l).ok();
            if let Some(row) = listener.and_then(|l| self.refusals_by_listener.get(l)) {
                row[c as usize].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Adds `n` (counters that are not refusals).
    pub fn add(&self, c: Counter, n: u64) {
        self.counts[c as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// Current value.
    pub fn get(&self, c: Counter) -> u64 {
        self.counts[c as usize].load(Ordering::Relaxed)
    }

    /// Refusals of kind `c` on listener `listener` (0 for a counter that is no refusal).
    pub fn refusals_on(&self, listener: usize, c: Counter) -> u64 {
        self.refusals_by_listener.get(listener).map_or(0, |row| row[c as usize].load(Ordering::Relaxed))
    }

    /// Runs `task` as serving listener `listener`: its refusals count against it.
    pub fn on_listener<F: Future>(listener: usize, task: F) -> impl Future<Output = F::Output> {
        LISTENER.scope(listener, task)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refusals_count_against_the_listener_of_the_task() {
        let stats = Stats::new(2);
        Stats::on_listener(1, async {
            stats.inc(Counter::NoServer);
            stats.inc(Counter::Accepted);
        })
        .await;
        stats.inc(Counter::NoServer); // no listener: counted in the total only
        assert_eq!(stats.get(Counter::NoServer), 2);
        assert_eq!(stats.refusals_on(1, Counter::NoServer), 1);
        assert_eq!(stats.refusals_on(0, Counter::NoServer), 0);
        assert_eq!(stats.refusals_on(1, Counter::Accepted), 0, "not a refusal");
        assert_eq!(stats.refusals_on(7, Counter::NoServer), 0, "no such listener");
    }
}
