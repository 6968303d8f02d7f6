//! Server selection for cswitch.
//!
//! Owns the [`Scheduler`] trait and its implementations, one file per algorithm family,
//! and the one `match` ([`SchedulerKind::build`]) from a config name to an implementation.
//! Pure: no I/O, no clocks, no threads. The proxy gives a scheduler a slice of
//! [`Candidate`]s (weight, in-flight count, usable or not) and gets an index back.
//!
//! A scheduler instance is owned by one worker thread (`&mut self`, no locks). Shared
//! load (in-flight requests) reaches it through the candidates, which the proxy fills
//! from atomics shared by all workers.
//!
//! Layout: `rr.rs` round robin (and the eligibility test all share), `wrr.rs` smooth
//! weighted round robin, `lc.rs` least connections (and the tie-rotating scan),
//! `wlc.rs` weighted least connections. Every scheduler skips servers that are unusable
//! or have weight 0, returns `None` when none is left, and never allocates in `pick`.

mod lc;
mod rr;
mod wlc;
mod wrr;

/// What a scheduler knows about one server of a group at the moment of a pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// Configured weight (≥ 1 for a usable server; 0 = never picked).
    pub weight: u32,
    /// Requests currently assigned to the server, across all workers.
    pub active: u32,
    /// False when the server must not be picked (already tried for this request, full,
    /// down, draining).
    pub usable: bool,
}

/// A server selection policy.
pub trait Scheduler: Send {
    /// Index of the server to use, or `None` when no candidate is usable.
    /// The slice has the same length and order on every call unless the group changed;
    /// implementations that keep per-server state reset it when the length changes.
    fn pick(&mut self, servers: &[Candidate]) -> Option<usize>;
}

/// The schedulers a group can name in its config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulerKind {
    /// Round robin.
    RoundRobin,
    /// Smooth weighted round robin (nginx's algorithm).
    WeightedRoundRobin,
    /// Least connections (fewest in-flight requests).
    LeastConnections,
    /// Weighted least connections (IPVS: min active/weight).
    WeightedLeastConnections,
}

impl SchedulerKind {
    /// Config names, in the order docs list them.
    pub const NAMES: &'static [&'static str] = &["rr", "wrr", "lc", "wlc"];

    /// The kind a config name denotes.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "rr" => Some(SchedulerKind::RoundRobin),
            "wrr" => Some(SchedulerKind::WeightedRoundRobin),
            "lc" => Some(SchedulerKind::LeastConnections),
            "wlc" => Some(SchedulerKind::WeightedLeastConnections),
            _ => None,
        }
    }

    /// The config name of this kind.
    pub fn name(&self) -> &'static str {
        match self {
            SchedulerKind::RoundRobin => "rr",
            SchedulerKind::WeightedRoundRobin => "wrr",
            SchedulerKind::LeastConnections => "lc",
            SchedulerKind::WeightedLeastConnections => "wlc",
        }
    }

    /// A fresh scheduler of this kind.
    pub fn build(&self) -> Box<dyn Scheduler> {
        match self {
            SchedulerKind::RoundRobin => Box::new(rr::RoundRobin::default()),
            SchedulerKind::WeightedRoundRobin => Box::new(wrr::WeightedRoundRobin::default()),
            SchedulerKind::LeastConnections => Box::new(lc::LeastConnections::default()),
            SchedulerKind::WeightedLeastConnections => Box::new(wlc::WeightedLeastConnections::default()),
        }
    }
}
