//! Worker-local pools of idle server connections, keyed by server id.
//!
//! A worker owns its pools (no lock on the data path). A connection goes back to its
//! server's pool after a complete exchange that both sides allow to persist; a client
//! connection whose requests move from server A to B and back to A takes A's idle
//! connection again (the user-space form of DWSR's switch-back, seed 001).

use crate::floor::clock;
use crate::floor::socket::Socket;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Duration;
use tokio::time::Instant;

struct Idle {
    stream: Socket,
    since: Instant,
    /// The client connection whose request it carried last.
    owner: u64,
}

/// Which idle connections a request may take (a group's `reuse` policy, applied).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    /// Any idle connection to the server.
    Any,
    /// Only one the client connection `owner` used last.
    OwnedBy(u64),
}

/// Idle connections of one worker, by server id (ids the switch numbers itself, never a
/// client's bytes: no hash flooding to fear, so no SipHash, taken twice per request).
pub struct Pools {
    idle: RefCell<HashMap<u64, Vec<Idle>, BuildHasherDefault<IdHasher>>>,
    max_per_server: usize,
}

impl Pools {
    /// Empty pools keeping at most `max_per_server` idle connections per server.
    pub fn new(max_per_server: usize) -> Self {
        Pools { idle: RefCell::new(HashMap::default()), max_per_server }
    }

    /// The most recently used live idle connection to `server` that `which` allows, if
    /// any. Connections the server closed, or sent bytes on, while idle are dropped here
    /// (the count of those is returned in the second place, for the caller to record).
    pub fn take(&self, server: u64, which: Take) -> (Option<Socket>, usize) {
        let mut idle = self.idle.borrow_mut();
        let Some(list) = idle.get_mut(&server) else { return (None, 0) };
        let mut dropped = 0;
        while let Some(i) = list.iter().rposition(|c| which == Take::Any || Take::OwnedBy(c.owner) == which) {
            let conn = list.remove(i);
            if conn.stream.still_open() {
                return (Some(conn.stream), dropped);
            }
            dropped += 1;
        }
        (None, dropped)
    }

    /// Whether an idle connection to `server` is pooled (it may since have been closed).
    pub fn has_idle(&self, server: u64) -> bool {
        self.idle.borrow().get(&server).is_some_and(|l| !l.is_empty())
    }

    /// Keeps `stream`, last used by client connection `owner`, for reuse (dropped if the
    /// server's pool is full).
    pub fn put(&self, server: u64, stream: Socket, owner: u64) {
        let mut idle = self.idle.borrow_mut();
        let list = idle.entry(server).or_default();
        if list.len() < self.max_per_server {
            stream.pooled();
            list.push(Idle { stream, since: clock::now(), owner });
        }
    }

    /// Closes connections idle longer than `max_idle` or closed by their server, and pools
    /// of servers no longer configured (`keep` says which ids are).
    pub fn sweep(&self, max_idle: Duration, keep: impl Fn(u64) -> bool) {
        let now = clock::now();
        let mut idle = self.idle.borrow_mut();
        idle.retain(|id, _| keep(*id));
        for list in idle.values_mut() {
            list.retain(|c| now.duration_since(c.since) < max_idle && c.stream.still_open());
        }
    }
}

/// Hashes a server id by one folded multiply (the high and low halves of its product with
/// an odd constant, so every bit of the id reaches the bits the table uses).
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        let product = u128::from(self.0) * 0x9e37_79b9_7f4a_7c15;
        (product as u64) ^ ((product >> 64) as u64)
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys come here (`write_u64`); any other input still hashes.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.0 = id;
    }
}
