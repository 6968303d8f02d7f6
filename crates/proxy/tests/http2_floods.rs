//! HTTP/2 floods from a raw client (issue 15 part 5): PINGs and SETTINGS sent without
//! reading the answers, a header block continued forever, and an HPACK bomb (a small
//! block that decodes to 40 MB). The switch must stop taking
//! bytes it would have to answer (so the client's writes stall at the socket buffers, not
//! at the switch's memory), end the CONTINUATION flood, and serve other connections
//! meanwhile. Resident memory is measured, so this binary holds one test.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod h2support;

use h2support::raw::{self, Raw};
use h2support::{get_with, rig};
use proxy::Counter;
use std::time::Duration;

fn rss_mib() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<usize>().unwrap() / 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn floods_are_bounded_and_other_connections_are_served() {
    let r = rig("floods", "").await;
    let warm = get_with(r.addr, "/a/warm", &[]).await;
    assert_eq!(warm.status, 200);
    let before = rss_mib();
    for (what, unit) in [("PING", raw::ping()), ("SETTINGS", raw::settings())] {
        let mut raw = Raw::open(r.addr).await;
        let written = raw.flood(&unit, Duration::from_secs(2)).await;
        eprintln!("{what} flood: the switch took {} KiB in 2 s", written >> 10);
        // Unread answers hold the switch's reading back: what it took fits in the socket
        // buffers, far from what 2 s of loopback writing would be.
        assert!(written < 64 << 20, "{what} flood: the switch took {} MiB", written >> 20);
        let other = get_with(r.addr, "/a/during", &[]).await;
        assert_eq!(other.status, 200, "{what} flood: another connection is served");
        let grown = rss_mib().saturating_sub(before);
        assert!(grown < 64, "{what} flood: resident memory grew {grown} MiB");
        drop(raw);
    }
    let mut raw = Raw::open(r.addr).await;
    let mut flood = raw::headers_open(1);
    for _ in 0..2000 {
        flood.extend(raw::continuation(1));
    }
    let _ = raw.send(&flood).await;
    let code = raw.goaway().await;
    eprintln!("CONTINUATION flood: GOAWAY {code:?}");
    assert!(code.is_some(), "the CONTINUATION flood ends with GOAWAY");
    let counted = h2support::wait_until(Duration::from_secs(2), || r.count_errors() == 1).await;
    assert!(counted, "counted as a connection error: {}", r.count_errors());
    // An HPACK bomb: 10,000 references to a 4 KB field, 40 MB once decoded.
    let mut raw = Raw::open(r.addr).await;
    let _ = raw.send(&raw::hpack_bomb(1, 10_000)).await;
    let answer = raw.next_for(1).await;
    let goaway = answer
        .as_ref()
        .filter(|(kind, _)| *kind == 7)
        .map(|(_, p)| u32::from_be_bytes([p[4], p[5], p[6], p[7]]));
    assert_eq!(goaway, Some(0xb), "GOAWAY ENHANCE_YOUR_CALM: {answer:?}");
    let grown = rss_mib().saturating_sub(before);
    assert!(grown < 64, "HPACK bomb: resident memory grew {grown} MiB");
    let after = get_with(r.addr, "/a/after", &[]).await;
    assert_eq!(after.status, 200);
    assert!(r.origin("w").requests().is_empty(), "no flood request reached a server");
}

trait Errors {
    fn count_errors(&self) -> u64;
}

impl Errors for h2support::Rig {
    fn count_errors(&self) -> u64 {
        self.switch.stats().get(Counter::H2ConnectionErrors)
    }
}
