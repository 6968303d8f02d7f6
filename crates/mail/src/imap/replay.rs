//! The server-facing IMAP dialogue: greeting, then the login with the client's tag.

use super::syntax::{literal_suffix, quoted};
use super::{encode_plain, Credentials};
use crate::error::excerpt;
use crate::line::{Line, LineBuf};
use crate::login::{Cause, Outcome};
use crate::ServerError;

/// The listener's settings for talking to IMAP servers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplayConfig {
    /// Longest server line, CRLF included.
    pub max_line: usize,
    /// Most bytes of one server response (its lines and literals), and of the untagged
    /// responses kept for the client during the login.
    pub max_response: usize,
}

impl Default for ReplayConfig {
    fn default() -> Self {
        ReplayConfig { max_line: 8192, max_response: 65536 }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Greeting,
    Login,
    Done,
}

/// The server side of an IMAP session until the login.
#[derive(Debug)]
pub struct Replay {
    cfg: ReplayConfig,
    input: LineBuf,
    /// The response being read, while its literals arrive.
    response: Vec<u8>,
    literal: Option<usize>,
    step: Step,
    tag: String,
    creds: Credentials,
    /// The login command, cut where it must wait for a `+` continuation.
    segments: Vec<Vec<u8>>,
    untagged: Vec<u8>,
}

impl Replay {
    /// A replay of the client's login (its `tag` and `creds`) that waits for the greeting.
    pub fn new(cfg: ReplayConfig, tag: &str, creds: &Credentials) -> Replay {
        Replay {
            cfg,
            input: LineBuf::default(),
            response: Vec::new(),
            literal: None,
            step: Step::Greeting,
            tag: tag.to_string(),
            creds: creds.clone(),
            segments: Vec::new(),
            untagged: Vec::new(),
        }
    }

    /// Takes bytes from the server and writes the commands to send it to `out`; returns
    /// the outcome once there is one (and `None` ever after).
    pub fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Option<Outcome> {
        if self.step == Step::Done {
            return None;
        }
        self.input.push(bytes);
        loop {
            let response = match self.next_response() {
                Ok(Some(r)) => r,
                Ok(None) => return None,
                Err(e) => return Some(self.unavailable(Cause::Protocol(e), out)),
            };
            if let Some(outcome) = self.on_response(response, out) {
                return Some(outcome);
            }
        }
    }

    /// One whole response, CRLF included, its literals inline.
    fn next_response(&mut self) -> Result<Option<Vec<u8>>, ServerError> {
        loop {
            if let Some(n) = self.literal {
                let Some(bytes) = self.input.take_exact(n) else { return Ok(None) };
                self.response.extend(bytes);
                self.literal = None;
            }
            let line = match self.input.next_line(self.cfg.max_line) {
                None => return Ok(None),
                Some(Line::TooLong) => return Err(ServerError::LineTooLong(self.cfg.max_line)),
                Some(Line::Text(line)) => line,
            };
            self.response.extend(&line);
            self.response.extend_from_slice(b"\r\n");
            match literal_suffix(&line) {
                Some((n, _)) if self.response.len() + n <= self.cfg.max_response => self.literal = Some(n),
                Some(_) => return Err(ServerError::TooManyLines(self.cfg.max_response)),
                None => return Ok(Some(std::mem::take(&mut self.response))),
            }
        }
    }

    fn on_response(&mut self, response: Vec<u8>, out: &mut Vec<u8>) -> Option<Outcome> {
        let mut words = response.split(|&b| b == b' ' || b == b'\r');
        let (first, second) = (words.next().unwrap_or_default(), words.next().unwrap_or_default());
        match self.step {
            Step::Greeting if first == b"*" && second.eq_ignore_ascii_case(b"OK") => {
                self.segments = login_segments(&self.tag, &self.creds, &capabilities(&response));
                self.segments.reverse();
                self.send_segment(out);
                self.step = Step::Login;
                None
            }
            Step::Greeting => Some(self.unavailable(Cause::Greeting(excerpt(first_line(&response))), out)),
            Step::Login if first.starts_with(b"+") && !self.segments.is_empty() => {
                self.send_segment(out);
                None
            }
            Step::Login if first == b"*" && second.eq_ignore_ascii_case(b"BYE") => {
                Some(self.unavailable(Cause::Bye(excerpt(first_line(&response))), out))
            }
            Step::Login if first == b"*" => {
                if self.untagged.len() + response.len() > self.cfg.max_response {
                    let e = ServerError::TooManyLines(self.cfg.max_response);
                    return Some(self.unavailable(Cause::Protocol(e), out));
                }
                self.untagged.extend(response);
                None
            }
            Step::Login if first == self.tag.as_bytes() && second.eq_ignore_ascii_case(b"OK") => {
                self.step = Step::Done;
                let mut to_client = std::mem::take(&mut self.untagged);
                to_client.extend(response);
                to_client.extend(self.input.take_rest());
                Some(Outcome::LoggedIn { to_client })
            }
            Step::Login if first == self.tag.as_bytes() && is_refusal(second) => {
                let cause = Cause::Rejected(excerpt(first_line(&response)));
                Some(self.refuse(response, cause, out))
            }
            Step::Login => {
                let e = ServerError::Malformed(excerpt(first_line(&response)));
                Some(self.unavailable(Cause::Protocol(e), out))
            }
            Step::Done => None,
        }
    }

