//! A server's live state: what the health control loop decides (effective weight, whether
//! sticky traffic may still go there) and what the data path measures (requests, status
//! classes, bytes, latency). Atomics only: the control loop is the one writer of the
//! decisions, the data path reads them with no lock (DESIGN.md §3); the data path is the
//! writer of the measurements and the admin API reads them.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// Upper bounds of the latency histogram's buckets, in microseconds (the last bucket,
/// beyond 60 s, has no bound). Roughly three per decade, from 50 µs.
pub const LATENCY_BOUNDS_US: [u64; 19] = [
    50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000,
    2_000_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000,
];
const BUCKETS: usize = LATENCY_BOUNDS_US.len() + 1;

/// `Live::ramp_from_ms` of a server not usable now.
pub const NOT_USABLE: u64 = u64::MAX;

/// The active check's verdict on a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Health {
    /// No check configured (or not run yet): taken as up.
    Unchecked = 0,
    /// The last `rise` checks passed (or the server has not failed `fall` yet).
    Up = 1,
    /// `fall` consecutive checks failed.
    Down = 2,
}

impl Health {
    /// API and metrics name.
    pub fn name(&self) -> &'static str {
        match self {
            Health::Unchecked => "unchecked",
            Health::Up => "up",
            Health::Down => "down",
        }
    }

    /// The verdict named `name` (see [`Health::name`]).
    pub fn from_name(name: &str) -> Option<Health> {
        [Health::Unchecked, Health::Up, Health::Down].into_iter().find(|h| h.name() == name)
    }

    fn from_u8(v: u8) -> Health {
        match v {
            1 => Health::Up,
            2 => Health::Down,
            _ => Health::Unchecked,
        }
    }
}

/// Milliseconds on the process clock (monotonic), so deadlines fit in an atomic.
pub fn now_ms() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let start = *START.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// One server's live state.
pub struct Live {
    /// Weight the schedulers use now (0 = no new requests): the control loop's verdict.
    pub effective_weight: AtomicU32,
    /// Whether sticky / persistent requests may still go to the server.
    pub sticky_ok: AtomicBool,
    health: AtomicU8,
    /// Last check failure reason, for the API (empty when none): written by the checker.
    last_check: std::sync::Mutex<String>,
    /// Passive checks: consecutive failures on live traffic.
    pub passive_failures: AtomicU32,
    /// Passive checks: out until this `now_ms()` (0 = not out).
    pub passive_out_until: AtomicU64,
    /// Last capacity an agent reported (with `reported_at_ms`).
    pub capacity: AtomicU32,
    /// `now_ms()` of the last agent report (0 = never).
    pub reported_at_ms: AtomicU64,
    /// Slow start: the weight ramps up from this `now_ms()`; 0 = full weight, [`NOT_USABLE`]
    /// = the server is not usable now (the ramp starts when it becomes usable).
    pub ramp_from_ms: AtomicU64,
    /// `now_ms()` the server entered `drain` (0 = not draining).
    pub drain_since_ms: AtomicU64,
    /// Requests sent (one per request, whatever the retries).
    pub requests: AtomicU64,
    /// Responses by status class: 1xx, 2xx, 3xx, 4xx, 5xx.
    pub responses: [AtomicU64; 5],
    /// Connect failures and unanswered requests.
    pub failures: AtomicU64,
    /// Active health checks that failed.
    pub check_failures: AtomicU64,
    /// Request bytes from clients to this server.
    pub bytes_in: AtomicU64,
    /// Response bytes from this server to clients.
    pub bytes_out: AtomicU64,
    latency: [AtomicU64; BUCKETS],
    latency_sum_us: AtomicU64,
}

impl Live {
    /// A server that starts with weight `weight`, up and usable.
    pub fn new(weight: u32) -> Live {
        Live {
            effective_weight: AtomicU32::new(weight),
            sticky_ok: AtomicBool::new(true),
            health: AtomicU8::new(Health::Unchecked as u8),
            last_check: std::sync::Mutex::new(String::new()),
            passive_failures: AtomicU32::new(0),
            passive_out_until: AtomicU64::new(0),
            capacity: AtomicU32::new(0),
            reported_at_ms: AtomicU64::new(0),
            ramp_from_ms: AtomicU64::new(0),
            drain_since_ms: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            responses: std::array::from_fn(|_| AtomicU64::new(0)),
            failures: AtomicU64::new(0),
            check_failures: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            latency: std::array::from_fn(|_| AtomicU64::new(0)),
            latency_sum_us: AtomicU64::new(0),
        }
    }

    /// The active check's verdict.
    pub fn health(&self) -> Health {
        Health::from_u8(self.health.load(Ordering::Relaxed))
    }

    /// Records the active check's verdict and, for a failure, its reason.
    pub fn set_health(&self, health: Health, reason: &str) {
        self.health.store(health as u8, Ordering::Relaxed);
        let mut last = self.last_check.lock().unwrap_or_else(|e| e.into_inner());
        last.clear();
        last.push_str(reason);
    }

