//! Phase "persistence lookup" (DESIGN.md §2) and its response half: a group's session
//! persistence (seed 001 §IV) at run time.
//!
//! On the request path, before the head is forwarded: find the server the client's session
//! lives on (a cookie naming it, a learned session cookie, a stick-table entry for its
//! address, header or URL parameter) and restore what the server must see (our cookie taken
//! out under `indirect`, the prefix taken off, the renamed cookie's name put back). On the
//! response path: set or rewrite the cookie, learn the session cookie a server sets. After a
//! complete exchange, the stick-table modes record where the key went.
//!
//! The pure parts (cookie syntax, the modes, the stick table) live in `balance::persist`.

use crate::floor::server::ServerRt;
use balance::persist::{
    mask_ip, url_param, InsertMode, InsertOptions, LearnMode, PrefixMode, RenameMode, StickTable,
    DEFAULT_CLASS, DEFAULT_KEYWORD,
};
use config::{PersistMode, Persistence};
use http1::{RequestHead, ResponseHead};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A stick-table key as it travels between processes (a binary upgrade).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TableKey {
    /// `source`: the masked client address.
    Ip(IpAddr),
    /// `learn`, `header`, `url_param`: the value.
    Bytes(Vec<u8>),
}

/// A group's persistence, built from its config; carried across reloads (tables included)
/// while the config of the persistence is unchanged.
pub struct PersistRt {
    config: Persistence,
    mode: Mode,
}

enum Mode {
    Insert(InsertMode),
    Prefix(PrefixMode),
    Learn(LearnMode),
    Rename(RenameMode),
    Source { table: StickTable<IpAddr>, v4: u8, v6: u8 },
    Header { name: String, table: StickTable<Box<[u8]>> },
    UrlParam { name: String, table: StickTable<Box<[u8]>> },
}

impl PersistRt {
    /// The runtime for `config`, reusing `previous` (and its tables) when it is the same.
    /// Entries of a reused table that point at servers the group no longer has are dropped.
    pub fn build(
        config: &Persistence,
        previous: Option<&Arc<PersistRt>>,
        keep: impl Fn(u64) -> bool + Copy,
    ) -> Arc<PersistRt> {
        if let Some(old) = previous.filter(|p| p.config == *config) {
            old.retain_servers(keep);
            return Arc::clone(old);
        }
        Arc::new(PersistRt { config: config.clone(), mode: Mode::new(config) })
    }

    /// The mode's name and, for the modes that keep a stick table, its (entries, capacity).
    pub fn table_size(&self) -> (&'static str, Option<(usize, usize)>) {
        fn size<K: std::hash::Hash + Eq + Clone>(t: &StickTable<K>) -> Option<(usize, usize)> {
            Some((t.len(), t.capacity()))
        }
        match &self.mode {
            Mode::Insert(_) => ("insert", None),
            Mode::Prefix(_) => ("prefix", None),
            Mode::Rename(_) => ("rename", None),
            Mode::Learn(l) => ("learn", size(l.table())),
            Mode::Source { table, .. } => ("source", size(table)),
            Mode::Header { table, .. } => ("header", size(table)),
            Mode::UrlParam { table, .. } => ("url_param", size(table)),
        }
    }

    /// Up to `limit` live entries of its stick table, with how long each has been idle (a
    /// binary upgrade carries them); none for the modes whose cookie names the server.
    pub fn entries(&self, now: Instant, limit: usize) -> Vec<(TableKey, u64, std::time::Duration)> {
        fn bytes(
            t: &StickTable<Box<[u8]>>,
            now: Instant,
            limit: usize,
        ) -> Vec<(TableKey, u64, std::time::Duration)> {
            t.entries(now, limit)
                .into_iter()
                .map(|(k, s, idle)| (TableKey::Bytes(k.into_vec()), s, idle))
                .collect()
        }
        match &self.mode {
            Mode::Learn(l) => bytes(l.table(), now, limit),
            Mode::Header { table, .. } | Mode::UrlParam { table, .. } => bytes(table, now, limit),
            Mode::Source { table, .. } => table
                .entries(now, limit)
                .into_iter()
                .map(|(ip, s, idle)| (TableKey::Ip(ip), s, idle))
                .collect(),
            Mode::Insert(_) | Mode::Prefix(_) | Mode::Rename(_) => Vec::new(),
        }
    }

