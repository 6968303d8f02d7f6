//! The client-facing IMAP dialogue in the not-authenticated state.

use super::syntax::{Assembled, Assembler, Cursor, Limits};
use super::{decode_plain, Credentials};
use crate::line::{Line, LineBuf};
use crate::{CloseReason, Secret};

/// The listener's IMAP settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontConfig {
    /// The name in the greeting.
    pub hostname: String,
    /// Offer STARTTLS (the caller can do the handshake).
    pub starttls: bool,
    /// Longest command line, CRLF included (RFC 7162 §4 suggests 8192).
    pub max_line: usize,
    /// Largest literal (a user name or password) the switch takes.
    pub max_literal: usize,
    /// Protocol errors and failed logins before the switch closes the connection.
    pub max_errors: u32,
}

impl Default for FrontConfig {
    fn default() -> Self {
        FrontConfig {
            hostname: "localhost".to_string(),
            starttls: false,
            max_line: 8192,
            max_literal: 4096,
            max_errors: 10,
        }
    }
}

/// What the caller must act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// LOGIN or AUTHENTICATE PLAIN, not answered yet: route on `creds.user`, then run a
    /// [`super::Replay`] with `tag` and either [`Front::tunnel`] or [`Front::login_failed`];
    /// or refuse with [`Front::deny_login`].
    Login {
        /// The client's tag for the command.
        tag: String,
        /// Who logs in.
        creds: Credentials,
    },
    /// STARTTLS, answered OK: flush the output, run the TLS handshake, feed the decrypted
    /// bytes. Buffered plaintext was discarded.
    StartTls,
    /// LOGOUT, answered: flush the output and close.
    Quit,
    /// The switch gave up on the client: flush the output and close.
    Close {
        /// Why.
        reason: CloseReason,
    },
}

