//! The client-facing POP3 dialogue in the AUTHORIZATION state.

use super::split_command;
use crate::line::{Line, LineBuf};
use crate::{CloseReason, Secret};

/// The listener's POP3 settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontConfig {
    /// The name in the greeting.
    pub hostname: String,
    /// Offer STLS (the caller can do the handshake).
    pub stls: bool,
    /// Longest command line, CRLF included (RFC 2449 §4 says 255; passwords run longer).
    pub max_line: usize,
    /// Protocol errors and failed logins before the switch closes the connection.
    pub max_errors: u32,
}

impl Default for FrontConfig {
    fn default() -> Self {
        FrontConfig { hostname: "localhost".to_string(), stls: false, max_line: 512, max_errors: 10 }
    }
}

/// What the caller must act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// USER and PASS, not answered yet: route on `user`, then run a [`super::Replay`] and
    /// either [`Front::tunnel`] or [`Front::login_failed`]; or refuse with
    /// [`Front::deny_login`].
    Login {
        /// The name given with USER.
        user: String,
        /// The password given with PASS.
        pass: Secret,
    },
    /// STLS, answered `+OK`: flush the output, run the TLS handshake, feed the decrypted
    /// bytes. Buffered plaintext was discarded, and the USER with it.
    StartTls,
    /// QUIT, answered: flush the output and close.
    Quit,
    /// The switch gave up on the client: flush the output and close.
    Close {
        /// Why.
        reason: CloseReason,
    },
}

/// The client side of a POP3 session until the login.
#[derive(Debug)]
pub struct Front {
    cfg: FrontConfig,
    input: LineBuf,
    user: Option<String>,
    login_pending: bool,
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
            user: None,
            login_pending: false,
            errors: 0,
            tls: false,
            closed: false,
        }
    }

    /// Writes the greeting.
    pub fn greeting(&self, out: &mut Vec<u8>) {
        ok(out, &format!("{} POP3 ready", self.cfg.hostname));
    }

    /// Buffers bytes from the client; [`Front::poll`] processes them.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.input.push(bytes);
    }

    /// Processes buffered commands, writing the switch's replies to `out`, until one needs
    /// the caller. `None`: more input is needed, a login is pending, or the session ended.
    pub fn poll(&mut self, out: &mut Vec<u8>) -> Option<Event> {
        if !self.closed && self.errors >= self.cfg.max_errors {
            self.closed = true;
            return Some(Event::Close { reason: CloseReason::TooManyErrors });
        }
        while !self.login_pending && !self.closed {
            let event = match self.input.next_line(self.cfg.max_line)? {
                Line::TooLong => self.error(out, "line too long"),
                Line::Text(line) if line.contains(&b'\r') || line.contains(&0) => {
                    self.error(out, "invalid characters in command")
                }
                Line::Text(line) => self.command(&line, out),
            };
            if event.is_some() {
                return event;
            }
        }
        None
    }

    /// The server refused the login: writes its answer (`Outcome::Refused`'s bytes) and
    /// waits for a new USER. Counts towards `max_errors`.
    pub fn login_failed(&mut self, to_client: &[u8], out: &mut Vec<u8>) {
        debug_assert!(self.login_pending, "login_failed without a pending login");
        self.login_pending = false;
        self.user = None;
        self.errors += 1;
        out.extend_from_slice(to_client);
    }

    /// The switch refuses the login itself (a rule's `deny`): `-ERR [AUTH] text`.
    pub fn deny_login(&mut self, text: &str, out: &mut Vec<u8>) {
        let line = format!("-ERR [AUTH] {}\r\n", printable(text));
        self.login_failed(line.as_bytes(), out);
    }

    /// The switch point: the server took the login. Returns the client bytes that followed
    /// PASS, to be sent to the server before tunnelling the rest.
    pub fn tunnel(mut self) -> Vec<u8> {
        debug_assert!(self.login_pending, "tunnel before the login");
        self.input.take_rest()
    }

    /// The name given with USER, if any.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// TLS was started with STLS.
    pub fn tls_active(&self) -> bool {
        self.tls
    }

    /// Client bytes buffered and not processed yet.
    pub fn buffered(&self) -> usize {
        self.input.buffered()
    }

    fn command(&mut self, line: &[u8], out: &mut Vec<u8>) -> Option<Event> {
        let (verb, arg) = split_command(line);
        match verb.as_str() {
            "USER" => match std::str::from_utf8(arg).map(str::trim) {
                Ok(user) if !user.is_empty() => {
                    self.user = Some(user.to_string());
                    ok_none(out, "send PASS")
                }
                _ => self.error(out, "USER needs a name"),
            },
            "PASS" => match self.user.clone() {
                Some(user) => {
                    self.login_pending = true;
                    Some(Event::Login { user, pass: Secret::new(arg) })
                }
                None => self.error(out, "send USER first"),
            },
            "CAPA" => {
                let stls = if self.cfg.stls && !self.tls { "STLS\r\n" } else { "" };
                out.extend_from_slice(
                    format!("+OK capability list follows\r\nUSER\r\n{stls}.\r\n").as_bytes(),
                );
                None
            }
            "STLS" => self.stls(out),
            "QUIT" => {
                ok(out, &format!("{} signing off", self.cfg.hostname));
                self.closed = true;
                Some(Event::Quit)
            }
            "APOP" | "AUTH" => self.error(out, "not supported; use USER and PASS"),
            "STAT" | "LIST" | "RETR" | "DELE" | "NOOP" | "RSET" | "TOP" | "UIDL" => {
                self.error(out, "log in first")
            }
            _ => self.error(out, "unknown command"),
        }
    }

    fn stls(&mut self, out: &mut Vec<u8>) -> Option<Event> {
        if !self.cfg.stls || self.tls {
            return self.error(out, "STLS not available");
        }
        ok(out, "begin TLS negotiation");
        // RFC 2595 §4 and CVE-2011-0411: nothing said in plaintext survives the handshake.
        self.input.clear();
        self.user = None;
        self.tls = true;
        Some(Event::StartTls)
    }

    fn error(&mut self, out: &mut Vec<u8>, text: &str) -> Option<Event> {
        self.errors += 1;
        if self.errors >= self.cfg.max_errors {
            out.extend_from_slice(b"-ERR too many errors\r\n");
            self.closed = true;
            return Some(Event::Close { reason: CloseReason::TooManyErrors });
        }
        out.extend_from_slice(format!("-ERR {text}\r\n").as_bytes());
        None
    }
}

fn ok(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(format!("+OK {text}\r\n").as_bytes());
}

fn ok_none(out: &mut Vec<u8>, text: &str) -> Option<Event> {
    ok(out, text);
    None
}

fn printable(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}
