//! One server as the data path sees it: its identity (the id keys its connection pools and
//! every table entry), its configured weight and state, its live figures, the in-flight
//! and queued counts the schedulers read, and its `maxconn` slots. Carried from snapshot
//! to snapshot while the server is unchanged, so counters and pools survive reloads.

use crate::floor::live::{now_ms, Live};
use crate::floor::weights::ramp;
use config::ServerState;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

static NEXT_SERVER_ID: AtomicU64 = AtomicU64::new(1);

/// One server as the data path sees it.
pub struct ServerRt {
    /// Stable id: the key of this server's connection pools.
    pub id: u64,
    /// Name in its group.
    pub name: String,
    /// Where its requests and checks go: its `addr`, or on the HashNAT node it names, its
    /// `local_addr`.
    pub addr: SocketAddr,
    /// Its `addr` as configured: what agents' reports name it by, and what every node of a
    /// cluster calls it.
    pub known_as: SocketAddr,
    /// Weight (from config; the schedulers use `live.effective_weight`).
    pub weight: AtomicU32,
    /// Administrative state (from config; [`ServerRt::state`]).
    state: AtomicU8,
    /// `now_ms()` the server was removed from the config (0 = it is in the config): it
    /// stays in its group, draining, until it is idle or `drain_timeout` passes.
    pub leaving_since_ms: AtomicU64,
    /// Health, capacity and traffic figures.
    pub live: Live,
    /// Requests in flight to this server, across workers (lc/wlc read it).
    pub active: AtomicU32,
    /// Requests waiting for a slot (maxconn reached).
    pub queued: AtomicUsize,
    /// `maxconn` slots; `None` = unlimited.
    pub slots: Option<Arc<Semaphore>>,
    /// `maxconn` (0 = unlimited).
    pub maxconn: u32,
    /// Slots this node may hold now: `maxconn`, or in a cluster its share of it
    /// ([`ServerRt::set_slot_limit`]).
    slot_limit: AtomicU32,
    /// Permits still out above `slot_limit` after it was lowered: each is forgotten by the
    /// next request that gets it ([`ServerRt::settle_debt`]).
    slot_debt: AtomicU32,
    /// The most slots held at once since the cluster last read it ([`ServerRt::take_peak`]).
    slots_peak: AtomicU32,
    /// Token naming this server in persistence cookies.
    pub cookie: String,
}

impl ServerRt {
    /// Administrative state in force.
    pub fn state(&self) -> ServerState {
        match self.state.load(Ordering::Relaxed) {
            1 => ServerState::Drain,
            2 => ServerState::Maint,
            _ => ServerState::Ready,
        }
    }

    /// Whether the server was removed from the config and is draining before it goes.
    pub fn leaving(&self) -> bool {
        self.leaving_since_ms.load(Ordering::Relaxed) != 0
    }

    /// Whether a leaving server may go now: nothing in flight or queued, or its drain
    /// timeout passed.
    pub fn done_leaving(&self, drain_timeout: Duration, now: u64) -> bool {
        let since = self.leaving_since_ms.load(Ordering::Relaxed);
        let timeout = u64::try_from(drain_timeout.as_millis()).unwrap_or(u64::MAX);
        let idle = self.active.load(Ordering::Relaxed) == 0 && self.queued.load(Ordering::Relaxed) == 0;
        since != 0 && (idle || now.saturating_sub(since) >= timeout)
    }

    /// The capacity an agent reported for `server` if it is fresh at `now`. A server that has
    /// never reported keeps its configured weight for `silent_after` after it was created (the
    /// agent's first report is on its way), then counts as silent.
    pub fn fresh_capacity(&self, now: u64, silent_after: Duration, created_ms: u64) -> Option<u32> {
        let silent_ms = u64::try_from(silent_after.as_millis()).unwrap_or(u64::MAX);
        match self.live.reported_at_ms.load(Ordering::Relaxed) {
            0 if now.saturating_sub(created_ms) < silent_ms => Some(self.weight.load(Ordering::Relaxed)),
            0 => None,
            at if now.saturating_sub(at) < silent_ms => Some(self.live.capacity.load(Ordering::Relaxed)),
            _ => None,
        }
    }

    /// Slots this node may hold now (`maxconn` outside a cluster; 0 = unlimited).
    pub fn slot_limit(&self) -> u32 {
        self.slot_limit.load(Ordering::Relaxed)
    }

    /// Slots held now by this node's requests.
    pub fn slots_held(&self) -> u32 {
        let Some(slots) = &self.slots else { return 0 };
        let out = self.slot_limit().saturating_add(self.slot_debt.load(Ordering::Relaxed));
        out.saturating_sub(u32::try_from(slots.available_permits()).unwrap_or(u32::MAX))
    }

    /// Notes the slots held after one was taken (for [`ServerRt::take_peak`]).
    pub fn note_held(&self) {
        self.slots_peak.fetch_max(self.slots_held(), Ordering::Relaxed);
    }

    /// The most slots held at once since the last call: what the cluster publishes, so a
    /// count read between a request's end and the next one's start does not tell the
    /// other nodes of slots that are not really free.
    pub fn take_peak(&self) -> u32 {
        let now = self.slots_held();
        self.slots_peak.swap(now, Ordering::Relaxed).max(now)
    }

