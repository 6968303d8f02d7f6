//! Phase "pick": the group's scheduler over live load counters, fed the request's hash key
//! (`extract_key`, shared with `explain`). Per-worker instances (`floor::schedulers`), or
//! the group's shared one for schedulers that learn a table.

use crate::floor::schedulers::{slot_for, sync};
use crate::floor::snapshot::Snapshot;
use crate::floor::worker::Worker;
use crate::upstream::slots::Tried;
use balance::Candidate;
use config::HashKey;
use std::net::IpAddr;
use std::sync::atomic::Ordering;

/// Picks a server of group `group` not yet tried for this request; `key` is the request's
/// hash key (see [`extract_key`]) when the scheduler reads one.
pub fn pick(
    worker: &Worker,
    snap: &Snapshot,
    group: usize,
    tried: &Tried,
    key: Option<&[u8]>,
) -> Option<usize> {
    let g = snap.group(group);
    let epoch = worker.shared.weights_epoch.load(Ordering::Acquire);
    let mut cands = worker.candidates.borrow_mut();
    cands.clear();
    for (i, s) in g.servers.iter().enumerate() {
        let weight = s.live.effective_weight.load(Ordering::Relaxed);
        cands.push(Candidate {
            weight,
            active: s.active.load(Ordering::Relaxed),
            maxconn: s.maxconn,
            usable: weight > 0 && !tried.contains(i),
        });
    }
    if let Some(shared) = &g.shared {
        let mut slot = shared.lock().unwrap_or_else(|e| e.into_inner());
        sync(&mut slot, g, snap.generation, epoch);
        let Some(cluster) = worker.shared.cluster.get() else { return slot.sched.pick(&cands, key) };
        slot.sched.keep_learned();
        let picked = slot.sched.pick(&cands, key);
        slot.share_learned(&g.servers, cluster);
        return picked;
    }
    let mut scheds = worker.schedulers.borrow_mut();
    if snap.generation > scheds.generation || scheds.slots.len() != snap.groups.len() {
        scheds.refresh(snap, epoch);
    }
    if snap.generation == scheds.generation {
        let slot = &mut scheds.slots[group];
        sync(slot, g, snap.generation, epoch);
        return slot.sched.pick(&cands, key);
    }
    // A request still running on an older snapshot than this worker has seen: rare (only
    // around a reload), so a throwaway scheduler is fine.
    slot_for(g, snap.generation, epoch).sched.pick(&cands, key)
}

/// Copies the request's hash key for `key` into `out`; false when the request has none
/// (the scheduler then balances without it). Shared with `cswitch explain`.
pub fn extract_key(key: &HashKey, req: &impl rules::Request, out: &mut Vec<u8>) -> bool {
    out.clear();
    let target = req.target();
    let found: Option<&[u8]> = match key {
        HashKey::Url => Some(target),
        HashKey::Path => Some(target.split(|&b| b == b'?').next().unwrap_or(target)),
        HashKey::Host => req.header("host"),
        HashKey::Header(name) => req.header(name),
        HashKey::Cookie(name) => {
            let mut value = None;
            req.header_each("cookie", &mut |field| {
                value = balance::persist::find_cookie(field, name.as_bytes());
                value.is_some()
            });
            value
        }
        HashKey::Arg(name) => balance::persist::url_param(target, name.as_bytes()),
        HashKey::SrcIp => {
            push_ip(req.src().ip(), out);
            return true;
        }
    };
    match found {
        Some(bytes) => {
            out.extend_from_slice(bytes);
            true
        }
        None => false,
    }
}

/// Appends an address's octets: the `srcip` hash key of every listener.
pub fn push_ip(ip: IpAddr, out: &mut Vec<u8>) {
    match ip {
        IpAddr::V4(v4) => out.extend_from_slice(&v4.octets()),
        IpAddr::V6(v6) => out.extend_from_slice(&v6.octets()),
    }
}
