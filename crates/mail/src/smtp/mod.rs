//! SMTP (RFC 5321) up to the switch point, and the dialogue with the chosen server.
//!
//! The switch answers the client itself until the first routed recipient ([`Front`]):
//! greeting, EHLO / HELO (advertising only PIPELINING, SIZE, 8BITMIME, ENHANCEDSTATUSCODES
//! and, when configured, STARTTLS), MAIL FROM (250, or a rule's `deny`), RSET, NOOP, HELP,
//! VRFY (252), QUIT, STARTTLS, with pipelined commands answered in order. Each RCPT TO goes
//! to the caller, who routes it:
//!
//! - a rule's `deny`: 550 from the switch ([`Front::reject_rcpt`]);
//! - the first recipient that routes to a group chooses the transaction's server: the caller
//!   connects and runs a [`Replay`] of what precedes the choice (greeting, EHLO, XCLIENT,
//!   MAIL FROM) and of this RCPT, and the server's reply to it is the client's answer
//!   ([`Outcome::Rcpt`], [`Front::answer_rcpt`]);
//! - a later recipient for the same group is sent to that server live ([`Replay::rcpt`])
//!   and its reply passed back verbatim, so the client learns each recipient's fate at RCPT
//!   time and what the server refuses is never in the message;
//! - a recipient for another group gets 451 4.3.0 ([`Front::defer_rcpt`]): the client sends
//!   it in its next transaction, which routes afresh.
//!
//! DATA with at least one recipient the server accepted is sent to the server
//! ([`Replay::data`]); its 354 goes to the client and the rest of the session is tunnelled
//! byte for byte (the message, and any later transaction, go to that server). DATA without
//! one is answered 554 5.5.1 by the front (RFC 5321 §3.3).
//!
//! # When the server cannot be used
//!
//! The switch has no queue, so it only ever answers what the server said, or "try again
//! later" ([`Outcome::Refused`], after which the replay has written QUIT):
//!
//! - the server is down, greets with anything but 220, refuses EHLO and HELO, breaks the
//!   protocol, closes or goes silent: the pending RCPT or DATA gets **451 4.4.0**.
//! - it refuses MAIL FROM (or the message is 8-bit and it lacks 8BITMIME): the pending RCPT
//!   gets its reply with a code valid after RCPT (a 554 becomes 550, a 421 451).
//! - it answers a RCPT with 421 (closing): the RCPT gets 451 with the server's text, since a
//!   421 from the switch would tell the client its own connection is closing.
//! - it refuses DATA: its reply with a code valid after DATA.
//!
//! The caller keeps that answer for the rest of the transaction: every later recipient for
//! the same group gets it too (the server is not tried once per recipient), and DATA after
//! recipients the server had accepted gets 451 4.4.0, so nothing the client was told 250 is
//! lost: it retries the message later. After the transaction ends (DATA refused, RSET, EHLO)
//! the session goes on with the switch and the next transaction routes afresh.
//!
//! BDAT is refused with 502 and its chunk skipped: CHUNKING is not offered, because the
//! switch would have to reframe chunks for servers that lack it.

mod command;
mod envelope;
mod event;
mod front;
mod outcome;
mod path;
mod policy;
mod replay;
mod reply;

pub use crate::CloseReason;
pub use envelope::{Body, Envelope, MailParams};
pub use event::{Event, FrontConfig};
pub use front::Front;
pub use outcome::{Cause, ClientInfo, Outcome, ReplayConfig};
pub use path::{Mailbox, PathError};
pub use replay::Replay;
pub use reply::Reply;
