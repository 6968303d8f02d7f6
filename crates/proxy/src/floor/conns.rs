//! A worker's client connections in accept order, with what each is doing, so admission
//! can make room under a flood (issue 17): at `max_client_connections` the oldest
//! connection that has not sent a complete request yet is closed to admit the new one,
//! else an idle keep-alive one (parked ones first: `floor::parked`); a connection with a
//! request in progress is never closed for another. Connections mark their own state (a
//! `Cell` write per request); the table is scanned only when the limit is reached, and
//! pruned by the worker's housekeeping.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::task::Waker;
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
pub type Slot = Rc<Watch>;

/// What the table knows of a connection: what it is doing, and since when it has been
/// waiting for a request's first byte. The idle timeout is the table's to enforce (the
/// worker's housekeeping closes connections that waited too long), so a waiting connection
/// carries no timer of its own: a timer is over 100 bytes, and every silent or idle
/// connection would hold one. The housekeeping also asks a keep-alive connection that has
/// waited `floor::parked::PARK_AFTER` to park: it wakes the connection's task, which then
/// leaves the runtime.
pub struct Watch {
    state: Cell<ConnState>,
    /// The housekeeping asked it to park.
    park: Cell<bool>,
    /// When it began to wait, in [`ticks`]; 0: not waiting. (Four bytes, not an `Instant`'s
    /// sixteen: every connection has one.)
    waiting_since: Cell<u32>,
    /// Wakes its task while it waits for a request and may park (otherwise `None`).
    waker: Cell<Option<Waker>>,
}

/// Tenths of a second since the process's first call, from 1 (wraps after 13 years).
pub fn ticks() -> u32 {
    static BASE: std::sync::OnceLock<tokio::time::Instant> = std::sync::OnceLock::new();
    let base = *BASE.get_or_init(crate::floor::clock::now);
    let age = crate::floor::clock::now().saturating_duration_since(base);
    u32::try_from(age.as_millis() / 100).unwrap_or(u32::MAX - 1) + 1
}

impl Watch {
    /// A new connection: fresh, not yet waiting.
    pub fn new() -> Watch {
        Watch::with(ConnState::Fresh)
    }

    /// A connection in `state`, not yet waiting.
    pub fn with(state: ConnState) -> Watch {
        Watch {
            state: Cell::new(state),
            park: Cell::new(false),
            waiting_since: Cell::new(0),
            waker: Cell::new(None),
        }
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
        if !yes {
            self.park.set(false);
            self.waker.set(None);
        }
    }

    /// When it began to wait, in [`ticks`] (0: not waiting).
    pub fn waiting_since(&self) -> u32 {
        self.waiting_since.get()
    }

    /// The waiting connection may park: `waker` wakes its task when it should. A clone
    /// only when the task's waker changed (one per wait: a reference count, no allocation).
    pub fn may_park(&self, waker: &Waker) {
        let old = self.waker.take();
        let same = old.as_ref().is_some_and(|w| w.will_wake(waker));
        self.waker.set(if same { old } else { Some(waker.clone()) });
    }

    /// Whether the housekeeping asked it to park.
    pub fn park_asked(&self) -> bool {
        self.park.get()
    }

    /// Asks a connection that may park to park (wakes its task); false if it may not.
    fn ask_park(&self) -> bool {
        let Some(waker) = self.waker.take() else { return false };
        self.park.set(true);
        waker.wake();
        true
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

    /// Closes the oldest connection in state `want` (fresh or idle); false if none is.
    /// (Parked connections are not here: `floor::parked` evicts those.)
    pub fn evict(&self, want: ConnState) -> bool {
        let mut entries = self.entries.borrow_mut();
        entries.retain(|e| !e.task.is_finished());
        let Some(index) = entries.iter().position(|e| e.state.get() == want) else { return false };
        if let Some(gone) = entries.remove(index) {
            gone.task.abort();
        }
        true
    }

    /// Forgets connections that ended, closes those that have waited for a request
    /// longer than `idle` (how many: the idle timeouts), and asks those that have waited
    /// `park` and may park to do so. Called every 250 ms, so a connection closes within
    /// that much of its timeout.
    pub fn sweep(&self, idle: std::time::Duration, park: std::time::Duration) -> usize {
        let now = ticks();
        let in_ticks =
            |d: std::time::Duration| u32::try_from(d.as_millis().div_ceil(100)).unwrap_or(u32::MAX);
        let (idle, park) = (in_ticks(idle), in_ticks(park));
        let mut expired = 0;
        self.entries.borrow_mut().retain(|e| {
            if e.task.is_finished() {
                return false;
            }
            let since = e.state.waiting_since.get();
            let waited = if since == 0 { 0 } else { now.saturating_sub(since) };
            if since != 0 && waited >= idle {
                e.task.abort();
                expired += 1;
                return false;
            }
            // Only keep-alive connections park; a fresh one waits where eviction looks first.
            if since != 0 && waited >= park && !e.state.park.get() && e.state.get() == ConnState::Idle {
                e.state.ask_park();
            }
            true
        });
        expired
    }

    /// A binary upgrade's hand-over: asks every connection waiting for a request to leave
    /// (its task hands it to the new process), and closes those waiting that cannot leave
    /// (TLS-terminated keep-alive ones: a rustls session cannot be passed on). Returns how
    /// many were closed.
    pub fn hand_over_waiting(&self) -> usize {
        let mut closed = 0;
        self.entries.borrow_mut().retain(|e| {
            if e.task.is_finished() {
                return false;
            }
            if e.state.waiting_since.get() == 0 || e.state.park.get() {
                return true; // busy: it looks again at its next wait
            }
            if e.state.ask_park() {
                return true;
            }
            if e.state.get() == ConnState::Idle {
                e.task.abort();
                closed += 1;
                return false;
            }
            true
        });
        closed
    }
}
