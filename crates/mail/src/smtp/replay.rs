//! The server-facing SMTP dialogue: replays what the front accepted, up to the server's 354.
//!
//! Greeting → EHLO with the client's name (HELO if EHLO is refused) → XCLIENT when offered
//! and enabled (the server then greets again and wants a new EHLO) → MAIL → each RCPT →
//! DATA. MAIL and the RCPTs go in one write when the server offers PIPELINING; DATA never
//! does: it is sent only once every recipient is accepted, because a server's 354 cannot be
//! taken back (see the policy in [`super`]).

use std::collections::VecDeque;
use std::net::IpAddr;

use super::envelope::{Body, Envelope};
use super::outcome::{Cause, ClientInfo, Outcome, Refusal, ReplayConfig};
use super::path::Mailbox;
use super::policy;
use super::reply::{Reply, ReplyReader};
use crate::ServerError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Greeting,
    Ehlo { again: bool },
    Helo,
    Xclient,
    Envelope,
    Data,
    Done,
}

#[derive(Clone, Copy, Debug)]
enum Sent {
    Mail,
    Rcpt(usize),
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

/// The server side of an SMTP session until DATA.
#[derive(Debug)]
pub struct Replay {
    cfg: ReplayConfig,
    env: Envelope,
    client: Option<ClientInfo>,
    reader: ReplyReader,
    step: Step,
    caps: Caps,
    awaiting: VecDeque<Sent>,
    next_rcpt: usize,
    refused: Vec<Refusal>,
}

impl Replay {
    /// A replay of `env` (from [`super::Front::envelope`]) that waits for the greeting.
    pub fn new(cfg: ReplayConfig, mut env: Envelope, client: Option<ClientInfo>) -> Replay {
        // The fields are public: never let a caller's value break a command line.
        env.helo.retain(|c| !c.is_control() && c != ' ');
        let reader = ReplyReader::new(cfg.max_line, cfg.max_lines);
        Replay {
            cfg,
            env,
            client,
            reader,
            step: Step::Greeting,
            caps: Caps::default(),
            awaiting: VecDeque::new(),
            next_rcpt: 0,
            refused: Vec::new(),
        }
    }

    /// Takes bytes from the server and writes the commands to send it to `out`; returns
    /// the outcome once there is one (and `None` ever after).
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
            if let Some(outcome) = self.on_reply(reply, out) {
                return Some(outcome);
            }
        }
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
            Step::Envelope => self.envelope_reply(reply, out),
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
            return Some(self.refuse(reply, Cause::EightBit, out));
        }
        self.step = Step::Envelope;
        let from = self.env.from.as_ref().map_or_else(|| "<>".to_string(), Mailbox::to_path);
        let params = self.env.params.to_wire(self.caps.size, self.caps.eight_bit);
        out.extend_from_slice(format!("MAIL FROM:{from}{params}\r\n").as_bytes());
        self.awaiting.push_back(Sent::Mail);
        while self.caps.pipelining && self.next_rcpt < self.env.rcpts.len() {
            self.send_rcpt(out);
        }
        None
    }

    fn send_rcpt(&mut self, out: &mut Vec<u8>) {
        let path = self.env.rcpts[self.next_rcpt].to_path();
        out.extend_from_slice(format!("RCPT TO:{path}\r\n").as_bytes());
        self.awaiting.push_back(Sent::Rcpt(self.next_rcpt));
        self.next_rcpt += 1;
    }

    fn envelope_reply(&mut self, reply: Reply, out: &mut Vec<u8>) -> Option<Outcome> {
        match self.awaiting.pop_front() {
            Some(Sent::Mail) if !reply.is_positive() => {
                return Some(self.refuse(policy::for_data(&reply), Cause::Sender(reply), out));
            }
            Some(Sent::Mail) => {}
            Some(Sent::Rcpt(i)) if !reply.is_positive() => {
                self.refused.push(Refusal { rcpt: self.env.rcpts[i].clone(), reply });
            }
            Some(Sent::Rcpt(_)) => {}
            None => {
                let e = ServerError::Malformed(reply.text());
                return Some(self.refuse(policy::unavailable(), Cause::Protocol(e), out));
            }
        }
        if !self.caps.pipelining && self.awaiting.is_empty() && self.next_rcpt < self.env.rcpts.len() {
            self.send_rcpt(out);
        }
        if !self.awaiting.is_empty() || self.next_rcpt < self.env.rcpts.len() {
            return None;
        }
        if self.refused.is_empty() {
            out.extend_from_slice(b"DATA\r\n");
            self.step = Step::Data;
            return None;
        }
        let reply = policy::refused_recipients(&self.refused, self.env.rcpts.len());
        Some(self.refuse(reply, Cause::Recipients, out))
    }

    /// The caller could not reach a server, or the server closed or went silent before the
    /// outcome: the client's DATA gets 451 4.4.0 (it keeps the message and retries).
    pub fn server_gone(&mut self, why: &str, out: &mut Vec<u8>) -> Outcome {
        self.refuse(policy::unavailable(), Cause::Unreachable(why.to_string()), out)
    }

    fn refuse(&mut self, reply: Reply, cause: Cause, out: &mut Vec<u8>) -> Outcome {
        self.step = Step::Done;
        out.extend_from_slice(b"QUIT\r\n");
        Outcome::Refused { reply, refused: std::mem::take(&mut self.refused), cause }
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
