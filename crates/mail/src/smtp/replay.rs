//! The server-facing SMTP dialogue: replays what precedes the choice of server, then relays
//! each later command live.
//!
//! Greeting → EHLO with the client's name (HELO if EHLO is refused) → XCLIENT when offered
//! and enabled (the server then greets again and wants a new EHLO) → MAIL → the RCPT that
//! chose this server, whose reply is the first [`Outcome::Rcpt`]. MAIL and that RCPT go in
//! one write when the server offers PIPELINING. From then on the replay is idle between
//! commands: the caller sends each later recipient ([`Replay::rcpt`]) and DATA
//! ([`Replay::data`]) one at a time, and each reply comes back as an [`Outcome`]. Lock-step
//! costs one round trip to the server per recipient, but the client's pipelined commands are
//! answered strictly in order by construction, and every answer the client gets is the
//! server's own.

use std::net::IpAddr;

use super::envelope::{Body, Envelope};
use super::outcome::{Cause, ClientInfo, Outcome, ReplayConfig};
use super::path::Mailbox;
use super::policy;
use super::reply::{Reply, ReplyReader};
use crate::ServerError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Greeting,
    Ehlo {
        again: bool,
    },
    Helo,
    Xclient,
    /// MAIL sent; the first RCPT too when `rcpt_sent` (PIPELINING).
    Mail {
        rcpt_sent: bool,
    },
    Rcpt,
    /// Waiting for the caller's next command.
    Idle,
    Data,
    Done,
}

/// What the server offered in its EHLO reply.
#[derive(Clone, Debug, Default)]
struct Caps {
    pipelining: bool,
    size: bool,
    eight_bit: bool,
    /// XCLIENT's attribute names; `None` when XCLIENT is not offered.
    xclient: Option<Vec<String>>,
}

/// The server side of one SMTP transaction, from the greeting to DATA's 354.
#[derive(Debug)]
pub struct Replay {
    cfg: ReplayConfig,
    env: Envelope,
    first: Mailbox,
    client: Option<ClientInfo>,
    reader: ReplyReader,
    step: Step,
    caps: Caps,
}

impl Replay {
    /// A replay of `env` (from [`super::Front::envelope`]) and of `first`, the recipient
    /// that chose the server, that waits for the greeting.
    pub fn new(cfg: ReplayConfig, mut env: Envelope, first: Mailbox, client: Option<ClientInfo>) -> Replay {
        // The fields are public: never let a caller's value break a command line.
        env.helo.retain(|c| !c.is_control() && c != ' ');
        let reader = ReplyReader::new(cfg.max_line, cfg.max_lines);
        Replay { cfg, env, first, client, reader, step: Step::Greeting, caps: Caps::default() }
    }

