//! The client-facing SMTP dialogue up to DATA: the switch's own greeting and replies, and
//! the server's answers the caller passes on.
//!
//! Commands are handled strictly one at a time, in order. A command the caller must decide
//! (MAIL, RCPT, DATA) stops processing until the caller answers it (for a RCPT, perhaps
//! after asking the server), and every command the client pipelined behind it (RFC 2920)
//! waits in the input buffer, so replies always leave in command order however the bytes
//! were split. The per-command handlers are in `front/commands.rs`.

mod commands;

use super::envelope::{Envelope, MailParams};
use super::event::{Event, FrontConfig};
use super::path::Mailbox;
use super::reply::{printable, Reply};
use crate::line::{Line, LineBuf};
use crate::CloseReason;

#[derive(Debug)]
enum Pending {
    None,
    Mail(Option<Mailbox>, MailParams),
    Rcpt(Mailbox),
    Data,
}

/// The client side of an SMTP session until DATA.
#[derive(Debug)]
pub struct Front {
    cfg: FrontConfig,
    input: LineBuf,
    /// The HELO name and whether it came with EHLO.
    helo: Option<(String, bool)>,
    mail: Option<(Option<Mailbox>, MailParams)>,
    /// The recipients the server accepted.
    rcpts: Vec<Mailbox>,
    /// Some RCPT was answered in this transaction (DATA then says "no valid recipients"
    /// rather than "need RCPT").
    rcpt_tried: bool,
    pending: Pending,
    errors: u32,
    tls: bool,
    closed: bool,
}

impl Front {
    /// A session that has not greeted yet.
    pub fn new(cfg: FrontConfig) -> Front {
        Front {
            cfg,
            input: LineBuf::default(),
            helo: None,
            mail: None,
            rcpts: Vec::new(),
            rcpt_tried: false,
            pending: Pending::None,
            errors: 0,
            tls: false,
            closed: false,
        }
    }

    /// Writes the greeting, the first thing the client reads.
    pub fn greeting(&self, out: &mut Vec<u8>) {
        say(out, 220, &format!("{} ESMTP ready", self.cfg.hostname));
    }

