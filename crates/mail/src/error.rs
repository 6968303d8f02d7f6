//! What a misbehaving server causes during a replay.

use thiserror::Error;

/// A server that did not speak its protocol well enough to replay the dialogue to it.
///
/// The replays never pass such a server's bytes to the client; they answer the client with a
/// temporary failure and report this for the log.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ServerError {
    /// A reply line longer than the configured limit.
    #[error("server reply line longer than {0} bytes")]
    LineTooLong(usize),
    /// A multi-line reply with more lines than the configured limit.
    #[error("server reply longer than {0} lines")]
    TooManyLines(usize),
    /// A line that is not a reply of the protocol (the offending line, shortened).
    #[error("malformed server reply: {0:?}")]
    Malformed(String),
}

/// A shortened, printable copy of a server line for error messages and logs.
pub(crate) fn excerpt(line: &[u8]) -> String {
    let s = String::from_utf8_lossy(&line[..line.len().min(80)]);
    s.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}
