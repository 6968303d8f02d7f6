//! Phase "pick": the group's scheduler over live load counters, fed the request's hash key.
//!
//! Scheduler instances follow a group across reloads while its name, kind and tunables
//! stay the same, so learned tables and counters survive (`rebuild` tells them the new
//! members; their state follows servers by name). Most schedulers are per worker (no
//! lock); those whose decisions come from a learned table (`htrr`, `lard`, `lard_r`) are
//! one instance per group behind a mutex, so every worker sends a target to the same place.

use crate::snapshot::{GroupRt, Snapshot};
use crate::upstream::Tried;
use crate::worker::Worker;
use balance::{Candidate, Member, Params, Scheduler, SchedulerKind};
use config::HashKey;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

/// A scheduler and the snapshot generation and weights epoch whose members it was last
/// told about.
pub struct SchedSlot {
    group: String,
    kind: SchedulerKind,
    params: Params,
    generation: u64,
    epoch: u64,
    sched: Box<dyn Scheduler>,
}

impl SchedSlot {
    /// A fresh scheduler for `group`, told about its members.
    pub fn new(group: &GroupRt, generation: u64, epoch: u64) -> SchedSlot {
        let mut sched = group.scheduler.build(&group.params);
        sched.rebuild(&members(group));
        SchedSlot {
            group: group.name.clone(),
            kind: group.scheduler,
            params: group.params.clone(),
            generation,
            epoch,
            sched,
        }
    }

    /// Whether this slot can serve `group` (same name, kind and tunables).
    fn fits(&self, group: &GroupRt) -> bool {
        self.group == group.name && self.kind == group.scheduler && self.params == group.params
    }

    /// Tells the scheduler about `group`'s members if it last saw another generation's or
    /// other effective weights (health, slow start, agents).
    fn sync(&mut self, group: &GroupRt, generation: u64, epoch: u64) {
        if self.generation != generation || self.epoch != epoch {
            self.sched.rebuild(&members(group));
            self.generation = generation;
            self.epoch = epoch;
        }
    }

    /// Whether the scheduler wants one instance shared by all workers.
    pub fn shares_state(&self) -> bool {
        self.sched.shares_state()
    }
}

/// The shared instance of a group, carried from `previous` when it still fits.
pub fn shared_slot(
    group: &GroupRt,
    previous: Option<&GroupRt>,
    generation: u64,
) -> Option<std::sync::Arc<Mutex<SchedSlot>>> {
    if let Some(old) = previous.and_then(|p| p.shared.as_ref()) {
        let mut slot = old.lock().unwrap_or_else(|e| e.into_inner());
        if slot.fits(group) {
            let epoch = slot.epoch;
            slot.sync(group, generation, epoch);
            return Some(std::sync::Arc::clone(old));
        }
    }
    let slot = SchedSlot::new(group, generation, 0);
    slot.shares_state().then(|| std::sync::Arc::new(Mutex::new(slot)))
}

fn members(group: &GroupRt) -> Vec<Member<'_>> {
    group
        .servers
        .iter()
        .map(|s| Member {
            name: &s.name,
            weight: s.live.effective_weight.load(Ordering::Relaxed),
            maxconn: s.maxconn,
        })
        .collect()
}

/// A worker's schedulers, one per group of the newest snapshot it has seen.
#[derive(Default)]
pub struct WorkerSchedulers {
    generation: u64,
    slots: Vec<SchedSlot>,
}

impl WorkerSchedulers {
    /// Moves to `snap`'s groups, keeping each slot that still fits its group.
    fn refresh(&mut self, snap: &Snapshot, epoch: u64) {
        let mut old: Vec<Option<SchedSlot>> = std::mem::take(&mut self.slots).into_iter().map(Some).collect();
        for group in &snap.groups {
            let kept =
                old.iter_mut().find(|s| s.as_ref().is_some_and(|s| s.fits(group))).and_then(Option::take);
            let slot = match kept {
                Some(mut slot) => {
                    slot.sync(group, snap.generation, epoch);
                    slot
                }
                None => SchedSlot::new(group, snap.generation, epoch),
            };
            self.slots.push(slot);
        }
        self.generation = snap.generation;
    }
}

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
        slot.sync(g, snap.generation, epoch);
        return slot.sched.pick(&cands, key);
    }
    let mut scheds = worker.schedulers.borrow_mut();
    if snap.generation > scheds.generation || scheds.slots.len() != snap.groups.len() {
        scheds.refresh(snap, epoch);
    }
    if snap.generation == scheds.generation {
        let slot = &mut scheds.slots[group];
        slot.sync(g, snap.generation, epoch);
        return slot.sched.pick(&cands, key);
    }
    // A request still running on an older snapshot than this worker has seen: rare (only
    // around a reload), so a throwaway scheduler is fine.
    SchedSlot::new(g, snap.generation, epoch).sched.pick(&cands, key)
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
            match req.src().ip() {
                IpAddr::V4(v4) => out.extend_from_slice(&v4.octets()),
                IpAddr::V6(v6) => out.extend_from_slice(&v6.octets()),
            }
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