    /// Buffers bytes from the client; [`Front::poll`] processes them.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.input.push(bytes);
    }

    /// Processes buffered commands, writing the switch's replies to `out`, until one needs
    /// the caller. `None`: more input is needed, a decision is pending, or the session ended.
    pub fn poll(&mut self, out: &mut Vec<u8>) -> Option<Event> {
        while matches!(self.pending, Pending::None) && !self.closed {
            let event = match self.input.next_line(self.cfg.max_line)? {
                Line::TooLong => self.error(out, 500, "5.5.2 Line too long"),
                Line::Text(line) => match String::from_utf8(line) {
                    Ok(line) if !line.contains(['\r', '\0']) => self.command(&line, out),
                    _ => self.error(out, 500, "5.5.2 Invalid characters in command"),
                },
            };
            if event.is_some() {
                return event;
            }
        }
        None
    }

    /// Accepts the pending MAIL: 250.
    pub fn accept_mail(&mut self, out: &mut Vec<u8>) {
        if let Pending::Mail(from, params) = std::mem::replace(&mut self.pending, Pending::None) {
            self.mail = Some((from, params));
            say(out, 250, "2.1.0 Ok");
        } else {
            debug_assert!(false, "accept_mail without a pending MAIL");
        }
    }

    /// Refuses the pending MAIL with `code` (4xx/5xx; anything else becomes 550) and `text`
    /// (which may start with an enhanced status code).
    pub fn reject_mail(&mut self, code: u16, text: &str, out: &mut Vec<u8>) {
        debug_assert!(matches!(self.pending, Pending::Mail(..)), "reject_mail without MAIL");
        self.pending = Pending::None;
        say(out, refusal_code(code), &printable(text));
    }

    /// Answers the pending RCPT with the server's reply, passed on verbatim (every line, its
    /// enhanced codes and text; a code that is neither 2xx nor 4xx/5xx becomes 550). A 2xx
    /// adds the recipient to [`Front::rcpts`].
    pub fn answer_rcpt(&mut self, reply: &Reply, out: &mut Vec<u8>) {
        let Pending::Rcpt(to) = std::mem::replace(&mut self.pending, Pending::None) else {
            debug_assert!(false, "answer_rcpt without a pending RCPT");
            return;
        };
        let mut reply = reply.clone();
        if (200..300).contains(&reply.code) {
            self.rcpts.push(to);
        } else {
            reply.code = refusal_code(reply.code);
        }
        reply.write_to(out);
    }

    /// Refuses the pending RCPT with `code` (4xx/5xx; anything else becomes 550) and
    /// `text` (a rule's `deny` text).
    pub fn reject_rcpt(&mut self, code: u16, text: &str, out: &mut Vec<u8>) {
        debug_assert!(matches!(self.pending, Pending::Rcpt(_)), "reject_rcpt without RCPT");
        self.pending = Pending::None;
        say(out, refusal_code(code), &printable(text));
    }

    /// Refuses the pending RCPT for now because it routes to another server than the
    /// transaction's first recipient: 451, so the client sends it in its own transaction.
    pub fn defer_rcpt(&mut self, out: &mut Vec<u8>) {
        self.reject_rcpt(451, "4.3.0 send this recipient in a separate transaction", out);
    }

    /// The server did not take DATA: answers the client's DATA with `reply` (from
    /// [`super::Outcome::Refused`]), ends the transaction (the caller forgets its routing
    /// decision and its server for it, as on [`Event::Reset`]) and goes on with the session.
    pub fn data_failed(&mut self, reply: &Reply, out: &mut Vec<u8>) {
        debug_assert!(matches!(self.pending, Pending::Data), "data_failed without DATA");
        self.pending = Pending::None;
        self.end_transaction();
        let mut reply = reply.clone();
        reply.code = refusal_code(reply.code);
        reply.write_to(out);
    }

    /// The switch point: the server took DATA. Returns the client bytes that followed the
    /// DATA line, to be sent to the server before tunnelling the rest.
    pub fn tunnel(mut self) -> Vec<u8> {
        debug_assert!(matches!(self.pending, Pending::Data), "tunnel before DATA");
        self.input.take_rest()
    }

    /// The current transaction's envelope, once HELO and MAIL are accepted.
    pub fn envelope(&self) -> Option<Envelope> {
        let (helo, esmtp) = self.helo.clone()?;
        let (from, params) = self.mail.clone()?;
        Some(Envelope { helo, esmtp, from, params })
    }

    /// The recipients of the current transaction the server accepted, in order.
    pub fn rcpts(&self) -> &[Mailbox] {
        &self.rcpts
    }

    /// The client's EHLO / HELO name, once given.
    pub fn helo(&self) -> Option<&str> {
        self.helo.as_ref().map(|(name, _)| name.as_str())
    }

    /// TLS was started with STARTTLS.
    pub fn tls_active(&self) -> bool {
        self.tls
    }

    /// Client bytes buffered and not processed yet; a caller waiting on a decision can
    /// stop reading the socket past a bound of its choice.
    pub fn buffered(&self) -> usize {
        self.input.buffered()
    }

    fn end_transaction(&mut self) {
        self.mail = None;
        self.rcpts.clear();
        self.rcpt_tried = false;
    }

    /// Answers a protocol error, or 421 and closes once there have been too many.
    fn error(&mut self, out: &mut Vec<u8>, code: u16, text: &str) -> Option<Event> {
        self.errors += 1;
        if self.errors >= self.cfg.max_errors {
            say(out, 421, &format!("4.7.0 {} Error: too many errors", self.cfg.hostname));
            self.closed = true;
            return Some(Event::Close { reason: CloseReason::TooManyErrors });
        }
        say(out, code, text);
        None
    }
}

fn refusal_code(code: u16) -> u16 {
    if (400..600).contains(&code) {
        code
    } else {
        550
    }
}

fn say(out: &mut Vec<u8>, code: u16, text: &str) {
    out.extend_from_slice(format!("{code} {text}\r\n").as_bytes());
}

fn say_none(out: &mut Vec<u8>, code: u16, text: &str) -> Option<Event> {
    say(out, code, text);
    None
}
