//! What a node's death costs behind the L4 tier (issue 13: "killing a node under a bounded
//! client loop loses only that node's in-flight requests"), in the namespace testbed
//! (`l4_bed`): two client threads open a new connection per request and three keep one
//! keep-alive connection each (a new one after a failure) while n2 dies — its process killed
//! (its host answers SYNs with resets) or its host crashed (all its traffic dropped, no
//! answer at all) — and twelve more connections open at once right after the death. Every
//! failed request must have been on a connection to n2 opened before the death (what
//! `lb`'s flow probe says), at most one per connection: connections opened meanwhile and
//! given n2 by the tier succeed after a SYN retransmit (ADR 0018).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
mod l4_bed;
mod oneway_bed;

use l4_bed::{as_client, client, Bed, WEB};
use std::collections::{BTreeMap, HashSet};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The new-connection clients' address, and the keep-alive clients'.
const FRESH: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 10);
const KEPT: Ipv4Addr = Ipv4Addr::new(10, 201, 0, 11);
const FRESH_THREADS: usize = 2;
const KEPT_THREADS: usize = 3;
/// New connections opened at once right after the death.
const BURST: usize = 12;

/// One request: when it started and ended, on which connection (its client end), when
/// that connection was opened, and whether it got a 200.
#[derive(Clone, Debug)]
struct Done {
    started: Duration,
    ended: Duration,
    conn: SocketAddrV4,
    opened: Duration,
    keep_alive: bool,
    ok: bool,
    error: String,
}

type Log = Arc<Mutex<Vec<Done>>>;

