//! The kernel L4 tier (issue 13 part 5, seed 002's L4 balancer in front of L7 switches):
//! on a node with `[cluster.l4]`, the VIP's flows are spread over the live cswitch nodes by
//! nftables DNAT (ADR 0013 says why not IPVS). Every gossip tick computes a [`Plan`] from
//! the membership — the live nodes whose `serve` is `ready`, and the dead ones whose flows
//! to reset — and hands it to the tier's own thread, which loads it into the kernel when it
//! changed (`nft`, one transaction). So a dead node leaves the tier as soon as the failure
//! detector says so (≤ ~1.6 s, ADR 0011), a drained one gets no new flow while conntrack
//! keeps its open ones on it, and a joining one gets flows once it says `ready`. Between
//! ticks of the failure detector, the tier's host checks each target's listener itself
//! (`probe`): a node whose port refuses connections leaves the targets within a check.
//! What a death costs is then only the node's connections in flight (ADR 0018): a reset a
//! dead node's host answers to a new flow's SYN is dropped (`nft`, chain `retry_refused`),
//! so the client's SYN retransmit goes to a live node; and when a node leaves the targets
//! dead, the flows it never answered are deleted from conntrack (`conntrack`), so their
//! retransmits are balanced anew instead of following their entry to a crashed host.

mod conntrack;
pub(crate) mod host;
mod nft;
mod probe;

use crate::keys::wall_ms;
use crate::serving::Serving;
use crate::view::{L4View, NodeView};
use config::ClusterL4;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a node stays dead before its open flows are reset. It leaves the targets at
/// once; resetting waits, so a failure detector's false alarm (a busy host's pause) costs a
/// healthy node's clients nothing but a moment without new flows.
const RESET_AFTER: Duration = Duration::from_secs(5);

/// A node that takes new flows: its name and where they go (its gossip address's IP, at
/// the VIP's port).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) name: String,
    pub(crate) ip: Ipv4Addr,
}

/// What the kernel should do now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Plan {
    /// In name order, so every tick of the same membership makes the same plan.
    pub(crate) targets: Vec<Target>,
    /// Addresses of dead nodes (no live node has them): their flows get a reset (once
    /// dead for [`RESET_AFTER`], see [`settle`]).
    pub(crate) gone: Vec<Ipv4Addr>,
    /// Addresses of nodes dead now, by the membership or the probe (at once, not after
    /// [`RESET_AFTER`]): the flows they never answered are forgotten once they are out of
    /// the targets. Not part of the kernel's table.
    pub(crate) dead: Vec<Ipv4Addr>,
}

/// Of the dead addresses in `gone`, those dead for [`RESET_AFTER`] by `now`; `dead_since`
/// remembers when each was first seen dead (and forgets those alive again).
fn settle(dead_since: &mut HashMap<Ipv4Addr, Instant>, gone: Vec<Ipv4Addr>, now: Instant) -> Vec<Ipv4Addr> {
    dead_since.retain(|ip, _| gone.contains(ip));
    gone.into_iter()
        .filter(|ip| now.duration_since(*dead_since.entry(*ip).or_insert(now)) >= RESET_AFTER)
        .collect()
}

/// The plan for the membership in `nodes`.
pub(crate) fn plan(cfg: &ClusterL4, nodes: &[NodeView]) -> Plan {
    let allowed = |n: &&NodeView| cfg.nodes.is_empty() || cfg.nodes.contains(&n.name);
    let v4 = |n: &NodeView| match n.gossip.ip() {
        IpAddr::V4(ip) => Some(ip),
        IpAddr::V6(_) => None,
    };
    let mut targets: Vec<Target> = nodes
        .iter()
        .filter(allowed)
        .filter(|n| n.live && n.serving == Some(Serving::Ready))
        .filter_map(|n| Some(Target { name: n.name.clone(), ip: v4(n)? }))
        .collect();
    targets.sort_by(|a, b| a.name.cmp(&b.name));
    targets.dedup_by(|a, b| a.ip == b.ip);
    let live: Vec<Ipv4Addr> = nodes.iter().filter(|n| n.live).filter_map(v4).collect();
    let mut gone: Vec<Ipv4Addr> = nodes
        .iter()
        .filter(allowed)
        .filter(|n| !n.live)
        .filter_map(v4)
        .filter(|ip| !live.contains(ip))
        .collect();
    gone.sort();
    gone.dedup();
    Plan { targets, dead: gone.clone(), gone }
}