    /// The last check failure reason ("" when the last check passed).
    pub fn last_check(&self) -> String {
        self.last_check.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether passive checks have the server out at `now` (ms).
    pub fn passive_out(&self, now: u64) -> bool {
        self.passive_out_until.load(Ordering::Relaxed) > now
    }

    /// Counts one finished request: its status (0 = none sent), bytes and duration.
    pub fn record(&self, status: u16, bytes_in: u64, bytes_out: u64, elapsed: Duration) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if (100..600).contains(&status) {
            self.responses[usize::from(status / 100 - 1)].fetch_add(1, Ordering::Relaxed);
        }
        self.bytes_in.fetch_add(bytes_in, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes_out, Ordering::Relaxed);
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let bucket = LATENCY_BOUNDS_US.partition_point(|&bound| bound < us);
        self.latency[bucket].fetch_add(1, Ordering::Relaxed);
        self.latency_sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// The latency histogram: count per bucket (see [`LATENCY_BOUNDS_US`]) and the sum in µs.
    pub fn latency(&self) -> (Vec<u64>, u64) {
        let counts = self.latency.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        (counts, self.latency_sum_us.load(Ordering::Relaxed))
    }
}

/// The `q` quantile (0..=1) of a histogram given as counts per bucket, in microseconds,
/// interpolated linearly within its bucket; `None` when the histogram is empty.
pub fn quantile_us(counts: &[u64], q: f64) -> Option<u64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    // The rank of the quantile among `total` samples; within its bucket the samples are
    // taken as spread evenly, so one sample reads as the bucket's middle, not its bound.
    let rank = q.clamp(0.0, 1.0) * total as f64;
    let mut seen = 0u64;
    for (i, &c) in counts.iter().enumerate() {
        if c == 0 {
            continue;
        }
        if (seen + c) as f64 >= rank {
            let lo = if i == 0 { 0 } else { LATENCY_BOUNDS_US[i - 1] };
            let hi = LATENCY_BOUNDS_US.get(i).copied().unwrap_or(lo * 2);
            let within = (rank - seen as f64) / c as f64;
            return Some(lo + ((hi - lo) as f64 * within) as u64);
        }
        seen += c;
    }
    LATENCY_BOUNDS_US.last().copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_fills_the_right_bucket_and_class() {
        let live = Live::new(1);
        live.record(204, 10, 20, Duration::from_micros(150));
        live.record(503, 0, 5, Duration::from_secs(100));
        live.record(0, 7, 0, Duration::from_micros(10));
        let (counts, sum) = live.latency();
        assert_eq!((counts[0], counts[2], counts[BUCKETS - 1]), (1, 1, 1));
        assert_eq!(sum, 150 + 100_000_000 + 10);
        let classes: Vec<u64> = live.responses.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        assert_eq!(classes, [0, 1, 0, 0, 1]);
        assert_eq!(live.bytes_in.load(Ordering::Relaxed), 17);
    }

    #[test]
    fn quantiles_interpolate_within_buckets() {
        let mut counts = vec![0; BUCKETS];
        counts[4] = 100; // all between 500 µs and 1 ms
        assert_eq!(quantile_us(&counts, 0.5), Some(750));
        assert_eq!(quantile_us(&counts, 1.0), Some(1_000));
        counts[7] = 100; // and as many between 5 and 10 ms
        assert_eq!(quantile_us(&counts, 0.5), Some(1_000));
        assert!(quantile_us(&counts, 0.99).is_some_and(|q| (5_000..=10_000).contains(&q)));
        assert_eq!(quantile_us(&[0; BUCKETS], 0.5), None);
        let mut one = vec![0; BUCKETS];
        one[6] = 1; // a single request between 2 and 5 ms
        assert_eq!(quantile_us(&one, 0.5), Some(3_500), "the middle, not the bound");
    }
}

/// One listener's traffic figures (listeners are fixed for the life of the process).
#[derive(Default)]
pub struct ListenerLive {
    /// Client connections open now.
    pub connections: AtomicU64,
    /// Requests whose head was read.
    pub requests: AtomicU64,
    /// Responses by status class: 1xx … 5xx.
    pub responses: [AtomicU64; 5],
    /// Bytes from clients.
    pub bytes_in: AtomicU64,
    /// Bytes to clients.
    pub bytes_out: AtomicU64,
}

impl ListenerLive {
    /// Counts one finished request.
    pub fn record(&self, status: u16, bytes_in: u64, bytes_out: u64) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if (100..600).contains(&status) {
            self.responses[usize::from(status / 100 - 1)].fetch_add(1, Ordering::Relaxed);
        }
        self.bytes_in.fetch_add(bytes_in, Ordering::Relaxed);
        self.bytes_out.fetch_add(bytes_out, Ordering::Relaxed);
    }
}
