//! What an agent needs to treat a handed-off connection's later requests (issue 12 part 5):
//! the [`Route`] of each hand-off (the listener, the group the server was picked from, and
//! the listener's connection persistence), and each one-way listener's [`Policy`] — its
//! rules as canonical source, which the agent compiles and evaluates on later requests,
//! pushed by the switch on every new control connection and after every reload.

use super::{len32, WireError};

/// A listener's `connection_persistence` as the agent applies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persistence {
    /// Later requests go to the same server, whatever the rules say.
    Pin,
    /// Each request goes to the server with `Connection: close`: one request per
    /// connection, every one routed by the switch.
    Close,
    /// A later request the rules send to another group is answered with a redirect to
    /// itself and `Connection: close`; the client's new connection is routed by the switch.
    Redirect,
    /// A later request the rules send to another group moves the connection, through the
    /// switch, to a server of that group (seed 001's switch-back, generalised).
    Migrate,
}

/// Where a hand-off was routed, and how its later requests are treated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The one-way listener's name (the key of its [`Policy`]).
    pub listener: String,
    /// The group the server was picked from.
    pub group: String,
    /// The listener's connection persistence.
    pub persistence: Persistence,
    /// The deciding rule said `STICKY_IP_PORT`: later requests skip the rules.
    pub pinned: bool,
    /// The group's cookie persistence, which the agent applies on this connection's
    /// requests and answers (the switch never sees the answers).
    pub cookie: Option<CookieRule>,
}

/// A group's cookie persistence (seed 001 §IV) as the agent applies it for one server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CookieRule {
    /// Which mode.
    pub mode: CookieMode,
    /// The cookie's name (ours under `insert`, the application's otherwise).
    pub name: String,
    /// The server's tag (`insert`, `prefix`).
    pub tag: String,
    /// The server's index in its group (`rename`'s code).
    pub index: u16,
}

/// The cookie modes an agent applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CookieMode {
    /// Our cookie naming the server is set on answers.
    Insert(InsertRule),
    /// The application's cookie value gets the server's tag as a prefix.
    Prefix,
    /// The application's cookie name is rewritten (same length) to carry the server.
    Rename,
    /// The session cookie the server sets is reported to the switch, whose table sends the
    /// client's next connections carrying it to this server.
    Learn,
}

/// `insert`'s options (as `config::InsertCookie`; durations in seconds, 0 for none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InsertRule {
    /// Take our cookie out of requests before the server sees them.
    pub indirect: bool,
    /// `Cache-Control: private` on answers that set it.
    pub nocache: bool,
    /// `HttpOnly`.
    pub httponly: bool,
    /// `Secure`.
    pub secure: bool,
    /// `Domain=`, empty for none.
    pub domain: String,
    /// Seconds unused before the cookie is void; 0: never.
    pub max_idle: u64,
    /// Seconds since the session began before it is void; 0: never.
    pub max_life: u64,
}

/// A one-way listener's rules, as the switch has them in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    /// The listener's name.
    pub listener: String,
    /// The switch process that sends it (its config generations count from 0 at start).
    pub switch: u64,
    /// The switch's config generation: a policy replaces the one the agent holds for the
    /// listener unless that one is from the same switch process and newer.
    pub generation: u64,
    /// The group a request no rule routes goes to.
    pub default_group: String,
    /// The group names, in the order the rules' actions index them.
    pub groups: Vec<String>,
    /// Canonical rule source (empty: no rules, every request to the default group).
    pub rules: String,
}

impl Policy {
    /// Whether this policy replaces `held`, the one the agent has for the listener.
    pub fn replaces(&self, held: &Policy) -> bool {
        self.switch != held.switch || self.generation >= held.generation
    }
}

impl Persistence {
    fn code(self) -> u8 {
        match self {
            Persistence::Pin => 0,
            Persistence::Close => 1,
            Persistence::Redirect => 2,
            Persistence::Migrate => 3,
        }
    }

    fn from_code(c: u8) -> Option<Persistence> {
        Some(match c {
            0 => Persistence::Pin,
            1 => Persistence::Close,
            2 => Persistence::Redirect,
            3 => Persistence::Migrate,
            _ => return None,
        })
    }
}

impl Route {
    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        put_str(out, &self.listener);
        put_str(out, &self.group);
        out.push(self.persistence.code());
        out.push(u8::from(self.pinned));
        match &self.cookie {
            None => out.push(0),
            Some(c) => c.encode(out),
        }
    }

    pub(super) fn decode(c: &mut Cursor<'_>) -> Result<Route, WireError> {
        let listener = c.string()?;
        let group = c.string()?;
        let persistence = Persistence::from_code(c.byte()?).ok_or(c.bad())?;
        let pinned = c.flag()?;
        let cookie = CookieRule::decode(c)?;
        Ok(Route { listener, group, persistence, pinned, cookie })
    }
}

