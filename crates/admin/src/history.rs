//! `GET /api/history`: the last five minutes of every server's req/s and p90 latency, one
//! point a second, so the stats page draws its charts from the start instead of from the
//! moment it was opened. A task on the admin thread samples the server views every second;
//! each server keeps a ring of [`POINTS`] points and the few cumulative samples the rate and
//! the windowed p90 are taken from, so memory is bounded (about 15 KB a server, at most
//! [`MAX_SERVERS`] servers) whatever the uptime.

use proxy::view::{quantile_us, ServerView};
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// One point per this.
pub(crate) const INTERVAL: Duration = Duration::from_secs(1);
/// Points kept per server: five minutes.
const POINTS: usize = 300;
/// The p90 is over the requests of this many seconds, as the stats page's own.
const WINDOW_SECS: f64 = 10.0;
/// Servers beyond this many (in group, name order) get no history.
const MAX_SERVERS: usize = 1024;

/// Every server's recent points.
#[derive(Default)]
pub(crate) struct History {
    servers: BTreeMap<(String, String), Track>,
}

/// One server: its points, and the cumulative samples of the last window.
#[derive(Default)]
struct Track {
    points: VecDeque<Point>,
    recent: VecDeque<Sample>,
}

/// `[t, rps, p90_us]`: the switch's uptime in seconds, requests per second since the
/// previous point (null for the first), and the p90 of the last [`WINDOW_SECS`] in µs
/// (null when there were no requests).
#[derive(Clone, Copy, Debug, Serialize)]
struct Point(f64, Option<f64>, Option<u64>);

struct Sample {
    t: f64,
    requests: u64,
    latency: Vec<u64>,
}

/// The answer of `GET /api/history`.
#[derive(Serialize)]
pub(crate) struct HistoryView<'a> {
    interval_secs: u64,
    window_secs: f64,
    points_kept: usize,
    servers: Vec<ServerHistory<'a>>,
}

#[derive(Serialize)]
struct ServerHistory<'a> {
    group: &'a str,
    server: &'a str,
    points: &'a VecDeque<Point>,
}

impl History {
    /// Adds a point per server from views taken at uptime `now`; servers no longer in
    /// the views are forgotten.
    pub(crate) fn record(&mut self, now: f64, servers: &[ServerView]) {
        self.servers.retain(|(g, n), _| servers.iter().any(|s| &s.group == g && &s.name == n));
        for s in servers {
            let key = (s.group.clone(), s.name.clone());
            if !self.servers.contains_key(&key) && self.servers.len() >= MAX_SERVERS {
                continue;
            }
            self.servers.entry(key).or_default().record(now, s);
        }
    }

    pub(crate) fn view(&self) -> HistoryView<'_> {
        HistoryView {
            interval_secs: INTERVAL.as_secs(),
            window_secs: WINDOW_SECS,
            points_kept: POINTS,
            servers: self
                .servers
                .iter()
                .map(|((group, server), t)| ServerHistory { group, server, points: &t.points })
                .collect(),
        }
    }
}

impl Track {
    fn record(&mut self, now: f64, s: &ServerView) {
        // A counter that went backwards: the server was removed and added again.
        if self.recent.back().is_some_and(|last| s.requests < last.requests) {
            self.recent.clear();
        }
        let rps = self.recent.back().and_then(|last| {
            let dt = now - last.t;
            (dt > 0.0).then(|| (s.requests - last.requests) as f64 / dt)
        });
        let base = self.recent.iter().find(|x| x.t >= now - WINDOW_SECS - 0.5);
        let p90 = base.and_then(|base| {
            let delta: Vec<u64> =
                s.latency.counts.iter().zip(&base.latency).map(|(c, b)| c.saturating_sub(*b)).collect();
            quantile_us(&delta, 0.9)
        });
        self.points.push_back(Point(now, rps, p90));
        if self.points.len() > POINTS {
            self.points.pop_front();
        }
        self.recent.push_back(Sample { t: now, requests: s.requests, latency: s.latency.counts.clone() });
        while self.recent.front().is_some_and(|x| x.t < now - WINDOW_SECS - 1.0) {
            self.recent.pop_front();
        }
    }
}

#[cfg(test)]
mod tests;
