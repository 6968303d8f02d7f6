//! The `STICKY_IP` table of the rule language (seed 000 §5.2): a client address, per
//! listener, mapped to the server a sticky rule sent it to, for `timeouts.sticky_ip` from
//! the rule's decision. Backed by a `balance::persist::StickTable`: shared by all workers
//! (a client's next connection may land on any of them), sharded, bounded with LRU
//! eviction; the common case — no sticky rule ever fired — takes no lock at all. Entries of
//! servers a reload removed are dropped at the reload (and never followed before it).

use arc_swap::ArcSwap;
use balance::persist::StickTable;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Entries kept at most (least recently used go first).
const MAX_ENTRIES: usize = 1 << 20;

/// Where a `STICKY_IP_PORT` connection goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// Group index in the snapshot the entry was made in.
    pub group: usize,
    /// Server id (`ServerRt::id`), stable across reloads while the server is unchanged.
    pub server: u64,
}

/// The table, replaced (emptied) by a reload that changes `timeouts.sticky_ip`.
pub struct StickyIp {
    table: ArcSwap<Table>,
}

struct Table {
    entries: StickTable<(usize, IpAddr)>,
    lifetime: Duration,
}

impl Table {
    fn new(lifetime: Duration) -> Table {
        // Entries live `lifetime` from the decision, used or not.
        Table { entries: StickTable::new(MAX_ENTRIES, lifetime, Some(lifetime)), lifetime }
    }
}

impl StickyIp {
    /// An empty table whose entries live `lifetime`.
    pub fn new(lifetime: Duration) -> Self {
        StickyIp { table: ArcSwap::from_pointee(Table::new(lifetime)) }
    }

    /// The server (id) this client address is pinned to on this listener.
    pub fn get(&self, listener: usize, ip: IpAddr, now: Instant) -> Option<u64> {
        self.table.load().entries.get(&(listener, ip), now)
    }

    /// Records an entry (a new decision restarts its lifetime).
    pub fn put(&self, listener: usize, ip: IpAddr, server: u64, now: Instant) {
        let table = self.table.load();
        table.entries.remove(&(listener, ip));
        table.entries.put((listener, ip), server, now);
    }

    /// Forgets an entry (its server is gone).
    pub fn remove(&self, listener: usize, ip: IpAddr) {
        self.table.load().entries.remove(&(listener, ip));
    }

    /// After a reload: a new lifetime empties the table; entries of servers that are gone
    /// (`keep` says which ids remain) are dropped.
    pub fn reconfigure(&self, lifetime: Duration, keep: impl Fn(u64) -> bool) {
        if self.table.load().lifetime != lifetime {
            self.table.store(Arc::new(Table::new(lifetime)));
        }
        self.table.load().entries.retain_servers(keep);
    }

    /// Up to `limit` live entries with how long each has been idle (a binary upgrade
    /// carries them to the new process).
    pub fn entries(&self, now: Instant, limit: usize) -> Vec<((usize, IpAddr), u64, Duration)> {
        self.table.load().entries.entries(now, limit)
    }

    /// Entries held (expired ones not yet removed included).
    pub fn len(&self) -> usize {
        self.table.load().entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_are_per_listener_and_follow_reconfiguration() {
        let t = StickyIp::new(Duration::from_secs(60));
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let now = Instant::now();
        assert_eq!(t.get(0, ip, now), None);
        t.put(0, ip, 7, now);
        assert_eq!(t.get(0, ip, now), Some(7));
        assert_eq!(t.get(1, ip, now), None);
        // Used or not, the entry ends 60 s after the decision.
        assert_eq!(t.get(0, ip, now + Duration::from_secs(30)), Some(7));
        assert_eq!(t.get(0, ip, now + Duration::from_secs(61)), None);
        t.put(0, ip, 7, now);
        t.reconfigure(Duration::from_secs(60), |id| id != 7);
        assert_eq!(t.get(0, ip, now), None, "its server was removed");
        t.put(0, ip, 8, now);
        t.reconfigure(Duration::from_secs(5), |_| true);
        assert_eq!(t.len(), 0, "a new lifetime starts an empty table");
    }
}
