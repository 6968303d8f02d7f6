//! One vocabulary for the two login protocols, POP3 and IMAP: a [`Front`] that is either
//! protocol's client side and reports the same [`Event`]s, a [`Replay`] that is either
//! protocol's server side, and the [`Outcome`] and [`Cause`] both replays end with. A caller
//! (the switch's POP3/IMAP listener) picks the protocol once, when it builds the front, and
//! never matches on it again.

use crate::{imap, pop3, CloseReason, ServerError};

/// How a login replay ended (both protocols).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server took the login: write `to_client` (its answer, and anything it sent
    /// after it), then [`Front::tunnel`]'s bytes to the server, and tunnel both ways.
    LoggedIn {
        /// What the server said.
        to_client: Vec<u8>,
    },
    /// No login: pass `to_client` to [`Front::login_failed`]. The replay wrote QUIT /
    /// LOGOUT for the server, which can be closed once it is flushed.
    Refused {
        /// The server's refusal (`-ERR`, tagged `NO` / `BAD`) or the switch's own
        /// "try again later" (`-ERR [SYS/TEMP]`, `tag NO [UNAVAILABLE]`).
        to_client: Vec<u8>,
        /// What went wrong, for the log.
        cause: Cause,
    },
}

/// Why a replay did not log in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cause {
    /// The greeting was not `+OK` / `* OK` (PREAUTH, BYE, …; the line, shortened).
    Greeting(String),
    /// The server broke the protocol.
    Protocol(ServerError),
    /// IMAP: the server said BYE during the login (the line, shortened).
    Bye(String),
    /// The server refused the login (its line, shortened).
    Rejected(String),
    /// No server could be reached, or it closed or went silent before answering.
    Unreachable(String),
}

/// Which login protocol a front speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// POP3 (USER / PASS).
    Pop3,
    /// IMAP (LOGIN, AUTHENTICATE PLAIN).
    Imap,
}

/// What the caller must act on.
#[derive(Debug)]
pub enum Event {
    /// A login, not answered yet: route on `user`, connect, run `replay` against the
    /// server, then [`Front::tunnel`] or [`Front::login_failed`]; or refuse with
    /// [`Front::deny_login`].
    Login {
        /// The user name (rule fields `pop.user` / `imap.user`).
        user: String,
        /// The replay of this login for the chosen server.
        replay: Replay,
    },
    /// STLS / STARTTLS, answered: flush the output, run the TLS handshake, feed the
    /// decrypted bytes.
    StartTls,
    /// QUIT / LOGOUT, answered: flush the output and close.
    Quit,
    /// The switch gave up on the client: flush the output and close.
    Close {
        /// Why.
        reason: CloseReason,
    },
}

/// The client side of a POP3 or IMAP session until the login.
#[derive(Debug)]
pub enum Front {
    /// POP3.
    Pop3(pop3::Front),
    /// IMAP (boxed: its state is larger).
    Imap(Box<imap::Front>),
}

/// The server side of a login, for either protocol.
#[derive(Debug)]
pub enum Replay {
    /// POP3.
    Pop3(pop3::Replay),
    /// IMAP.
    Imap(Box<imap::Replay>),
}

impl Front {
    /// A front for `protocol`, greeting as `hostname`, offering STLS / STARTTLS when
    /// `tls`; other settings at their defaults.
    pub fn new(protocol: Protocol, hostname: String, tls: bool) -> Front {
        match protocol {
            Protocol::Pop3 => {
                Front::Pop3(pop3::Front::new(pop3::FrontConfig { hostname, stls: tls, ..Default::default() }))
            }
            Protocol::Imap => Front::Imap(Box::new(imap::Front::new(imap::FrontConfig {
                hostname,
                starttls: tls,
                ..Default::default()
            }))),
        }
    }

    /// Writes the greeting.
    pub fn greeting(&self, out: &mut Vec<u8>) {
        match self {
            Front::Pop3(f) => f.greeting(out),
            Front::Imap(f) => f.greeting(out),
        }
    }

    /// Buffers client bytes.
    pub fn feed(&mut self, bytes: &[u8]) {
        match self {
            Front::Pop3(f) => f.feed(bytes),
            Front::Imap(f) => f.feed(bytes),
        }
    }

