//! The control channel between a switch and a server's agent, sans-io: frames and an
//! incremental reader. A frame is `len: u32 LE` (of what follows), a kind byte, then the
//! kind's fields in a fixed order (integers little-endian, addresses as family, IP, port;
//! a [`TcpState`] in its own encoding). Written by hand: fourteen small frames, and the agent
//! must refuse malformed input precisely, which a serialisation crate would not make
//! simpler (ADR 0008).
//!
//! A switch opens a connection, sends [`Frame::Hello`] with the shared token and gets
//! [`Frame::Welcome`] (or [`Frame::Refused`], then the close). Then per hand-off:
//! `Handoff` → `Ready` | `Failed`, then `Go` (the steering flipped: leave repair mode and
//! serve) or `Abort` (the switch serves it itself: drop the socket in repair mode, silently).
//! When a connection it served has closed, the agent sends [`Frame::Ended`] on a control
//! connection from the same switch (the one the hand-off came on, if it is still open), at
//! any time: the switch reads its connections while they are idle too.
//!
//! Each hand-off carries its [`Route`]; the switch sends each one-way listener's [`Policy`]
//! (its rules) after `Welcome` and again after every reload (`policy`).
//!
//! Moving a served connection to another server (`migrate`): the agent sends
//! [`Frame::Migrate`] with the request it holds; the switch freezes the flow and asks
//! [`Frame::Dump`] (→ [`Frame::Dumped`] or `Failed`), hands the state to the new server's
//! agent as a `Handoff`, flips, and tells the old agent `Abort` (moved: drop it silently) —
//! or `Go` (not moved: serve the request yourself) when any step fails or the request stays.

mod policy;

use policy::Cursor;
pub use policy::{CookieMode, CookieRule, InsertRule, Persistence, Policy, Route};

use crate::state::{DecodeError, TcpState};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Largest frame accepted: a dump's queues are bounded by the socket buffers.
pub const MAX_FRAME: usize = 8 << 20;

/// One message.
// A frame lives for one read or write; boxing the hand-off would add an allocation to each.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// Switch → agent, first: the shared token.
    Hello {
        /// The token, as configured.
        token: Vec<u8>,
    },
    /// Agent → switch: the token matched.
    Welcome,
    /// Agent → switch: the token did not match (the agent closes after it).
    Refused {
        /// Why.
        reason: String,
    },
    /// Switch → agent: restore this connection.
    Handoff {
        /// The switch's id for this hand-off.
        id: u64,
        /// The local end to restore (the VIP and port the client connected to).
        vip: SocketAddr,
        /// The client's end.
        client: SocketAddr,
        /// Where it was routed, and how its later requests are treated.
        route: Route,
        /// The dumped state.
        state: TcpState,
        /// Bytes the switch read (the routed request), put back before the queue.
        already_read: Vec<u8>,
    },
    /// Agent → switch: restored, waiting in repair mode.
    Ready {
        /// The hand-off.
        id: u64,
    },
    /// Agent → switch: could not restore.
    Failed {
        /// The hand-off.
        id: u64,
        /// Why (the kernel's error and the step).
        reason: String,
    },
    /// Switch → agent: the client's packets now come here; serve it.
    Go {
        /// The hand-off.
        id: u64,
    },
    /// Switch → agent: the switch keeps the connection; drop yours without a sound.
    Abort {
        /// The hand-off.
        id: u64,
    },
    /// Switch → agent: a one-way listener's rules (after `Welcome`, and after reloads).
    Policy(Policy),
    /// Agent → switch, unasked: the connection of hand-off `id` has closed on the server
    /// (both ways, or reset); its steering entry can go.
    Ended {
        /// The hand-off.
        id: u64,
        /// The client's end (the steering entry's key).
        client: SocketAddr,
    },
    /// Agent → switch, unasked (`connection_persistence = "migrate"`): the next request on
    /// hand-off `id`'s connection belongs to another group; every earlier answer has
    /// reached the client. The switch routes `request` and moves the connection: `Dump`,
    /// then `Abort` (moved: drop it silently) or `Go` (not moved: serve it yourself).
    Migrate {
        /// The hand-off whose connection it is.
        id: u64,
        /// The local end (the VIP and port the client connected to).
        vip: SocketAddr,
        /// The client's end.
        client: SocketAddr,
        /// What the agent read of the request and did not forward (its head, and what came
        /// of its body).
        request: Vec<u8>,
    },
    /// Switch → agent: the flow of hand-off `id` is frozen; dump its connection.
    Dump {
        /// The hand-off.
        id: u64,
    },
    /// Agent → switch: the connection of hand-off `id`, dumped (in repair mode until `Go`
    /// or `Abort`).
    Dumped {
        /// The hand-off.
        id: u64,
        /// The dumped state.
        state: TcpState,
    },
    /// Agent → switch, unasked (cookie persistence `learn`): server `tag` of `group` set
    /// this session cookie; the switch's table sends the cookie's next connections there.
    Learned {
        /// The group the server is in.
        group: String,
        /// The server's cookie tag (unique in its group).
        tag: String,
        /// The Set-Cookie field's value as the server sent it.
        set_cookie: Vec<u8>,
    },
}

