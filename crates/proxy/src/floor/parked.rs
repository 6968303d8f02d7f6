//! Keep-alive client connections parked out of the runtime (issue 14, ADR 0009).
//!
//! A plain HTTP connection that has waited [`PARK_AFTER`] for its next request leaves
//! tokio: its task ends, its socket is taken out of the runtime's reactor and put into
//! this worker's own epoll set, and what the connection must remember (a [`Resting`],
//! under 100 bytes) goes into a slab. A task, its future and the reactor's registration
//! cost some 900 bytes per connection; a parked one costs its slab slot. When the socket
//! turns readable (the next request, or the client's close) the worker's resume loop takes
//! it out of the set and serves it as a task again. Connections that wait less than
//! `PARK_AFTER` (a busy keep-alive client) never park, so the request path pays nothing.
//!
//! The table keeps the connection counted as open while it is parked (admission and the
//! listener's figure), enforces `client_idle` on it, and closes the oldest one when
//! admission needs room.

use crate::floor::conns::ticks;
use crate::floor::shared::Shared;
use crate::floor::worker::uncount;
use rustix::event::epoll;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::io;
use std::mem::MaybeUninit;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// How long a keep-alive connection waits for its next request as a task before it parks.
pub const PARK_AFTER: Duration = Duration::from_secs(1);

/// Most connections resumed per turn of the resume loop (it yields between batches).
pub const BATCH: usize = 64;

/// What a parked connection keeps: enough for its wing to serve it again.
pub struct Resting {
    /// The socket, out of the runtime.
    pub stream: TcpStream,
    /// The client's address.
    pub peer: SocketAddr,
    /// Its listener (index in the snapshot).
    pub listener: u32,
    /// When it began to wait for a request, in [`ticks`] (`client_idle` counts from there).
    pub since: u32,
    /// The wing's connection id.
    pub id: u64,
    /// A request of this connection has been answered by a server.
    pub served: bool,
    /// Whatever else the wing keeps for it (boxed already, so parking allocates nothing).
    pub extra: Option<Box<dyn Any>>,
}

#[derive(Default)]
struct Slab {
    slots: Vec<Option<Resting>>,
    free: Vec<u32>,
    len: usize,
}

/// A worker's parked connections.
pub struct Parked {
    /// The epoll set they wait in; `None` if it could not be made (nothing parks then).
    epoll: Option<OwnedFd>,
    /// False once the resume loop found it cannot watch the set.
    enabled: Cell<bool>,
    slab: RefCell<Slab>,
    shared: Arc<Shared>,
}

impl Parked {
    /// An empty table with its own epoll set.
    pub fn new(shared: Arc<Shared>) -> Parked {
        let epoll = match epoll::create(epoll::CreateFlags::CLOEXEC) {
            Ok(fd) => Some(fd),
            Err(e) => {
                tracing::warn!(error = %e, "no epoll set for idle connections; they stay tasks");
                None
            }
        };
        let enabled = Cell::new(epoll.is_some());
        Parked { epoll, enabled, slab: RefCell::new(Slab::default()), shared }
    }

    /// Whether connections can park here.
    pub fn enabled(&self) -> bool {
        self.enabled.get()
    }

    /// Parks nothing from now on (nothing could wake a parked connection).
    pub fn disable(&self) {
        self.enabled.set(false);
    }

    /// The epoll set (a second descriptor of it) registered with the runtime's reactor, for
    /// the resume loop to wait on: it turns readable when a parked socket does.
    pub fn watch(&self) -> io::Result<AsyncFd<OwnedFd>> {
        let Some(epoll) = &self.epoll else { return Err(io::ErrorKind::Unsupported.into()) };
        let fd = epoll.try_clone()?;
        // tokio deprecated its safe constructors (an arbitrary `AsRawFd` type cannot promise
        // its descriptor stays open and the same while registered) in favour of an `unsafe`
        // one. An `OwnedFd` moved into the `AsyncFd` does promise it, so the safe constructor
        // is sound here, and using it keeps the proxy crate free of `unsafe` (the workspace's
        // only `unsafe` is `oneway::repair`; ADR 0009).
        #[allow(deprecated)]
        AsyncFd::with_interest(fd, Interest::READABLE)
    }

