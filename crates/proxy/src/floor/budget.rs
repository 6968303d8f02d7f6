//! The memory bound of one HTTP/2 client connection (`limits.h2_connection_bytes`): what
//! its streams make the switch hold — each stream's header block while it runs, and the
//! bytes in its pipes, request DATA on their way to the request phases and answers on
//! their way back — is counted against one budget. A stream's pipe (`pipe`) writes only
//! while the budget has room, and no more than the room left, so the pipes together never
//! hold more than the bound: a full budget holds the connection's DATA back (the client's
//! flow-control window stays shut) and its answers (the servers' sockets fill), never
//! another connection's. A stream that opens while the budget is full is refused
//! (`http2`: RST_STREAM ENHANCE_YOUR_CALM).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// One connection's budget.
pub struct Budget {
    held: Cell<usize>,
    limit: usize,
    /// Writers waiting for room.
    waiting: RefCell<Vec<Waker>>,
}

impl Budget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Rc<Budget> {
        Rc::new(Budget { held: Cell::new(0), limit, waiting: RefCell::new(Vec::new()) })
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.held.get()
    }

    /// Whether nothing more may be held.
    pub fn full(&self) -> bool {
        self.held.get() >= self.limit
    }

    /// Counts `n` bytes held, room or not (a header block already received).
    pub fn charge(&self, n: usize) {
        self.held.set(self.held.get().saturating_add(n));
    }

    /// `n` bytes are no longer held: waiting writers look again.
    pub fn release(&self, n: usize) {
        self.held.set(self.held.get().saturating_sub(n));
        if n > 0 {
            self.waiting.borrow_mut().drain(..).for_each(Waker::wake);
        }
    }

    /// Bytes that may still be written; pending (woken by a release) while none.
    pub fn poll_room(&self, cx: &mut Context<'_>) -> Poll<usize> {
        let room = self.limit.saturating_sub(self.held.get());
        if room > 0 {
            return Poll::Ready(room);
        }
        let mut waiting = self.waiting.borrow_mut();
        if !waiting.iter().any(|w| w.will_wake(cx.waker())) {
            waiting.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// A header block counted for as long as its stream runs.
pub struct Charge {
    budget: Rc<Budget>,
    bytes: usize,
}

impl Charge {
    /// Counts `bytes` against `budget` until dropped.
    pub fn new(budget: &Rc<Budget>, bytes: usize) -> Charge {
        budget.charge(bytes);
        Charge { budget: Rc::clone(budget), bytes }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.release(self.bytes);
    }
}