/// Why bytes are not a frame.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// A frame longer than [`MAX_FRAME`].
    #[error("frame of {0} bytes exceeds the limit")]
    TooLong(usize),
    /// An unknown kind byte.
    #[error("unknown frame kind {0}")]
    Kind(u8),
    /// A frame shorter than its fields, or longer.
    #[error("malformed {0} frame")]
    Malformed(&'static str),
    /// The dumped state inside a hand-off.
    #[error("hand-off state: {0}")]
    State(#[from] DecodeError),
}

const HELLO: u8 = 1;
const WELCOME: u8 = 2;
const REFUSED: u8 = 3;
const HANDOFF: u8 = 4;
const READY: u8 = 5;
const FAILED: u8 = 6;
const GO: u8 = 7;
const ABORT: u8 = 8;
const POLICY: u8 = 9;
const ENDED: u8 = 10;
const MIGRATE: u8 = 11;
const DUMP: u8 = 12;
const DUMPED: u8 = 13;
const LEARNED: u8 = 14;

impl Frame {
    /// Appends the frame to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        match self {
            Frame::Hello { token } => put_bytes(out, HELLO, token),
            Frame::Welcome => out.push(WELCOME),
            Frame::Refused { reason } => put_bytes(out, REFUSED, reason.as_bytes()),
            Frame::Handoff { id, vip, client, route, state, already_read } => {
                out.push(HANDOFF);
                out.extend_from_slice(&id.to_le_bytes());
                put_addr(out, vip);
                put_addr(out, client);
                route.encode(out);
                let mut encoded = Vec::new();
                state.encode(&mut encoded);
                out.extend_from_slice(&len32(&encoded).to_le_bytes());
                out.extend_from_slice(&encoded);
                out.extend_from_slice(already_read);
            }
            Frame::Ready { id } => put_id(out, READY, *id),
            Frame::Failed { id, reason } => {
                put_id(out, FAILED, *id);
                out.extend_from_slice(reason.as_bytes());
            }
            Frame::Go { id } => put_id(out, GO, *id),
            Frame::Abort { id } => put_id(out, ABORT, *id),
            Frame::Policy(p) => {
                out.push(POLICY);
                p.encode(out);
            }
            Frame::Ended { id, client } => {
                put_id(out, ENDED, *id);
                put_addr(out, client);
            }
            Frame::Migrate { id, vip, client, request } => {
                put_id(out, MIGRATE, *id);
                put_addr(out, vip);
                put_addr(out, client);
                out.extend_from_slice(request);
            }
            Frame::Dump { id } => put_id(out, DUMP, *id),
            Frame::Dumped { id, state } => {
                put_id(out, DUMPED, *id);
                state.encode(out);
            }
            Frame::Learned { group, tag, set_cookie } => {
                out.push(LEARNED);
                policy::put_str(out, group);
                policy::put_str(out, tag);
                out.extend_from_slice(set_cookie);
            }
        }
        let len = len32(&out[start + 4..]);
        out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    }

    /// Reads one frame's body (kind and fields, without the length prefix).
    fn decode(body: &[u8]) -> Result<Frame, WireError> {
        let (&kind, rest) = body.split_first().ok_or(WireError::Malformed("empty"))?;
        let text = |b: &[u8], what| String::from_utf8(b.to_vec()).map_err(|_| WireError::Malformed(what));
        let id = |b: &[u8], what| -> Result<(u64, usize), WireError> {
            let bytes: [u8; 8] =
                b.get(..8).and_then(|s| s.try_into().ok()).ok_or(WireError::Malformed(what))?;
            Ok((u64::from_le_bytes(bytes), 8))
        };
        let only_id = |b: &[u8], what| match id(b, what)? {
            (v, 8) if b.len() == 8 => Ok(v),
            _ => Err(WireError::Malformed(what)),
        };
        Ok(match kind {
            HELLO => Frame::Hello { token: rest.to_vec() },
            WELCOME if rest.is_empty() => Frame::Welcome,
            WELCOME => return Err(WireError::Malformed("welcome")),
            REFUSED => Frame::Refused { reason: text(rest, "refused")? },
            HANDOFF => decode_handoff(rest)?,
            READY => Frame::Ready { id: only_id(rest, "ready")? },
            FAILED => {
                let (v, n) = id(rest, "failed")?;
                Frame::Failed { id: v, reason: text(&rest[n..], "failed")? }
            }
            GO => Frame::Go { id: only_id(rest, "go")? },
            ABORT => Frame::Abort { id: only_id(rest, "abort")? },
            POLICY => Frame::Policy(Policy::decode(&mut Cursor::new(rest, "policy"))?),
            ENDED => {
                let (v, n) = id(rest, "ended")?;
                match get_addr(&rest[n..]) {
                    Some((client, used)) if n + used == rest.len() => Frame::Ended { id: v, client },
                    _ => return Err(WireError::Malformed("ended")),
                }
            }
            MIGRATE => decode_migrate(rest)?,
            LEARNED => {
                let mut c = Cursor::new(rest, "learned");
                let (group, tag) = (c.string()?, c.string()?);
                Frame::Learned { group, tag, set_cookie: c.rest().to_vec() }
            }
            DUMP => Frame::Dump { id: only_id(rest, "dump")? },
            DUMPED => {
                let (v, n) = id(rest, "dumped")?;
                Frame::Dumped { id: v, state: TcpState::decode(&rest[n..])? }
            }
            other => return Err(WireError::Kind(other)),
        })
    }
}

