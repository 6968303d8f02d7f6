//! What an upgrade tells the operator: where it is while it runs (`GET /api/upgrade`,
//! and a log line a second while the old process drains) and what it did (the answer to
//! `POST /api/upgrade`, and the log): connections moved (tunnels among them, with the
//! bytes they had buffered), finished in the old process and why, failed to move and why,
//! cut at the grace period.

use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Where an upgrade is.
#[derive(Default)]
pub(super) struct Progress {
    /// The one running: what it does and since when.
    now: Option<(&'static str, Instant, Value)>,
    /// How the last one ended (its report, or why it failed).
    last: Option<Value>,
}

impl Progress {
    /// The running upgrade is at `phase` (`starting`, `handing_over`), with `facts`.
    pub(super) fn at(&mut self, phase: &'static str, facts: Value) {
        let since = self.now.as_ref().map_or_else(Instant::now, |(_, since, _)| *since);
        self.now = Some((phase, since, facts));
    }

    /// It ended with `outcome`.
    pub(super) fn ended(&mut self, outcome: Value) {
        self.now = None;
        self.last = Some(outcome);
    }

    /// `GET /api/upgrade`: the running upgrade (with the hand-over's counts so far, from
    /// `tally`), and the last one's outcome.
    pub(super) fn status(&self, tally: Option<proxy::HandoverTally>, open: usize) -> Value {
        let running = self.now.as_ref().map(|(phase, since, facts)| {
            let mut v = json!({ "phase": phase, "for_ms": since.elapsed().as_millis() as u64 });
            merge(&mut v, facts);
            if *phase == "handing_over" {
                let t = tally.unwrap_or_default();
                merge(
                    &mut v,
                    &json!({
                        "moved": t.moved,
                        "tunnels_moved": t.tunnels_moved,
                        "failed_to_move": t.failed,
                        "last_failure": t.last_failure,
                        "still_open_here": open,
                    }),
                );
            }
            v
        });
        json!({ "running": running, "last": self.last })
    }
}

fn merge(into: &mut Value, from: &Value) {
    if let (Some(into), Some(from)) = (into.as_object_mut(), from.as_object()) {
        into.extend(from.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
}

/// The figures of a finished hand-over.
pub(super) struct Done {
    pub pid: u32,
    pub serving_after: Duration,
    pub duration: Duration,
    pub open_then: usize,
    pub left: usize,
    pub tally: proxy::HandoverTally,
}

/// The answer to `POST /api/upgrade`, logged too.
pub(super) fn done(d: &Done) -> Value {
    let t = &d.tally;
    let finished = (d.open_then as u64).saturating_sub(t.moved).saturating_sub(d.left as u64);
    let known = t.tls_closed + t.tunnels_kept;
    let report = json!({
        "new_pid": d.pid,
        "serving_after_ms": d.serving_after.as_millis() as u64,
        "duration_ms": d.duration.as_millis() as u64,
        "moved": t.moved,
        "tunnels_moved": t.tunnels_moved,
        "tunnel_bytes_buffered": t.tunnel_bytes_buffered,
        "finished_in_old": finished,
        "finished_in_old_why": {
            "tls_terminated": t.tls_closed,
            "tunnels_not_movable": t.tunnels_kept,
            "other": finished.saturating_sub(known),
        },
        "failed_to_move": t.failed,
        "last_failure": t.last_failure,
        "cut_at_grace_period": d.left,
    });
    tracing::info!(
        new_pid = d.pid,
        moved = t.moved,
        tunnels_moved = t.tunnels_moved,
        tunnel_bytes_buffered = t.tunnel_bytes_buffered,
        finished_in_old = finished,
        tls_terminated = t.tls_closed,
        tunnels_not_movable = t.tunnels_kept,
        failed_to_move = t.failed,
        last_failure = t.last_failure.as_deref().unwrap_or(""),
        cut_at_grace_period = d.left,
        duration_ms = d.duration.as_millis() as u64,
        "upgrade done; this process exits"
    );
    report
}

/// A line a second while the old process drains.
pub(super) fn draining(tally: Option<proxy::HandoverTally>, open: usize) {
    let t = tally.unwrap_or_default();
    tracing::info!(
        moved = t.moved,
        tunnels_moved = t.tunnels_moved,
        failed_to_move = t.failed,
        still_open_here = open,
        "upgrade: handing over"
    );
}
