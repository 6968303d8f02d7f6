//! The per-connection memory bound of HTTP/2 (`limits.h2_connection_bytes`, issue 15 part
//! 5), on the running binary, from raw clients: each connection opens 99 streams for 4 MB
//! answers and opens no flow-control window, so every answer waits inside the switch. The
//! switch's resident memory is read from /proc: with the bound, what the connections make
//! it hold stops at the bound (the servers' sockets fill instead), a stream opened then is
//! reset ENHANCE_YOUR_CALM (the 20th ends the connection), and other connections are served; the same attack on a switch
//! whose bound is out of reach shows the answers piling up without it.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

#[allow(dead_code)] // the raw-frame client of the proxy's HTTP/2 tests; part of it here
#[path = "../../proxy/tests/h2support/raw.rs"]
mod raw;

use common::{tempdir, Running};
use raw::Raw;
use std::net::SocketAddr;
use std::time::Duration;

const CONNECTIONS: usize = 4;
/// One under `h2_max_concurrent_streams` (100), so one more may open.
const STREAMS: u32 = 99;
const BOUND_KIB: usize = 256;
/// SETTINGS_INITIAL_WINDOW_SIZE 0: the switch may send no DATA on any stream.
const NO_WINDOW: (u16, u32) = (0x4, 0);

fn rss_kib(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn start(tag: &str, origin: SocketAddr, bound: usize) -> (Running, SocketAddr) {
    let dir = tempdir(tag);
    let text = format!(
        "[global]\nworkers = 1\ngrace_period = \"0s\"\n[access_log]\nenabled = false\n\
         [limits]\nh2_connection_bytes = {bound}\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
         [[group]]\nname = \"web\"\nservers = [ {{ name = \"w\", addr = \"{origin}\" }} ]\n"
    );
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, text).unwrap();
    let run = Running::start(&path);
    let line = run.wait_for("listening");
    let field = line.split_whitespace().find_map(|w| w.strip_prefix("addr=")).unwrap();
    (run, field.parse().unwrap())
}

/// A GET on a new connection; its status (0: none).
async fn get(addr: SocketAddr, path: &str) -> u32 {
    let mut raw = Raw::open(addr).await;
    assert!(raw.send(&Raw::get(1, path)).await);
    match raw.next_for(1).await {
        Some((1, _)) => 200, // a response head (the test's paths answer 200)
        other => panic!("{path}: {other:?}"),
    }
}

/// The attack on `addr`; the switch's resident growth (KiB) once the answers have piled
/// up, and the connections (still open).
async fn attack(addr: SocketAddr, pid: u32) -> (usize, Vec<Raw>) {
    // Warm up: a few streams answered whole, buffers and pools allocated.
    for _ in 0..3 {
        assert_eq!(get(addr, "/s").await, 200);
    }
    let before = rss_kib(pid);
    let mut raws = Vec::new();
    for _ in 0..CONNECTIONS {
        let mut raw = Raw::open_with(addr, &[NO_WINDOW]).await;
        let frames: Vec<u8> = (0..STREAMS).flat_map(|i| Raw::get(2 * i + 1, "/big/4000000")).collect();
        assert!(raw.send(&frames).await);
        raws.push(raw);
    }
    (settled_rss_kib(pid).await.saturating_sub(before), raws)
}

/// The switch's resident size once the answers stopped piling up: at least 1.5 s after the
/// attack began, then until two readings 300 ms apart agree within 1 % (a busy machine
/// fills the connections' buffers more slowly), at most 10 s more.
async fn settled_rss_kib(pid: u32) -> usize {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut last = rss_kib(pid);
    for _ in 0..33 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = rss_kib(pid);
        if now.abs_diff(last) * 100 <= last {
            return now;
        }
        last = now;
    }
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_makes_the_switch_hold_no_more_than_its_bound() {
    let origin = testkit::Origin::start("w").await;
    let (bounded, addr) = start("h2mem-bounded", origin.addr(), BOUND_KIB << 10);
    let (unbounded, spare_addr) = start("h2mem-unbounded", origin.addr(), 1 << 30);

    let (with_bound, mut raws) = attack(addr, bounded.child.id()).await;
    // One more stream on a full connection: refused.
    let extra = 2 * STREAMS + 1;
    assert!(raws[0].send(&Raw::get(extra, "/big/10")).await);
    let answer = raws[0].next_for(extra).await;
    let code = answer
        .as_ref()
        .filter(|(kind, _)| *kind == 3)
        .map(|(_, p)| u32::from_be_bytes([p[0], p[1], p[2], p[3]]));
    assert_eq!(code, Some(0xb), "RST_STREAM ENHANCE_YOUR_CALM: {answer:?}");
    // A client that keeps opening streams there (one at a time, each after its reset):
    // the 20th ends the connection.
    let mut answers = Vec::new();
    for i in 0..20 {
        let id = extra + 2 * i;
        assert!(raws[1].send(&Raw::get(id, "/big/10")).await);
        answers.push(raws[1].next_for(id).await);
    }
    let resets = answers.iter().filter(|a| matches!(a, Some((3, p)) if p[..] == [0, 0, 0, 0xb])).count();
    assert_eq!(resets, 19, "{answers:?}");
    let goaway =
        |a: &Option<(u8, Vec<u8>)>| matches!(a, Some((7, p)) if p.get(4..8) == Some(&[0, 0, 0, 0xb]));
    assert!(goaway(&answers[19]), "the 20th: GOAWAY ENHANCE_YOUR_CALM: {answers:?}");
    // Other connections are not held back by the full ones.
    assert_eq!(get(addr, "/during").await, 200);

    let (without, spare_raws) = attack(spare_addr, unbounded.child.id()).await;
    eprintln!("resident growth: {with_bound} KiB with a {BOUND_KIB} KiB bound per connection, {without} KiB without");
    // Without the bound each stream's answer fills its pipe (64 KiB); with it, the
    // connection's streams share the bound. The phases' own buffers are in both.
    let piled = CONNECTIONS * STREAMS as usize * 64;
    let bounded_total = CONNECTIONS * BOUND_KIB;
    assert!(
        // Half of it: resident memory is a coarse measure (allocator, timing).
        without.saturating_sub(with_bound) >= (piled - bounded_total) / 2,
        "the bound saved {} KiB; the pipes could hold {piled} KiB, the bounds {bounded_total} KiB",
        without.saturating_sub(with_bound)
    );
    drop((raws, spare_raws));
}
