//! Recipients SMTP servers refused after the switch had accepted them: the client's retry
//! is answered from here, per recipient (see `mail::smtp::RefusalCache`). One per process.

use mail::smtp::RefusalCache;
use std::sync::Mutex;
use std::time::Duration;

/// Recipients servers refused, per process: answered from here on the client's retry.
pub struct Refusals(pub Mutex<RefusalCache>);

impl Default for Refusals {
    fn default() -> Self {
        // Permanent refusals for an hour; temporary ones not at all (greylisting servers
        // must see the retry themselves).
        Refusals(Mutex::new(RefusalCache::new(10_000, Duration::from_secs(3600), Duration::ZERO)))
    }
}
