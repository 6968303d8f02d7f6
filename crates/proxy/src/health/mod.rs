//! Health and capacity: the control loop that decides, per server, the weight the
//! schedulers use and whether sticky traffic may go there. Inputs: administrative state
//! (config / admin API), active checks (`checker`, `probe`), passive checks on live
//! traffic (`upstream::passive`, called by the request path), slow start, and the
//! capacities `cswitch agent` reports (`agents`), directly or through another node of the
//! cluster (`cluster`). Output: per-server atomics plus an epoch
//! the schedulers compare to know when to rebuild (`floor::weights`, applied by
//! `GroupRt::apply_weights`) — the data path takes no lock.
//!
//! Runs on its own thread with a small runtime, so checks never compete with requests
//! for a worker's event loop.

mod agents;
mod checker;
pub mod cluster;
pub mod probe;

use crate::floor::live::now_ms;
use crate::floor::shared::Shared;
use crate::floor::snapshot::Snapshot;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How often verdicts are recomputed (slow-start steps, silent agents, drain timeouts).
const TICK: Duration = Duration::from_millis(100);

/// Starts the control thread. `agents` is the bound UDP socket of `[agents]`, if any.
pub fn spawn(
    shared: Arc<Shared>,
    agents: Option<std::net::UdpSocket>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new().name("cswitch-health".into()).spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                tracing::error!(error = %e, "health runtime failed to start");
                return;
            }
        };
        rt.block_on(run(shared, agents));
    })
}

async fn run(shared: Arc<Shared>, agents: Option<std::net::UdpSocket>) {
    let receiver = agents.and_then(|socket| match tokio::net::UdpSocket::from_std(socket) {
        Ok(socket) => Some(tokio::spawn(agents::receive(Arc::clone(&shared), socket))),
        Err(e) => {
            tracing::error!(error = %e, "agent socket registration failed");
            None
        }
    });
    let mut control = Control::default();
    let mut tick = tokio::time::interval(TICK);
    while !shared.shutting_down.load(Ordering::Acquire) {
        tick.tick().await;
        let snap = shared.snapshot.load_full();
        control.sync_checkers(&shared, &snap);
        control.update(&shared, &snap);
        if someone_left(&snap) {
            shared.rebuild_snapshot();
        }
    }
    control.stop_all();
    if let Some(task) = receiver {
        task.abort();
    }
}

/// Whether a server removed from the config has finished draining (it can go).
fn someone_left(snap: &Snapshot) -> bool {
    let now = now_ms();
    snap.groups.iter().any(|g| g.servers.iter().any(|s| s.leaving() && s.done_leaving(g.drain_timeout, now)))
}

/// One running check loop and the settings it was started with.
struct Running {
    health: config::Health,
    task: JoinHandle<()>,
}

#[derive(Default)]
struct Control {
    /// Check loops by server id.
    checkers: HashMap<u64, Running>,
    /// When each server was first seen (ms): agents get `silent_after` from there.
    first_seen: HashMap<u64, u64>,
}

impl Control {
    /// Starts checks for servers that need them and stops those whose server left or whose
    /// group's check changed.
    fn sync_checkers(&mut self, shared: &Arc<Shared>, snap: &Snapshot) {
        let mut wanted: HashMap<u64, (&config::Health, &Arc<crate::floor::server::ServerRt>, &str)> =
            HashMap::new();
        for g in &snap.groups {
            if let Some(h) = &g.health {
                for s in &g.servers {
                    wanted.insert(s.id, (h, s, &g.name));
                }
            }
        }
        self.checkers.retain(|id, running| {
            let keep = wanted.get(id).is_some_and(|(h, _, _)| **h == running.health);
            if !keep {
                running.task.abort();
            }
            keep
        });
        for (id, (health, server, group)) in wanted {
            if self.checkers.contains_key(&id) {
                continue;
            }
            let task = tokio::spawn(checker::run(
                Arc::clone(server),
                health.clone(),
                group.to_string(),
                Arc::clone(shared),
            ));
            self.checkers.insert(id, Running { health: health.clone(), task });
        }
        // A server whose group no longer checks it is no longer judged by old results.
        for g in snap.groups.iter().filter(|g| g.health.is_none()) {
            for s in &g.servers {
                if s.live.health() != crate::floor::live::Health::Unchecked {
                    s.live.set_health(crate::floor::live::Health::Unchecked, "");
                }
            }
        }
    }

    /// Recomputes every server's verdict; bumps the epoch when a weight changed.
    fn update(&mut self, shared: &Shared, snap: &Snapshot) {
        let now = now_ms();
        let silent_after = snap.config.agents.as_ref().map_or(Duration::from_secs(2), |a| a.silent_after);
        let mut changed = false;
        for g in &snap.groups {
            let capacities: Vec<Option<u32>> = g
                .servers
                .iter()
                .map(|s| {
                    let created = *self.first_seen.entry(s.id).or_insert(now);
                    s.fresh_capacity(now, silent_after, created)
                })
                .collect();
            changed |= g.apply_weights(&capacities, now);
        }
        if changed {
            shared.weights_epoch.fetch_add(1, Ordering::Release);
        }
        if self.first_seen.len() > 4 * snap.groups.iter().map(|g| g.servers.len()).sum::<usize>() + 64 {
            self.first_seen.retain(|id, _| snap.group_of(*id).is_some());
        }
    }

    fn stop_all(&mut self) {
        for (_, running) in self.checkers.drain() {
            running.task.abort();
        }
    }
}
