//! One-way TLS passthrough (issue 12): on a one-way listener, once the ClientHello is
//! routed, the connection goes to the chosen server's agent (`crate::handoff`) with every
//! byte read from the client so far — the hello and anything after it — put back in front
//! of its receive queue, so the server's TLS stack reads the handshake as the client sent
//! it and answers the client directly. The switch never sees the ServerHello, so
//! session-ID persistence learns nothing from a handed-off connection. When the hand-off
//! cannot be made the connection is tunnelled two-way, to the server already chosen.

use crate::floor::snapshot::Snapshot;
use crate::floor::stats::Counter;
use crate::floor::worker::Worker;
use crate::handoff;
use crate::upstream::connect;
use crate::upstream::decide::Decision;
use crate::upstream::slots::Tried;
use tokio::net::TcpStream;

/// What the hand-off of one TLS connection came to.
pub(super) enum HandOff {
    /// Handed to the agent of server `index` of the decided group: the socket is in repair
    /// mode and no longer the switch's (drop it without writing).
    Done(usize),
    /// Serve it two-way, to this server first when one is chosen: the server the hand-off
    /// was for, so the scheduler picks once and the fallback goes where the connection
    /// would have gone.
    TwoWay(Option<u64>),
}

/// Hands the connection off when listener `listener` is one-way and the server chosen for
/// decision `d` (the one an entry chose, else the scheduler's pick, fed `key`) has an
/// agent. `already_read`: every byte read from the client. Counts the hand-off or the
/// reason it fell back.
pub(super) async fn try_hand_off(
    worker: &Worker,
    snap: &Snapshot,
    listener: usize,
    d: &Decision,
    key: Option<&[u8]>,
    client: &TcpStream,
    already_read: &[u8],
) -> HandOff {
    let prefer = d.server.map(|(id, _)| id);
    let oneway = match &snap.config.oneway {
        Some(o) if snap.config.listeners[listener].mode == config::Mode::OneWay => o,
        _ => return HandOff::TwoWay(prefer),
    };
    let Some(index) = connect::choose(worker, snap, d.group, prefer, &Tried::default(), key) else {
        return HandOff::TwoWay(prefer);
    };
    let chosen = Some(snap.group(d.group).servers[index].id);
    let Some(target) = handoff::target(snap, d.group, index) else {
        return HandOff::TwoWay(chosen);
    };
    let route = handoff::route::opaque(snap, listener, d.group);
    let server = snap.group(d.group).servers[index].known_as;
    let ask = handoff::Ask { client, already_read, target, server, oneway, snap, route };
    match handoff::hand_off(&ask).await {
        Ok(()) => {
            worker.shared.stats.inc(Counter::Handoffs);
            HandOff::Done(index)
        }
        Err(reason) => {
            worker.shared.stats.inc(reason);
            HandOff::TwoWay(chosen)
        }
    }
}
