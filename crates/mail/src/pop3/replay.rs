//! The server-facing POP3 dialogue: greeting, USER, PASS.

use crate::error::excerpt;
use crate::line::{Line, LineBuf};
use crate::login::{Cause, Outcome};
use crate::{Secret, ServerError};

/// The listener's settings for talking to POP3 servers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayConfig {
    /// Longest server line, CRLF included (RFC 1939 says 512; a little slack).
    pub max_line: usize,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig { max_line: 1024 }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Greeting,
    User,
    Pass,
    Done,
}

/// The server side of a POP3 session until the login.
#[derive(Debug)]
pub struct Replay {
    cfg: ReplayConfig,
    input: LineBuf,
    step: Step,
    user: String,
    pass: Secret,
}

const UNAVAILABLE: &[u8] = b"-ERR [SYS/TEMP] mail server unavailable, try again later\r\n";

impl Replay {
    /// A replay of USER `user` / PASS `pass` that waits for the greeting.
    pub fn new(cfg: ReplayConfig, user: &str, pass: &Secret) -> Replay {
        // A POP3 line cannot carry CR or LF (the front never yields them); a caller's value
        // must not inject a second command either.
        let user = user.replace(['\r', '\n'], "");
        let pass =
            Secret::new(pass.expose().iter().copied().filter(|b| !b"\r\n".contains(b)).collect::<Vec<u8>>());
        Replay { cfg, input: LineBuf::default(), step: Step::Greeting, user, pass }
    }

    /// Takes bytes from the server and writes the commands to send it to `out`; returns
    /// the outcome once there is one (and `None` ever after).
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Option<Outcome> {
        if self.step == Step::Done {
            return None;
        }
        self.input.push(bytes);
        loop {
            let line = match self.input.next_line(self.cfg.max_line)? {
                Line::TooLong => {
                    let cause = Cause::Protocol(ServerError::LineTooLong(self.cfg.max_line));
                    return Some(self.refuse(UNAVAILABLE.to_vec(), cause, out));
                }
                Line::Text(line) => line,
            };
            if let Some(outcome) = self.on_line(&line, out) {
                return Some(outcome);
            }
        }
    }

    fn on_line(&mut self, line: &[u8], out: &mut Vec<u8>) -> Option<Outcome> {
        let status = status(line);
        match (self.step, status) {
            (Step::Greeting, Some(true)) => {
                out.extend_from_slice(format!("USER {}\r\n", self.user).as_bytes());
                self.step = Step::User;
                None
            }
            (Step::Greeting, _) => {
                Some(self.refuse(UNAVAILABLE.to_vec(), Cause::Greeting(excerpt(line)), out))
            }
            (Step::User, Some(true)) => {
                out.extend_from_slice(b"PASS ");
                out.extend_from_slice(self.pass.expose());
                out.extend_from_slice(b"\r\n");
                self.step = Step::Pass;
                None
            }
            (Step::Pass, Some(true)) => {
                self.step = Step::Done;
                let mut to_client = client_line(line);
                to_client.extend(self.input.take_rest());
                Some(Outcome::LoggedIn { to_client })
            }
            (Step::User | Step::Pass, Some(false)) => {
                Some(self.refuse(client_line(line), Cause::Rejected(excerpt(line)), out))
            }
            (_, None) => {
                let cause = Cause::Protocol(ServerError::Malformed(excerpt(line)));
                Some(self.refuse(UNAVAILABLE.to_vec(), cause, out))
            }
            (Step::Done, _) => None,
        }
    }

    /// The caller could not reach a server, or the server closed or went silent before
    /// the outcome: the client gets `-ERR [SYS/TEMP]` (a temporary failure, RFC 3206).
    pub fn server_gone(&mut self, why: &str, out: &mut Vec<u8>) -> Outcome {
        self.refuse(UNAVAILABLE.to_vec(), Cause::Unreachable(why.to_string()), out)
    }

    fn refuse(&mut self, to_client: Vec<u8>, cause: Cause, out: &mut Vec<u8>) -> Outcome {
        self.step = Step::Done;
        out.extend_from_slice(b"QUIT\r\n");
        Outcome::Refused { to_client, cause }
    }
}

/// `Some(true)` for `+OK`, `Some(false)` for `-ERR`, `None` for anything else.
fn status(line: &[u8]) -> Option<bool> {
    let word = line.split(|&b| b == b' ').next().unwrap_or_default();
    match word {
        b"+OK" => Some(true),
        b"-ERR" => Some(false),
        _ => None,
    }
}

/// A server line as it may go to the client: one line, CRLF-terminated.
fn client_line(line: &[u8]) -> Vec<u8> {
    let mut v: Vec<u8> = line.iter().map(|&b| if b == b'\r' || b == 0 { b' ' } else { b }).collect();
    v.extend_from_slice(b"\r\n");
    v
}
