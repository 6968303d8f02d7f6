//! A scheduler instance and what it was last told: the snapshot generation and weights
//! epoch whose members it knows. Instances follow a group across reloads while its name,
//! kind and tunables stay the same, so learned tables and counters survive (`rebuild`
//! tells them the new members; their state follows servers by name). Most schedulers are
//! per worker (`floor::schedulers`); those that learn a table (`htrr`, `lard`, `lard_r`)
//! are one instance per group behind a mutex, held by the group.

use crate::floor::server::ServerRt;
use balance::{Member, Params, Scheduler, SchedulerKind};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// How long an assignment stays in this node's gossip state: enough for every node to take
/// it (they keep it in their tables after), short enough that 1,000 new keys per second
/// keep the state near 60,000 entries, the size of the tables they fill.
const SHARED_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// A scheduler and the snapshot generation and weights epoch whose members it was last
/// told about.
pub struct SchedSlot {
    group: String,
    kind: SchedulerKind,
    params: Params,
    generation: u64,
    epoch: u64,
    /// The scheduler.
    pub sched: Box<dyn Scheduler>,
}

impl SchedSlot {
    /// A fresh scheduler for `group`, told about its members.
    pub fn new(
        group: &str,
        kind: SchedulerKind,
        params: &Params,
        servers: &[Arc<ServerRt>],
        generation: u64,
        epoch: u64,
    ) -> SchedSlot {
        let mut sched = kind.build(params);
        sched.rebuild(&members(servers));
        SchedSlot { group: group.to_string(), kind, params: params.clone(), generation, epoch, sched }
    }

    /// Whether this slot can serve `group` (same name, kind and tunables).
    pub fn fits(&self, group: &str, kind: SchedulerKind, params: &Params) -> bool {
        self.group == group && self.kind == kind && self.params == *params
    }

    /// Tells the scheduler about `group`'s members if it last saw another generation's or
    /// other effective weights (health, slow start, agents).
    pub fn sync(&mut self, servers: &[Arc<ServerRt>], generation: u64, epoch: u64) {
        if self.generation != generation || self.epoch != epoch {
            self.sched.rebuild(&members(servers));
            self.generation = generation;
            self.epoch = epoch;
        }
    }

    /// Shares what the scheduler learned since the last call with the other nodes (a
    /// learning scheduler in a cluster, told to `keep_learned` before its pick; allocates
    /// only when there is something to share).
    pub fn share_learned(&mut self, servers: &[Arc<ServerRt>], cluster: &cluster::Cluster) {
        let mut learned = Vec::new();
        self.sched.drain_learned(&mut learned);
        if learned.is_empty() {
            return;
        }
        let entries: Vec<cluster::Learned> = learned
            .into_iter()
            .filter_map(|(hash, i)| {
                let server = servers.get(i)?.name.clone();
                Some(cluster::Learned { group: self.group.clone(), hash, server })
            })
            .collect();
        cluster.publish_assignments(&entries, SHARED_FOR);
    }

    /// Whether the scheduler wants one instance shared by all workers.
    pub fn shares_state(&self) -> bool {
        self.sched.shares_state()
    }
}

/// The shared instance of a group, carried from `previous` when it still fits.
pub fn shared_slot(
    group: &str,
    kind: SchedulerKind,
    params: &Params,
    servers: &[Arc<ServerRt>],
    previous: Option<&Arc<Mutex<SchedSlot>>>,
    generation: u64,
) -> Option<Arc<Mutex<SchedSlot>>> {
    if let Some(old) = previous {
        let mut slot = old.lock().unwrap_or_else(|e| e.into_inner());
        if slot.fits(group, kind, params) {
            let epoch = slot.epoch;
            slot.sync(servers, generation, epoch);
            return Some(Arc::clone(old));
        }
    }
    let slot = SchedSlot::new(group, kind, params, servers, generation, 0);
    slot.shares_state().then(|| Arc::new(Mutex::new(slot)))
}

fn members(servers: &[Arc<ServerRt>]) -> Vec<Member<'_>> {
    servers
        .iter()
        .map(|s| Member {
            name: &s.name,
            weight: s.live.effective_weight.load(Ordering::Relaxed),
            maxconn: s.maxconn,
        })
        .collect()
}
