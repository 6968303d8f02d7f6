//! A joining node says `ready` to the L4 tier only once it has the other nodes' tables.
//! Until then a client the tier gives it, pinned elsewhere (`STICKY_IP`, a learned cookie,
//! a TLS session), would be placed anew. "Has them" means: every live peer's state has
//! reached this node up to that peer's latest `beat` and was handed to the switch.
//! Scuttlebutt sends a node's writes in version order and every node rewrites its `beat`
//! each tick, so holding a peer's beat means holding everything it wrote before it — its
//! whole table, however many datagrams the catch-up took. The wait is bounded ([`WAIT`]):
//! a node whose seeds are all down (the first node of a cluster) is ready after it anyway.
//! A node without seeds waits for nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The longest a joining node holds its `ready`.
pub(crate) const WAIT: Duration = Duration::from_secs(2);

/// Whether this node has finished joining.
pub(crate) struct Joining {
    since: Instant,
    has_seeds: bool,
    done: AtomicBool,
}

/// Why a node finished joining.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Joined {
    /// Every live peer's tables arrived.
    Received,
    /// No seed: a cluster of one so far.
    Alone,
    /// [`WAIT`] passed first.
    TimedOut,
}

/// The verdict after `elapsed`, with `peers` live other nodes of which `received` handed
/// their tables; `None`: keep waiting.
fn verdict(elapsed: Duration, has_seeds: bool, peers: usize, received: usize) -> Option<Joined> {
    if !has_seeds {
        Some(Joined::Alone)
    } else if peers > 0 && received >= peers {
        Some(Joined::Received)
    } else if elapsed >= WAIT {
        Some(Joined::TimedOut)
    } else {
        None
    }
}

impl Joining {
    pub(crate) fn new(has_seeds: bool) -> Joining {
        Joining { since: Instant::now(), has_seeds, done: AtomicBool::new(false) }
    }

    /// Whether this node may say `ready`.
    pub(crate) fn done(&self) -> bool {
        self.done.load(Ordering::Relaxed)
    }

    /// Takes one tick's count: `peers` live other nodes, `received` of them whose tables
    /// were handed to the switch. Logs the end of the wait.
    pub(crate) fn tick(&self, peers: usize, received: usize) {
        if self.done() {
            return;
        }
        let elapsed = self.since.elapsed();
        let Some(joined) = verdict(elapsed, self.has_seeds, peers, received) else { return };
        self.done.store(true, Ordering::Relaxed);
        let took_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        match joined {
            Joined::Received => {
                tracing::info!(
                    peers,
                    took_ms,
                    "cluster: the other nodes' tables received; ready for the L4 tier"
                )
            }
            Joined::Alone => {}
            Joined::TimedOut => tracing::warn!(
                peers,
                received,
                took_ms,
                "cluster: not every other node's tables received in time; ready for the L4 tier anyway"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_waits_for_every_live_peers_tables_at_most_the_bound() {
        let early = Duration::from_millis(100);
        assert_eq!(verdict(early, true, 0, 0), None, "no peer heard yet");
        assert_eq!(verdict(early, true, 3, 2), None, "one peer's tables missing");
        assert_eq!(verdict(early, true, 3, 3), Some(Joined::Received));
        assert_eq!(verdict(WAIT, true, 3, 2), Some(Joined::TimedOut));
        assert_eq!(verdict(WAIT, true, 0, 0), Some(Joined::TimedOut), "seeds all down");
        assert_eq!(verdict(Duration::ZERO, false, 0, 0), Some(Joined::Alone));
    }
}