/// The running tier: its table in the kernel and the thread that loads plans.
pub(crate) struct Tier {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
    prober: Mutex<Option<JoinHandle<()>>>,
    /// Leave the table in the kernel at stop (a binary upgrade's new process runs it now).
    keep_table: std::sync::atomic::AtomicBool,
}

struct Shared {
    cfg: ClusterL4,
    /// The latest plan not yet loaded, and whether the tier is stopping.
    next: Mutex<(Option<Plan>, bool)>,
    wake: Condvar,
    /// The last plan offered (loaded or about to be), to offer each change once.
    offered: Mutex<Option<Plan>>,
    /// The last plan the membership made, before the probe's findings took targets out.
    raw: Mutex<Option<Plan>>,
    /// What the probe found of the targets' listeners.
    findings: Mutex<probe::Findings>,
    /// When each dead address was first seen dead.
    dead_since: Mutex<HashMap<Ipv4Addr, Instant>>,
    view: Mutex<L4View>,
}

impl Tier {
    /// Installs the table (no target yet) and starts the thread.
    pub(crate) fn start(cfg: &ClusterL4) -> std::io::Result<Tier> {
        nft::load(&nft::install_text(cfg))?;
        let forwarding =
            std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").is_ok_and(|s| s.trim() == "1");
        if !forwarding {
            tracing::warn!("L4 tier: net.ipv4.ip_forward is 0 on this host, so no flow to the VIP passes");
        }
        let view = L4View {
            vip: cfg.vip.to_string(),
            ports: cfg.ports.clone(),
            table: cfg.table.clone(),
            forwarding,
            ..L4View::default()
        };
        let shared = Arc::new(Shared {
            cfg: cfg.clone(),
            next: Mutex::new((None, false)),
            wake: Condvar::new(),
            offered: Mutex::new(None),
            raw: Mutex::new(None),
            findings: Mutex::new(probe::Findings::default()),
            dead_since: Mutex::new(HashMap::new()),
            view: Mutex::new(view),
        });
        let worker = Arc::clone(&shared);
        let thread =
            std::thread::Builder::new().name("cswitch-l4".into()).spawn(move || load_plans(&worker))?;
        let checker = Arc::clone(&shared);
        let prober =
            std::thread::Builder::new().name("cswitch-l4-probe".into()).spawn(move || run_probe(&checker))?;
        tracing::info!(vip = %cfg.vip, ports = ?cfg.ports, table = %cfg.table, "L4 tier installed");
        Ok(Tier {
            shared,
            thread: Mutex::new(Some(thread)),
            prober: Mutex::new(Some(prober)),
            keep_table: Default::default(),
        })
    }

    /// Takes the membership's plan (its dead addresses once they have been dead long
    /// enough) and hands it, less the targets the probe found down, to the thread when it
    /// differs from the last one.
    pub(crate) fn offer(&self, mut plan: Plan) {
        if let Ok(mut dead_since) = self.shared.dead_since.lock() {
            plan.gone = settle(&mut dead_since, std::mem::take(&mut plan.gone), Instant::now());
        }
        if let Ok(mut raw) = self.shared.raw.lock() {
            *raw = Some(plan);
        }
        self.shared.offer_probed();
    }

    pub(crate) fn cfg(&self) -> &ClusterL4 {
        &self.shared.cfg
    }

    pub(crate) fn view(&self) -> L4View {
        self.shared.view.lock().map(|v| v.clone()).unwrap_or_default()
    }

    /// Stops the thread and deletes the table: the VIP's new flows then reach this host's
    /// own stack (refused), and no stale rule sends them to nodes nobody watches.
    /// At stop, leave the table to the process that took over (a binary upgrade).
    pub(crate) fn keep_table(&self) {
        self.keep_table.store(true, std::sync::atomic::Ordering::Release);
    }

