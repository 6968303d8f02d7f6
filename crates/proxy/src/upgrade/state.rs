//! The run-time state a binary upgrade carries from the old process to the new one, as
//! plain serializable values: servers are named (group, name) and listeners by name,
//! since the new process numbers them itself.
//!
//! - before the new process serves: the admin edits made at run time (`edits`), the
//!   health verdicts (a server that was down stays
//!   down until it passes `rise` checks) and the `STICKY_IP` entries;
//! - once the old process is drained: the counters, per listener and per server (so
//!   metrics do not reset), and the sticky entries it made meanwhile.
//!
//! The groups' persistence stick tables and the TLS session IDs servers issued (TLS
//! passthrough's session persistence) go with the sticky entries, both times. Not carried:
//! the latency histograms.

use crate::floor::live::Health;
use crate::floor::persist::TableKey;
use crate::floor::shared::Shared;
use crate::floor::snapshot::Snapshot;
use crate::floor::stats::Counter;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A server as both processes know it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ServerName {
    /// Its group.
    pub group: String,
    /// Its name in the group.
    pub name: String,
}

/// One `STICKY_IP` entry.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct StickyEntry {
    /// The listener it is kept for.
    pub listener: String,
    /// The client address.
    pub ip: IpAddr,
    /// Where it goes.
    pub server: ServerName,
    /// How long since it was last used, in ms.
    pub idle_ms: u64,
}

/// One entry of a group's persistence stick table (`source`, `learn`, `header`,
/// `url_param`).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PersistEntry {
    /// Where it goes (its group's table).
    pub server: ServerName,
    /// The key.
    pub key: TableKey,
    /// How long since it was last used, in ms.
    pub idle_ms: u64,
}

/// One TLS session ID a server issued (TLS passthrough), and where it goes.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct TlsSessionEntry {
    /// The session ID.
    pub id: Vec<u8>,
    /// The server that issued it.
    pub server: ServerName,
    /// How long since it was last used, in ms.
    pub idle_ms: u64,
}

/// One server's verdict and figures.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ServerState {
    /// Which.
    pub server: Option<ServerName>,
    /// Its active check's verdict (`up`, `down`, `unchecked`) and the last failure.
    pub health: Option<(String, String)>,
    /// requests, 1xx..5xx, failures, check failures, bytes in, bytes out.
    pub figures: Vec<u64>,
}

/// One listener's figures: requests, 1xx..5xx, bytes in, bytes out.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ListenerFigures {
    /// Which.
    pub listener: String,
    /// The figures, in that order.
    pub figures: Vec<u64>,
}

/// A piece of state in transit.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct State {
    /// Admin edits made since the config file was last loaded (before serving).
    #[serde(default)]
    pub edits: Vec<crate::upgrade::edits::Edit>,
    /// Process-wide counters by name (only when the old process is drained).
    pub counters: Vec<(String, u64)>,
    /// Per listener (only when drained).
    pub listeners: Vec<ListenerFigures>,
    /// Per server: verdicts before serving, figures when drained.
    pub servers: Vec<ServerState>,
    /// `STICKY_IP` entries (kept where the new process has made its own).
    pub sticky: Vec<StickyEntry>,
    /// Persistence stick-table entries (kept where the new process has made its own).
    #[serde(default)]
    pub persistence: Vec<PersistEntry>,
    /// TLS session IDs (kept where the new process has learnt its own).
    #[serde(default)]
    pub tls_sessions: Vec<TlsSessionEntry>,
}

/// Most sticky entries carried (the table's own bound).
const MAX_STICKY: usize = 1 << 20;

fn name_of(snap: &Snapshot, id: u64) -> Option<ServerName> {
    let group = &snap.groups[snap.group_of(id)?];
    let server = group.servers.iter().find(|s| s.id == id)?;
    Some(ServerName { group: group.name.clone(), name: server.name.clone() })
}

fn find<'a>(snap: &'a Snapshot, name: &ServerName) -> Option<&'a crate::floor::server::ServerRt> {
    let group = snap.groups.iter().find(|g| g.name == name.group)?;
    group.servers.iter().find(|s| s.name == name.name).map(|s| &**s)
}

/// What the new process needs before it serves: verdicts and sticky entries.
pub fn before_serving(shared: &Shared) -> State {
    let snap = shared.snapshot.load();
    let servers = snap
        .groups
        .iter()
        .flat_map(|g| g.servers.iter().map(move |s| (g, s)))
        .map(|(g, s)| ServerState {
            server: Some(ServerName { group: g.name.clone(), name: s.name.clone() }),
            health: Some((s.live.health().name().to_string(), s.live.last_check())),
            figures: Vec::new(),
        })
        .collect();
    State {
        servers,
        sticky: sticky(shared, &snap),
        persistence: persistence(&snap),
        tls_sessions: tls_sessions(shared, &snap),
        ..State::default()
    }
}

