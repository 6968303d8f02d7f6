//! The last server each client address used, shared by all workers: pre-allocation
//! (`upstream::prealloc`) starts a connection to it while the next request is read.

use balance::persist::StickTable;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long a client address's last server is remembered, and how many are.
const REMEMBER: Duration = Duration::from_secs(600);
const ADDRESSES: usize = 100_000;

/// The last server (id) each client address used, shared by all workers.
pub struct LastServer(StickTable<IpAddr>);

impl Default for LastServer {
    fn default() -> Self {
        LastServer(StickTable::new(ADDRESSES, REMEMBER, None))
    }
}

impl LastServer {
    /// The server `ip` used last, if remembered.
    pub fn get(&self, ip: IpAddr) -> Option<u64> {
        self.0.get(&ip, Instant::now())
    }

    /// Records that `ip`'s request went to `server`.
    pub fn record(&self, ip: IpAddr, server: u64) {
        self.0.put(ip, server, Instant::now());
    }
}
