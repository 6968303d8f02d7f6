//! One group as the data path sees it: its servers (including those a reload removed,
//! draining until idle), scheduler settings and shared scheduler instance, persistence,
//! checks and weight policy. Built off the data path from the config and the previous
//! snapshot's group of the same name.

use crate::floor::live::now_ms;
use crate::floor::persist::PersistRt;
use crate::floor::sched_slot::{shared_slot, SchedSlot};
use crate::floor::server::{new_server, ServerRt};
use crate::floor::weights;
use balance::{Params, SchedulerKind};
use config::{HashKey, ServerState, WeightSource};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One group as the data path sees it.
pub struct GroupRt {
    /// Name.
    pub name: String,
    /// Scheduler used when no rule picks a server.
    pub scheduler: SchedulerKind,
    /// Its tunables.
    pub params: Params,
    /// What keyed schedulers read from a request.
    pub hash_key: HashKey,
    /// The one scheduler instance all workers share, for schedulers that learn a table.
    pub shared: Option<Arc<Mutex<SchedSlot>>>,
    /// Session persistence, if configured.
    pub persistence: Option<Arc<PersistRt>>,
    /// Active health checks, if configured.
    pub health: Option<config::Health>,
    /// Passive checks, if configured.
    pub passive: Option<config::Passive>,
    /// Weight ramp-up time of a server that becomes usable.
    pub slow_start: Duration,
    /// How long a draining server keeps its sticky traffic.
    pub drain_timeout: Duration,
    /// Where weights come from.
    pub weights: WeightSource,
    /// Which requests may ride a pooled connection (`reuse`).
    pub reuse: config::Reuse,
    /// The protocol spoken to the servers (`server_protocol`).
    pub server_protocol: config::ServerProtocol,
    /// Servers in config order.
    pub servers: Vec<Arc<ServerRt>>,
}

impl GroupRt {
    /// Whether this group still has the server with this id.
    pub fn has(&self, id: u64) -> bool {
        self.servers.iter().any(|s| s.id == id)
    }

    /// Writes each server's effective weight and sticky verdict from its state, health,
    /// slow start and `capacities` (agent reports, by server); true when a weight moved.
    pub fn apply_weights(&self, capacities: &[Option<u32>], now: u64) -> bool {
        let largest = capacities.iter().flatten().copied().max().unwrap_or(0);
        let mut changed = false;
        for (server, capacity) in self.servers.iter().zip(capacities) {
            let live = &server.live;
            let state = server.state();
            let passive_out = live.passive_out(now);
            let is_usable = weights::usable(state, live.health(), passive_out);
            let ramp_from =
                weights::next_ramp_start(live.ramp_from_ms.load(Ordering::Relaxed), is_usable, now);
            live.ramp_from_ms.store(ramp_from, Ordering::Relaxed);
            let base = match self.weights {
                WeightSource::Config => server.weight.load(Ordering::Relaxed),
                WeightSource::Agent => weights::agent_weight(*capacity, largest, self.scheduler),
            };
            let weight = match (is_usable, ramp_from) {
                (false, _) => 0,
                (true, 0) => base,
                (true, from) => {
                    weights::ramp(base, Duration::from_millis(now.saturating_sub(from)), self.slow_start)
                }
            };
            changed |= live.effective_weight.swap(weight, Ordering::Relaxed) != weight;
            let drain_since = live.drain_since_ms.load(Ordering::Relaxed);
            let drained_for = Duration::from_millis(now.saturating_sub(drain_since));
            // A server removed from the config finishes its in-flight requests only: the
            // config says it is gone, so its sessions move now (as after an HAProxy reload).
            let ok = !server.leaving()
                && weights::sticky_ok(state, live.health(), passive_out, drained_for, self.drain_timeout);
            live.sticky_ok.store(ok, Ordering::Relaxed);
        }
        changed
    }
}

/// `node`: this switch's `[cluster] node`, which picks the server a HashNAT `local_addr`
/// applies to.
pub(crate) fn build_group(
    group: &config::Group,
    previous: Option<&GroupRt>,
    generation: u64,
    node: Option<&str>,
) -> GroupRt {
    let old = previous;
    let mut servers: Vec<Arc<ServerRt>> = group
        .servers
        .iter()
        .map(|s| {
            let kept = old.and_then(|g| {
                g.servers.iter().find(|o| {
                    o.name == s.name
                        && o.known_as == s.addr
                        && o.addr == s.connect_addr(node)
                        && o.maxconn == s.maxconn
                        && o.cookie == s.cookie
                })
            });
            match kept {
                Some(rt) => {
                    rt.weight.store(s.weight, Ordering::Relaxed);
                    rt.leaving_since_ms.store(0, Ordering::Relaxed);
                    rt.set_state(s.state);
                    Arc::clone(rt)
                }
                // A server that joins a running switch ramps up (slow start); one there
                // from the start takes its full weight at once.
                None => Arc::new(new_server(s, (generation > 0).then_some(group.slow_start), node)),
            }
        })
        .collect();
    if let Some(old) = old {
        let going: Vec<Arc<ServerRt>> = leaving(old, &servers, group.drain_timeout).collect();
        servers.extend(going);
    }
    let mut rt = GroupRt {
        name: group.name.clone(),
        scheduler: group.scheduler,
        // In a cluster every node must place alike whatever order capacities arrive in.
        params: balance::Params { sieve_canonical: node.is_some(), ..group.params.clone() },
        hash_key: group.hash_key.clone(),
        shared: None,
        persistence: None,
        health: group.health.clone(),
        passive: group.passive.clone(),
        slow_start: group.slow_start,
        drain_timeout: group.drain_timeout,
        weights: group.weights,
        reuse: group.reuse,
        server_protocol: group.server_protocol,
        servers,
    };
    rt.shared = shared_slot(
        &rt.name,
        rt.scheduler,
        &rt.params,
        &rt.servers,
        old.and_then(|g| g.shared.as_ref()),
        generation,
    );
    let previous = old.and_then(|g| g.persistence.as_ref());
    rt.persistence = group.persistence.as_ref().map(|p| PersistRt::build(p, previous, |id| rt.has(id)));
    rt
}

/// Servers of the previous group that the new config no longer has: they stay, draining
/// (no new requests, no sticky traffic), until their in-flight requests are done or the
/// group's drain timeout passes. A new server of the same name replaces a leaving one at
/// once. (To move sticky sessions off gently first, set `state = "drain"`, then remove.)
fn leaving<'a>(
    old: &'a GroupRt,
    kept: &'a [Arc<ServerRt>],
    drain_timeout: Duration,
) -> impl Iterator<Item = Arc<ServerRt>> + 'a {
    let now = now_ms().max(1);
    old.servers
        .iter()
        .filter(move |o| !kept.iter().any(|k| Arc::ptr_eq(k, o) || k.name == o.name))
        .filter(move |o| !o.done_leaving(drain_timeout, now))
        .map(move |o| {
            if o.leaving_since_ms.load(Ordering::Relaxed) == 0 {
                o.leaving_since_ms.store(now, Ordering::Relaxed);
                tracing::info!(server = %o.name, "server removed from the config: draining before it goes");
            }
            o.set_state(ServerState::Drain);
            Arc::clone(o)
        })
}
