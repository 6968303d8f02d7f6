//! Per-worker HTTP/2 connections to the servers of `server_protocol = "h2"` groups: one per
//! server, shared by every request the worker sends it (streams multiplexed; the `h2`
//! crate makes a stream wait while the server's `SETTINGS_MAX_CONCURRENT_STREAMS` are in
//! use). While one request opens the connection, the others wait for it rather than open
//! their own. The housekeeping lets go of a connection no request used for
//! `timeouts.pool_idle`, as of an idle pooled HTTP/1.1 connection. The connection's task (`upstream::h2`) drives it; a handle that finds it
//! gone is forgotten and the next request connects again.

use bytes::Bytes;
use h2::client::SendRequest;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

enum Entry {
    /// The connection, and when a request last took a stream on it.
    Ready(SendRequest<Bytes>, Instant),
    /// A request is opening it; woken when it is there or failed.
    Opening(Rc<Notify>),
}

/// The worker's HTTP/2 server connections, by server id.
#[derive(Default)]
pub struct H2Pools {
    conns: RefCell<HashMap<u64, Entry>>,
}

/// What a request finds for its server.
pub enum Found<'a> {
    /// The connection: a handle to it.
    Ready(SendRequest<Bytes>),
    /// Another request is opening it: wait, then look again.
    Wait(Rc<Notify>),
    /// Nothing: this request opens it (the others wait until it is done or dropped).
    Open(Opening<'a>),
}

/// The right, and duty, to open server `id`'s connection.
pub struct Opening<'a> {
    pools: &'a H2Pools,
    id: u64,
    notify: Rc<Notify>,
}

impl H2Pools {
    /// The connection to server `id`, a wait for it, or the task of opening it.
    pub fn find(&self, id: u64) -> Found<'_> {
        let mut conns = self.conns.borrow_mut();
        match conns.get_mut(&id) {
            Some(Entry::Ready(send, used)) => {
                *used = Instant::now();
                Found::Ready(send.clone())
            }
            Some(Entry::Opening(n)) => Found::Wait(Rc::clone(n)),
            None => {
                let notify = Rc::new(Notify::new());
                conns.insert(id, Entry::Opening(Rc::clone(&notify)));
                Found::Open(Opening { pools: self, id, notify })
            }
        }
    }

    /// Forgets the connection to server `id` (it failed).
    pub fn forget(&self, id: u64) {
        let mut conns = self.conns.borrow_mut();
        if matches!(conns.get(&id), Some(Entry::Ready(..))) {
            conns.remove(&id);
        }
    }

    /// Lets go of connections no request took a stream on for `max_idle`, and of servers no
    /// longer configured (`keep` says which ids are). A connection closes once the streams
    /// still running on it end.
    pub fn sweep(&self, max_idle: Duration, keep: impl Fn(u64) -> bool) {
        let now = Instant::now();
        self.conns.borrow_mut().retain(|id, entry| match entry {
            Entry::Ready(_, used) => keep(*id) && now.duration_since(*used) < max_idle,
            Entry::Opening(_) => true,
        });
    }
}

impl Opening<'_> {
    /// The connection is open: kept, and the waiting requests woken.
    pub fn done(self, send: SendRequest<Bytes>) {
        self.pools.conns.borrow_mut().insert(self.id, Entry::Ready(send, Instant::now()));
    }
}

impl Drop for Opening<'_> {
    /// Wakes the waiting requests; when the opening failed (or was abandoned), the next
    /// one to look opens it.
    fn drop(&mut self) {
        let mut conns = self.pools.conns.borrow_mut();
        if matches!(conns.get(&self.id), Some(Entry::Opening(n)) if Rc::ptr_eq(n, &self.notify)) {
            conns.remove(&self.id);
        }
        self.notify.notify_waiters();
    }
}
