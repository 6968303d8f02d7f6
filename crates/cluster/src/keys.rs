//! The keys each node publishes in its gossip state, and their values' text (a leaf):
//!
//! - `digest`: its config digest (`digest.rs`);
//! - `beat`: its wall clock (ms since the epoch) at its last tick — a capacity's age is
//!   measured against it, on the origin's own clock, so nodes' clocks need not agree;
//! - `cap/<server IP:port>`: `<capacity> <wall ms>`, the last report an agent sent it;
//! - `sip/<listener>/<client IP>`: `<group>/<server> <wall ms>`, a `STICKY_IP` decision
//!   (names, not this node's internal ids, so every node can resolve them); deleted by its
//!   origin when its lifetime ends;
//! - `lck/<group>\t<cookie value>`: `<server> <wall ms>`, a session cookie a server set
//!   (persistence `learn`); a tab because neither names nor cookie values hold one;
//! - `tls/<session ID in hex>`: `<group>/<server> <wall ms>`, a TLS session ID a server
//!   issued (passthrough listeners);
//! - `lt/<group>\t<key hash, 16 hex digits>`: `<server> <wall ms>`, an assignment a learning
//!   scheduler (`htrr`, `lard`, `lard_r`) made: the key's XXH3, alike on every node;
//! - `act/<group>\t<server>`: `<count>`, this node's requests in flight to a server that has
//!   a `maxconn` (cluster-wide admission, `admission.rs`); rewritten when it changes.

use std::net::{IpAddr, SocketAddr};
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) const DIGEST: &str = "digest";
pub(crate) const BEAT: &str = "beat";
pub(crate) const CAP_PREFIX: &str = "cap/";
pub(crate) const STICKY_PREFIX: &str = "sip/";
pub(crate) const LEARNED_PREFIX: &str = "lck/";
pub(crate) const TLS_PREFIX: &str = "tls/";
pub(crate) const ACTIVE_PREFIX: &str = "act/";
pub(crate) const SCHED_PREFIX: &str = "lt/";

/// Milliseconds since the epoch (0 if the clock is before it).
pub(crate) fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0))
}

pub(crate) fn cap_key(server: SocketAddr) -> String {
    format!("{CAP_PREFIX}{server}")
}

pub(crate) fn cap_value(capacity: u32, at_ms: u64) -> String {
    format!("{capacity} {at_ms}")
}

/// A `cap/…` entry: the server, its capacity, and when the origin received it.
pub(crate) fn parse_cap(key: &str, value: &str) -> Option<(SocketAddr, u32, u64)> {
    let server = key.strip_prefix(CAP_PREFIX)?.parse().ok()?;
    let (capacity, at) = value.split_once(' ')?;
    Some((server, capacity.parse().ok()?, at.parse().ok()?))
}

/// A `STICKY_IP` decision as the cluster shares it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StickyIp {
    /// The listener's name.
    pub listener: String,
    /// The client address pinned.
    pub client: IpAddr,
    /// The group's name.
    pub group: String,
    /// The server's name in that group.
    pub server: String,
}

pub(crate) fn sticky_key(listener: &str, client: IpAddr) -> String {
    format!("{STICKY_PREFIX}{listener}/{client}")
}

pub(crate) fn sticky_value(group: &str, server: &str, at_ms: u64) -> String {
    format!("{group}/{server} {at_ms}")
}

/// A `sip/…` entry and when its origin decided it. Split from the right: an IP, a server
/// name (letters, digits, `-_.`) and a number hold no `/` or space, whatever the listener's
/// and group's names hold.
pub(crate) fn parse_sticky(key: &str, value: &str) -> Option<(StickyIp, u64)> {
    let (listener, client) = key.strip_prefix(STICKY_PREFIX)?.rsplit_once('/')?;
    let (target, at) = value.rsplit_once(' ')?;
    let (group, server) = target.rsplit_once('/')?;
    let entry = StickyIp {
        listener: listener.to_string(),
        client: client.parse().ok()?,
        group: group.to_string(),
        server: server.to_string(),
    };
    Some((entry, at.parse().ok()?))
}

/// A session cookie value a server set, learned by a group with persistence `learn`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LearnedCookie {
    /// The group's name.
    pub group: String,
    /// The cookie's value.
    pub value: String,
    /// The name of the server that set it.
    pub server: String,
}

pub(crate) fn learned_key(group: &str, value: &str) -> String {
    format!("{LEARNED_PREFIX}{group}\t{value}")
}

/// A `lck/…` entry and when its origin learned it.
pub(crate) fn parse_learned(key: &str, value: &str) -> Option<(LearnedCookie, u64)> {
    let (group, cookie) = key.strip_prefix(LEARNED_PREFIX)?.split_once('\t')?;
    let (server, at) = value.rsplit_once(' ')?;
    let entry = LearnedCookie { group: group.into(), value: cookie.into(), server: server.into() };
    Some((entry, at.parse().ok()?))
}