    /// Processes buffered bytes, writing the switch's answers to `out`; the next event, or
    /// `None` when more client bytes are needed.
    pub fn poll(&mut self, out: &mut Vec<u8>) -> Option<Event> {
        Some(match self {
            Front::Pop3(f) => match f.poll(out)? {
                pop3::Event::Login { user, pass } => {
                    let replay = Replay::Pop3(pop3::Replay::new(pop3::ReplayConfig::default(), &user, &pass));
                    Event::Login { user, replay }
                }
                pop3::Event::StartTls => Event::StartTls,
                pop3::Event::Quit => Event::Quit,
                pop3::Event::Close { reason } => Event::Close { reason },
            },
            Front::Imap(f) => match f.poll(out)? {
                imap::Event::Login { tag, creds } => {
                    let replay = imap::Replay::new(imap::ReplayConfig::default(), &tag, &creds);
                    Event::Login { user: creds.user, replay: Replay::Imap(Box::new(replay)) }
                }
                imap::Event::StartTls => Event::StartTls,
                imap::Event::Quit => Event::Quit,
                imap::Event::Close { reason } => Event::Close { reason },
            },
        })
    }

    /// The login was refused by the server: pass its words on (`to_client` from
    /// [`Outcome::Refused`]); the client may try again.
    pub fn login_failed(&mut self, to_client: &[u8], out: &mut Vec<u8>) {
        match self {
            Front::Pop3(f) => f.login_failed(to_client, out),
            Front::Imap(f) => f.login_failed(to_client, out),
        }
    }

    /// The switch refuses the login itself (a rule), with `text`.
    pub fn deny_login(&mut self, text: &str, out: &mut Vec<u8>) {
        match self {
            Front::Pop3(f) => f.deny_login(text, out),
            Front::Imap(f) => f.deny_login(text, out),
        }
    }

    /// The client bytes that followed the login, for the server.
    pub fn tunnel(self) -> Vec<u8> {
        match self {
            Front::Pop3(f) => f.tunnel(),
            Front::Imap(f) => f.tunnel(),
        }
    }
}

impl Replay {
    /// Takes server bytes, writes commands for the server to `out`; the outcome once known.
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Option<Outcome> {
        match self {
            Replay::Pop3(r) => r.feed(bytes, out),
            Replay::Imap(r) => r.feed(bytes, out),
        }
    }

    /// No server, or it closed or went silent (`why`): the protocol's "try again later".
    pub fn server_gone(&mut self, why: &str, out: &mut Vec<u8>) -> Outcome {
        match self {
            Replay::Pop3(r) => r.server_gone(why, out),
            Replay::Imap(r) => r.server_gone(why, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both protocols through the one vocabulary: greet, log in, replay, tunnel.
    #[test]
    fn a_login_reads_the_same_in_both_protocols() {
        // (protocol, client's login, server's greeting, server's acceptance)
        type Case = (Protocol, &'static [u8], &'static [u8], &'static [u8]);
        let cases: [Case; 2] = [
            (Protocol::Pop3, b"USER tim\r\nPASS pw\r\n", b"+OK hi\r\n", b"+OK in\r\n"),
            (Protocol::Imap, b"a1 LOGIN tim pw\r\n", b"* OK hi\r\n", b"a1 OK in\r\n"),
        ];
        for (protocol, client, greeting, accepted) in cases {
            let mut front = Front::new(protocol, "mx".into(), false);
            let mut out = Vec::new();
            front.greeting(&mut out);
            front.feed(client);
            let Some(Event::Login { user, mut replay }) = front.poll(&mut out) else {
                panic!("{protocol:?}")
            };
            assert_eq!(user, "tim");
            let mut to_server = Vec::new();
            let mut outcome = replay.feed(greeting, &mut to_server);
            for _ in 0..3 {
                if outcome.is_some() {
                    break;
                }
                outcome = replay.feed(accepted, &mut to_server);
            }
            assert!(matches!(outcome, Some(Outcome::LoggedIn { .. })), "{protocol:?}: {outcome:?}");
            assert!(front.tunnel().is_empty());
        }
    }

    #[test]
    fn a_server_gone_is_the_protocols_try_again_later() {
        for (protocol, client, said) in [
            (Protocol::Pop3, &b"USER a\r\nPASS b\r\n"[..], "-ERR [SYS/TEMP]"),
            (Protocol::Imap, b"t LOGIN a b\r\n", "t NO [UNAVAILABLE]"),
        ] {
            let mut front = Front::new(protocol, "mx".into(), false);
            front.feed(client);
            let Some(Event::Login { mut replay, .. }) = front.poll(&mut Vec::new()) else { panic!() };
            let Outcome::Refused { to_client, cause } = replay.server_gone("down", &mut Vec::new()) else {
                panic!()
            };
            assert!(String::from_utf8_lossy(&to_client).starts_with(said), "{protocol:?}");
            assert!(matches!(cause, Cause::Unreachable(_)));
        }
    }
}