    /// Takes bytes from the server and writes the commands to send it to `out`; returns
    /// the server's answer to the pending command once it is complete.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Option<Outcome> {
        if self.step == Step::Done {
            return None;
        }
        self.reader.push(bytes);
        loop {
            let reply = match self.reader.next() {
                Ok(Some(reply)) => reply,
                Ok(None) => return None,
                Err(e) => return Some(self.refuse(policy::unavailable(), Cause::Protocol(e), out)),
            };
            match self.on_reply(reply, out) {
                // In lock-step nothing may follow the reply to the one command in flight.
                Some(Outcome::Rcpt(_)) if !self.reader.is_empty() => {
                    let e = ServerError::Malformed("a reply nobody asked for".to_string());
                    return Some(self.refuse(policy::unavailable(), Cause::Protocol(e), out));
                }
                Some(outcome) => return Some(outcome),
                None => {}
            }
        }
    }

    /// Relays a later recipient of the transaction; its reply comes from [`Replay::feed`].
    /// Only after an [`Outcome::Rcpt`].
    pub fn rcpt(&mut self, to: &Mailbox, out: &mut Vec<u8>) {
        debug_assert_eq!(self.step, Step::Idle, "rcpt while a command is in flight");
        out.extend_from_slice(format!("RCPT TO:{}\r\n", to.to_path()).as_bytes());
        self.step = Step::Rcpt;
    }

    /// Sends DATA; the server's 354 comes from [`Replay::feed`] as [`Outcome::Tunnel`].
    /// Only after an [`Outcome::Rcpt`] that accepted a recipient.
    pub fn data(&mut self, out: &mut Vec<u8>) {
        debug_assert_eq!(self.step, Step::Idle, "data while a command is in flight");
        out.extend_from_slice(b"DATA\r\n");
        self.step = Step::Data;
    }

    /// Ends the session with the server (the client reset or ended the transaction): QUIT,
    /// unless it was already written.
    pub fn quit(&mut self, out: &mut Vec<u8>) {
        if self.step != Step::Done {
            self.step = Step::Done;
            out.extend_from_slice(b"QUIT\r\n");
        }
    }

    /// The caller could not reach a server, or the server closed or went silent: the
    /// client's pending RCPT or DATA gets 451 4.4.0 (it keeps the message and retries).
    pub fn server_gone(&mut self, why: &str, out: &mut Vec<u8>) -> Outcome {
        self.refuse(policy::unavailable(), Cause::Unreachable(why.to_string()), out)
    }

    fn on_reply(&mut self, reply: Reply, out: &mut Vec<u8>) -> Option<Outcome> {
        match self.step {
            Step::Greeting if reply.code == 220 => self.ehlo(false, out),
            Step::Greeting => Some(self.refuse(policy::unavailable(), Cause::Greeting(reply), out)),
            Step::Ehlo { again } if reply.is_positive() => {
                self.caps = parse_caps(&reply);
                match self.xclient_command().filter(|_| !again) {
                    Some(cmd) => {
                        out.extend_from_slice(cmd.as_bytes());
                        self.step = Step::Xclient;
                        None
                    }
                    None => self.start_envelope(out),
                }
            }
            Step::Ehlo { again: false } if reply.code >= 500 => {
                out.extend_from_slice(format!("HELO {}\r\n", self.env.helo).as_bytes());
                self.step = Step::Helo;
                None
            }
            Step::Helo if reply.is_positive() => self.start_envelope(out),
            Step::Ehlo { .. } | Step::Helo => {
                Some(self.refuse(policy::unavailable(), Cause::Hello(reply), out))
            }
            // XCLIENT restarts the session with a new greeting (220) that wants a new EHLO.
            Step::Xclient if reply.code == 220 => self.ehlo(true, out),
            Step::Xclient if reply.code == 421 => {
                Some(self.refuse(policy::unavailable(), Cause::Hello(reply), out))
            }
            // Refused (not an authorized XCLIENT host): go on without it.
            Step::Xclient => self.start_envelope(out),
            // The client's MAIL was answered 250 by the switch long ago; what is pending now
            // is its RCPT, so the sender's refusal answers that (and every later recipient
            // for this server, see the policy in `super`).
            Step::Mail { .. } if !reply.is_positive() => {
                Some(self.refuse(policy::for_rcpt(&reply), Cause::Sender(reply), out))
            }
            Step::Mail { rcpt_sent: true } => {
                self.step = Step::Rcpt;
                None
            }
            Step::Mail { rcpt_sent: false } => {
                let first = self.first.clone();
                self.step = Step::Idle;
                self.rcpt(&first, out);
                None
            }
            Step::Rcpt => self.rcpt_reply(reply, out),
            Step::Idle => {
                let e = ServerError::Malformed(format!("unasked: {}", reply.text()));
                Some(self.refuse(policy::unavailable(), Cause::Protocol(e), out))
            }
            Step::Data if reply.code == 354 => {
                self.step = Step::Done;
                let mut to_client = reply.to_bytes();
                to_client.extend(self.reader.take_rest());
                Some(Outcome::Tunnel { to_client })
            }
            Step::Data => Some(self.refuse(policy::for_data(&reply), Cause::Data(reply), out)),
            Step::Done => None,
        }
    }

    /// A RCPT's reply goes to the client as it is, except a 421: the server is closing, and
    /// the client must not read that as the switch closing its own connection.
    fn rcpt_reply(&mut self, reply: Reply, out: &mut Vec<u8>) -> Option<Outcome> {
        match reply.code {
            421 => Some(self.refuse(policy::for_rcpt(&reply), Cause::Closing(reply), out)),
            200..=299 | 400..=599 => {
                self.step = Step::Idle;
                Some(Outcome::Rcpt(reply))
            }
            _ => {
                let e = ServerError::Malformed(format!("RCPT answered {}", reply.code));
                Some(self.refuse(policy::unavailable(), Cause::Protocol(e), out))
            }
        }
    }

    fn ehlo(&mut self, again: bool, out: &mut Vec<u8>) -> Option<Outcome> {
        out.extend_from_slice(format!("EHLO {}\r\n", self.env.helo).as_bytes());
        self.step = Step::Ehlo { again };
        None
    }

    /// `XCLIENT NAME=… ADDR=… …` with the attributes the server offers, when enabled.
    fn xclient_command(&self) -> Option<String> {
        let attrs = self.caps.xclient.as_ref().filter(|_| self.cfg.xclient)?;
        let client = self.client.as_ref()?;
        let mut cmd = String::from("XCLIENT");
        for attr in ["NAME", "ADDR", "PORT", "PROTO", "HELO"] {
            if !attrs.iter().any(|a| a == attr) {
                continue;
            }
            let value = match attr {
                "NAME" => client.name.clone().unwrap_or_else(|| "[UNAVAILABLE]".to_string()),
                "ADDR" => match client.addr.ip().to_canonical() {
                    IpAddr::V4(ip) => ip.to_string(),
                    IpAddr::V6(ip) => format!("IPV6:{ip}"),
                },
                "PORT" => client.addr.port().to_string(),
                "PROTO" => if self.env.esmtp { "ESMTP" } else { "SMTP" }.to_string(),
                _ => self.env.helo.clone(),
            };
            cmd.push_str(&format!(" {attr}={}", xtext(&value)));
        }
        (cmd.len() > "XCLIENT".len()).then(|| cmd + "\r\n")
    }

    fn start_envelope(&mut self, out: &mut Vec<u8>) -> Option<Outcome> {
        if self.env.params.body == Some(Body::EightBitMime) && !self.caps.eight_bit {
            let reply = Reply::new(554, "5.6.3 The mail server cannot take 8-bit messages");
            return Some(self.refuse(policy::for_rcpt(&reply), Cause::EightBit, out));
        }
        let from = self.env.from.as_ref().map_or_else(|| "<>".to_string(), Mailbox::to_path);
        let params = self.env.params.to_wire(self.caps.size, self.caps.eight_bit);
        out.extend_from_slice(format!("MAIL FROM:{from}{params}\r\n").as_bytes());
        self.step = Step::Mail { rcpt_sent: self.caps.pipelining };
        if self.caps.pipelining {
            out.extend_from_slice(format!("RCPT TO:{}\r\n", self.first.to_path()).as_bytes());
        }
        None
    }

    fn refuse(&mut self, reply: Reply, cause: Cause, out: &mut Vec<u8>) -> Outcome {
        self.step = Step::Done;
        out.extend_from_slice(b"QUIT\r\n");
        Outcome::Refused { reply, cause }
    }
}

fn parse_caps(reply: &Reply) -> Caps {
    let mut caps = Caps::default();
    for line in reply.lines.iter().skip(1) {
        let mut words = line.split_ascii_whitespace();
        let keyword = words.next().unwrap_or_default().to_ascii_uppercase();
        match keyword.as_str() {
            "PIPELINING" => caps.pipelining = true,
            "SIZE" => caps.size = true,
            "8BITMIME" => caps.eight_bit = true,
            "XCLIENT" => caps.xclient = Some(words.map(str::to_ascii_uppercase).collect()),
            _ => {}
        }
    }
    caps
}

/// RFC 3461 §4 xtext, which XCLIENT values use.
fn xtext(value: &str) -> String {
    let mut s = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'!'..=b'~' if b != b'+' && b != b'=' => s.push(char::from(b)),
            _ => s.push_str(&format!("+{b:02X}")),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    #[test]
    fn xtext_escapes_plus_equals_and_controls() {
        assert_eq!(super::xtext("a+b=c d\u{e9}"), "a+2Bb+3Dc+20d+C3+A9");
        assert_eq!(super::xtext("[UNAVAILABLE]"), "[UNAVAILABLE]");
    }
}
