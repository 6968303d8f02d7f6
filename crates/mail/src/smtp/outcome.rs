//! What a replay is configured with and how it ends.

use std::net::SocketAddr;

use super::path::Mailbox;
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

/// How a replay ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server accepted every recipient and answered DATA with 354. Write `to_client`
    /// (that 354) to the client, then [`super::Front::tunnel`]'s bytes to the server, and
    /// tunnel both ways from here on.
    Tunnel {
        /// The server's 354 reply, and anything it sent after it.
        to_client: Vec<u8>,
    },
    /// The transaction cannot go on. Answer the client's DATA with `reply` through
    /// [`super::Front::data_failed`]; QUIT was written for the server, which can be closed
    /// once it is flushed. Record `refused` in a [`super::RefusalCache`].
    Refused {
        /// The answer to the client's DATA.
        reply: Reply,
        /// Recipients the switch had accepted and the server refused, with its replies.
        refused: Vec<Refusal>,
        /// What went wrong, for the log.
        cause: Cause,
    },
}

/// A recipient the server refused after the switch had answered it 250.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The recipient.
    pub rcpt: Mailbox,
    /// The server's reply to its RCPT.
    pub reply: Reply,
}

/// Why a replay did not reach DATA.
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
    /// Some or all recipients were refused (`refused`).
    Recipients,
    /// DATA was refused.
    Data(Reply),
    /// No server could be reached, or it closed or went silent before DATA.
    Unreachable(String),
}
