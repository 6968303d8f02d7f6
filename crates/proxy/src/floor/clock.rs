//! A cheap clock for deadlines: the kernel's coarse monotonic clock (advanced once a tick,
//! read without touching the time hardware), turned into an `Instant` against one precise
//! reading taken once per thread. Deadlines of seconds do not need microseconds, and a
//! request computes several: in a VM, each precise read costs as much as parsing a field.
//! Both clocks are CLOCK_MONOTONIC (the coarse one is its tick-resolution copy), so they
//! never drift apart; the error is at most one kernel tick (1–10 ms). Durations that are
//! reported (access log, metrics) keep reading the precise clock.
//!
//! The one `unsafe` here is the call to glibc's `clock_gettime`: neither std nor tokio reads
//! the coarse clock, and rustix's own vDSO lookup crashes under valgrind (callgrind is how
//! the CPU per request is profiled).
#![allow(unsafe_code)]

use std::time::Duration;
use tokio::time::Instant;

thread_local! {
    /// One precise reading and the coarse clock at that moment.
    static BASE: (Instant, Duration) = (Instant::now(), coarse());
}

fn coarse() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into `t`, which lives across the call; the
    // clock id is a constant Linux always has (since 2.6.32), so it cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Now, to within one kernel tick: for deadlines and idle ages, not for reported durations.
pub fn now() -> Instant {
    BASE.with(|(instant, at)| *instant + coarse().saturating_sub(*at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_the_precise_clock_to_a_tick() {
        for _ in 0..3 {
            let before = Instant::now();
            let ours = now();
            let after = Instant::now();
            let slack = Duration::from_millis(20); // a tick at HZ=100 is 10 ms
            assert!(ours + slack >= before && ours <= after + slack, "{ours:?} vs {before:?}..{after:?}");
            std::thread::sleep(Duration::from_millis(30));
        }
    }
}