    /// Records an entry another process made (a binary upgrade), last used at `used`,
    /// unless this process has one for the key already.
    pub fn adopt_entry(&self, key: &TableKey, server: u64, used: Instant) {
        let now = Instant::now();
        let put_bytes = |t: &StickTable<Box<[u8]>>, k: &[u8]| {
            if t.get(k, now).is_none() {
                t.put(k.into(), server, used);
            }
        };
        match (&self.mode, key) {
            (Mode::Learn(l), TableKey::Bytes(k)) => put_bytes(l.table(), k),
            (Mode::Header { table, .. } | Mode::UrlParam { table, .. }, TableKey::Bytes(k)) => {
                put_bytes(table, k)
            }
            (Mode::Source { table, .. }, TableKey::Ip(ip)) if table.get(ip, now).is_none() => {
                table.put(*ip, server, used);
            }
            _ => {} // the mode changed with the config: the entry means nothing here
        }
    }

    fn retain_servers(&self, keep: impl Fn(u64) -> bool + Copy) {
        match &self.mode {
            Mode::Learn(l) => l.table().retain_servers(keep),
            Mode::Source { table, .. } => table.retain_servers(keep),
            Mode::Header { table, .. } | Mode::UrlParam { table, .. } => table.retain_servers(keep),
            Mode::Insert(_) | Mode::Prefix(_) | Mode::Rename(_) => {}
        }
    }
}

impl Mode {
    fn new(p: &Persistence) -> Mode {
        let size = p.table_size;
        match &p.mode {
            PersistMode::Insert(i) => Mode::Insert(InsertMode::new(&InsertOptions {
                indirect: i.indirect,
                nocache: i.nocache,
                httponly: i.httponly,
                secure: i.secure,
                domain: i.domain.clone(),
                max_idle: i.max_idle,
                max_life: i.max_life,
                ..InsertOptions::new(&i.cookie)
            })),
            PersistMode::Prefix { cookie } => Mode::Prefix(PrefixMode::new(cookie)),
            PersistMode::Learn { cookie, timeout } => {
                Mode::Learn(LearnMode::new(cookie, size, *timeout, None))
            }
            // The config layer checked the name (≥ 8 token characters); a refusal here
            // would be a bug there, and falls back to learning the cookie instead.
            PersistMode::Rename { cookie } => match RenameMode::new(cookie, DEFAULT_KEYWORD) {
                Some(r) => Mode::Rename(r),
                None => Mode::Learn(LearnMode::new(cookie, size, std::time::Duration::from_secs(1800), None)),
            },
            PersistMode::Source { timeout, netmask_v4, netmask_v6 } => Mode::Source {
                table: StickTable::new(size, *timeout, None),
                v4: *netmask_v4,
                v6: *netmask_v6,
            },
            PersistMode::Header { name, timeout } => {
                Mode::Header { name: name.clone(), table: StickTable::new(size, *timeout, None) }
            }
            PersistMode::UrlParam { name, timeout } => {
                Mode::UrlParam { name: name.clone(), table: StickTable::new(size, *timeout, None) }
            }
        }
    }
}

/// What the request half found, for the response half and the stick-table update.
#[derive(Default)]
pub struct PersistScratch {
    /// The request's Cookie fields, joined (cookie modes only).
    cookies: Vec<u8>,
    /// The rewritten Cookie field value.
    rewritten: Vec<u8>,
    /// `insert`: the valid cookie of ours the request carried (tag, first seen, refresh due).
    hit_tag: Vec<u8>,
    hit: Option<(u64, bool)>,
    /// Stick-table modes: the request's key (an address's octets, a header or parameter value).
    key: Vec<u8>,
    has_key: bool,
}

impl PersistScratch {
    /// Forgets the previous request.
    pub fn reset(&mut self) {
        self.hit = None;
        self.has_key = false;
    }
}

