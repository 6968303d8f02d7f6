//! TLS session IDs servers issued in their ServerHellos (TLS passthrough, seed 000 §1):
//! a resuming client goes back to the server that holds its session. Shared by all
//! workers; bounded, least recently used first out.

use std::time::Duration;

/// Most session IDs remembered (least recently used go first).
pub const TLS_SESSIONS_CAPACITY: usize = 100_000;

/// Session IDs learnt from ServerHellos → server id, with an idle lifetime
/// (`timeouts.tls_session`); a new lifetime on reload starts a new table.
pub struct TlsSessions {
    table: arc_swap::ArcSwap<(Duration, balance::persist::StickTable<Box<[u8]>>)>,
}

impl TlsSessions {
    /// An empty table whose entries live `lifetime` after their last use.
    pub fn new(lifetime: Duration) -> Self {
        TlsSessions { table: arc_swap::ArcSwap::from_pointee((lifetime, Self::table(lifetime))) }
    }

    fn table(lifetime: Duration) -> balance::persist::StickTable<Box<[u8]>> {
        balance::persist::StickTable::new(TLS_SESSIONS_CAPACITY, lifetime, None)
    }

    /// The server that issued `session_id`, if known and not expired.
    pub fn get(&self, session_id: &[u8]) -> Option<u64> {
        self.table.load().1.get(session_id, std::time::Instant::now())
    }

    /// Remembers that `server` issued `session_id`.
    pub fn put(&self, session_id: Box<[u8]>, server: u64) {
        self.put_at(session_id, server, std::time::Instant::now());
    }

    /// As [`TlsSessions::put`], for a session issued at `at` (another node of the cluster
    /// saw it then).
    pub fn put_at(&self, session_id: Box<[u8]>, server: u64, at: std::time::Instant) {
        self.table.load().1.put(session_id, server, at);
    }

    /// After a reload: a new lifetime empties the table; entries of servers that are gone
    /// are dropped.
    pub fn reconfigure(&self, lifetime: Duration, keep: impl Fn(u64) -> bool) {
        if self.table.load().0 != lifetime {
            self.table.store(std::sync::Arc::new((lifetime, Self::table(lifetime))));
        }
        self.table.load().1.retain_servers(keep);
    }

    /// Up to `limit` live entries: (session ID, server, time since last use), for a binary
    /// upgrade's hand-over.
    pub fn entries(&self, limit: usize) -> Vec<(Box<[u8]>, u64, Duration)> {
        self.table.load().1.entries(std::time::Instant::now(), limit)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.table.load().1.len()
    }
}
