//! One handler per command the switch answers itself (RFC 5321 §4.1.1, RFC 3207).

use super::{say, say_none, Front, Pending};
use crate::smtp::command::{self, Command};
use crate::smtp::envelope::MailParams;
use crate::smtp::event::Event;
use crate::smtp::path::{parse_forward_path, parse_reverse_path, split_path, PathError};
use crate::smtp::reply::Reply;

impl Front {
    pub(super) fn command(&mut self, line: &str, out: &mut Vec<u8>) -> Option<Event> {
        match command::parse(line) {
            Command::Ehlo(name) => self.hello(name, true, out),
            Command::Helo(name) => self.hello(name, false, out),
            Command::Mail(arg) => self.mail_from(arg, out),
            Command::Rcpt(arg) => self.rcpt_to(arg, out),
            Command::Data(arg) => self.data(arg, out),
            Command::Bdat(arg) => self.bdat(arg, out),
            Command::Rset("") => {
                self.end_transaction();
                say(out, 250, "2.0.0 Ok");
                Some(Event::Reset)
            }
            Command::Rset(_) => self.error(out, 501, "5.5.4 Syntax: RSET"),
            Command::Noop => say_none(out, 250, "2.0.0 Ok"),
            Command::Quit => {
                say(out, 221, "2.0.0 Bye");
                self.closed = true;
                Some(Event::Quit)
            }
            Command::Help => say_none(out, 214, "2.0.0 See RFC 5321"),
            Command::Vrfy("") => self.error(out, 501, "5.5.4 Syntax: VRFY address"),
            Command::Vrfy(_) => {
                say_none(out, 252, "2.5.0 Cannot VRFY user, but will accept message and attempt delivery")
            }
            Command::StartTls(arg) => self.starttls(arg, out),
            Command::NotImplemented => self.error(out, 502, "5.5.1 Command not implemented"),
            Command::Unknown => self.error(out, 500, "5.5.2 Command unrecognized"),
        }
    }

    fn hello(&mut self, arg: &str, extended: bool, out: &mut Vec<u8>) -> Option<Event> {
        let Some(name) = arg.split(' ').next().filter(|n| !n.is_empty()) else {
            let verb = if extended { "EHLO" } else { "HELO" };
            return self.error(out, 501, &format!("5.5.4 Syntax: {verb} hostname"));
        };
        self.end_transaction();
        self.helo = Some((name.to_string(), extended));
        if extended {
            self.capabilities().write_to(out);
        } else {
            say(out, 250, &self.cfg.hostname);
        }
        Some(Event::Helo { name: name.to_string(), extended })
    }

    /// The EHLO reply: only what the switch honours before the switch point.
    fn capabilities(&self) -> Reply {
        let mut lines = vec![self.cfg.hostname.clone(), "PIPELINING".to_string()];
        lines.push(match self.cfg.max_size {
            0 => "SIZE".to_string(),
            n => format!("SIZE {n}"),
        });
        lines.extend(["8BITMIME", "ENHANCEDSTATUSCODES"].map(String::from));
        if self.cfg.starttls && !self.tls {
            lines.push("STARTTLS".to_string());
        }
        Reply { code: 250, lines }
    }

    fn mail_from(&mut self, arg: Option<&str>, out: &mut Vec<u8>) -> Option<Event> {
        let Some((_, esmtp)) = self.helo else {
            return self.error(out, 503, "5.5.1 Error: send HELO/EHLO first");
        };
        if self.mail.is_some() {
            return self.error(out, 503, "5.5.1 Error: nested MAIL command");
        }
        let Some(arg) = arg else {
            return self.error(out, 501, "5.5.4 Syntax: MAIL FROM:<address>");
        };
        let parsed = split_path(arg).and_then(|(path, rest)| Ok((parse_reverse_path(path)?, rest)));
        let (from, rest) = match parsed {
            Ok(ok) => ok,
            Err(e) => return self.bad_path(e, "5.1.7 Bad sender address syntax", out),
        };
        match MailParams::parse(rest, esmtp, self.cfg.max_size) {
            Ok(params) => {
                self.pending = Pending::Mail(from.clone(), params);
                Some(Event::Mail { from, params })
            }
            Err(reply) if reply.code == 552 => {
                reply.write_to(out);
                None
            }
            Err(reply) => self.error(out, reply.code, &reply.text()),
        }
    }

