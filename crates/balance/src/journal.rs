//! What a learning scheduler (`htrr`, `lard`, `lard_r`) decided about keys, kept for a
//! cluster to share: each new or changed assignment as (key hash, member index). Off until
//! [`crate::Scheduler::keep_learned`] is called (outside a cluster nothing is kept); once
//! on, the journal is allocated once and holds at most [`JOURNAL`] entries between two
//! drains (the proxy drains it after every pick, so it never fills in practice; a full
//! journal drops entries, which then stay local to this node).

/// Most assignments kept between two drains.
pub(crate) const JOURNAL: usize = 1024;

/// Assignments since the last drain.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    on: bool,
    entries: Vec<(u64, usize)>,
}

impl Journal {
    /// Starts keeping assignments (idempotent).
    pub(crate) fn start(&mut self) {
        if !self.on {
            self.on = true;
            self.entries.reserve_exact(JOURNAL);
        }
    }

    /// Notes that the key with `hash` now goes to `member` (nothing when off or full:
    /// never allocates).
    pub(crate) fn note(&mut self, hash: u64, member: usize) {
        if self.on && self.entries.len() < JOURNAL {
            self.entries.push((hash, member));
        }
    }

    /// Moves the assignments noted since the last drain to `out`.
    pub(crate) fn drain(&mut self, out: &mut Vec<(u64, usize)>) {
        out.append(&mut self.entries);
    }
}
