//! The `STICKY_IP` table of the rule language (seed 000 §5.2): a client address, per
//! listener, mapped to the group and server a sticky rule sent it to, for
//! `timeouts.sticky_ip`. Shared by all workers (a client's next connection may land on any
//! of them), so it is sharded to keep lock hold times short; the common case — no sticky
//! rule ever fired — takes no lock at all.
//!
//! Bounded: a shard holding more than its share of `MAX_ENTRIES` first drops expired
//! entries, then the ones closest to expiry. (The balancing issue brings the general
//! stick tables with LRU; this is the minimal form the rule language needs.)

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

const SHARDS: usize = 16;
const MAX_ENTRIES: usize = 1 << 20;

/// Where a sticky client goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// Group index in the snapshot the entry was made in.
    pub group: usize,
    /// Server id (`ServerRt::id`), stable across reloads while the server is unchanged.
    pub server: u64,
}

#[derive(Clone, Copy)]
struct Entry {
    target: Target,
    expires: Instant,
}

/// The table.
pub struct StickyIp {
    shards: Vec<Mutex<HashMap<(usize, IpAddr), Entry>>>,
    len: AtomicUsize,
}

impl Default for StickyIp {
    fn default() -> Self {
        StickyIp {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            len: AtomicUsize::new(0),
        }
    }
}

impl StickyIp {
    /// The live entry for this client on this listener.
    pub fn get(&self, listener: usize, ip: IpAddr, now: Instant) -> Option<Target> {
        if self.len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let shard = self.shard(ip).lock().unwrap_or_else(|e| e.into_inner());
        shard.get(&(listener, ip)).filter(|e| e.expires > now).map(|e| e.target)
    }

    /// Records (or refreshes) an entry.
    pub fn put(&self, listener: usize, ip: IpAddr, target: Target, expires: Instant) {
        let mut shard = self.shard(ip).lock().unwrap_or_else(|e| e.into_inner());
        if shard.len() >= MAX_ENTRIES / SHARDS {
            let before = shard.len();
            evict(&mut shard, Instant::now());
            self.len.fetch_sub(before - shard.len(), Ordering::Relaxed);
        }
        if shard.insert((listener, ip), Entry { target, expires }).is_none() {
            self.len.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Forgets an entry (its server is gone).
    pub fn remove(&self, listener: usize, ip: IpAddr) {
        let mut shard = self.shard(ip).lock().unwrap_or_else(|e| e.into_inner());
        if shard.remove(&(listener, ip)).is_some() {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn shard(&self, ip: IpAddr) -> &Mutex<HashMap<(usize, IpAddr), Entry>> {
        let h = match ip {
            IpAddr::V4(v4) => u32::from(v4) as usize,
            IpAddr::V6(v6) => u128::from(v6) as usize,
        };
        &self.shards[h.wrapping_mul(0x9E37_79B9) % SHARDS]
    }
}

/// Drops expired entries; if none were, drops the quarter closest to expiry.
fn evict(shard: &mut HashMap<(usize, IpAddr), Entry>, now: Instant) {
    let before = shard.len();
    shard.retain(|_, e| e.expires > now);
    if shard.len() < before {
        return;
    }
    let mut expiries: Vec<Instant> = shard.values().map(|e| e.expires).collect();
    expiries.sort_unstable();
    if let Some(cut) = expiries.get(expiries.len() / 4).copied() {
        shard.retain(|_, e| e.expires > cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn entries_expire_and_are_per_listener() {
        let t = StickyIp::default();
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let now = Instant::now();
        assert_eq!(t.get(0, ip, now), None);
        let target = Target { group: 1, server: 7 };
        t.put(0, ip, target, now + Duration::from_secs(60));
        assert_eq!(t.get(0, ip, now), Some(target));
        assert_eq!(t.get(1, ip, now), None);
        assert_eq!(t.get(0, ip, now + Duration::from_secs(61)), None);
        t.remove(0, ip);
        assert_eq!(t.get(0, ip, now), None);
    }
}