    pub(crate) fn stop(&self) {
        if let Ok(mut next) = self.shared.next.lock() {
            next.1 = true;
            self.shared.wake.notify_one();
        }
        if let Some(prober) = self.prober.lock().ok().and_then(|mut t| t.take()) {
            let _ = prober.join();
        }
        if let Some(thread) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = thread.join();
            if self.keep_table.load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
            if let Err(e) = nft::load(&nft::remove_text(&self.shared.cfg)) {
                tracing::warn!(error = %e, "L4 tier: table not removed");
            }
        }
    }
}

impl Shared {
    /// The membership's last plan less the targets the probe found down, handed to the
    /// loading thread when it differs from the last one offered.
    fn offer_probed(&self) {
        let Some(mut plan) = self.raw.lock().ok().and_then(|raw| raw.clone()) else { return };
        if let Ok(findings) = self.findings.lock() {
            plan.dead.extend(plan.targets.iter().map(|t| t.ip).filter(|ip| findings.down(*ip)));
            plan.targets.retain(|t| !findings.down(t.ip));
        }
        plan.dead.sort();
        plan.dead.dedup();
        let Ok(mut offered) = self.offered.lock() else { return };
        if offered.as_ref() == Some(&plan) {
            return;
        }
        *offered = Some(plan.clone());
        if let Ok(mut next) = self.next.lock() {
            next.0 = Some(plan);
            self.wake.notify_one();
        }
    }

    fn stopping(&self) -> bool {
        self.next.lock().map_or(true, |next| next.1)
    }
}

/// The probe's thread: checks the membership's targets every [`probe::EVERY`] and re-offers
/// the plan when a target went down or came back, until stopped.
fn run_probe(shared: &Shared) {
    let Some(&port) = shared.cfg.ports.first() else { return };
    while !shared.stopping() {
        let suspect = shared.findings.lock().is_ok_and(|f| f.suspect());
        if !suspect {
            std::thread::sleep(probe::EVERY);
        }
        let targets: Vec<Target> = shared
            .raw
            .lock()
            .ok()
            .and_then(|raw| raw.as_ref().map(|p| p.targets.clone()))
            .unwrap_or_default();
        let mut changed = false;
        for t in &targets {
            let outcome = probe::check(t.ip, port);
            let Ok(mut findings) = shared.findings.lock() else { return };
            if findings.record(t.ip, outcome) {
                changed = true;
                let down = findings.down(t.ip);
                tracing::info!(node = %t.name, addr = %t.ip, ?outcome, down, "L4 tier: probe of a target");
            }
        }
        if let Ok(mut findings) = shared.findings.lock() {
            findings.keep_only(&targets.iter().map(|t| t.ip).collect::<Vec<_>>());
        }
        if changed {
            shared.offer_probed();
        }
    }
}

/// The thread: loads each plan as it comes, until stopped.
fn load_plans(shared: &Shared) {
    let mut loaded = Loaded::default();
    loop {
        let plan = {
            let Ok(mut next) = shared.next.lock() else { return };
            while next.0.is_none() && !next.1 {
                next = match shared.wake.wait(next) {
                    Ok(n) => n,
                    Err(_) => return,
                };
            }
            if next.1 {
                return;
            }
            next.0.take()
        };
        if let Some(plan) = plan {
            apply(shared, &plan, &mut loaded);
        }
    }
}

/// What the kernel has: the last table text loaded, and the dead addresses whose
/// unanswered flows were forgotten.
#[derive(Default)]
struct Loaded {
    text: String,
    dead: Vec<Ipv4Addr>,
}

/// Loads `plan`'s table (when its text changed), then forgets the unanswered flows of
/// nodes newly dead: only once the table no longer sends them any.
fn apply(shared: &Shared, plan: &Plan, loaded: &mut Loaded) {
    let text = nft::update_text(&shared.cfg, plan);
    if text != loaded.text {
        if !load_table(shared, plan, &text) {
            return;
        }
        loaded.text = text;
    }
    for &ip in plan.dead.iter().filter(|ip| !loaded.dead.contains(ip)) {
        let result = conntrack::forget_unanswered(shared.cfg.vip, ip);
        let Ok(mut view) = shared.view.lock() else { return };
        match result {
            Ok(n) => {
                view.unanswered_forgotten += n;
                tracing::info!(addr = %ip, flows = n, "L4 tier: a dead node's unanswered flows forgotten");
            }
            Err(e) => {
                tracing::error!(addr = %ip, error = %e, "L4 tier: a dead node's unanswered flows not forgotten");
                view.error = Some(e.to_string());
            }
        }
    }
    loaded.dead.clone_from(&plan.dead);
}

