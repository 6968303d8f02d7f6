//! How many spare objects a per-worker free list keeps. Every object given back is kept (up
//! to a hard bound), so a steady load allocates nothing per request whatever its
//! concurrency; once a second the worker's housekeeping drops the spares that were not
//! needed during the whole second (the list's low-water mark), down to a floor, so a burst
//! does not pin its peak memory for more than a second or two. Counting only the list's
//! length, not objects in use, keeps it right when an object leaves without coming back
//! (a buffer that moves with its connection, one widened for a large body).

use std::cell::Cell;

/// At most this many spares, whatever the load (a burst's objects beyond it are freed).
const HARD: usize = 1024;

/// The keep policy of one free list (single-threaded: one per worker).
pub struct SpareLimit {
    floor: usize,
    /// The fewest spares the list held since the last trim.
    low: Cell<usize>,
}

impl SpareLimit {
    /// A policy that never trims below `floor` spares.
    pub const fn new(floor: usize) -> SpareLimit {
        SpareLimit { floor, low: Cell::new(0) }
    }

    /// An object was taken (or made: the list was empty); the list now holds `left`.
    pub fn took(&self, left: usize) {
        if left < self.low.get() {
            self.low.set(left);
        }
    }

    /// An object comes back while the list holds `spare`: whether to keep it.
    pub fn keeps(&self, spare: usize) -> bool {
        spare < HARD
    }

    /// The end of a period with `spare` objects in the list: how many to keep (drop the
    /// rest). The ones never taken during the period go, down to the floor.
    pub fn trim(&self, spare: usize) -> usize {
        let unused = self.low.get().min(spare.saturating_sub(self.floor));
        let keep = spare - unused;
        self.low.set(keep);
        keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_what_the_load_used_and_falls_back_to_the_floor() {
        let limit = SpareLimit::new(2);
        // A period in which the list went from 10 spares down to 3 and back.
        assert_eq!(limit.trim(10), 10, "first period: the low-water mark starts at 0");
        limit.took(3);
        assert_eq!(limit.trim(10), 7, "3 were never taken: dropped");
        assert_eq!(limit.trim(7), 2, "nothing taken since: the floor");
        assert_eq!(limit.trim(2), 2, "never below the floor");
        assert!(limit.keeps(500) && !limit.keeps(HARD));
    }
}
