//! How many spare objects a per-worker free list keeps. Every object given back is kept (up
//! to a hard bound), so a steady load allocates nothing per request whatever its
//! concurrency; once a second the worker's housekeeping drops the spares that were not
//! needed during the whole second (the list's low-water mark), down to a floor, so a burst
//! does not pin its peak memory for more than a second or two. Counting only the list's
//! length, not objects in use, keeps it right when an object leaves without coming back
//! (a buffer that moves with its connection, one widened for a large body). [`Spares`] is
//! such a list (request buffers, scratch spaces, the ring's send buffers);
//! [`SpareLimit`] its policy.

/// At most this many spares, whatever the load (a burst's objects beyond it are freed).
const HARD: usize = 1024;

/// The keep policy of one free list (single-threaded: one per worker).
struct SpareLimit {
    floor: usize,
    /// The fewest spares the list held since the last trim.
    low: usize,
}

impl SpareLimit {
    /// A policy that never trims below `floor` spares.
    const fn new(floor: usize) -> SpareLimit {
        SpareLimit { floor, low: 0 }
    }

    /// An object was taken (or made: the list was empty); the list now holds `left`.
    fn took(&mut self, left: usize) {
        self.low = self.low.min(left);
    }

    /// An object comes back while the list holds `spare`: whether to keep it.
    fn keeps(&self, spare: usize) -> bool {
        spare < HARD
    }

    /// The end of a period with `spare` objects in the list: how many to keep (drop the
    /// rest). The ones never taken during the period go, down to the floor.
    fn trim(&mut self, spare: usize) -> usize {
        let unused = self.low.min(spare.saturating_sub(self.floor));
        let keep = spare - unused;
        self.low = keep;
        keep
    }
}

/// A worker's free list of spare objects under a [`SpareLimit`]: what was given back is
/// taken again before anything new is made.
pub struct Spares<T> {
    list: Vec<T>,
    keep: SpareLimit,
}

impl<T> Spares<T> {
    /// An empty list that never trims below `floor` spares.
    pub const fn new(floor: usize) -> Spares<T> {
        Spares { list: Vec::new(), keep: SpareLimit::new(floor) }
    }

    /// A spare, if there is one.
    pub fn pop(&mut self) -> Option<T> {
        let spare = self.list.pop();
        self.keep.took(self.list.len());
        spare
    }

    /// Keeps `spare` (dropped when the list is at its hard bound).
    pub fn push(&mut self, spare: T) {
        if self.keep.keeps(self.list.len()) {
            self.list.push(spare);
        }
    }

    /// The end of a period (the worker's housekeeping, once a second): drops the spares it
    /// did not need.
    pub fn trim(&mut self) {
        let keep = self.keep.trim(self.list.len());
        self.list.truncate(keep);
    }

    /// How many spares it holds.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.list.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_what_the_load_used_and_falls_back_to_the_floor() {
        let mut limit = SpareLimit::new(2);
        // A period in which the list went from 10 spares down to 3 and back.
        assert_eq!(limit.trim(10), 10, "first period: the low-water mark starts at 0");
        limit.took(3);
        assert_eq!(limit.trim(10), 7, "3 were never taken: dropped");
        assert_eq!(limit.trim(7), 2, "nothing taken since: the floor");
        assert_eq!(limit.trim(2), 2, "never below the floor");
        assert!(limit.keeps(500) && !limit.keeps(HARD));
    }
}
