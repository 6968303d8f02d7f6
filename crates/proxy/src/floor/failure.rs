//! Typed failures (DESIGN.md §5). Every step that can fail on the way to a server and back
//! (queue, connect, exchange, reply) returns a [`Failure`]: which side failed, whether the
//! request may still go to another server, whether it counts against the server, and what
//! the client is told. The retry loop asks the failure, nothing else.

/// What the client is told when the switch answers instead of a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Status code.
    pub status: u16,
    /// Short reason: the response body and the access log's `error`.
    pub reason: &'static str,
}

impl Refusal {
    /// A refusal with this status and reason.
    pub const fn new(status: u16, reason: &'static str) -> Self {
        Refusal { status, reason }
    }
}

/// Who failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The client: it left, stalled, or sent something invalid.
    Client,
    /// The server: unreachable, silent, closed early, or answered something invalid.
    Server,
    /// The switch's own limits (queue full, queue timeout).
    Internal,
}

/// Whether the request may be sent to another server after this failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Nothing of the request reached a server: any request may go elsewhere.
    Safe,
    /// The request reached a server that never answered: only a request that can be sent
    /// again unchanged (idempotent, whole body still held) may go elsewhere.
    IfReplayable,
    /// Never (a response started, the client is gone, or the switch refused).
    Never,
}

/// One failure on the way to a server and back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure {
    /// Who failed.
    pub side: Side,
    /// Whether another server may be tried.
    pub retry: Retry,
    /// Passive health counts it against the server, and the server is not tried again
    /// for this request (a pooled connection the server had closed is not its fault).
    pub blames_server: bool,
    /// What the client is told; `None` when nothing can be sent any more (a response has
    /// started, or the client is gone): the connection just closes.
    pub answer: Option<Refusal>,
}

impl Failure {
    /// The server could not be reached (nothing was sent).
    pub const fn unreachable(answer: Refusal) -> Failure {
        Failure { side: Side::Server, retry: Retry::Safe, blames_server: true, answer: Some(answer) }
    }

    /// The server closed or reset before answering. `delivered`: some of the request
    /// reached it; `reused`: the connection came from the idle pool.
    pub const fn unanswered(delivered: bool, reused: bool) -> Failure {
        Failure {
            side: Side::Server,
            retry: if delivered { Retry::IfReplayable } else { Retry::Safe },
            blames_server: !reused,
            answer: Some(Refusal::new(502, "server closed the connection without answering")),
        }
    }

    /// The server failed in a way no other server can repair (timeout, malformed or cut
    /// response); `answer` when nothing was sent to the client yet.
    pub const fn server(answer: Option<Refusal>) -> Failure {
        Failure { side: Side::Server, retry: Retry::Never, blames_server: false, answer }
    }

    /// The client left, stalled or sent an invalid body; `answer` when it can still be told.
    pub const fn client(answer: Option<Refusal>) -> Failure {
        Failure { side: Side::Client, retry: Retry::Never, blames_server: false, answer }
    }

    /// The switch's own limit refused the request.
    pub const fn internal(answer: Refusal) -> Failure {
        Failure { side: Side::Internal, retry: Retry::Never, blames_server: false, answer: Some(answer) }
    }

    /// Whether the request may go to another server (`replayable`: idempotent with its
    /// whole body held).
    pub fn may_retry(&self, replayable: bool) -> bool {
        match self.retry {
            Retry::Safe => true,
            Retry::IfReplayable => replayable,
            Retry::Never => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_follows_what_reached_the_server() {
        let r = Refusal::new(502, "x");
        assert!(Failure::unreachable(r).may_retry(false));
        assert!(Failure::unanswered(false, false).may_retry(false));
        assert!(!Failure::unanswered(true, false).may_retry(false));
        assert!(Failure::unanswered(true, false).may_retry(true));
        assert!(!Failure::server(Some(r)).may_retry(true));
        assert!(!Failure::client(None).may_retry(true));
        assert!(!Failure::unanswered(true, true).blames_server, "a stale pooled connection");
        assert_eq!(Failure::internal(r).side, Side::Internal);
    }
}