/// What the old process hands on once drained: its counters and late sticky entries.
pub fn when_drained(shared: &Shared) -> State {
    let snap = shared.snapshot.load();
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let counters = Counter::ALL.iter().map(|c| (c.name().to_string(), shared.stats.get(*c))).collect();
    let listeners = snap
        .listeners
        .iter()
        .zip(&shared.listeners)
        .map(|(l, live)| {
            let mut figures = vec![load(&live.requests)];
            figures.extend(live.responses.iter().map(load));
            figures.extend([load(&live.bytes_in), load(&live.bytes_out)]);
            ListenerFigures { listener: l.name.clone(), figures }
        })
        .collect();
    let servers = snap
        .groups
        .iter()
        .flat_map(|g| g.servers.iter().map(move |s| (g, s)))
        .map(|(g, s)| {
            let live = &s.live;
            let mut figures = vec![load(&live.requests)];
            figures.extend(live.responses.iter().map(load));
            figures.extend([&live.failures, &live.check_failures, &live.bytes_in, &live.bytes_out].map(load));
            let server = Some(ServerName { group: g.name.clone(), name: s.name.clone() });
            ServerState { server, health: None, figures }
        })
        .collect();
    let (sticky, persistence) = (sticky(shared, &snap), persistence(&snap));
    let tls_sessions = tls_sessions(shared, &snap);
    State { edits: Vec::new(), counters, listeners, servers, sticky, persistence, tls_sessions }
}

fn sticky(shared: &Shared, snap: &Snapshot) -> Vec<StickyEntry> {
    let entries = shared.sticky_ip.entries(Instant::now(), MAX_STICKY);
    entries
        .into_iter()
        .filter_map(|((listener, ip), id, idle)| {
            Some(StickyEntry {
                listener: snap.listeners.get(listener)?.name.clone(),
                ip,
                server: name_of(snap, id)?,
                idle_ms: u64::try_from(idle.as_millis()).unwrap_or(u64::MAX),
            })
        })
        .collect()
}

fn tls_sessions(shared: &Shared, snap: &Snapshot) -> Vec<TlsSessionEntry> {
    let entries = shared.tls_sessions.entries(crate::floor::tables::tls_sessions::TLS_SESSIONS_CAPACITY);
    entries
        .into_iter()
        .filter_map(|(id, server, idle)| {
            Some(TlsSessionEntry {
                id: id.into_vec(),
                server: name_of(snap, server)?,
                idle_ms: u64::try_from(idle.as_millis()).unwrap_or(u64::MAX),
            })
        })
        .collect()
}

fn persistence(snap: &Snapshot) -> Vec<PersistEntry> {
    let now = Instant::now();
    let mut out = Vec::new();
    for g in &snap.groups {
        let Some(p) = &g.persistence else { continue };
        for (key, id, idle) in p.entries(now, MAX_STICKY) {
            let Some(s) = g.servers.iter().find(|s| s.id == id) else { continue };
            let server = ServerName { group: g.name.clone(), name: s.name.clone() };
            out.push(PersistEntry {
                server,
                key,
                idle_ms: u64::try_from(idle.as_millis()).unwrap_or(u64::MAX),
            });
        }
    }
    out
}

/// Takes `state` in: counters and figures are added, verdicts set, sticky entries and TLS
/// session IDs kept unless this process has one of its own for the address or session. Names this process does not
/// know (a listener or server the config dropped) are skipped.
pub fn import(shared: &Shared, state: &State) {
    let snap = shared.snapshot.load();
    for (name, value) in &state.counters {
        if let Some(c) = Counter::ALL.iter().find(|c| c.name() == name) {
            shared.stats.add(*c, *value);
        }
    }
    for l in &state.listeners {
        let Some(i) = snap.listeners.iter().position(|x| x.name == l.listener) else { continue };
        let Some(live) = shared.listeners.get(i) else { continue };
        let targets = std::iter::once(&live.requests)
            .chain(live.responses.iter())
            .chain([&live.bytes_in, &live.bytes_out]);
        targets.zip(&l.figures).for_each(|(a, v)| _ = a.fetch_add(*v, Ordering::Relaxed));
    }
    for s in &state.servers {
        let Some(server) = s.server.as_ref().and_then(|n| find(&snap, n)) else { continue };
        let live = &server.live;
        if let Some((health, reason)) = &s.health {
            if let Some(h) = Health::from_name(health) {
                live.set_health(h, reason);
            }
        }
        let targets = std::iter::once(&live.requests).chain(live.responses.iter()).chain([
            &live.failures,
            &live.check_failures,
            &live.bytes_in,
            &live.bytes_out,
        ]);
        targets.zip(&s.figures).for_each(|(a, v)| _ = a.fetch_add(*v, Ordering::Relaxed));
    }
    let now = Instant::now();
    for e in &state.persistence {
        let Some(group) = snap.groups.iter().find(|g| g.name == e.server.group) else { continue };
        let (Some(p), Some(server)) = (&group.persistence, find(&snap, &e.server)) else { continue };
        let used = now.checked_sub(Duration::from_millis(e.idle_ms)).unwrap_or(now);
        p.adopt_entry(&e.key, server.id, used);
    }
    for e in &state.tls_sessions {
        let Some(server) = find(&snap, &e.server) else { continue };
        if shared.tls_sessions.get(&e.id).is_none() {
            let used = now.checked_sub(Duration::from_millis(e.idle_ms)).unwrap_or(now);
            shared.tls_sessions.put_at(e.id.clone().into_boxed_slice(), server.id, used);
        }
    }
    for e in &state.sticky {
        let Some(listener) = snap.listeners.iter().position(|l| l.name == e.listener) else { continue };
        let Some(server) = find(&snap, &e.server) else { continue };
        if shared.sticky_ip.get(listener, e.ip, now).is_none() {
            let used = now.checked_sub(Duration::from_millis(e.idle_ms)).unwrap_or(now);
            shared.sticky_ip.put(listener, e.ip, server.id, used);
        }
    }
}
