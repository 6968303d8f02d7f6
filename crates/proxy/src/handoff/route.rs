//! The hand-off's [`Route`]: what the agent needs to treat the connection's later requests
//! and answers — the listener (whose rules it holds), the group, the listener's connection
//! persistence, and the group's cookie persistence for the chosen server.

use crate::floor::snapshot::Snapshot;
use config::{ConnectionPersistence, PersistMode};
use oneway::{CookieMode, CookieRule, InsertRule, Persistence, Route};

/// The route of a request of `listener` sent to server `index` of `group`; `pinned` when
/// the deciding rule said `STICKY_IP_PORT`.
pub fn of(snap: &Snapshot, listener: usize, group: usize, index: usize, pinned: bool) -> Route {
    let l = &snap.config.listeners[listener];
    let g = snap.group(group);
    Route {
        listener: l.name.clone(),
        group: g.name.clone(),
        persistence: persistence(l.connection_persistence),
        pinned,
        cookie: cookie(snap, group, index),
    }
}

/// The route of a connection whose bytes the agent cannot read (TLS passthrough): pinned to
/// its server, no cookies.
pub fn opaque(snap: &Snapshot, listener: usize, group: usize) -> Route {
    Route {
        listener: snap.config.listeners[listener].name.clone(),
        group: snap.group(group).name.clone(),
        persistence: Persistence::Pin,
        pinned: true,
        cookie: None,
    }
}

/// The listener's connection persistence as its agents apply it (a one-way listener's
/// config holds pin, close, redirect or migrate).
fn persistence(p: ConnectionPersistence) -> Persistence {
    match p {
        ConnectionPersistence::Close => Persistence::Close,
        ConnectionPersistence::Redirect => Persistence::Redirect,
        ConnectionPersistence::Migrate => Persistence::Migrate,
        ConnectionPersistence::Pin | ConnectionPersistence::PerRequest => Persistence::Pin,
    }
}

/// The group's cookie persistence for server `index` (`learn`: the agent reports the
/// session cookies the server sets, `learned`).
fn cookie(snap: &Snapshot, group: usize, index: usize) -> Option<CookieRule> {
    let (cfg, server) = super::server_config(snap, group, index)?;
    let (mode, name) = match &cfg.persistence.as_ref()?.mode {
        PersistMode::Insert(i) => {
            let secs = |d: Option<std::time::Duration>| d.map_or(0, |d| d.as_secs().max(1));
            let rule = InsertRule {
                indirect: i.indirect,
                nocache: i.nocache,
                httponly: i.httponly,
                secure: i.secure,
                domain: i.domain.clone().unwrap_or_default(),
                max_idle: secs(i.max_idle),
                max_life: secs(i.max_life),
            };
            (CookieMode::Insert(rule), &i.cookie)
        }
        PersistMode::Prefix { cookie } => (CookieMode::Prefix, cookie),
        PersistMode::Rename { cookie } => (CookieMode::Rename, cookie),
        PersistMode::Learn { cookie, .. } => (CookieMode::Learn, cookie),
        _ => return None,
    };
    Some(CookieRule {
        mode,
        name: name.clone(),
        tag: server.cookie.clone(),
        index: u16::try_from(index).ok()?,
    })
}