fn decode_migrate(b: &[u8]) -> Result<Frame, WireError> {
    let mut c = Cursor::new(b, "migrate");
    let id = c.u64()?;
    let vip = addr(&mut c)?;
    let client = addr(&mut c)?;
    Ok(Frame::Migrate { id, vip, client, request: c.rest().to_vec() })
}

fn decode_handoff(b: &[u8]) -> Result<Frame, WireError> {
    let mut c = Cursor::new(b, "handoff");
    let id = c.u64()?;
    let vip = addr(&mut c)?;
    let client = addr(&mut c)?;
    let route = Route::decode(&mut c)?;
    let len = c.u32()? as usize;
    let state = TcpState::decode(c.take(len)?)?;
    Ok(Frame::Handoff { id, vip, client, route, state, already_read: c.rest().to_vec() })
}

fn addr(c: &mut Cursor<'_>) -> Result<SocketAddr, WireError> {
    let (a, used) = get_addr(c.peek()).ok_or(c.bad())?;
    c.take(used)?;
    Ok(a)
}

fn put_bytes(out: &mut Vec<u8>, kind: u8, bytes: &[u8]) {
    out.push(kind);
    out.extend_from_slice(bytes);
}

fn put_id(out: &mut Vec<u8>, kind: u8, id: u64) {
    out.push(kind);
    out.extend_from_slice(&id.to_le_bytes());
}

fn put_addr(out: &mut Vec<u8>, addr: &SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&addr.port().to_le_bytes());
}

/// An address and how many bytes it took.
fn get_addr(b: &[u8]) -> Option<(SocketAddr, usize)> {
    let (ip, n): (IpAddr, usize) = match *b.first()? {
        4 => (IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(b.get(1..5)?).ok()?)), 5),
        6 => (IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(b.get(1..17)?).ok()?)), 17),
        _ => return None,
    };
    let port = u16::from_le_bytes(b.get(n..n + 2)?.try_into().ok()?);
    Some((SocketAddr::new(ip, port), n + 2))
}

fn len32(b: &[u8]) -> u32 {
    u32::try_from(b.len()).unwrap_or(u32::MAX)
}

/// Frames from a byte stream, as it arrives.
#[derive(Default)]
pub struct Reader {
    buf: Vec<u8>,
}

