//! The worker a thread runs, for what agents send unasked on its control connections
//! (`migrate`, `learned`): their reader tasks run on that worker's thread and need its
//! snapshot, tables and schedulers.

use crate::floor::worker::Worker;
use std::cell::RefCell;
use std::rc::{Rc, Weak};

thread_local! {
    static WORKER: RefCell<Weak<Worker>> = const { RefCell::new(Weak::new()) };
}

/// Called once per worker thread at start.
pub fn set(worker: &Rc<Worker>) {
    WORKER.with(|w| *w.borrow_mut() = Rc::downgrade(worker));
}

/// This thread's worker, while it runs.
pub(super) fn this() -> Option<Rc<Worker>> {
    WORKER.with(|w| w.borrow().upgrade())
}
