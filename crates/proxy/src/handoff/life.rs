//! A handed-off flow's life in the steering table (issue 12, part 3): entered by the flip,
//! forgotten when its connection is over. The switch keeps the live flows (client → the
//! hand-off that owns its entry), which is the `cswitch_steering_flows` gauge, and one
//! sweep thread forgets flows:
//!
//! - **reported**: the agent said the server's socket closed ([`oneway::Frame::Ended`]):
//!   every byte and both FINs acknowledged, or reset. What the client may still send is a
//!   retransmission of its FIN (the server's last ACK lost: the server's TIME_WAIT answers
//!   it), so the flow goes once the client has been quiet for [`REPORTED_QUIET`]: its
//!   retransmissions come at RTO ≥ 200 ms, doubling, so 2 s keeps the flow steered through
//!   three lost ACKs in a row.
//! - **ended in the datapath**: the client sent FIN or RST and nothing since for
//!   [`ENDED_QUIET`], and no report came (the agent is gone, or its connections to this
//!   switch all closed). A client that sent FIN is then in TIME_WAIT (done), or in
//!   FIN_WAIT2 waiting for a server that has said nothing for 10 s — a pause no HTTP
//!   exchange makes after the client's FIN; every segment the server sends is ACKed, which
//!   would have kept the flow from being quiet.
//! - **replaced**: a new connection from the same client port was handed off (or this one
//!   migrated) before the old one's end was seen: the flip takes the entry over.
//! - **idle timeout**: the table's own `flow_timeout` removed the entry; the sweep counts a
//!   flow older than that which two `flows` dumps in a row (10 s apart) did not list. Not
//!   one dump: a dump taken while flows come and go can skip elements.
//!
//! A client port is reused at once by new connections (spike P11), so a flow is always
//! named with the hand-off that owns its entry: a report for an older hand-off, or an
//! `ended` entry of an earlier connection (a flip removes it), never forgets a newer one.
//! Flips and forgets of the entries happen under one lock, so the sweep's check and its
//! forget see the same owner.

use super::steering;
use crate::floor::shared::Shared;
use crate::floor::stats::{Counter, Stats};
use oneway::Steering;
use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A flow its agent reported ended is forgotten once its client has been quiet this long.
pub const REPORTED_QUIET: Duration = Duration::from_secs(2);

/// A flow whose client sent FIN or RST is forgotten, unreported, once quiet this long.
pub const ENDED_QUIET: Duration = Duration::from_secs(10);

/// How often the sweep runs.
const TICK: Duration = Duration::from_secs(1);

/// Every this many sweeps, the live flows are checked against the table (idle timeouts).
const RECONCILE_EVERY: u32 = 10;

/// A live flow: the hand-off owning its entry, and when it was flipped.
#[derive(Clone, Copy, Debug)]
struct Flow {
    id: u64,
    since: Instant,
}

/// The live flows, by client.
static FLOWS: LazyLock<Mutex<HashMap<SocketAddrV4, Flow>>> = LazyLock::new(Default::default);

/// Agents' reports (hand-off, client, when it came) waiting for the sweep's next round.
/// Not a channel: a report only starts a wait of [`REPORTED_QUIET`], so the sweep reads
/// them on its tick instead of being woken for each one (a thread wake-up per hand-off
/// was a tenth of the switch's CPU at a thousand hand-offs a second).
static REPORTS: Mutex<Vec<(u64, SocketAddrV4, Instant)>> = Mutex::new(Vec::new());

/// Whether a sweep runs (reports are kept only then).
static SWEEPING: AtomicBool = AtomicBool::new(false);

fn reports() -> MutexGuard<'static, Vec<(u64, SocketAddrV4, Instant)>> {
    REPORTS.lock().unwrap_or_else(|e| e.into_inner())
}

fn flows() -> MutexGuard<'static, HashMap<SocketAddrV4, Flow>> {
    FLOWS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Flows whose entry a later flip on the same client port took over, not yet counted.
static REPLACED: AtomicU64 = AtomicU64::new(0);

