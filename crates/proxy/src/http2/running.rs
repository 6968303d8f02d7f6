//! The streams of one connection still running on the switch's side: counted, aborted
//! together when the connection is abandoned or ends, and each taking itself out when its
//! task ends (or is aborted), so nothing waits to be collected. Cheaper per stream than
//! tokio's `JoinSet` (an entry, a lock and a list move per stream, ADR 0022): the tasks
//! run on the connection's own thread, so a `RefCell` does.

use std::cell::{Cell, RefCell};
use std::future::Future;
use tokio::task::AbortHandle;

/// The running streams' abort handles, by slot.
#[derive(Default)]
pub struct Running {
    slots: RefCell<Vec<Option<AbortHandle>>>,
    free: RefCell<Vec<usize>>,
    count: Cell<usize>,
}

/// A stream's place in [`Running`], given back when its task ends.
pub struct Slot(usize);

impl Slot {
    /// The same place (one for the spawner, one for the stream's end).
    pub fn of(slot: &Slot) -> Slot {
        Slot(slot.0)
    }
}

impl Running {
    pub fn len(&self) -> usize {
        self.count.get()
    }

    pub fn is_empty(&self) -> bool {
        self.count.get() == 0
    }

    /// A slot for the next stream; it must be filled by [`Running::spawn`].
    pub fn reserve(&self) -> Slot {
        let free = self.free.borrow_mut().pop();
        Slot(free.unwrap_or_else(|| {
            let mut slots = self.slots.borrow_mut();
            slots.push(None);
            slots.len() - 1
        }))
    }

    /// Spawns `stream` on this thread into `slot`; the stream gives `slot` back with
    /// [`Running::ended`] when it ends.
    pub fn spawn<F: Future<Output = ()> + 'static>(&self, slot: &Slot, stream: F) {
        let handle = tokio::task::spawn_local(stream).abort_handle();
        if let Some(place) = self.slots.borrow_mut().get_mut(slot.0) {
            *place = Some(handle);
        }
        self.count.set(self.count.get() + 1);
    }

    /// The stream in `slot` ended (its task finished or was aborted).
    pub fn ended(&self, slot: &Slot) {
        if let Some(place) = self.slots.borrow_mut().get_mut(slot.0) {
            if place.take().is_some() {
                self.count.set(self.count.get().saturating_sub(1));
            }
        }
        self.free.borrow_mut().push(slot.0);
    }

    /// Aborts every running stream (each is dropped at its task's next turn, which gives
    /// its slot back).
    pub fn abort_all(&self) {
        let handles: Vec<AbortHandle> = self.slots.borrow().iter().flatten().cloned().collect();
        for h in handles {
            h.abort();
        }
    }
}