    /// Parks a connection, still counted as open; gives it back if its socket could not
    /// join the set (the wing then serves it as a task again).
    pub fn park(&self, r: Resting) -> Result<(), Resting> {
        let (Some(epoll), true) = (&self.epoll, self.enabled.get()) else { return Err(r) };
        let mut slab = self.slab.borrow_mut();
        let index = match slab.free.pop() {
            Some(i) => i as usize,
            None => slab.slots.len(),
        };
        // Level-triggered: a ready socket stays ready in the set until it is taken out.
        let flags = epoll::EventFlags::IN | epoll::EventFlags::RDHUP;
        if let Err(e) = epoll::add(epoll, &r.stream, epoll::EventData::new_u64(index as u64), flags) {
            if index < slab.slots.len() {
                slab.free.push(index as u32);
            }
            tracing::debug!(error = %e, "idle connection not parked");
            return Err(r);
        }
        if index == slab.slots.len() {
            slab.slots.push(Some(r));
        } else {
            slab.slots[index] = Some(r);
        }
        slab.len += 1;
        Ok(())
    }

    /// Takes up to [`BATCH`] connections whose sockets turned readable out of the set and
    /// hands each to `resume` (which takes over its count); how many there were.
    pub fn take_ready(&self, watch: &OwnedFd, mut resume: impl FnMut(Resting)) -> usize {
        let Some(epoll) = &self.epoll else { return 0 };
        let mut events = [MaybeUninit::<epoll::Event>::uninit(); BATCH];
        let now = rustix::time::Timespec { tv_sec: 0, tv_nsec: 0 };
        let ready = match epoll::wait(watch, &mut events[..], Some(&now)) {
            Ok((ready, _)) => ready,
            Err(_) => return 0,
        };
        let n = ready.len();
        for event in ready.iter() {
            let Some(r) = self.remove(event.data.u64() as usize) else { continue };
            // Out of the set before the runtime registers it: the next readiness is the
            // runtime's. (Closing would remove it too; a live socket must be removed.)
            let _ = epoll::delete(epoll, &r.stream);
            resume(r);
        }
        n
    }

    /// Closes parked connections that have waited `idle` or longer; how many.
    pub fn sweep(&self, idle: Duration) -> usize {
        let limit = u32::try_from(idle.as_millis().div_ceil(100)).unwrap_or(u32::MAX);
        let now = ticks();
        let expired: Vec<usize> = {
            let slab = self.slab.borrow();
            let waited_out = |r: &Resting| now.saturating_sub(r.since) >= limit;
            let slots = slab.slots.iter().enumerate();
            slots.filter(|(_, s)| s.as_ref().is_some_and(waited_out)).map(|(i, _)| i).collect()
        };
        for &i in &expired {
            self.close(i);
        }
        self.shrink();
        expired.len()
    }

    /// Closes the connection that has waited longest (admission needs room); false if
    /// none is parked.
    pub fn evict_oldest(&self) -> bool {
        let oldest = {
            let slab = self.slab.borrow();
            let slots = slab.slots.iter().enumerate();
            slots.filter_map(|(i, s)| s.as_ref().map(|r| (r.since, i))).min().map(|(_, i)| i)
        };
        oldest.is_some_and(|i| self.close(i))
    }

    /// Takes every parked connection out of the set and the table (a binary upgrade hands
    /// them to the new process); their counts go with them.
    pub fn take_all(&self) -> Vec<Resting> {
        let slots = std::mem::take(&mut *self.slab.borrow_mut());
        let taken: Vec<Resting> = slots.slots.into_iter().flatten().collect();
        if let Some(epoll) = &self.epoll {
            for r in &taken {
                let _ = epoll::delete(epoll, &r.stream);
            }
        }
        taken
    }

    /// Closes every parked connection (shutdown: none has a request in flight).
    pub fn close_all(&self) {
        let slots = std::mem::take(&mut *self.slab.borrow_mut());
        for r in slots.slots.into_iter().flatten() {
            uncount(&self.shared, r.listener as usize);
        }
    }

    fn close(&self, index: usize) -> bool {
        let Some(r) = self.remove(index) else { return false };
        uncount(&self.shared, r.listener as usize);
        true // dropping the socket closes it, which also takes it out of the set
    }

    fn remove(&self, index: usize) -> Option<Resting> {
        let mut slab = self.slab.borrow_mut();
        let r = slab.slots.get_mut(index)?.take()?;
        slab.free.push(index as u32);
        slab.len -= 1;
        Some(r)
    }

    /// Gives back the slab's room when far fewer connections are parked than at its peak
    /// (only free slots at its end can go: a slot's index is its socket's key in the set).
    fn shrink(&self) {
        let mut slab = self.slab.borrow_mut();
        if slab.slots.capacity() < 1024 || slab.slots.capacity() < 4 * slab.len {
            return;
        }
        while let Some(None) = slab.slots.last() {
            slab.slots.pop();
        }
        let end = slab.slots.len() as u32;
        slab.free.retain(|&i| i < end);
        slab.slots.shrink_to_fit();
        slab.free.shrink_to_fit();
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        self.close_all();
    }
}