/// Steers `client` to `server_mac` for hand-off `id` (the flip, on this worker's handle).
pub(super) fn flip(client: SocketAddrV4, server_mac: [u8; 6], id: u64) -> io::Result<()> {
    let mut live = flows();
    // A port with no live flow has no entry to replace: the shorter transaction, unless
    // the table holds one the switch does not know of (then it fails whole, and the full
    // one runs).
    let known = live.contains_key(&client);
    steering::with(|s| match known {
        true => s.flip(client, server_mac),
        false => s.flip_new(client, server_mac).or_else(|_| s.flip(client, server_mac)),
    })?;
    let before = live.insert(client, Flow { id, since: Instant::now() });
    // A new connection from the same client port (P11), or a migration of this one: the
    // old entry ends here.
    if before.is_some() {
        REPLACED.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// Hand-off `id` failed after its flip: its flow is steered back to the switch at once.
pub(super) fn unflip(client: SocketAddrV4, id: u64) -> io::Result<()> {
    let mut live = flows();
    if live.get(&client).is_some_and(|f| f.id == id) {
        live.remove(&client);
    }
    steering::with(|s| s.forget(client))
}

/// An agent reported that hand-off `id`'s connection (client `client`) has closed.
pub(super) fn reported(id: u64, client: SocketAddr) {
    let SocketAddr::V4(client) = client else { return };
    if SWEEPING.load(Ordering::Relaxed) {
        reports().push((id, client, Instant::now()));
    }
}

/// Flows steered now; `None` without a steering table.
pub fn live_flows() -> Option<u64> {
    steering::table().map(|_| flows().len() as u64)
}

/// Starts the sweep when a steering table is installed; it ends at shutdown.
pub fn spawn(shared: Arc<Shared>) -> io::Result<Option<JoinHandle<()>>> {
    let Some(table) = steering::table() else { return Ok(None) };
    let steering = Steering::open(table)?;
    SWEEPING.store(true, Ordering::Relaxed);
    let flow_timeout =
        shared.snapshot.load().config.oneway.as_ref().map_or(Duration::ZERO, |o| o.flow_timeout);
    let sweep =
        Sweep { steering, flow_timeout, pending: HashMap::new(), unlisted: HashSet::new(), warned: false };
    let thread =
        std::thread::Builder::new().name("steering-sweep".into()).spawn(move || sweep.run(&shared))?;
    Ok(Some(thread))
}

/// The sweep's state: its netlink handle, and the reported flows waiting for quiet.
struct Sweep {
    steering: Steering,
    /// The table's idle timeout: no younger flow can have expired.
    flow_timeout: Duration,
    /// Flows old enough to have expired that the last `flows` dump did not list.
    unlisted: HashSet<SocketAddrV4>,
    /// Reported flows: the hand-off, and when the report came.
    pending: HashMap<SocketAddrV4, (u64, Instant)>,
    /// A failing dump is logged once until one works again.
    warned: bool,
}

impl Sweep {
    fn run(mut self, shared: &Shared) {
        let mut sweeps = 0u32;
        while !shared.shutting_down.load(Ordering::Acquire) {
            std::thread::sleep(TICK);
            let reported = std::mem::take(&mut *reports());
            for (id, client, at) in reported {
                self.note(id, client, at);
            }
            self.sweep(&shared.stats);
            sweeps = sweeps.wrapping_add(1);
            if sweeps.is_multiple_of(RECONCILE_EVERY) {
                self.reconcile(&shared.stats);
            }
        }
    }

    /// A report for the hand-off that still owns the client's entry waits for quiet.
    fn note(&mut self, id: u64, client: SocketAddrV4, at: Instant) {
        if flows().get(&client).is_some_and(|f| f.id == id) {
            self.pending.insert(client, (id, at));
        }
    }

    fn sweep(&mut self, stats: &Stats) {
        stats.add(Counter::SteeringReplaced, REPLACED.swap(0, Ordering::Relaxed));
        let ended = match self.steering.ended() {
            Ok(ended) => {
                self.warned = false;
                ended
            }
            Err(e) => {
                if !std::mem::replace(&mut self.warned, true) {
                    tracing::warn!(error = %e, "steering sweep: ended flows not readable; agent reports only");
                }
                Vec::new()
            }
        };
        let quiet: HashMap<SocketAddrV4, Duration> = ended.iter().map(|e| (e.client, e.quiet)).collect();
        for (client, (id, at)) in self.pending.clone() {
            // Quiet since the client's last packet when it ended in the datapath, else
            // since the report (it sent no FIN or RST: the server reset the connection).
            let q = quiet.get(&client).copied().unwrap_or_else(|| at.elapsed());
            if q >= REPORTED_QUIET {
                self.pending.remove(&client);
                self.forget_reported(client, id, stats);
            }
        }
        for e in ended {
            if e.quiet >= ENDED_QUIET && !self.pending.contains_key(&e.client) {
                self.forget_ended(e.client, stats);
            }
        }
        let live = flows();
        self.pending.retain(|client, (id, _)| live.get(client).is_some_and(|f| f.id == *id));
    }

    fn forget_reported(&mut self, client: SocketAddrV4, id: u64, stats: &Stats) {
        let mut live = flows();
        if live.get(&client).is_none_or(|f| f.id != id) {
            return; // a newer connection owns the port now
        }
        match self.steering.forget(client) {
            Ok(()) => {
                live.remove(&client);
                stats.inc(Counter::SteeringForgotReported);
            }
            Err(e) => tracing::warn!(%client, error = %e, "steering sweep: forget failed"),
        }
    }

    fn forget_ended(&mut self, client: SocketAddrV4, stats: &Stats) {
        let mut live = flows();
        match self.steering.forget_ended(client) {
            Ok(true) => {
                live.remove(&client);
                stats.inc(Counter::SteeringForgotEnded);
            }
            Ok(false) => {} // flipped again since the dump: a new connection's entry
            Err(e) => tracing::warn!(%client, error = %e, "steering sweep: forget failed"),
        }
    }

    /// Live flows the table no longer has went by its idle timeout: flows flipped at least
    /// `flow_timeout` ago that neither this dump nor the one before listed.
    fn reconcile(&mut self, stats: &Stats) {
        let Ok(listed) = self.steering.flows() else { return };
        let listed: HashSet<SocketAddrV4> = listed.into_iter().collect();
        let mut live = flows();
        let before = live.len();
        let unlisted = std::mem::take(&mut self.unlisted);
        live.retain(|client, f| {
            if listed.contains(client) || f.since.elapsed() < self.flow_timeout {
                return true;
            }
            if unlisted.contains(client) {
                return false;
            }
            self.unlisted.insert(*client);
            true
        });
        for _ in live.len()..before {
            stats.inc(Counter::SteeringExpired);
        }
    }
}