/// The request half. Returns the id of the server the session is on, if it is still in
/// the group; pushes a `Cookie` edit onto `set_headers` when the server must see the
/// cookies differently from the client.
pub fn on_request(
    p: &PersistRt,
    servers: &[Arc<ServerRt>],
    head: &[u8],
    req: &RequestHead,
    peer: SocketAddr,
    ps: &mut PersistScratch,
    set_headers: &mut Vec<(String, String)>,
) -> Option<u64> {
    ps.reset();
    let now = Instant::now();
    let found = match &p.mode {
        Mode::Source { table, v4, v6 } => {
            let ip = mask_ip(peer.ip(), *v4, *v6);
            ps.key.clear();
            ps.has_key = true;
            table.get(&ip, now)
        }
        Mode::Header { name, table } => keyed(table, req.header(head, name), ps, now),
        Mode::UrlParam { name, table } => {
            keyed(table, url_param(req.target.slice(head), name.as_bytes()), ps, now)
        }
        Mode::Insert(_) | Mode::Prefix(_) | Mode::Learn(_) | Mode::Rename(_) => {
            if !join_cookies(head, req, &mut ps.cookies) {
                return None;
            }
            on_cookies(&p.mode, servers, ps, set_headers, now)
        }
    };
    found.filter(|id| servers.iter().any(|s| s.id == *id))
}

fn keyed(
    table: &StickTable<Box<[u8]>>,
    value: Option<&[u8]>,
    ps: &mut PersistScratch,
    now: Instant,
) -> Option<u64> {
    let value = value?;
    ps.key.clear();
    ps.key.extend_from_slice(value);
    ps.has_key = true;
    table.get(value, now)
}

/// The cookie modes' request half, over the joined Cookie fields in `ps.cookies`.
fn on_cookies(
    mode: &Mode,
    servers: &[Arc<ServerRt>],
    ps: &mut PersistScratch,
    set_headers: &mut Vec<(String, String)>,
    now: Instant,
) -> Option<u64> {
    ps.rewritten.clear();
    let by_tag = |tag: &[u8]| servers.iter().find(|s| s.cookie.as_bytes() == tag).map(|s| s.id);
    let (found, rewrote) = match mode {
        Mode::Insert(m) => {
            let found = m.on_request(&ps.cookies, unix_now()).map(|hit| {
                ps.hit_tag.clear();
                ps.hit_tag.extend_from_slice(hit.tag);
                ps.hit = Some((hit.first_seen, hit.refresh));
                by_tag(hit.tag)
            });
            (found.flatten(), m.indirect() && m.strip(&ps.cookies, &mut ps.rewritten))
        }
        Mode::Prefix(m) => {
            (m.request_tag(&ps.cookies).and_then(by_tag), m.strip(&ps.cookies, &mut ps.rewritten))
        }
        Mode::Learn(m) => (m.lookup(&ps.cookies, now), false),
        Mode::Rename(m) => {
            let hit = m.find(&ps.cookies, None);
            let found = hit.as_ref().and_then(|h| servers.get(h.server_index)).map(|s| s.id);
            ps.rewritten.extend_from_slice(&ps.cookies);
            (found, m.restore_all(&mut ps.rewritten) > 0)
        }
        Mode::Source { .. } | Mode::Header { .. } | Mode::UrlParam { .. } => (None, false),
    };
    if rewrote {
        // An empty value removes the field: every cookie was ours.
        set_headers.push(("Cookie".to_string(), String::from_utf8_lossy(&ps.rewritten).into_owned()));
    }
    found
}

/// Joins the request's Cookie fields into `out` (`; ` between them); false when none.
fn join_cookies(head: &[u8], req: &RequestHead, out: &mut Vec<u8>) -> bool {
    out.clear();
    for h in req.headers.iter().filter(|h| h.name.slice(head).eq_ignore_ascii_case(b"cookie")) {
        if !out.is_empty() {
            out.extend_from_slice(b"; ");
        }
        out.extend_from_slice(h.value.slice(head));
    }
    !out.is_empty()
}

/// `learn`: a session cookie `server` set, seen by someone else than this switch (a one-way
/// connection's agent). False when the group does not learn, or it is not the cookie.
pub fn learn(p: &PersistRt, set_cookie_value: &[u8], server: u64) -> bool {
    match &p.mode {
        Mode::Learn(m) => m.learn(set_cookie_value, server, Instant::now()),
        _ => false,
    }
}

/// After a complete exchange with `server`: the stick-table modes record the request's key.
pub fn remember(p: &PersistRt, ps: &PersistScratch, server: u64, peer: SocketAddr) {
    if !ps.has_key {
        return;
    }
    let now = Instant::now();
    match &p.mode {
        Mode::Source { table, v4, v6 } => table.put(mask_ip(peer.ip(), *v4, *v6), server, now),
        Mode::Header { table, .. } | Mode::UrlParam { table, .. } => {
            table.put(ps.key.as_slice().into(), server, now)
        }
        Mode::Insert(_) | Mode::Prefix(_) | Mode::Learn(_) | Mode::Rename(_) => {}
    }
}

