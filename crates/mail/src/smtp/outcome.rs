//! What a replay is configured with and what it hands back.

use std::net::SocketAddr;

use super::reply::Reply;
use crate::ServerError;

/// The listener's settings for talking to SMTP servers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayConfig {
    /// Send XCLIENT (Postfix) when the server offers it, so it sees the client's address.
    pub xclient: bool,
    /// Longest server reply line, CRLF included (RFC 5321 says 512; a little slack).
    pub max_line: usize,
    /// Most lines in one server reply.
    pub max_lines: usize,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig { xclient: true, max_line: 1024, max_lines: 64 }
    }
}

/// Who the client is, for XCLIENT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientInfo {
    /// The client's address and port.
    pub addr: SocketAddr,
    /// Its verified reverse-DNS name, if the caller has one.
    pub name: Option<String>,
}

/// What the server said to the command the replay is waiting on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server's reply to the RCPT being relayed (the first one, after the replay of
    /// what precedes it, or a later one sent with [`super::Replay::rcpt`]): 2xx, or a
    /// 4xx / 5xx refusal other than 421. Pass it to the client as it is
    /// ([`super::Front::answer_rcpt`]); the server waits for the next RCPT or DATA.
    Rcpt(Reply),
    /// The server answered DATA with 354. Write `to_client` (that 354) to the client, then
    /// [`super::Front::tunnel`]'s bytes to the server, and tunnel both ways from here on.
    Tunnel {
        /// The server's 354 reply, and anything it sent after it.
        to_client: Vec<u8>,
    },
    /// The server cannot be used for this transaction any more. `reply` answers the
    /// client's pending command (the RCPT being relayed, or DATA) with a code valid for it;
    /// QUIT was written for the server, which can be closed once it is flushed.
    Refused {
        /// The answer to the client's RCPT or DATA.
        reply: Reply,
        /// What went wrong, for the log.
        cause: Cause,
    },
}

/// Why a replay gave up on its server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The greeting was not 220.
    Greeting(Reply),
    /// EHLO and HELO were refused.
    Hello(Reply),
    /// The server broke the protocol.
    Protocol(ServerError),
    /// The message is 8-bit and the server does not offer 8BITMIME.
    EightBit,
    /// MAIL FROM was refused.
    Sender(Reply),
    /// The server answered a RCPT with 421: it is closing the connection.
    Closing(Reply),
    /// DATA was refused.
    Data(Reply),
    /// No server could be reached, or it closed or went silent.
    Unreachable(String),
}
