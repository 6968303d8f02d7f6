//! Sans-io mail front ends for cswitch: SMTP, POP3 and IMAP up to the switch point.
//!
//! Owns the part of a mail session that the switch speaks itself (seed 000 §4.4): it greets
//! the client, answers the commands that come before the routing decision, collects what the
//! rules route on (SMTP envelope, POP3 / IMAP user), then replays the dialogue to the server
//! the rules chose and tells the caller what to pass back to the client before it tunnels the
//! rest of the session byte for byte. No sockets and no tokio: bytes go in, replies and events
//! come out, so every state machine is tested by feeding it transcripts.
//!
//! Each protocol has the same two halves:
//! - a `Front` (client side): `greeting`, `feed` (buffer bytes), `poll` (process them, write
//!   the switch's own replies, return the next [`smtp::Event`] / [`pop3::Event`] /
//!   [`imap::Event`] that needs the caller), decision methods (`answer_rcpt`, `login_failed`,
//!   …) and `tunnel` (hand back the client bytes that follow the switch point);
//! - a `Replay` (server side): built from what the front collected, fed the server's bytes,
//!   writes the commands to send and ends with an `Outcome` that says what the client gets.
//!
//! Layout: [`smtp`] (front, replay and relay, replies, addresses, the refusal policy),
//! [`pop3`], [`imap`] (front, replay, literal-aware command syntax), [`login`] (one
//! vocabulary over POP3 and IMAP: front, replay, outcome); private `line` (CRLF
//! line splitting with limits, shared by all three). [`ServerError`] is what a misbehaving
//! server causes; [`Secret`] keeps passwords out of `Debug` output.

mod error;
pub mod imap;
mod line;
pub mod login;
pub mod pop3;
mod secret;
pub mod smtp;

pub use error::ServerError;
pub use secret::Secret;

/// Why a front closes a client connection by itself (after writing its last words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// `max_errors` protocol errors or failed logins.
    TooManyErrors,
    /// An IMAP command line over the limit: its tag is lost with it, so no tagged answer
    /// can tell the client, which would otherwise wait forever.
    LineTooLong,
}

/// The domain part of a mail address or user name, lowercased; empty when there is none.
///
/// Accepts `local@domain`, `<local@domain>` and source-routed paths (`<@relay:l@d>`); the
/// domain is what follows the last `@`, so `"a@b"@example.org` gives `example.org`. This is
/// the value of the rule fields `smtp.rcpt_to_domain`, `pop.user` domain and so on.
pub fn domain_of(addr: &str) -> String {
    let addr = addr.trim();
    let addr = addr.strip_prefix('<').unwrap_or(addr);
    let addr = addr.strip_suffix('>').unwrap_or(addr);
    match addr.rfind('@') {
        // `@relay:` alone (a route with no mailbox after it) has no domain of its own.
        Some(at) if !addr[at..].contains(':') => addr[at + 1..].to_ascii_lowercase(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::domain_of;

    #[test]
    fn domain_of_forms() {
        assert_eq!(domain_of("alice@Example.ORG"), "example.org");
        assert_eq!(domain_of("<bob@Mail.Example>"), "mail.example");
        assert_eq!(domain_of("<@relay.example:bob@x.example>"), "x.example");
        assert_eq!(domain_of("\"a@b\"@q.example"), "q.example");
        assert_eq!(domain_of("<>"), "");
        assert_eq!(domain_of("postmaster"), "");
        assert_eq!(domain_of("alice"), "");
    }
}
