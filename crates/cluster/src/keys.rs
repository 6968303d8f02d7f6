//! The keys each node publishes in its gossip state, and their values' text (a leaf):
//!
//! - `digest`: its config digest (`digest.rs`);
//! - `beat`: its wall clock (ms since the epoch) at its last tick — a capacity's age is
//!   measured against it, on the origin's own clock, so nodes' clocks need not agree;
//! - `cap/<server IP:port>`: `<capacity> <wall ms>`, the last report an agent sent it.

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) const DIGEST: &str = "digest";
pub(crate) const BEAT: &str = "beat";
pub(crate) const CAP_PREFIX: &str = "cap/";

/// Milliseconds since the epoch (0 if the clock is before it).
pub(crate) fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(0))
}

pub(crate) fn cap_key(server: SocketAddr) -> String {
    format!("{CAP_PREFIX}{server}")
}

pub(crate) fn cap_value(capacity: u32, at_ms: u64) -> String {
    format!("{capacity} {at_ms}")
}

/// A `cap/…` entry: the server, its capacity, and when the origin received it.
pub(crate) fn parse_cap(key: &str, value: &str) -> Option<(SocketAddr, u32, u64)> {
    let server = key.strip_prefix(CAP_PREFIX)?.parse().ok()?;
    let (capacity, at) = value.split_once(' ')?;
    Some((server, capacity.parse().ok()?, at.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capacity_round_trips() {
        let server: SocketAddr = "[::1]:9001".parse().unwrap_or_else(|e| panic!("{e}"));
        let (k, v) = (cap_key(server), cap_value(70, 1_700_000_000_123));
        assert_eq!(parse_cap(&k, &v), Some((server, 70, 1_700_000_000_123)));
        assert_eq!(parse_cap("beat", &v), None);
        assert_eq!(parse_cap(&k, "70"), None);
    }
}