/// A TLS session ID a server issued in its ServerHello (TLS passthrough).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsSession {
    /// The session ID (1 to 32 bytes).
    pub id: Vec<u8>,
    /// The group's name.
    pub group: String,
    /// The server's name in that group.
    pub server: String,
}

pub(crate) fn tls_key(id: &[u8]) -> String {
    let mut key = String::with_capacity(TLS_PREFIX.len() + 2 * id.len());
    key.push_str(TLS_PREFIX);
    for b in id {
        key.push_str(&format!("{b:02x}"));
    }
    key
}

/// A `tls/…` entry and when its origin saw the session issued.
pub(crate) fn parse_tls(key: &str, value: &str) -> Option<(TlsSession, u64)> {
    let hex = key.strip_prefix(TLS_PREFIX)?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let id = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    let (target, at) = value.rsplit_once(' ')?;
    let (group, server) = target.rsplit_once('/')?;
    Some((TlsSession { id, group: group.into(), server: server.into() }, at.parse().ok()?))
}

/// An assignment a learning scheduler made on one node: the key (by its hash) and server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Learned {
    /// The group's name.
    pub group: String,
    /// XXH3 of the request's hash key.
    pub hash: u64,
    /// The server's name in that group.
    pub server: String,
}

pub(crate) fn sched_key(group: &str, hash: u64) -> String {
    format!("{SCHED_PREFIX}{group}\t{hash:016x}")
}

/// An `lt/…` entry and when its origin learned it.
pub(crate) fn parse_sched(key: &str, value: &str) -> Option<(Learned, u64)> {
    let (group, hash) = key.strip_prefix(SCHED_PREFIX)?.rsplit_once('\t')?;
    let (server, at) = value.rsplit_once(' ')?;
    let entry =
        Learned { group: group.into(), hash: u64::from_str_radix(hash, 16).ok()?, server: server.into() };
    Some((entry, at.parse().ok()?))
}

pub(crate) fn active_key(group: &str, server: &str) -> String {
    format!("{ACTIVE_PREFIX}{group}\t{server}")
}

/// An `act/…` entry: (group, server) and the origin's in-flight count.
pub(crate) fn parse_active<'a>(key: &'a str, value: &str) -> Option<(&'a str, &'a str, u32)> {
    let (group, server) = key.strip_prefix(ACTIVE_PREFIX)?.split_once('\t')?;
    Some((group, server, value.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capacity_round_trips() {
        let server: SocketAddr = "[::1]:9001".parse().unwrap_or_else(|e| panic!("{e}"));
        let (k, v) = (cap_key(server), cap_value(70, 1_700_000_000_123));
        assert_eq!(parse_cap(&k, &v), Some((server, 70, 1_700_000_000_123)));
        assert_eq!(parse_cap("beat", &v), None);
        assert_eq!(parse_cap(&k, "70"), None);
    }

    #[test]
    fn a_sticky_entry_round_trips() {
        let client: IpAddr = "2001:db8::7".parse().unwrap_or_else(|e| panic!("{e}"));
        let (k, v) = (sticky_key("web", client), sticky_value("shop", "s2", 5));
        let entry = StickyIp { listener: "web".into(), client, group: "shop".into(), server: "s2".into() };
        assert_eq!(parse_sticky(&k, &v), Some((entry, 5)));
        assert_eq!(parse_sticky(&k, "shop 5"), None);
    }

    #[test]
    fn a_tls_session_round_trips() {
        let k = tls_key(&[0, 0xab, 0x7f]);
        assert_eq!(k, "tls/00ab7f");
        let entry = TlsSession { id: vec![0, 0xab, 0x7f], group: "g".into(), server: "s".into() };
        assert_eq!(parse_tls(&k, "g/s 4"), Some((entry, 4)));
        assert_eq!(parse_tls("tls/0ab", "g/s 4"), None);
    }

    #[test]
    fn a_learned_assignment_round_trips() {
        let k = sched_key("web", 0xab);
        assert_eq!(k, "lt/web\t00000000000000ab");
        let entry = Learned { group: "web".into(), hash: 0xab, server: "s1".into() };
        assert_eq!(parse_sched(&k, "s1 3"), Some((entry, 3)));
    }

    #[test]
    fn an_active_count_round_trips() {
        let k = active_key("web/a", "s1");
        assert_eq!(parse_active(&k, "7"), Some(("web/a", "s1", 7)));
        assert_eq!(parse_active(&k, "x"), None);
    }

    #[test]
    fn a_learned_cookie_round_trips() {
        let (k, v) = (learned_key("web", "a/b=c"), "s1 9".to_string());
        let entry = LearnedCookie { group: "web".into(), value: "a/b=c".into(), server: "s1".into() };
        assert_eq!(parse_learned(&k, &v), Some((entry, 9)));
    }
}