impl Reader {
    /// Adds bytes read from the connection.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame, if one is here. An error means the peer is not speaking
    /// this protocol: close the connection.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, WireError> {
        let Some(len_bytes) = self.buf.get(..4) else { return Ok(None) };
        let len = u32::from_le_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]) as usize;
        if len > MAX_FRAME {
            return Err(WireError::TooLong(len));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let frame = Frame::decode(&self.buf[4..4 + len]);
        self.buf.drain(..4 + len);
        frame.map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Window;

    fn state() -> TcpState {
        TcpState {
            mss: 1448,
            wscale: Some((7, 7)),
            sack: true,
            tsval: Some(42),
            snd_seq: 10,
            rcv_seq: 20,
            window: Window::default(),
            outq: vec![],
            unsent: 0,
            inq: b"body".to_vec(),
        }
    }

    fn all() -> Vec<Frame> {
        vec![
            Frame::Hello { token: b"secret-token-0123".to_vec() },
            Frame::Welcome,
            Frame::Refused { reason: "bad token".into() },
            Frame::Handoff {
                id: 7,
                vip: "10.0.0.100:80".parse().unwrap(),
                client: "[2001:db8::1]:40000".parse().unwrap(),
                route: Route {
                    listener: "web".into(),
                    group: "static".into(),
                    persistence: Persistence::Redirect,
                    pinned: true,
                    cookie: Some(CookieRule {
                        mode: CookieMode::Insert(InsertRule {
                            indirect: true,
                            secure: true,
                            domain: "example.com".into(),
                            max_idle: 1200,
                            ..InsertRule::default()
                        }),
                        name: "SRV".into(),
                        tag: "b1".into(),
                        index: 3,
                    }),
                },
                state: state(),
                already_read: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            },
            Frame::Handoff {
                id: 8,
                vip: "10.0.0.100:80".parse().unwrap(),
                client: "10.0.0.10:40000".parse().unwrap(),
                route: Route {
                    listener: "web".into(),
                    group: "static".into(),
                    persistence: Persistence::Pin,
                    pinned: false,
                    cookie: Some(CookieRule {
                        mode: CookieMode::Rename,
                        name: "PHPSESSID".into(),
                        tag: "b2".into(),
                        index: 1,
                    }),
                },
                state: state(),
                already_read: vec![],
            },
            Frame::Ready { id: 7 },
            Frame::Failed { id: 7, reason: "connect: EADDRNOTAVAIL".into() },
            Frame::Go { id: u64::MAX },
            Frame::Abort { id: 0 },
            Frame::Policy(Policy {
                listener: "web".into(),
                switch: 0x1234_5678_9abc,
                generation: 3,
                default_group: "static".into(),
                groups: vec!["static".into(), "api".into()],
                rules: "R1: if (match(url, \"^/api\")) { routeTo(api, NONSTICKY); }\n".into(),
            }),
            Frame::Ended { id: 7, client: "10.0.0.10:40000".parse().unwrap() },
            Frame::Migrate {
                id: 7,
                vip: "10.0.0.100:80".parse().unwrap(),
                client: "10.0.0.10:40000".parse().unwrap(),
                request: b"GET /api HTTP/1.1\r\n\r\n".to_vec(),
            },
            Frame::Dump { id: 7 },
            Frame::Dumped { id: 7, state: state() },
            Frame::Learned {
                group: "web".into(),
                tag: "b1".into(),
                set_cookie: b"JSESSIONID=abc; Path=/".to_vec(),
            },
        ]
    }

    #[test]
    fn every_frame_round_trips_byte_by_byte() {
        let mut bytes = Vec::new();
        for f in all() {
            f.encode(&mut bytes);
        }
        let mut reader = Reader::default();
        let mut got = Vec::new();
        for b in &bytes {
            reader.push(std::slice::from_ref(b));
            while let Some(f) = reader.next_frame().unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got, all());
    }

    #[test]
    fn malformed_frames_are_named() {
        let frame = |body: &[u8]| {
            let mut b = (body.len() as u32).to_le_bytes().to_vec();
            b.extend_from_slice(body);
            let mut r = Reader::default();
            r.push(&b);
            r.next_frame()
        };
        assert_eq!(frame(&[99]), Err(WireError::Kind(99)));
        assert_eq!(frame(&[READY, 1, 2]), Err(WireError::Malformed("ready")));
        assert_eq!(frame(&[GO, 0, 0, 0, 0, 0, 0, 0, 0, 9]), Err(WireError::Malformed("go")));
        assert_eq!(frame(&[HANDOFF, 1]), Err(WireError::Malformed("handoff")));
        // A policy claiming more group names than its bytes could hold.
        let mut policy = vec![POLICY, 1, 0, 0, 0, b'w'];
        policy.extend_from_slice(&[0; 16]);
        policy.extend_from_slice(&[0, 0, 0, 0]);
        policy.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(frame(&policy), Err(WireError::Malformed("policy")));
        assert_eq!(frame(&[ENDED, 1, 0, 0, 0, 0, 0, 0, 0, 4, 10]), Err(WireError::Malformed("ended")));
        let mut extra = Vec::new();
        Frame::Ended { id: 1, client: "10.0.0.1:1".parse().unwrap() }.encode(&mut extra);
        assert_eq!(frame(&[&extra[4..], &[0]].concat()), Err(WireError::Malformed("ended")));
        let mut r = Reader::default();
        r.push(&(MAX_FRAME as u32 + 1).to_le_bytes());
        assert_eq!(r.next_frame(), Err(WireError::TooLong(MAX_FRAME + 1)));
    }
}