    fn rcpt_to(&mut self, arg: Option<&str>, out: &mut Vec<u8>) -> Option<Event> {
        if self.mail.is_none() {
            return self.error(out, 503, "5.5.1 Error: need MAIL command");
        }
        let Some(arg) = arg else {
            return self.error(out, 501, "5.5.4 Syntax: RCPT TO:<address>");
        };
        let parsed = split_path(arg).and_then(|(path, rest)| Ok((parse_forward_path(path)?, rest)));
        let (to, rest) = match parsed {
            Ok(ok) => ok,
            Err(e) => return self.bad_path(e, "5.1.3 Bad recipient address syntax", out),
        };
        if !rest.is_empty() {
            return self.error(out, 555, "5.5.4 Unsupported RCPT option");
        }
        self.rcpt_tried = true;
        if self.rcpts.len() >= self.cfg.max_recipients {
            return say_none(out, 452, "4.5.3 Error: too many recipients");
        }
        self.pending = Pending::Rcpt(to.clone());
        Some(Event::Rcpt { to })
    }

    fn bad_path(&mut self, e: PathError, syntax: &str, out: &mut Vec<u8>) -> Option<Event> {
        match e {
            PathError::NonAscii => self.error(out, 553, "5.6.7 Non-ASCII address needs SMTPUTF8"),
            PathError::TooLong => self.error(out, 501, "5.5.4 Address too long"),
            PathError::Syntax => self.error(out, 501, syntax),
        }
    }

    fn data(&mut self, arg: &str, out: &mut Vec<u8>) -> Option<Event> {
        if !arg.is_empty() {
            return self.error(out, 501, "5.5.4 Syntax: DATA");
        }
        if self.mail.is_none() {
            return self.error(out, 503, "5.5.1 Error: need MAIL command");
        }
        if self.rcpts.is_empty() {
            return if self.rcpt_tried {
                self.error(out, 554, "5.5.1 Error: no valid recipients")
            } else {
                self.error(out, 503, "5.5.1 Error: need RCPT command")
            };
        }
        self.pending = Pending::Data;
        Some(Event::Data)
    }

    /// CHUNKING is not offered (the switch would have to reframe chunks for servers that
    /// lack it), so BDAT is refused; its chunk is skipped so the session stays in step.
    fn bdat(&mut self, arg: &str, out: &mut Vec<u8>) -> Option<Event> {
        let mut words = arg.split(' ');
        let size = words.next().and_then(|n| n.parse::<u64>().ok());
        let last_ok = words.next().is_none_or(|w| w.eq_ignore_ascii_case("LAST"));
        match size {
            Some(size) if last_ok && words.next().is_none() => {
                self.input.skip(size);
                self.error(out, 502, "5.5.1 BDAT not implemented: CHUNKING is not offered")
            }
            _ => self.error(out, 501, "5.5.4 Syntax: BDAT size [LAST]"),
        }
    }

    fn starttls(&mut self, arg: &str, out: &mut Vec<u8>) -> Option<Event> {
        if !self.cfg.starttls {
            return self.error(out, 502, "5.5.1 Command not implemented");
        }
        if self.tls {
            return self.error(out, 503, "5.5.1 Error: TLS already active");
        }
        if !arg.is_empty() {
            return self.error(out, 501, "5.5.4 Syntax: STARTTLS");
        }
        if self.mail.is_some() {
            return self.error(out, 503, "5.5.1 Error: MAIL transaction in progress");
        }
        say(out, 220, "2.0.0 Ready to start TLS");
        // RFC 3207 §4.2: forget everything learnt in plaintext, and (CVE-2011-0411) any
        // command pipelined behind STARTTLS.
        self.input.clear();
        self.helo = None;
        self.tls = true;
        Some(Event::StartTls)
    }
}