/// The client side of an IMAP session until the login.
#[derive(Debug)]
pub struct Front {
    cfg: FrontConfig,
    input: LineBuf,
    assembler: Assembler,
    /// Tag of an AUTHENTICATE waiting for its SASL response line.
    sasl_tag: Option<String>,
    /// Tag of the login the caller is deciding.
    login_tag: Option<String>,
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
            assembler: Assembler::default(),
            sasl_tag: None,
            login_tag: None,
            errors: 0,
            tls: false,
            closed: false,
        }
    }

    /// Writes the greeting, capabilities included (RFC 9051 §7.1).
    pub fn greeting(&self, out: &mut Vec<u8>) {
        let line = format!("* OK [CAPABILITY {}] {} ready\r\n", self.capabilities(), self.cfg.hostname);
        out.extend_from_slice(line.as_bytes());
    }

    /// Buffers bytes from the client; [`Front::poll`] processes them.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.input.push(bytes);
    }

    /// Processes buffered commands, writing the switch's responses to `out`, until one
    /// needs the caller. `None`: more input is needed, a login is pending, or the session
    /// ended.
    pub fn poll(&mut self, out: &mut Vec<u8>) -> Option<Event> {
        if !self.closed && self.errors >= self.cfg.max_errors {
            return Some(self.bye(out, "Too many errors", CloseReason::TooManyErrors));
        }
        while self.login_tag.is_none() && !self.closed {
            if let Some(tag) = self.sasl_tag.take() {
                let event = match self.input.next_line(self.cfg.max_line) {
                    None => {
                        self.sasl_tag = Some(tag);
                        return None;
                    }
                    Some(Line::TooLong) => self.error(out, &tag, "SASL response too long"),
                    Some(Line::Text(line)) => self.sasl_response(tag, &line, out),
                };
                if event.is_some() {
                    return event;
                }
                continue;
            }
            let limits = Limits { line: self.cfg.max_line, literal: self.cfg.max_literal };
            let event = match self.assembler.next(&mut self.input, limits)? {
                Assembled::Continue => {
                    out.extend_from_slice(b"+ Ready for literal data\r\n");
                    None
                }
                Assembled::TooLong => Some(self.bye(out, "Line too long", CloseReason::LineTooLong)),
                Assembled::LiteralTooBig(head) => {
                    let tag = Cursor::new(&head).tag().unwrap_or("*").to_string();
                    self.error(out, &tag, "Literal too big")
                }
                Assembled::Command(cmd) => self.command(&cmd, out),
            };
            if event.is_some() {
                return event;
            }
        }
        None
    }

    /// The server refused the login: writes its tagged answer (`Outcome::Refused`'s bytes)
    /// and waits for another command. Counts towards `max_errors`.
    pub fn login_failed(&mut self, to_client: &[u8], out: &mut Vec<u8>) {
        debug_assert!(self.login_tag.is_some(), "login_failed without a pending login");
        self.login_tag = None;
        self.errors += 1;
        out.extend_from_slice(to_client);
    }

    /// The switch refuses the login itself (a rule's `deny`):
    /// `tag NO [AUTHENTICATIONFAILED] text`.
    pub fn deny_login(&mut self, text: &str, out: &mut Vec<u8>) {
        let tag = self.login_tag.clone().unwrap_or_else(|| "*".to_string());
        let text: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
        let line = format!("{tag} NO [AUTHENTICATIONFAILED] {text}\r\n");
        self.login_failed(line.as_bytes(), out);
    }

    /// The switch point: the server took the login. Returns the client bytes that followed
    /// the login command, to be sent to the server before tunnelling the rest.
    pub fn tunnel(mut self) -> Vec<u8> {
        debug_assert!(self.login_tag.is_some(), "tunnel before the login");
        self.input.take_rest()
    }

    /// TLS was started with STARTTLS.
    pub fn tls_active(&self) -> bool {
        self.tls
    }

    /// Client bytes buffered and not processed yet.
    pub fn buffered(&self) -> usize {
        self.input.buffered()
    }

    fn capabilities(&self) -> String {
        let tls = if self.cfg.starttls && !self.tls { " STARTTLS" } else { "" };
        format!("IMAP4rev1 SASL-IR AUTH=PLAIN{tls}")
    }

    fn command(&mut self, cmd: &[u8], out: &mut Vec<u8>) -> Option<Event> {
        let mut c = Cursor::new(cmd);
        let Some(tag) = c.tag() else {
            return self.error(out, "*", "Missing tag");
        };
        let Some(verb) = c.sp().and_then(|_| c.atom()) else {
            return self.error(out, tag, "Missing command");
        };
        let verb = verb.to_ascii_uppercase();
        let bare = c.at_end();
        match verb.as_str() {
            "CAPABILITY" if bare => {
                let caps = self.capabilities();
                tagged_ok(out, tag, &format!("* CAPABILITY {caps}\r\n"), "CAPABILITY completed")
            }
            "NOOP" if bare => tagged_ok(out, tag, "", "NOOP completed"),
            "LOGOUT" if bare => {
                let bye = format!("* BYE {} logging out\r\n", self.cfg.hostname);
                self.closed = true;
                tagged_ok(out, tag, &bye, "LOGOUT completed");
                Some(Event::Quit)
            }
            "STARTTLS" if bare => self.starttls(tag, out),
            "LOGIN" => match login_args(&mut c) {
                Some((user, password)) => {
                    let creds = Credentials { authzid: String::new(), user, password };
                    Some(self.login(tag, creds))
                }
                None => self.error(out, tag, "Syntax: LOGIN user password"),
            },
            "AUTHENTICATE" => self.authenticate(tag, &mut c, out),
            "CAPABILITY" | "NOOP" | "LOGOUT" | "STARTTLS" => self.error(out, tag, "Unexpected arguments"),
            _ => self.error(out, tag, "Command unknown or not valid before login"),
        }
    }

    fn starttls(&mut self, tag: &str, out: &mut Vec<u8>) -> Option<Event> {
        if !self.cfg.starttls || self.tls {
            return self.error(out, tag, "STARTTLS not available");
        }
        tagged_ok(out, tag, "", "Begin TLS negotiation now");
        // RFC 9051 §6.2.1 and CVE-2011-0411: nothing pipelined in plaintext survives.
        self.input.clear();
        self.assembler = Assembler::default();
        self.tls = true;
        Some(Event::StartTls)
    }

    fn authenticate(&mut self, tag: &str, c: &mut Cursor<'_>, out: &mut Vec<u8>) -> Option<Event> {
        let Some(mechanism) = c.sp().and_then(|_| c.atom()) else {
            return self.error(out, tag, "Syntax: AUTHENTICATE mechanism");
        };
        if !mechanism.eq_ignore_ascii_case("PLAIN") {
            return self.error(out, tag, "Unsupported authentication mechanism");
        }
        if c.at_end() {
            out.extend_from_slice(b"+ \r\n");
            self.sasl_tag = Some(tag.to_string());
            return None;
        }
        // SASL-IR (RFC 4959): the response follows the mechanism; "=" is an empty one.
        match c.sp().and_then(|_| c.atom()).filter(|_| c.at_end()).and_then(decode_plain) {
            Some(creds) => Some(self.login(tag, creds)),
            None => self.error(out, tag, "Invalid SASL PLAIN response"),
        }
    }

    fn sasl_response(&mut self, tag: String, line: &[u8], out: &mut Vec<u8>) -> Option<Event> {
        if line == b"*" {
            return self.error(out, &tag, "AUTHENTICATE cancelled");
        }
        match std::str::from_utf8(line).ok().and_then(decode_plain) {
            Some(creds) => Some(self.login(&tag, creds)),
            None => self.error(out, &tag, "Invalid SASL PLAIN response"),
        }
    }

    fn login(&mut self, tag: &str, creds: Credentials) -> Event {
        self.login_tag = Some(tag.to_string());
        Event::Login { tag: tag.to_string(), creds }
    }

    /// A tagged BAD (untagged when the tag is unknown), or BYE once there were too many.
    fn error(&mut self, out: &mut Vec<u8>, tag: &str, text: &str) -> Option<Event> {
        self.errors += 1;
        if self.errors >= self.cfg.max_errors {
            return Some(self.bye(out, "Too many errors", CloseReason::TooManyErrors));
        }
        out.extend_from_slice(format!("{tag} BAD {text}\r\n").as_bytes());
        None
    }

    fn bye(&mut self, out: &mut Vec<u8>, text: &str, reason: CloseReason) -> Event {
        out.extend_from_slice(format!("* BYE {text}\r\n").as_bytes());
        self.closed = true;
        Event::Close { reason }
    }
}

/// `SP user SP password` to the end of the command.
fn login_args(c: &mut Cursor<'_>) -> Option<(String, Secret)> {
    let user = c.sp().and_then(|_| c.astring())?;
    let password = c.sp().and_then(|_| c.astring())?;
    let user = String::from_utf8(user).ok().filter(|u| !u.is_empty())?;
    c.at_end().then(|| (user, Secret::new(password)))
}

fn tagged_ok(out: &mut Vec<u8>, tag: &str, untagged: &str, text: &str) -> Option<Event> {
    out.extend_from_slice(format!("{untagged}{tag} OK {text}\r\n").as_bytes());
    None
}
