//! SMTP (RFC 5321) up to the switch point, and its replay to the chosen server.
//!
//! The switch answers the client itself until DATA ([`Front`]): greeting, EHLO / HELO
//! (advertising only PIPELINING, SIZE, 8BITMIME, ENHANCEDSTATUSCODES and, when configured,
//! STARTTLS), MAIL FROM and each RCPT TO (answered as the caller decides: 250, a rule's
//! `deny`, or 451 for a recipient that routes elsewhere than the transaction's first),
//! RSET, NOOP, HELP, VRFY (252), QUIT, STARTTLS, with pipelined commands answered in order.
//! At DATA the caller connects to the server and runs a [`Replay`] of the envelope; if the
//! server takes DATA, the caller passes its 354 on and tunnels the rest of the session byte
//! for byte (the message, and any later transaction, go to that server).
//!
//! # Recipients the server refuses after the switch said 250
//!
//! SMTP gives DATA one reply for the whole transaction, and the switch has no queue, so it
//! cannot deliver to some recipients and bounce the others. Postfix's before-queue proxy
//! (`smtpd_proxy_filter`) avoids the question by talking to the next hop in lock-step from
//! MAIL on; the switch cannot, because the server is chosen by the recipients. So the
//! replay never sends DATA unless every recipient was accepted, and otherwise:
//!
//! - **all refused**, every refusal permanent: DATA gets **554** listing each recipient with
//!   the server's reply. The client bounces the message, which is what the server said.
//! - **all refused**, some only for now (4xx): DATA gets **451**; the client retries later.
//! - **some refused**: DATA gets **451 4.3.0** listing the refused recipients and nothing is
//!   delivered. The client keeps the whole message queued, so nothing the switch accepted
//!   is lost. Each refusal is put in a [`RefusalCache`]; when the client retries, the caller
//!   checks the cache at RCPT and answers those recipients with the server's own reply, so
//!   the retry delivers to the others and the client bounces (5xx) or keeps retrying (4xx)
//!   only the refused ones. This is the verify-cache idea of Postfix's
//!   `reject_unverified_recipient`, which also answers 450 until it has learnt the answer.
//!   The cost is one retry interval of delay for the good recipients of a partly refused
//!   message; a caller without a cache still loses nothing, but the client's retries then
//!   repeat until its queue lifetime ends and it bounces the message.
//! - the server is down, greets with anything but 220, refuses EHLO and HELO, or breaks the
//!   protocol: **451 4.4.0** (try again later, perhaps to a healthy server).
//! - the server refuses MAIL FROM or DATA: its reply, with a code valid after DATA (a 421
//!   becomes 451, codes without a DATA meaning become 451 / 554).
//!
//! After a refusal the replay sends QUIT, the front ends the transaction and the session
//! goes on with the switch (RSET, a new MAIL, QUIT all work).
//!
//! BDAT is refused with 502 and its chunk skipped: CHUNKING is not offered, because the
//! switch would have to reframe chunks for servers that lack it.

mod cache;
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
pub use cache::RefusalCache;
pub use envelope::{Body, Envelope, MailParams};
pub use event::{Event, FrontConfig};
pub use front::Front;
pub use outcome::{Cause, ClientInfo, Outcome, Refusal, ReplayConfig};
pub use path::{Mailbox, PathError};
pub use replay::Replay;
pub use reply::Reply;
