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

/// A reader with a small receive window makes the switch's sends complete short (the socket
/// takes part of a send buffer; on the ring the driver sends the rest itself); every byte must
/// follow in order, and the answer that ends the connection (`Connection: close`) arrives
/// whole before the close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_gets_every_byte_of_a_closing_answer() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let h = start(&["s1"], "").await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut c = socket.connect(h.addr).await.unwrap();
    let n: u64 = 3 * 1024 * 1024 + 123;
    let ask = format!("GET /big/{n} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    c.write_all(ask.as_bytes()).await.unwrap();
    let started = std::time::Instant::now();
    let (mut got, mut chunk, mut reads) = (Vec::new(), vec![0u8; 4096], 0u32);
    loop {
        assert!(started.elapsed() < Duration::from_secs(60), "bounded: {} bytes so far", got.len());
        let read = tokio::time::timeout(Duration::from_secs(10), c.read(&mut chunk)).await;
        let k = read.expect("the answer stalled").unwrap();
        if k == 0 {
            break;
        }
        got.extend_from_slice(&chunk[..k]);
        reads += 1;
        if reads.is_multiple_of(32) {
            tokio::time::sleep(Duration::from_millis(1)).await; // slow: the window stays small
        }
    }
    let head_end = got.windows(4).position(|w| w == b"\r\n\r\n").expect("a head") + 4;
    assert!(got.starts_with(b"HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&got[..head_end]));
    let body = &got[head_end..];
    assert_eq!(body.len() as u64, n, "the whole body, then the close");
    let wrong = body.iter().enumerate().position(|(i, &b)| b != testkit::big_byte(i as u64));
    assert_eq!(wrong, None, "bytes in order");
}