/// The client loops, each bounded (20 s, 10,000 requests), until `stop`.
fn load(t0: Instant, stop: &Arc<AtomicBool>) -> (Vec<std::thread::JoinHandle<()>>, Log) {
    let log: Log = Arc::default();
    let mut threads = Vec::new();
    for w in 0..FRESH_THREADS + KEPT_THREADS {
        let (stop, log) = (Arc::clone(stop), Arc::clone(&log));
        let keep_alive = w >= FRESH_THREADS;
        threads.push(std::thread::spawn(move || {
            let running = || !stop.load(Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(20);
            let mut open: Option<(TcpStream, SocketAddrV4, Duration)> = None;
            for i in 0..10_000 {
                if !running() {
                    return;
                }
                let path = format!("/load/{w}-{i}");
                let started = t0.elapsed();
                let (conn, opened, result) = if keep_alive {
                    ask_kept(&mut open, &path, t0)
                } else {
                    let (local, result) = client::try_get(FRESH, WEB, &path, None);
                    (local, started, result.map(|f| f.status))
                };
                let (ok, error) = match result {
                    Ok(status) => (status == 200, format!("status {status}")),
                    Err(e) => (false, e.to_string()),
                };
                let ended = t0.elapsed();
                log.lock().unwrap().push(Done { started, ended, conn, opened, keep_alive, ok, error });
                std::thread::sleep(Duration::from_millis(5));
            }
        }));
    }
    (threads, log)
}

/// `n` new-connection requests at once, right after a death: the tier gives about a third
/// of them to the dead node before it leaves the targets (it takes a probe and an `nft`
/// load, ≥ 15 ms), so each test sees connections that must be balanced anew.
fn burst(t0: Instant, log: &Log, n: usize) -> Vec<std::thread::JoinHandle<()>> {
    (0..n)
        .map(|i| {
            let log = Arc::clone(log);
            std::thread::spawn(move || {
                let started = t0.elapsed();
                let (conn, result) = client::try_get(FRESH, WEB, &format!("/burst/{i}"), None);
                let (ok, error) = match result {
                    Ok(f) => (f.status == 200, format!("status {}", f.status)),
                    Err(e) => (false, e.to_string()),
                };
                let ended = t0.elapsed();
                log.lock().unwrap().push(Done {
                    started,
                    ended,
                    conn,
                    opened: started,
                    keep_alive: false,
                    ok,
                    error,
                });
            })
        })
        .collect()
}

/// One request on the keep-alive connection in `open` (a new one first if there is none;
/// after a failure the connection is dropped): its connection, when that was opened, and
/// the status.
fn ask_kept(
    open: &mut Option<(TcpStream, SocketAddrV4, Duration)>,
    path: &str,
    t0: Instant,
) -> (SocketAddrV4, Duration, std::io::Result<u16>) {
    if open.is_none() {
        let opened = t0.elapsed();
        match client::try_connect(KEPT, WEB) {
            (local, Ok(stream)) => *open = Some((stream, local, opened)),
            (local, Err(e)) => return (local, opened, Err(e)),
        }
    }
    let (stream, local, opened) = open.as_mut().unwrap();
    let (local, opened) = (*local, *opened);
    let result = client::ask(stream, path).map(|f| f.status);
    if result.is_err() {
        *open = None;
    }
    (local, opened, result)
}

/// What the loops saw around a death at `died` (n2's): the failures each checked against
/// what `lb`'s flow probe says, and the counts printed.
struct Tally {
    requests: usize,
    failed: Vec<Done>,
    /// Connections whose first SYN the tier gave n2 and whose retransmit reached another
    /// node, answered.
    saved: usize,
}

fn tally(bed: &Bed, log: &Log, died: Duration) -> Tally {
    let flows = bed.flow_nodes();
    let done = log.lock().unwrap().clone();
    let nodes = |d: &Done| flows.get(&d.conn).cloned().unwrap_or_default();
    let failed: Vec<Done> = done.iter().filter(|d| !d.ok).cloned().collect();
    let saved: HashSet<SocketAddrV4> = done
        .iter()
        .filter(|d| d.ok && nodes(d).len() == 2 && nodes(d).contains(&"n2".into()))
        .map(|d| d.conn)
        .collect();
    let saved = saved.len();
    let fresh_failed = failed.iter().filter(|d| !d.keep_alive).count();
    eprintln!(
        "{} requests, {} failed ({fresh_failed} new-connection, {} keep-alive), {saved} connections first \
         given to n2 answered by another node after a SYN retransmit",
        done.len(),
        failed.len(),
        failed.len() - fresh_failed,
    );
    for d in &failed {
        eprintln!("  failed ({}): {d:?}", d.error);
    }
    let mut per_conn: BTreeMap<SocketAddrV4, usize> = BTreeMap::new();
    for d in &failed {
        assert_eq!(nodes(d), ["n2"], "a request failed on a connection not (only) to n2: {d:?}");
        assert!(d.opened <= died, "a request failed on a connection opened after n2 died: {d:?}");
        if !d.keep_alive {
            assert!(d.started <= died, "a new-connection request that started after n2 died failed: {d:?}");
        }
        *per_conn.entry(d.conn).or_default() += 1;
    }
    assert!(per_conn.values().all(|n| *n == 1), "a connection lost more than one request: {per_conn:?}");
    Tally { requests: done.len(), failed, saved }
}

/// The keep-alive connections open on n2 at `at` (by the probe), so the most requests the
/// keep-alive clients may lose.
fn kept_on_n2(bed: &Bed, log: &Log, at: Duration) -> usize {
    let flows = bed.flow_nodes();
    let done = log.lock().unwrap().clone();
    let mut conns: HashSet<SocketAddrV4> = HashSet::new();
    for d in done.iter().filter(|d| d.keep_alive && d.opened <= at && d.ended >= at) {
        if flows.get(&d.conn).is_some_and(|n| n == &["n2"]) {
            conns.insert(d.conn);
        }
    }
    conns.len()
}

/// The tier's counter of resets it held back (chain `retry_refused`).
fn held_resets(bed: &Bed) -> u64 {
    let out = bed.net.run("lb", &["nft", "list", "chain", "ip", "cswitch_l4", "retry_refused"]);
    let text = String::from_utf8_lossy(&out.stdout);
    text.split("counter packets ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The `conntrack` tool the tier runs; its absence fails where kernel tests are required.
fn conntrack_tool() -> bool {
    let ok =
        std::process::Command::new("conntrack").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CSWITCH_REQUIRE_KERNEL").is_none(),
            "conntrack (conntrack-tools) is required"
        );
        eprintln!("skipped: needs conntrack");
    }
    ok
}

/// n2's process is SIGKILLed under the loops: its host answers every SYN the tier gives it
/// with a reset until the probe takes it out (~0.1 s); the tier holds those resets back, so
/// those clients' SYN retransmits reach n1 or n3. Only the requests in flight on n2 fail.
#[test]
fn a_killed_node_costs_only_its_requests_in_flight() {
    let _one = l4_bed::one_at_a_time();
    if !conntrack_tool() {
        return;
    }
    let Some(bed) = Bed::start("death-kill", 3) else { return };
    as_client(bed, |bed| {
        let t0 = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let (threads, log) = load(t0, &stop);
        std::thread::sleep(Duration::from_millis(1200));
        let killing = t0.elapsed();
        bed.kill(1);
        let died = t0.elapsed();
        let burst = burst(t0, &log, BURST);
        let left = bed.until_targets(&["n1", "n3"], Duration::from_secs(2));
        eprintln!("n2 killed at {died:?}, out of the tier {left:?} later");
        std::thread::sleep(Duration::from_millis(1800));
        stop.store(true, Ordering::Relaxed);
        threads.into_iter().chain(burst).for_each(|t| t.join().unwrap());
        let kept = kept_on_n2(bed, &log, killing);
        let tally = tally(bed, &log, died);
        let held = held_resets(bed);
        eprintln!("{kept} keep-alive connection(s) on n2 at the kill; the tier held back {held} reset(s)");
        let fresh_failed = tally.failed.iter().filter(|d| !d.keep_alive).count();
        assert!(fresh_failed <= FRESH_THREADS, "more new-connection requests failed than were in flight");
        assert!(
            tally.saved >= 2,
            "the burst after the death: {} connection(s) first given to n2",
            tally.saved
        );
        assert!(
            tally.failed.len() - fresh_failed <= kept,
            "more keep-alive requests failed than connections on n2"
        );
        assert!(
            tally.saved >= 1 && held >= 1,
            "no connection was given to the dead n2 (saved {})",
            tally.saved
        );
        assert!(tally.requests > 200, "the loops ran: {}", tally.requests);
    });
}

/// n2's host crashes under the loops (all its traffic dropped: no reset, no answer): the
/// probe takes it out after three timed-out checks, and the tier forgets the flows it gave
/// n2 that never got an answer, so those clients' SYN retransmits reach n1 or n3. Only the
/// requests in flight on n2 (and at most one per keep-alive connection it had) fail.
#[test]
fn a_crashed_host_costs_only_its_requests_in_flight() {
    let _one = l4_bed::one_at_a_time();
    if !conntrack_tool() {
        return;
    }
    let Some(bed) = Bed::start("death-crash", 3) else { return };
    as_client(bed, |bed| {
        let t0 = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let (threads, log) = load(t0, &stop);
        std::thread::sleep(Duration::from_millis(1200));
        l4_bed::nft(
            &bed.net,
            "n2",
            "table netdev mute {
               chain in { type filter hook ingress device eth0 priority 0; policy drop; }
             }
             table inet mute {
               chain out { type filter hook output priority 0; oif eth0 drop; }
             }
",
        );
        let died = t0.elapsed();
        let burst = burst(t0, &log, BURST);
        let left = bed.until_targets(&["n1", "n3"], Duration::from_secs(2));
        eprintln!("n2's host cut off at {died:?}, out of the tier {left:?} later");
        std::thread::sleep(Duration::from_millis(2000));
        stop.store(true, Ordering::Relaxed);
        threads.into_iter().chain(burst).for_each(|t| t.join().unwrap());
        let kept = kept_on_n2(bed, &log, died);
        let tally = tally(bed, &log, died);
        let forgotten = bed.ctl("lb", &["cluster"])["l4"]["unanswered_forgotten"].as_u64().unwrap();
        eprintln!("{kept} keep-alive connection(s) on n2 at the crash; the tier forgot {forgotten} unanswered flow(s)");
        let fresh_failed = tally.failed.iter().filter(|d| !d.keep_alive).count();
        assert!(fresh_failed <= FRESH_THREADS, "more new-connection requests failed than were in flight");
        assert!(
            tally.saved >= 2,
            "the burst after the death: {} connection(s) first given to n2",
            tally.saved
        );
        assert!(
            tally.failed.len() - fresh_failed <= kept,
            "more keep-alive requests failed than connections on n2"
        );
        assert!(
            tally.saved >= 1 && forgotten >= 1,
            "no connection was given to the cut-off n2 (saved {})",
            tally.saved
        );
        assert!(tally.requests > 200, "the loops ran: {}", tally.requests);
    });
}
