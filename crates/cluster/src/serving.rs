//! Whether a node takes new flows from the L4 tier: `ready` once its listeners are bound,
//! `draining` when an operator drains it (`cswitch ctl cluster drain`); a node that serves
//! no listener (one that only runs the tier) publishes nothing. Published under the key
//! `serve`; the tier (`l4`) reads it from every node. A node that runs the tier also
//! publishes `tier = l4`, so one that only runs it is known as such (its config digest,
//! without listeners or groups, is not drift).

use std::sync::atomic::{AtomicU8, Ordering};

/// The gossip key.
pub(crate) const SERVE: &str = "serve";
/// Published (`l4`) by a node that runs the L4 tier.
pub(crate) const TIER: &str = "tier";
/// Published by a node that runs the L4 tier: the nodes its kernel sends new flows to now
/// (names, comma-separated), so a node that drains itself knows when no new flow can come.
pub(crate) const L4_TARGETS: &str = "l4_targets";

/// A node's part in the L4 tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Serving {
    /// Takes new flows.
    Ready,
    /// Takes no new flows; its open connections finish.
    Draining,
}

impl Serving {
    /// The value published under `serve`.
    pub fn as_str(self) -> &'static str {
        match self {
            Serving::Ready => "ready",
            Serving::Draining => "draining",
        }
    }

    /// A published value (`None` for anything else, e.g. a newer node's word).
    pub fn parse(text: &str) -> Option<Serving> {
        match text {
            "ready" => Some(Serving::Ready),
            "draining" => Some(Serving::Draining),
            _ => None,
        }
    }
}

/// This node's state, set by the switch, read by the tick (0: publishes nothing).
#[derive(Default)]
pub(crate) struct Own(AtomicU8);

impl Own {
    pub(crate) fn set(&self, serving: Serving) {
        let code = match serving {
            Serving::Ready => 1,
            Serving::Draining => 2,
        };
        self.0.store(code, Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> Option<Serving> {
        match self.0.load(Ordering::Relaxed) {
            1 => Some(Serving::Ready),
            2 => Some(Serving::Draining),
            _ => None,
        }
    }
}