    fn send_segment(&mut self, out: &mut Vec<u8>) {
        if let Some(segment) = self.segments.pop() {
            out.extend(segment);
        }
    }

    /// The caller could not reach a server, or the server closed or went silent before
    /// the outcome: the client gets `tag NO [UNAVAILABLE]` (a temporary failure).
    pub fn server_gone(&mut self, why: &str, out: &mut Vec<u8>) -> Outcome {
        self.unavailable(Cause::Unreachable(why.to_string()), out)
    }

    fn unavailable(&mut self, cause: Cause, out: &mut Vec<u8>) -> Outcome {
        let line = format!("{} NO [UNAVAILABLE] mail server unavailable, try again later\r\n", self.tag);
        self.refuse(line.into_bytes(), cause, out)
    }

    fn refuse(&mut self, to_client: Vec<u8>, cause: Cause, out: &mut Vec<u8>) -> Outcome {
        self.step = Step::Done;
        out.extend_from_slice(b"cswitch-logout LOGOUT\r\n");
        Outcome::Refused { to_client, cause }
    }
}

fn is_refusal(status: &[u8]) -> bool {
    status.eq_ignore_ascii_case(b"NO") || status.eq_ignore_ascii_case(b"BAD")
}

/// The words of a greeting's `[CAPABILITY …]` response code, uppercased.
fn capabilities(greeting: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(greeting).to_ascii_uppercase();
    let Some(start) = text.find("[CAPABILITY ") else { return Vec::new() };
    let rest = &text[start + "[CAPABILITY ".len()..];
    let end = rest.find(']').unwrap_or(rest.len());
    rest[..end].split_ascii_whitespace().map(str::to_string).collect()
}

/// The login command, in the pieces that each wait for the server's `+`.
fn login_segments(tag: &str, creds: &Credentials, caps: &[String]) -> Vec<Vec<u8>> {
    let has = |cap: &str| caps.iter().any(|c| c == cap);
    if !creds.authzid.is_empty() || has("LOGINDISABLED") {
        let response = encode_plain(creds);
        return if has("SASL-IR") {
            vec![format!("{tag} AUTHENTICATE PLAIN {response}\r\n").into_bytes()]
        } else {
            vec![format!("{tag} AUTHENTICATE PLAIN\r\n").into_bytes(), format!("{response}\r\n").into_bytes()]
        };
    }
    let mut segments = vec![format!("{tag} LOGIN ").into_bytes()];
    for (i, value) in [creds.user.as_bytes(), creds.password.expose()].into_iter().enumerate() {
        if i > 0 {
            push(&mut segments, b" ");
        }
        match quoted(value) {
            Some(q) => push(&mut segments, &q),
            None if has("LITERAL+") => {
                push(&mut segments, format!("{{{}+}}\r\n", value.len()).as_bytes());
                push(&mut segments, value);
            }
            None => {
                push(&mut segments, format!("{{{}}}\r\n", value.len()).as_bytes());
                segments.push(value.to_vec());
            }
        }
    }
    push(&mut segments, b"\r\n");
    segments
}

fn push(segments: &mut [Vec<u8>], bytes: &[u8]) {
    if let Some(last) = segments.last_mut() {
        last.extend_from_slice(bytes);
    }
}

/// The first line of a response, for logs.
fn first_line(response: &[u8]) -> &[u8] {
    let end = response.iter().position(|&b| b == b'\r' || b == b'\n').unwrap_or(response.len());
    &response[..end]
}