impl CookieRule {
    fn encode(&self, out: &mut Vec<u8>) {
        out.push(match self.mode {
            CookieMode::Insert(_) => 1,
            CookieMode::Prefix => 2,
            CookieMode::Rename => 3,
            CookieMode::Learn => 4,
        });
        put_str(out, &self.name);
        put_str(out, &self.tag);
        out.extend_from_slice(&self.index.to_le_bytes());
        if let CookieMode::Insert(i) = &self.mode {
            for flag in [i.indirect, i.nocache, i.httponly, i.secure] {
                out.push(u8::from(flag));
            }
            put_str(out, &i.domain);
            out.extend_from_slice(&i.max_idle.to_le_bytes());
            out.extend_from_slice(&i.max_life.to_le_bytes());
        }
    }

    /// `None` for the 0 byte that says "no cookie persistence".
    fn decode(c: &mut Cursor<'_>) -> Result<Option<CookieRule>, WireError> {
        let kind = c.byte()?;
        if kind == 0 {
            return Ok(None);
        }
        let name = c.string()?;
        let tag = c.string()?;
        let index = u16::from_le_bytes(c.take(2)?.try_into().map_err(|_| c.bad())?);
        let mode = match kind {
            1 => CookieMode::Insert(InsertRule {
                indirect: c.flag()?,
                nocache: c.flag()?,
                httponly: c.flag()?,
                secure: c.flag()?,
                domain: c.string()?,
                max_idle: c.u64()?,
                max_life: c.u64()?,
            }),
            2 => CookieMode::Prefix,
            3 => CookieMode::Rename,
            4 => CookieMode::Learn,
            _ => return Err(c.bad()),
        };
        Ok(Some(CookieRule { mode, name, tag, index }))
    }
}

impl Policy {
    pub(super) fn encode(&self, out: &mut Vec<u8>) {
        put_str(out, &self.listener);
        out.extend_from_slice(&self.switch.to_le_bytes());
        out.extend_from_slice(&self.generation.to_le_bytes());
        put_str(out, &self.default_group);
        out.extend_from_slice(&u32::try_from(self.groups.len()).unwrap_or(u32::MAX).to_le_bytes());
        for g in &self.groups {
            put_str(out, g);
        }
        put_str(out, &self.rules);
    }

    pub(super) fn decode(c: &mut Cursor<'_>) -> Result<Policy, WireError> {
        let listener = c.string()?;
        let switch = c.u64()?;
        let generation = c.u64()?;
        let default_group = c.string()?;
        let n = c.u32()? as usize;
        // Each name takes at least its 4-byte length: a count beyond that is a lie.
        if n > c.left() / 4 {
            return Err(c.bad());
        }
        let groups = (0..n).map(|_| c.string()).collect::<Result<_, _>>()?;
        let rules = c.string()?;
        c.end()?;
        Ok(Policy { listener, switch, generation, default_group, groups, rules })
    }
}

pub(super) fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&len32(s.as_bytes()).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Reads fields in order; every shortfall is the frame's `Malformed` error.
pub(super) struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(bytes: &'a [u8], what: &'static str) -> Cursor<'a> {
        Cursor { bytes, at: 0, what }
    }

    pub(super) fn bad(&self) -> WireError {
        WireError::Malformed(self.what)
    }

    pub(super) fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let end = self.at.checked_add(n).ok_or(self.bad())?;
        let s = self.bytes.get(self.at..end).ok_or(self.bad())?;
        self.at = end;
        Ok(s)
    }

    /// What is left, without consuming it.
    pub(super) fn peek(&self) -> &'a [u8] {
        self.bytes.get(self.at..).unwrap_or_default()
    }

    pub(super) fn rest(&mut self) -> &'a [u8] {
        let s = self.bytes.get(self.at..).unwrap_or_default();
        self.at = self.bytes.len();
        s
    }

    fn left(&self) -> usize {
        self.bytes.len().saturating_sub(self.at)
    }

    fn end(&self) -> Result<(), WireError> {
        if self.left() == 0 {
            Ok(())
        } else {
            Err(self.bad())
        }
    }

    fn byte(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }

    fn flag(&mut self) -> Result<bool, WireError> {
        match self.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(self.bad()),
        }
    }

    pub(super) fn u32(&mut self) -> Result<u32, WireError> {
        let b: [u8; 4] = self.take(4)?.try_into().map_err(|_| self.bad())?;
        Ok(u32::from_le_bytes(b))
    }

    pub(super) fn u64(&mut self) -> Result<u64, WireError> {
        let b: [u8; 8] = self.take(8)?.try_into().map_err(|_| self.bad())?;
        Ok(u64::from_le_bytes(b))
    }

    pub(super) fn string(&mut self) -> Result<String, WireError> {
        let n = self.u32()? as usize;
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| self.bad())
    }
}
