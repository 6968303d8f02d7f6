//! How long hand-offs take, by phase, and what they cost the switch's CPU (issue 12's
//! benchmark: "hand-off latency p50/p99 by phase", "a hand-off costs the switch ≤ 40 µs
//! CPU"). Process-wide atomics, written by every worker, read by `/metrics`.
//!
//! Phases (wall time): `agent` (a control connection: pooled, or connected and
//! authenticated), `freeze` (repair mode, then the flow frozen in the datapath), `dump`
//! (the socket's state read), `ready` (HANDOFF sent until READY: the agent's restore and
//! two trips on the control channel), `flip` (the steering transaction), `go` (GO sent),
//! and `total`. CPU: the worker thread's CPU time over the hand-off's own work — everything
//! but the wait for READY, during which the worker runs other connections.

use rustix::time::{clock_gettime, ClockId};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The phases, in order, then the whole.
pub const PHASES: [&str; 7] = ["agent", "freeze", "dump", "ready", "flip", "go", "total"];

/// Upper bounds of the buckets in microseconds (the last bucket has none): fine where
/// hand-offs fall (tens of µs), coarse beyond.
pub const BOUNDS_US: [u64; 18] =
    [2, 5, 10, 20, 30, 40, 50, 75, 100, 150, 200, 300, 500, 1_000, 2_000, 5_000, 20_000, 100_000];
const BUCKETS: usize = BOUNDS_US.len() + 1;

struct Histogram {
    counts: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
}

impl Histogram {
    const fn new() -> Histogram {
        Histogram { counts: [const { AtomicU64::new(0) }; BUCKETS], sum_ns: AtomicU64::new(0) }
    }

    fn record(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.counts[BOUNDS_US.partition_point(|&b| b < us)].fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

static PHASE: [Histogram; PHASES.len()] = [const { Histogram::new() }; PHASES.len()];
/// Completed hand-offs measured, and their CPU time.
static DONE: AtomicU64 = AtomicU64::new(0);
static CPU_NS: AtomicU64 = AtomicU64::new(0);

/// One phase's histogram: counts per bucket (see [`BOUNDS_US`]) and the sum in seconds.
#[derive(Clone, Debug, Default)]
pub struct PhaseView {
    /// The phase's name.
    pub phase: &'static str,
    /// Count per bucket.
    pub counts: Vec<u64>,
    /// Total time, seconds.
    pub sum_secs: f64,
}

/// Every phase, and the CPU of the completed hand-offs.
#[derive(Clone, Debug, Default)]
pub struct TimingView {
    /// Per phase.
    pub phases: Vec<PhaseView>,
    /// Completed hand-offs measured.
    pub done: u64,
    /// Their CPU time on the switch, seconds.
    pub cpu_secs: f64,
}

/// The figures so far.
pub fn view() -> TimingView {
    let phases = PHASES
        .iter()
        .zip(&PHASE)
        .map(|(phase, h)| PhaseView {
            phase,
            counts: h.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect(),
            sum_secs: h.sum_ns.load(Ordering::Relaxed) as f64 / 1e9,
        })
        .collect();
    TimingView {
        phases,
        done: DONE.load(Ordering::Relaxed),
        cpu_secs: CPU_NS.load(Ordering::Relaxed) as f64 / 1e9,
    }
}

/// A hand-off being timed: each `lap` closes a phase.
pub(super) struct Stopwatch {
    started: Instant,
    lap: Instant,
    phase: usize,
    cpu_from: Option<Duration>,
    cpu: Duration,
}

impl Stopwatch {
    pub(super) fn start() -> Stopwatch {
        let now = Instant::now();
        Stopwatch { started: now, lap: now, phase: 0, cpu_from: Some(thread_cpu()), cpu: Duration::ZERO }
    }

    /// The current phase ended now.
    pub(super) fn lap(&mut self) {
        let now = Instant::now();
        if let Some(h) = PHASE.get(self.phase) {
            h.record(now - self.lap);
        }
        self.lap = now;
        self.phase += 1;
    }

    /// The worker turns to other work (the wait for READY): its CPU is not this hand-off's.
    pub(super) fn pause_cpu(&mut self) {
        if let Some(from) = self.cpu_from.take() {
            self.cpu += thread_cpu().saturating_sub(from);
        }
    }

    pub(super) fn resume_cpu(&mut self) {
        self.cpu_from = Some(thread_cpu());
    }

    /// The hand-off is done: its total and its CPU are recorded.
    pub(super) fn done(mut self) {
        self.pause_cpu();
        PHASE[PHASES.len() - 1].record(self.started.elapsed());
        DONE.fetch_add(1, Ordering::Relaxed);
        CPU_NS.fetch_add(u64::try_from(self.cpu.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

fn thread_cpu() -> Duration {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    Duration::new(u64::try_from(t.tv_sec).unwrap_or(0), u32::try_from(t.tv_nsec).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopwatch_fills_each_phase_and_the_total() {
        let before = view();
        let mut w = Stopwatch::start();
        for _ in 0..PHASES.len() - 1 {
            w.lap();
        }
        w.done();
        let after = view();
        for (b, a) in before.phases.iter().zip(&after.phases) {
            assert_eq!(a.counts.iter().sum::<u64>(), b.counts.iter().sum::<u64>() + 1, "{}", a.phase);
        }
        assert_eq!(after.done, before.done + 1);
    }
}
