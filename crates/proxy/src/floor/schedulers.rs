//! A worker's own scheduler instances, one per group of the newest snapshot it has seen
//! (no lock on the pick). Moving to a new snapshot keeps each instance whose group still
//! fits it.

use crate::floor::group::GroupRt;
use crate::floor::sched_slot::SchedSlot;
use crate::floor::snapshot::Snapshot;

/// A worker's schedulers, one per group of the newest snapshot it has seen.
#[derive(Default)]
pub struct WorkerSchedulers {
    /// The snapshot generation the slots follow.
    pub generation: u64,
    /// One slot per group of that snapshot, in order.
    pub slots: Vec<SchedSlot>,
}

impl WorkerSchedulers {
    /// Moves to `snap`'s groups, keeping each slot that still fits its group.
    pub fn refresh(&mut self, snap: &Snapshot, epoch: u64) {
        let mut old: Vec<Option<SchedSlot>> = std::mem::take(&mut self.slots).into_iter().map(Some).collect();
        for group in &snap.groups {
            let kept =
                old.iter_mut().find(|s| s.as_ref().is_some_and(|s| fits(s, group))).and_then(Option::take);
            let slot = match kept {
                Some(mut slot) => {
                    sync(&mut slot, group, snap.generation, epoch);
                    slot
                }
                None => slot_for(group, snap.generation, epoch),
            };
            self.slots.push(slot);
        }
        self.generation = snap.generation;
    }
}

/// A fresh scheduler for `group`, told about its members.
pub fn slot_for(group: &GroupRt, generation: u64, epoch: u64) -> SchedSlot {
    SchedSlot::new(&group.name, group.scheduler, &group.params, &group.servers, generation, epoch)
}

/// Whether `slot` can serve `group` (same name, kind and tunables).
pub fn fits(slot: &SchedSlot, group: &GroupRt) -> bool {
    slot.fits(&group.name, group.scheduler, &group.params)
}

/// Tells `slot` about `group`'s members if it last saw another generation or epoch.
pub fn sync(slot: &mut SchedSlot, group: &GroupRt, generation: u64, epoch: u64) {
    slot.sync(&group.servers, generation, epoch);
}
