//! Moving a served connection to another server at a request boundary
//! (`connection_persistence = "migrate"`, issue 12 part 5; seed 001's switch-back,
//! generalised): the agent that holds the connection saw a later request its copy of the
//! rules sends to another group, and asks ([`Frame::Migrate`]). The switch routes the
//! request with its own rules, persistence and scheduler, and — when it belongs on another
//! server with an agent — moves the connection there: freeze the flow, `Dump` at the old
//! agent, `Handoff` (the request put back in front of the dumped queue) to the new one,
//! READY, flip, then `Go` to the new agent and `Abort` to the old (which drops its socket
//! in repair mode, silently). Any failure unfreezes the flow and tells the old agent `Go`:
//! it leaves repair mode and serves the request itself, so no request is lost.
//!
//! Runs on the worker thread whose control connection read the request (the steering
//! handle and the schedulers are per worker).

use super::{control, life, policy, route, steering};
use crate::floor::snapshot::Snapshot;
use crate::floor::stats::Counter;
use crate::floor::worker::Worker;
use crate::http::view::{Dst, HeadView};
use crate::upstream::connect;
use crate::upstream::decide::{self, Act, Ask, Notes, Tables};
use crate::upstream::pick::extract_key;
use crate::upstream::slots::Tried;
use http1::{BodyKind, Parse, RequestHead};
use oneway::Frame;
use rules::{Body, Sticky};
use std::net::{SocketAddr, SocketAddrV4};

/// What the agent asked.
pub(super) struct Asked {
    /// The agent holding the connection.
    pub agent: SocketAddr,
    /// Its hand-off.
    pub id: u64,
    pub vip: SocketAddr,
    pub client: SocketAddr,
    pub request: Vec<u8>,
}

/// An agent asks to move a connection: handled on this worker, in a task of its own.
pub(super) fn requested(asked: Asked) {
    let Some(worker) = super::worker::this() else { return };
    drop(tokio::task::spawn_local(async move {
        let counter = match run(&worker, &asked).await {
            Ok(true) => Counter::Migrations,
            Ok(false) => Counter::MigrationsStayed,
            Err(()) => Counter::MigrationsFailed,
        };
        worker.shared.stats.inc(counter);
    }));
}

/// `Ok(true)`: moved; `Ok(false)`: it stays (the old agent was told `Go`); `Err`: a step
/// failed (the flow was thawed and the old agent told `Go`).
async fn run(worker: &Worker, asked: &Asked) -> Result<bool, ()> {
    let snap = worker.shared.snapshot.load_full();
    let (Some(oneway), SocketAddr::V4(client)) = (snap.config.oneway.as_ref(), asked.client) else {
        return Err(());
    };
    let policies = policy::of(&snap);
    let timeout = oneway.handoff_timeout;
    let Some(mut old) = control::take(asked.agent, &oneway.token, timeout, &policies).await else {
        // The agent gets no answer and serves the request itself when it gives up waiting.
        return Err(());
    };
    let Some(place) = destination(worker, &snap, asked) else {
        let _ = old.send(&Frame::Go { id: asked.id }).await;
        control::give(asked.agent, old);
        return Ok(false);
    };
    let moved = move_to(&snap, asked, client, &place, &mut old).await;
    let _ = old.send(&if moved { Frame::Abort { id: asked.id } } else { Frame::Go { id: asked.id } }).await;
    control::give(asked.agent, old);
    if moved {
        tracing::debug!(%client, from = %asked.agent, to = %place.target.agent, "connection migrated");
        Ok(true)
    } else {
        Err(())
    }
}

/// Where the request goes when that is another server with an agent.
struct Place {
    listener: usize,
    group: usize,
    index: usize,
    sticky: Sticky,
    target: config::Handoff,
}

