//! A slow reader never makes the switch buffer without bound (seed 000 §4.1's flooding).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::start;
use std::time::Duration;
use testkit::RawClient;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_read_does_not_grow_memory() {
    let h = start(&["s1"], "").await;
    let before = rss_kib();
    let mut c = RawClient::connect(h.addr).await.unwrap();
    let n: u64 = 256 * 1024 * 1024;
    c.send(format!("GET /big/{n} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes()).await.unwrap();
    // The client reads nothing for a while; the origin can only get as far as the socket
    // buffers and the switch's fixed buffers allow.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let grown = rss_kib().saturating_sub(before);
    assert!(grown < 32 * 1024, "RSS grew {grown} KiB while a 256 MiB response was held back");
    drop(c);
}