/// The response half for one response from `server` (index `index` in its group).
pub struct OnResponse<'a> {
    /// The group's persistence.
    pub persist: &'a PersistRt,
    /// What the request half found.
    pub found: &'a PersistScratch,
    /// The server that answered.
    pub server: &'a ServerRt,
    /// Its index in the group (the `rename` code).
    pub index: usize,
    /// The group's name, and this node's cluster: a newly learned cookie is shared.
    pub share: Option<(&'a str, &'a cluster::Cluster)>,
}

impl OnResponse<'_> {
    /// Fields to add to the response (`insert`: our Set-Cookie when the request did not
    /// carry a valid one for this server, or it is due for refresh; with `nocache`,
    /// `Cache-Control: private`), written into `extra`.
    pub fn extra(&self, head: &[u8], resp: &ResponseHead, extra: &mut Vec<u8>) {
        extra.clear();
        let Mode::Insert(m) = &self.persist.mode else { return };
        let tag = self.server.cookie.as_str();
        let hit = self.found.hit.map(|(first_seen, refresh)| balance::persist::InsertHit {
            tag: &self.found.hit_tag,
            first_seen,
            last_seen: first_seen,
            refresh,
        });
        let now = unix_now();
        let Some(first_seen) = m.plan(hit.as_ref(), tag, now) else { return };
        let server_set_ours = resp
            .headers
            .iter()
            .filter(|h| h.name.slice(head).eq_ignore_ascii_case(b"set-cookie"))
            .any(|h| m.is_ours(h.value.slice(head)));
        if server_set_ours {
            return;
        }
        extra.extend_from_slice(b"Set-Cookie: ");
        m.set_cookie(tag, first_seen, now, extra);
        extra.extend_from_slice(b"\r\n");
        if let Some((name, value)) = m.extra_header() {
            extra.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
    }

    /// Whether Set-Cookie fields need a look (`prefix`, `learn`, `rename`).
    pub fn edits_set_cookie(&self) -> bool {
        matches!(self.persist.mode, Mode::Prefix(_) | Mode::Learn(_) | Mode::Rename(_))
    }

    /// One Set-Cookie field: true when `out` holds its replacement value.
    pub fn set_cookie(&self, value: &[u8], out: &mut Vec<u8>) -> bool {
        match &self.persist.mode {
            Mode::Prefix(m) => m.on_set_cookie(value, &self.server.cookie, out),
            Mode::Learn(m) => {
                let now = Instant::now();
                // Shared only when new here (a value seen again is no gossip write).
                let known = self.share.is_some()
                    && m.learned_value(value).is_some_and(|v| m.table().get(v, now) == Some(self.server.id));
                if m.learn(value, self.server.id, now) && !known {
                    self.share_learned(m, value);
                }
                false
            }
            Mode::Rename(m) => {
                let Some(code) = balance::persist::rename_code(self.index) else { return false };
                out.extend_from_slice(value);
                m.rewrite_set_cookie(out, DEFAULT_CLASS, code)
            }
            _ => false,
        }
    }
}

impl OnResponse<'_> {
    /// Shares a cookie value just learned with the other nodes of the cluster.
    fn share_learned(&self, m: &LearnMode, set_cookie_value: &[u8]) {
        let (Some((group, node)), Some(value)) = (self.share, m.learned_value(set_cookie_value)) else {
            return;
        };
        let lifetime = match &self.persist.config.mode {
            PersistMode::Learn { timeout, .. } => *timeout,
            _ => std::time::Duration::from_secs(1800),
        };
        let entry = cluster::LearnedCookie {
            group: group.to_string(),
            value: String::from_utf8_lossy(value).into_owned(),
            server: self.server.name.clone(),
        };
        node.publish_learned_cookie(&entry, lifetime);
    }
}

/// A cookie value another node of the cluster learned for `server`, at `at`; false when
/// the group does not learn cookies.
pub fn learned_elsewhere(p: &PersistRt, value: &[u8], server: u64, at: Instant) -> bool {
    let Mode::Learn(m) = &p.mode else { return false };
    m.table().put(value.into(), server, at);
    true
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
