//! A worker's client connections in accept order, with what each is doing, so admission
//! can make room under a flood (issue 17): at `max_client_connections` the oldest
//! connection that has not sent a complete request yet is closed to admit the new one,
//! else the oldest idle keep-alive one; a connection with a request in progress is never
//! closed for another. Connections mark their own state (a `Cell` write per request); the
//! table is scanned only when the limit is reached, and pruned by the worker's
//! housekeeping.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use tokio::task::AbortHandle;

/// What a connection is doing, as eviction sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnState {
    /// No complete request yet (silent, or its first head trickling in).
    Fresh,
    /// Between requests (keep-alive).
    Idle,
    /// A request in progress, or a connection-level session: never evicted.
    Busy,
}

/// One connection's state, shared by its task and the table.
pub type Slot = Rc<Cell<ConnState>>;

/// Which connection went, when one was evicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Evicted {
    /// One that had not sent a complete request.
    Fresh,
    /// An idle keep-alive one.
    Idle,
}

struct Entry {
    state: Slot,
    task: AbortHandle,
}

/// The table.
#[derive(Default)]
pub struct Conns {
    entries: RefCell<VecDeque<Entry>>,
}

impl Conns {
    /// Registers a connection's task, newest last.
    pub fn add(&self, state: Slot, task: AbortHandle) {
        self.entries.borrow_mut().push_back(Entry { state, task });
    }

    /// Closes the oldest fresh connection, else the oldest idle one.
    pub fn evict_one(&self) -> Option<Evicted> {
        let mut entries = self.entries.borrow_mut();
        entries.retain(|e| !e.task.is_finished());
        let pick = |want: ConnState| entries.iter().position(|e| e.state.get() == want);
        let (index, kind) = match pick(ConnState::Fresh) {
            Some(i) => (i, Evicted::Fresh),
            None => (pick(ConnState::Idle)?, Evicted::Idle),
        };
        let gone = entries.remove(index)?;
        gone.task.abort();
        Some(kind)
    }

    /// Forgets connections that ended.
    pub fn prune(&self) {
        self.entries.borrow_mut().retain(|e| !e.task.is_finished());
    }
}