/// Loads `text` (the table for `plan`); whether the kernel took it.
fn load_table(shared: &Shared, plan: &Plan, text: &str) -> bool {
    let started = Instant::now();
    let result = nft::load(text);
    let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    let Ok(mut view) = shared.view.lock() else { return result.is_ok() };
    match result {
        Ok(()) => {
            view.targets = plan.targets.iter().map(|t| t.name.clone()).collect();
            view.gone = plan.gone.iter().map(Ipv4Addr::to_string).collect();
            view.changes += 1;
            view.changed_at_ms = wall_ms();
            view.load_us = took;
            view.error = None;
            tracing::info!(targets = ?view.targets, gone = ?view.gone, took_us = took, "L4 tier changed");
            true
        }
        Err(e) => {
            tracing::error!(error = %e, "L4 tier: change not loaded");
            view.error = Some(e.to_string());
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ip: &str, live: bool, serving: Option<Serving>) -> NodeView {
        NodeView {
            name: name.into(),
            gossip: format!("{ip}:7946").parse().unwrap_or_else(|e| panic!("{e}")),
            generation: 1,
            is_self: false,
            live,
            config_digest: None,
            drift: false,
            lag_ms: None,
            capacities: 0,
            sticky_ip: 0,
            learned_cookies: 0,
            tls_sessions: 0,
            assignments: 0,
            serving,
            runs_l4: false,
            l4_targets: Vec::new(),
        }
    }

    fn cfg(nodes: &[&str]) -> ClusterL4 {
        ClusterL4 {
            vip: Ipv4Addr::new(192, 0, 2, 10),
            ports: vec![80],
            nodes: nodes.iter().map(|n| n.to_string()).collect(),
            table: "t".into(),
        }
    }

    #[test]
    fn live_ready_nodes_take_flows_and_dead_ones_are_gone() {
        let ready = Some(Serving::Ready);
        let nodes = [
            node("cs3", "10.0.0.3", true, ready),
            node("cs1", "10.0.0.1", true, ready),
            node("cs2", "10.0.0.2", true, Some(Serving::Draining)),
            node("cs4", "10.0.0.4", false, ready),
            node("l4", "10.0.0.9", true, None),
        ];
        let p = plan(&cfg(&[]), &nodes);
        let names: Vec<&str> = p.targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["cs1", "cs3"], "in name order; not the draining one, nor the tier's own node");
        assert_eq!(p.gone, [Ipv4Addr::new(10, 0, 0, 4)]);
        assert_eq!(p.dead, p.gone, "dead now; `offer` keeps `gone` only once dead long enough");
        let only = plan(&cfg(&["cs3", "cs4"]), &nodes);
        assert_eq!(only.targets.len(), 1, "`nodes` restricts the tier");
    }

    #[test]
    fn a_dead_address_is_reset_only_after_a_while_and_forgotten_when_alive() {
        let (a, b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut since = HashMap::new();
        let t0 = Instant::now();
        assert!(settle(&mut since, vec![a], t0).is_empty(), "just died");
        let later = t0 + RESET_AFTER;
        assert_eq!(settle(&mut since, vec![a, b], later), [a], "a long dead, b just died");
        assert!(settle(&mut since, vec![b], later).is_empty(), "a alive again, b still new");
        assert!(settle(&mut since, vec![a], later + RESET_AFTER).is_empty(), "a died again: counts anew");
    }

    #[test]
    fn a_restarted_node_is_not_gone_under_its_dead_generation() {
        let old = node("cs1", "10.0.0.1", false, Some(Serving::Ready));
        let new = NodeView { generation: 2, ..node("cs1", "10.0.0.1", true, Some(Serving::Ready)) };
        let p = plan(&cfg(&[]), &[old, new]);
        assert_eq!(p.targets.len(), 1);
        assert!(p.gone.is_empty(), "its address is live again: {p:?}");
    }
}
