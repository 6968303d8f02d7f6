//! System calls per keep-alive request, counted by `strace -c` on the running switch
//! (issue 14, "keep it true"): the epoll floor of a readiness-based proxy is 4 (a read and a
//! write on each side); the benchmark harness measures 4.04. A change that adds a system
//! call per request (a wake-up, a `getsockname`, an `EAGAIN` read) fails here, without timing
//! anything.
//!
//! Needs `strace` (installed by `.ci/run`, which sets `CSWITCH_REQUIRE_STRACE=1` so a missing
//! tool fails instead of skipping) and the right to trace a child (root, or ptrace_scope 0).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::load::{connect_each_time, send, warmed};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Concurrent keep-alive clients: enough that one `epoll_wait` finds several ready, as in
/// the harness's 64-connection workload (more would outgrow the default pool of idle server
/// connections, and every request would pay a connect).
const CLIENTS: usize = 64;
/// Requests per client while traced.
const REQUESTS: usize = 60;
/// The bound.
const MAX_PER_REQUEST: f64 = 4.1;
/// On the io_uring data path (`io = "uring"`) the reads and writes of both sides go
/// through the ring: one `io_uring_enter` serves many requests (about 0.5 per request
/// measured here with 16 clients), plus the reaper's eventfd read and `epoll_wait`.
const MAX_PER_REQUEST_URING: f64 = 1.0;
/// A new connection per request on the ring (`reuse = "always"`, as the benchmark runs it):
/// `accept4` per connection, the `shutdown` that sends the answer's held-back last bytes with
/// the FIN (ADR 0024: cheaper than the segment it saves), its share of `io_uring_enter` (64
/// clients that each connect, ask and close batch less than keep-alive ones), of `epoll_wait`
/// and of the listener's last `EAGAIN` accept: 2.3 measured. The socket is closed through the
/// ring (a `close` of its own would add 1); TCP_NODELAY comes with the listener (a
/// `setsockopt` per connection would add 1), and accepted sockets never join tokio's epoll (2
/// `epoll_ctl` each would add 2).
const MAX_PER_CONNECTION_URING: f64 = 3.0;
/// Connections each client opens, one request each, while traced.
const CONNECTIONS: usize = 20;

fn strace_usable() -> bool {
    let ok =
        Command::new("strace").args(["-c", "-o", "/dev/null", "true"]).status().is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("CSWITCH_REQUIRE_STRACE").is_none(),
            "strace is required here and cannot run"
        );
        eprintln!("skipped: strace missing or not allowed to trace");
    }
    ok
}

/// The `calls` column of one system call's line (0 when it was not made).
fn calls_of(summary: &str, name: &str) -> u64 {
    summary
        .lines()
        .find(|l| l.split_whitespace().last() == Some(name))
        .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        .unwrap_or(0)
}

/// The `calls` column of strace's summary line.
fn total_calls(summary: &str) -> u64 {
    let line =
        summary.lines().find(|l| l.trim_end().ends_with(" total")).unwrap_or_else(|| panic!("{summary}"));
    line.split_whitespace().nth(3).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("{line}"))
}

#[test]
fn a_keep_alive_request_costs_at_most_4_1_system_calls() {
    if !strace_usable() {
        return;
    }
    let per_request = system_calls_per_request("epoll", false);
    assert!(
        per_request <= MAX_PER_REQUEST,
        "{per_request:.2} system calls per keep-alive request (bound {MAX_PER_REQUEST})"
    );
}

#[test]
fn on_the_ring_a_keep_alive_request_costs_at_most_1_system_call() {
    if !strace_usable() {
        return;
    }
    let per_request = system_calls_per_request("uring", false);
    assert!(
        per_request <= MAX_PER_REQUEST_URING,
        "{per_request:.2} system calls per keep-alive request on io_uring (bound {MAX_PER_REQUEST_URING})"
    );
}

#[test]
fn on_the_ring_a_connection_per_request_costs_at_most_3_system_calls() {
    if !strace_usable() {
        return;
    }
    let per_connection = system_calls_per_request("uring", true);
    assert!(
        per_connection <= MAX_PER_CONNECTION_URING,
        "{per_connection:.2} system calls per connection on io_uring (bound {MAX_PER_CONNECTION_URING})"
    );
}

/// Runs the switch with `[global] io`, traces it over the clients' requests (on their
/// keep-alive connections, or on a new connection each when `close`), and returns the system
/// calls it made per request.
fn system_calls_per_request(io: &str, close: bool) -> f64 {
    // Warm: client and server connections open (the traced window opens none), buffers and
    // pools allocated.
    let mut w = warmed(&format!("syscalls-{io}-{close}"), io, CLIENTS);
    let clients = std::mem::take(&mut w.clients);
    let clients = if close {
        // Their closes, and their parking after a second idle, are not the traced load.
        drop(clients);
        std::thread::sleep(Duration::from_millis(300));
        Vec::new()
    } else {
        clients
    };
    let out = w.dir.join("strace.txt");
    let mut strace = Command::new("strace")
        .args(["-c", "-f", "-o"])
        .arg(&out)
        .args(["-p", &w.run.child.id().to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // strace says "attached" for each thread once tracing has started.
    let attached = common::log_lines(strace.stderr.take().unwrap());
    common::wait_for(&attached, "attached");
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let (requests, clients) = if close {
        w.rt.block_on(connect_each_time(w.web, CLIENTS, CONNECTIONS));
        (CLIENTS * CONNECTIONS, clients)
    } else {
        (CLIENTS * REQUESTS, w.rt.block_on(send(clients, REQUESTS)))
    };
    assert!(started.elapsed() < Duration::from_secs(60), "bounded");
    Command::new("kill").args(["-INT", &strace.id().to_string()]).status().unwrap();
    strace.wait().unwrap();
    drop(clients);

    let summary = std::fs::read_to_string(&out).unwrap();
    // The allocator's `madvise` (mimalloc returning freed pages after a delay) follows the
    // clock, not the requests: a traced debug build runs long enough to show 66 to 195 of
    // them over the same 3,840 requests. Every other call counts.
    // A debug build's std checks that a descriptor it closes is open (`fcntl(F_GETFD)`, one per
    // closed connection); a release build does not.
    let not_counted = calls_of(&summary, "madvise") + calls_of(&summary, "fcntl");
    let per_request = (total_calls(&summary) - not_counted) as f64 / requests as f64;
    eprintln!("io = {io}, close = {close}: {per_request:.3} system calls per request:\n{summary}");
    let _ = std::fs::remove_dir_all(&w.dir);
    per_request
}
