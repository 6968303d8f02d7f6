//! One-way switching's hand-off (issue 12; spike §3.2, §6), the switch's side: once a
//! request is routed to a server that has an agent, the connection is frozen in the
//! datapath, dumped with `TCP_REPAIR`, shipped to the agent, and — when the agent answers
//! READY — steered to the server and let go (GO); the switch's socket is then closed in
//! repair mode, which sends nothing. Every failure before GO unfreezes the flow, leaves
//! repair mode without a window probe and returns the reason: the caller serves the
//! request two-way, so a failed hand-off never fails a request.
//!
//! - `control`: the per-worker pool of authenticated control connections to agents, each
//!   read all its life (agents report ended connections on them unasked).
//! - `steering`: the per-worker netlink handle on the steering table, and the table's
//!   installation at start.
//! - `policy`: the one-way listeners' rules for the agents (sent on each new control
//!   connection, pushed after reloads).
//! - `route`: what a hand-off tells the agent about its connection (listener, group,
//!   connection and cookie persistence).
//! - `life`: the flows steered now, and the sweep that forgets them when their connections
//!   are over (the agent's report, or the client's FIN/RST and quiet).
//! - `migrate`: moving a served connection to another server at a request boundary, when
//!   its agent asks (`connection_persistence = "migrate"`).
//! - `learned`: session cookies agents report (`learn` on one-way connections).
//! - `segment`: whether an agent's host shares the switch's L2 segment (the kernel's
//!   routes), which steering by MAC address needs.
//! - `worker`: the worker of this thread, for what agents send unasked.
//! - `timing`: each phase's latency and the switch CPU a hand-off costs (for `/metrics`).

mod control;
mod learned;
pub mod life;
pub mod migrate;
pub mod policy;
pub mod route;
mod segment;
pub mod steering;
pub mod timing;
pub mod worker;

use crate::floor::snapshot::Snapshot;
use crate::floor::stats::Counter;
use oneway::Frame;
use std::net::{SocketAddr, SocketAddrV4};
use timing::Stopwatch;
use tokio::net::TcpStream;

/// What a hand-off needs to know.
pub struct Ask<'a> {
    /// The client's socket (plain TCP, its request read).
    pub client: &'a TcpStream,
    /// Every byte the switch read from the client and the server must see, in order.
    pub already_read: &'a [u8],
    /// The server's agent and MAC.
    pub target: config::Handoff,
    /// The server's configured address (`addr`; a HashNAT host's peer listener): with the
    /// agent's, what tells whether its host shares this switch's segment.
    pub server: SocketAddr,
    /// `[oneway]`.
    pub oneway: &'a config::OneWay,
    /// The config in force (the rules a new control connection sends the agent).
    pub snap: &'a crate::floor::snapshot::Snapshot,
    /// Where the request was routed, for the agent's treatment of later requests.
    pub route: oneway::Route,
}

/// The agent of server `index` of `group`, from the config in force (`None`: the server
/// has none, or it is this HashNAT node's own host; its connections are served two-way).
pub fn target(snap: &Snapshot, group: usize, index: usize) -> Option<config::Handoff> {
    let server = server_config(snap, group, index)?.1;
    // HashNAT (ADR 0019): this node's own share goes to its server at `local_addr`, here,
    // never to its own agent (that would steer the client's packets out and back in).
    let node = snap.config.cluster.as_ref().map(|c| c.node.as_str());
    if server.connect_addr(node) != server.addr {
        return None;
    }
    server.handoff
}

/// The config of server `index` of `group`, and of its group.
pub(crate) fn server_config(
    snap: &Snapshot,
    group: usize,
    index: usize,
) -> Option<(&config::Group, &config::Server)> {
    let g = snap.group(group);
    let name = &g.servers.get(index)?.name;
    let group_cfg = snap.config.groups.iter().find(|c| c.name == g.name)?;
    Some((group_cfg, group_cfg.servers.iter().find(|s| &s.name == name)?))
}