/// The switch's routing of the request: `None` when it stays (the same host, a server
/// without an agent, an answer only the switch gives, a request it cannot read).
fn destination(worker: &Worker, snap: &Snapshot, asked: &Asked) -> Option<Place> {
    let listener =
        snap.config.listeners.iter().position(|l| l.mode == config::Mode::OneWay && l.bind == asked.vip)?;
    let mut req = RequestHead::new();
    if req.parse(&asked.request, &snap.head_limits) != Ok(Parse::Complete) {
        return None;
    }
    let after_head = &asked.request[req.head_len..];
    let complete = req.body == BodyKind::None;
    let dst = Dst::Known(asked.vip);
    let view = HeadView {
        head: &asked.request,
        req: &req,
        src: asked.client,
        dst,
        body: Body { bytes: after_head, complete },
    };
    let ask =
        Ask { listener, request: &view, pinned: None, http: Some((&asked.request, &req)), tls_session: None };
    let mut notes = Notes::default();
    let tables = Tables::of(&worker.shared);
    let d = decide::decide(snap, tables, &mut worker.eval.borrow_mut(), &ask, &mut notes, None)?;
    if d.act != Act::Forward {
        return None;
    }
    let g = snap.group(d.group);
    let mut key = Vec::new();
    let keyed = g.scheduler.uses_key() && extract_key(&g.hash_key, &view, &mut key);
    let prefer = d.server.map(|(id, _)| id);
    let index = connect::choose(worker, snap, d.group, prefer, &Tried::default(), keyed.then_some(&key[..]))?;
    let target = super::target(snap, d.group, index)?;
    (target.agent != asked.agent).then_some(Place {
        listener,
        group: d.group,
        index,
        sticky: d.sticky,
        target,
    })
}

/// Freeze, dump at the old agent, restore at the new one, flip, GO. False (the flow
/// thawed) when a step fails.
async fn move_to(
    snap: &Snapshot,
    asked: &Asked,
    client: SocketAddrV4,
    place: &Place,
    old: &mut control::Control,
) -> bool {
    let Some(oneway) = snap.config.oneway.as_ref() else { return false };
    let timeout = oneway.handoff_timeout;
    if let Err(e) = steering::with(|s| s.freeze(client)) {
        tracing::warn!(%client, error = %e, "migration: freeze failed; the request stays");
        return false;
    }
    let state = match old.exchange(&Frame::Dump { id: asked.id }, timeout).await {
        Some(Frame::Dumped { id, state }) if id == asked.id => state,
        other => {
            tracing::warn!(%client, agent = %asked.agent, answer = ?other, "migration: no dump; the request stays");
            thaw(client);
            return false;
        }
    };
    let policies = policy::of(snap);
    let Some(mut new) = control::take(place.target.agent, &oneway.token, timeout, &policies).await else {
        thaw(client);
        return false;
    };
    let id = control::next_id();
    let frame = Frame::Handoff {
        id,
        vip: asked.vip,
        client: asked.client,
        route: route::of(snap, place.listener, place.group, place.index, place.sticky == Sticky::IpPort),
        state,
        already_read: asked.request.clone(),
    };
    let ready = matches!(new.exchange(&frame, timeout).await, Some(Frame::Ready { id: got }) if got == id);
    if !ready || life::flip(client, place.target.mac, id).is_err() {
        tracing::warn!(%client, agent = %place.target.agent, ready, "migration: the new server did not take it; the request stays");
        let _ = new.send(&Frame::Abort { id }).await;
        thaw(client);
        return false;
    }
    if new.send(&Frame::Go { id }).await.is_ok() {
        control::give(place.target.agent, new);
        return true;
    }
    // The new agent never got GO (it drops its restore): the flow goes back to the old one,
    // which is told GO by the caller.
    tracing::warn!(%client, agent = %place.target.agent, "migration: GO not sent; steered back");
    let old_mac = agent_mac(snap, asked.agent);
    if old_mac.is_none_or(|mac| life::flip(client, mac, asked.id).is_err()) {
        let _ = life::unflip(client, id);
    }
    false
}

/// The MAC of the server whose agent is `agent`.
fn agent_mac(snap: &Snapshot, agent: SocketAddr) -> Option<[u8; 6]> {
    let servers = snap.config.groups.iter().flat_map(|g| &g.servers);
    servers.filter_map(|s| s.handoff).find(|h| h.agent == agent).map(|h| h.mac)
}

fn thaw(client: SocketAddrV4) {
    if let Err(e) = steering::with(|s| s.unfreeze(client)) {
        tracing::warn!(%client, error = %e, "unfreeze failed; the flow thaws when its frozen entry times out (5 s)");
    }
}
