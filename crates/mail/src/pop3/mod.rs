//! POP3 (RFC 1939, RFC 2449 CAPA, RFC 2595 STLS) up to the login, and its replay.
//!
//! The switch greets, answers CAPA (USER, and STLS when configured), STLS and QUIT, and
//! takes USER then PASS ([`Front`]). PASS is the switch point: the caller routes on the
//! user (rule field `pop.user` and [`crate::domain_of`] of it), connects, and runs a
//! [`Replay`] that reads the server's greeting and sends USER and PASS. The server's answer
//! to PASS goes to the client as it is: `+OK` and the caller tunnels (CAPA after login comes
//! from the server), `-ERR` and the front waits for another USER. A server that is down or
//! greets with `-ERR` gives the client `-ERR [SYS/TEMP]` (RFC 3206).
//!
//! Only USER / PASS is offered: APOP's digest is bound to the greeting's timestamp, which
//! is the switch's, not the server's, and SASL would mean re-running mechanisms the switch
//! cannot replay. A server that refuses plaintext USER from the switch (Dovecot's
//! `disable_plaintext_auth`) must trust the switch's address (`login_trusted_networks`).

mod front;
mod replay;

pub use crate::login::{Cause, Outcome};
pub use front::{Event, Front, FrontConfig};
pub use replay::{Replay, ReplayConfig};

/// `VERB arg` split at the first space; the verb uppercased. The argument keeps its bytes:
/// a password may have spaces, and need not be UTF-8.
pub(crate) fn split_command(line: &[u8]) -> (String, &[u8]) {
    let (verb, arg) = match line.iter().position(|&b| b == b' ') {
        Some(i) => (&line[..i], &line[i + 1..]),
        None => (line, &line[line.len()..]),
    };
    (String::from_utf8_lossy(verb).to_ascii_uppercase(), arg)
}