/// Hands the connection off. `Ok`: the agent serves it; drop the socket without writing
/// to it. `Err`: not handed off (the counter says why); the socket is as it was.
pub async fn hand_off(ask: &Ask<'_>) -> Result<(), Counter> {
    let (client, vip) = match (ask.client.peer_addr(), ask.client.local_addr()) {
        (Ok(SocketAddr::V4(c)), Ok(SocketAddr::V4(v))) => (c, v),
        _ => return Err(Counter::HandoffNotDumped),
    };
    let timeout = ask.oneway.handoff_timeout;
    // Steering rewrites MAC addresses only: a routed host would never get the flow.
    if !segment::shared(&ask.oneway.interface, &[ask.target.agent.ip(), ask.server.ip()]) {
        return Err(Counter::HandoffNotOnSegment);
    }
    let mut watch = Stopwatch::start();
    let policies = policy::of(ask.snap);
    let mut ctl = control::take(ask.target.agent, &ask.oneway.token, timeout, &policies)
        .await
        .ok_or(Counter::HandoffNoAgent)?;
    watch.lap();
    let state = freeze_and_dump(ask, client, &mut watch)?;
    let id = control::next_id();
    let frame = Frame::Handoff {
        id,
        vip: vip.into(),
        client: client.into(),
        route: ask.route.clone(),
        state,
        already_read: ask.already_read.to_vec(),
    };
    let sent = ctl.send(&frame).await.is_ok();
    // While the agent restores, the worker serves other connections: not this one's CPU.
    watch.pause_cpu();
    let answer = if sent { ctl.answer_within(timeout).await } else { None };
    watch.resume_cpu();
    watch.lap();
    let result = match answer {
        Some(Frame::Ready { id: got }) if got == id => flip(ask, client, &mut ctl, id, &mut watch).await,
        Some(Frame::Failed { reason, .. }) => {
            tracing::info!(%client, agent = %ask.target.agent, %reason, "hand-off refused by the agent; served two-way");
            Err(Counter::HandoffRefused)
        }
        _ => {
            // No answer in time: tell the agent to drop whatever it restored (silently).
            tracing::info!(%client, agent = %ask.target.agent, ?timeout, "no READY from the agent in time; served two-way");
            let _ = ctl.send(&Frame::Abort { id }).await;
            Err(Counter::HandoffTimeout)
        }
    };
    match result {
        Ok(()) => {
            control::give(ask.target.agent, ctl);
            watch.done();
        }
        Err(_) => {
            thaw(ask.client, client);
            if answer_was_clean(&result) {
                control::give(ask.target.agent, ctl);
            }
        }
    }
    result
}

/// Repair mode, then the freeze (a repaired socket still receives: P1), then the dump.
fn freeze_and_dump(
    ask: &Ask<'_>,
    client: SocketAddrV4,
    watch: &mut Stopwatch,
) -> Result<oneway::TcpState, Counter> {
    oneway::enter_repair(ask.client).map_err(|e| not_dumped("repair mode", &e))?;
    if let Err(e) = steering::with(|s| s.freeze(client)) {
        let _ = oneway::leave_repair(ask.client, false);
        return Err(not_dumped("freeze", &e));
    }
    watch.lap();
    let state = oneway::dump(ask.client).map_err(|e| {
        thaw(ask.client, client);
        not_dumped("dump", &e)
    })?;
    watch.lap();
    Ok(state)
}

/// READY came: steer the flow to the server (one transaction), then GO.
async fn flip(
    ask: &Ask<'_>,
    client: SocketAddrV4,
    ctl: &mut control::Control,
    id: u64,
    watch: &mut Stopwatch,
) -> Result<(), Counter> {
    if let Err(e) = life::flip(client, ask.target.mac, id) {
        tracing::warn!(%client, error = %e, "steering flip failed; served two-way");
        let _ = ctl.send(&Frame::Abort { id }).await;
        return Err(Counter::HandoffFlipFailed);
    }
    watch.lap();
    let went = ctl.send(&Frame::Go { id }).await;
    watch.lap();
    if went.is_err() {
        // The channel broke between READY and GO: steer the flow back (the agent drops a
        // restore that gets no GO) and serve it here.
        tracing::warn!(%client, agent = %ask.target.agent, "GO not sent: control connection lost after READY");
        let _ = life::unflip(client, id);
        return Err(Counter::HandoffFlipFailed);
    }
    Ok(())
}

/// Undo: unfreeze, leave repair mode without a window probe.
fn thaw(sock: &TcpStream, client: SocketAddrV4) {
    if let Err(e) = steering::with(|s| s.unfreeze(client)) {
        tracing::warn!(%client, error = %e, "unfreeze failed; the flow thaws when its frozen entry times out (5 s)");
    }
    let _ = oneway::leave_repair(sock, false);
}

/// Whether the control connection is still in step after `result` (a late READY could
/// still arrive on a timed-out one: that one is dropped).
fn answer_was_clean(result: &Result<(), Counter>) -> bool {
    matches!(result, Err(Counter::HandoffRefused))
}

fn not_dumped(step: &str, e: &dyn std::fmt::Display) -> Counter {
    tracing::warn!(step, error = %e, "hand-off not made; served two-way");
    Counter::HandoffNotDumped
}
