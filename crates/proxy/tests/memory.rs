//! Memory per connection that has not sent its request (issue 17): small before the first
//! byte (no buffer is taken until bytes arrive) and while a head trickles in (a small
//! buffer that grows only if the head needs it; the request's larger state only once the
//! head is whole). Resident bytes, not timing. Alone in its test binary, so no other test
//! allocates while it measures.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::start;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

fn rss_kib() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Opens `n` connections (std sockets: the client side costs no user-space memory) that
/// send `first`, and returns the resident bytes the process gained per connection.
async fn per_connection(addr: SocketAddr, n: usize, first: &[u8], conns: &mut Vec<TcpStream>) -> usize {
    let before = rss_kib();
    for _ in 0..n {
        let mut s = TcpStream::connect(addr).unwrap();
        std::io::Write::write_all(&mut s, first).unwrap();
        conns.push(s);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    rss_kib().saturating_sub(before) * 1024 / n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_without_a_request_costs_little_memory() {
    let h = start(&["s1"], "[limits]\nmax_client_connections = 10000\n").await;
    let mut conns = Vec::new();
    // Warm-up: the reactor's and the allocator's first tables.
    per_connection(h.addr, 200, b"", &mut conns).await;
    let silent = per_connection(h.addr, 2000, b"", &mut conns).await;
    let trickling = per_connection(h.addr, 2000, b"GET / HTTP/1.1\r\nHo", &mut conns).await;
    eprintln!("per connection: silent {silent} B, trickling {trickling} B");
    assert!(silent <= 1024, "silent connection: {silent} B");
    assert!(trickling <= 4096, "trickling head: {trickling} B");
    assert_eq!(h.count(proxy::Counter::HeadTimeout), 0);
}
