//! A config's digest as the cluster compares it: what decides where requests go (groups,
//! servers, schedulers, persistence, limits, timeouts, listeners and their rule files' text),
//! without what legitimately differs from node to node (the file's path, bind addresses,
//! `[admin]`, `[agents]`, `[cluster]`). Nodes showing different digests have drifted.

use config::Config;
use std::net::{Ipv4Addr, SocketAddr};
use xxhash_rust::xxh3::Xxh3;

/// 16 hex digits (xxh3-64), stable within one build of cswitch.
pub fn config_digest(config: &Config) -> String {
    let mut h = Xxh3::new();
    let anywhere = SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0));
    for listener in &config.listeners {
        let mut shared = listener.clone();
        shared.bind = anywhere;
        h.update(format!("{shared:?}").as_bytes());
        // The rules are what the file says now: an edited rule file is drift too.
        if let Some(path) = &listener.rules {
            h.update(&std::fs::read(path).unwrap_or_default());
        }
    }
    h.update(format!("{:?}{:?}{:?}", config.groups, config.limits, config.timeouts).as_bytes());
    format!("{:016x}", h.digest())
}