    /// Sets how many slots this node may hold (cluster-wide admission: its share of
    /// `maxconn`). Raising it pays back debt before adding permits; lowering it forgets the
    /// free permits and records the rest as debt, settled as held ones come back. One
    /// writer (the cluster's tick).
    pub fn set_slot_limit(&self, limit: u32) {
        let Some(slots) = &self.slots else { return };
        let limit = limit.min(self.maxconn);
        let old = self.slot_limit.swap(limit, Ordering::AcqRel);
        if limit > old {
            let mut add = limit - old;
            while add > 0 {
                let debt = self.slot_debt.load(Ordering::Acquire);
                if debt == 0 {
                    break;
                }
                let pay = debt.min(add);
                if self
                    .slot_debt
                    .compare_exchange(debt, debt - pay, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
                {
                    add -= pay;
                }
            }
            slots.add_permits(add as usize);
        } else if limit < old {
            let cut = old - limit;
            let forgotten = u32::try_from(slots.forget_permits(cut as usize)).unwrap_or(cut);
            self.slot_debt.fetch_add(cut.saturating_sub(forgotten), Ordering::AcqRel);
        }
    }

    /// Whether a permit just taken goes to pay a debt (then the caller forgets it and
    /// waits for another).
    pub fn settle_debt(&self) -> bool {
        let mut debt = self.slot_debt.load(Ordering::Acquire);
        while debt > 0 {
            match self.slot_debt.compare_exchange(debt, debt - 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(now) => debt = now,
            }
        }
        false
    }

    pub(crate) fn set_state(&self, state: ServerState) {
        let code = match state {
            ServerState::Ready => 0,
            ServerState::Drain => 1,
            ServerState::Maint => 2,
        };
        if self.state.swap(code, Ordering::Relaxed) != code && state == ServerState::Drain {
            self.live.drain_since_ms.store(now_ms().max(1), Ordering::Relaxed);
        }
    }
}

/// A server runtime; `joins` is the group's slow start when the server joins a running
/// switch (it then starts at the bottom of its ramp); `node` is this switch's `[cluster]
/// node` (HashNAT's `local_addr`).
pub(crate) fn new_server(s: &config::Server, joins: Option<Duration>, node: Option<&str>) -> ServerRt {
    let mut weight = s.weight;
    if let Some(slow_start) = joins {
        weight = ramp(s.weight, Duration::ZERO, slow_start);
    }
    let live = Live::new(weight);
    if joins.is_some() {
        live.ramp_from_ms.store(now_ms().max(1), Ordering::Relaxed);
    }
    let rt = ServerRt {
        id: NEXT_SERVER_ID.fetch_add(1, Ordering::Relaxed),
        name: s.name.clone(),
        addr: s.connect_addr(node),
        known_as: s.addr,
        weight: AtomicU32::new(s.weight),
        state: AtomicU8::new(0),
        leaving_since_ms: AtomicU64::new(0),
        live,
        active: AtomicU32::new(0),
        queued: AtomicUsize::new(0),
        slots: (s.maxconn > 0).then(|| Arc::new(Semaphore::new(s.maxconn as usize))),
        maxconn: s.maxconn,
        slot_limit: AtomicU32::new(s.maxconn),
        slot_debt: AtomicU32::new(0),
        slots_peak: AtomicU32::new(0),
        cookie: s.cookie.clone(),
    };
    rt.set_state(s.state);
    if s.state != ServerState::Ready {
        // Not usable until the control loop says so.
        rt.live.effective_weight.store(0, Ordering::Relaxed);
    }
    rt
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn server(maxconn: u32) -> ServerRt {
        let s = config::Server {
            name: "s1".into(),
            addr: "127.0.0.1:9".parse().unwrap(),
            weight: 1,
            maxconn,
            cookie: "s1".into(),
            state: ServerState::Ready,
            handoff: None,
            local_addr: None,
        };
        new_server(&s, None, None)
    }

    #[test]
    fn a_lowered_limit_retires_returned_slots_and_a_raised_one_pays_the_debt_first() {
        let s = server(4);
        let slots = Arc::clone(s.slots.as_ref().unwrap());
        let held: Vec<_> = (0..4).map(|_| Arc::clone(&slots).try_acquire_owned().unwrap()).collect();
        s.set_slot_limit(2);
        assert_eq!((s.slot_limit(), s.slots_held()), (2, 4), "held slots are not taken back");
        // Raised before any came back: one unit of debt is cancelled, no permit added.
        s.set_slot_limit(3);
        assert_eq!((slots.available_permits(), s.slots_held()), (0, 4));
        drop(held);
        // The remaining debt (one) is paid by the next taker, who forgets its permit.
        let first = Arc::clone(&slots).try_acquire_owned().unwrap();
        assert!(s.settle_debt());
        first.forget();
        let second = Arc::clone(&slots).try_acquire_owned().unwrap();
        assert!(!s.settle_debt(), "no debt left");
        drop(second);
        assert_eq!((slots.available_permits(), s.slots_held()), (3, 0));
        s.set_slot_limit(1);
        assert_eq!(slots.available_permits(), 1, "free permits are forgotten at once");
    }
}
