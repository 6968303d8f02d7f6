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
use tokio::time::Instant;

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
pub type Slot = Rc<Watch>;

/// What the table knows of a connection: what it is doing, and since when it has been
/// waiting for a request's first byte. The idle timeout is the table's to enforce (the
/// worker's housekeeping closes connections that waited too long), so a waiting connection
/// carries no timer of its own: a timer is over 100 bytes, and every silent or idle
/// connection would hold one.
pub struct Watch {
    state: Cell<ConnState>,
    /// When it began to wait, in [`ticks`]; 0: not waiting. (Four bytes, not an `Instant`'s
    /// sixteen: every connection has one.)
    waiting_since: Cell<u32>,
}

/// Tenths of a second since the process's first call, from 1 (wraps after 13 years).
fn ticks() -> u32 {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let base = *BASE.get_or_init(Instant::now);
    u32::try_from(base.elapsed().as_millis() / 100).unwrap_or(u32::MAX - 1) + 1
}

impl Watch {
    /// A new connection: fresh, not yet waiting.
    pub fn new() -> Watch {
        Watch { state: Cell::new(ConnState::Fresh), waiting_since: Cell::new(0) }
    }

    /// What it is doing.
    pub fn get(&self) -> ConnState {
        self.state.get()
    }

    /// Says what it is doing.
    pub fn set(&self, state: ConnState) {
        self.state.set(state);
    }

    /// Waiting for a request's first byte from now (`true`), or no longer (`false`).
    pub fn waiting(&self, yes: bool) {
        self.waiting_since.set(if yes { ticks() } else { 0 });
    }
}

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
pub struct Conns {
    entries: RefCell<VecDeque<Entry>>,
}

impl Default for Conns {
    /// Room for 4,096 connections reserved at once (64 KiB of address space, resident as
    /// it fills): the table's growth should not be part of what a connection costs.
    fn default() -> Self {
        Conns { entries: RefCell::new(VecDeque::with_capacity(4096)) }
    }
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

    /// Forgets connections that ended, and closes those that have waited for a request
    /// longer than `idle` (how many: the idle timeouts). Called every 250 ms, so a
    /// connection closes within that much of its timeout.
    pub fn sweep(&self, idle: std::time::Duration) -> usize {
        let now = ticks();
        let idle = u32::try_from(idle.as_millis().div_ceil(100)).unwrap_or(u32::MAX);
        let mut expired = 0;
        self.entries.borrow_mut().retain(|e| {
            if e.task.is_finished() {
                return false;
            }
            let since = e.state.waiting_since.get();
            let waited_out = since != 0 && now.saturating_sub(since) >= idle;
            if waited_out {
                e.task.abort();
                expired += 1;
            }
            !waited_out
        });
        expired
    }
}
