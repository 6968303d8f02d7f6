//! On the ring, an answer the connection closes after leaves with its FIN in one TCP segment
//! (`RingTcp::closing`, ADR 0024): the client's own kernel counts the segments it received
//! (`TCP_INFO`'s `tcpi_segs_in`), through a switch on the ring and one on epoll, the same
//! requests to the same origin.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![allow(unsafe_code)] // getsockopt(TCP_INFO): no safe wrapper among the dependencies

mod common;

use common::start;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Segments the client received on one connection (handshake, ACKs, the answer, the FIN),
/// counted once the switch closed it; and the answer.
async fn segments_for(addr: SocketAddr, request: &[u8]) -> (u32, Vec<u8>) {
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    c.read_to_end(&mut answer).await.unwrap();
    (segments_in(&c), answer)
}

fn segments_in(c: &TcpStream) -> u32 {
    // SAFETY: getsockopt writes at most `len` bytes into `info`, which lives across the call.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    let r = unsafe {
        libc::getsockopt(
            c.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    info.tcpi_segs_in
}

/// The fewest segments over a few connections (a delayed ACK can add one now and then).
async fn fewest_segments(addr: SocketAddr, request: &[u8], expect: &str) -> u32 {
    let mut fewest = u32::MAX;
    for _ in 0..5 {
        let (segments, answer) = segments_for(addr, request).await;
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.contains(expect), "{answer}");
        fewest = fewest.min(segments);
    }
    fewest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closing_answer_and_its_fin_share_a_segment_on_the_ring() {
    let ring = start(&["s1"], "[global]\nworkers = 1\nio = \"uring\"\n").await;
    let epoll = start(&["s1"], "[global]\nworkers = 1\nio = \"epoll\"\n").await;
    // Forwarded: the client asks to close.
    let get = b"GET /small HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    let on_ring = fewest_segments(ring.addr, get, "200 OK").await;
    let on_epoll = fewest_segments(epoll.addr, get, "200 OK").await;
    assert_eq!(on_ring + 1, on_epoll, "answer and FIN in one segment: ring {on_ring}, epoll {on_epoll}");
    // Refused by the switch (it closes after a refusal).
    let bad = b"GET /small HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
    let on_ring = fewest_segments(ring.addr, bad, "400").await;
    let on_epoll = fewest_segments(epoll.addr, bad, "400").await;
    assert_eq!(on_ring + 1, on_epoll, "refusal and FIN in one segment: ring {on_ring}, epoll {on_epoll}");
}

/// A keep-alive answer is never held back: the next request on the connection gets its
/// answer at once (the corked bytes would otherwise wait for a close that never comes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_answers_are_not_held_back() {
    let ring = start(&["s1"], "[global]\nworkers = 1\nio = \"uring\"\n").await;
    let mut c = testkit::RawClient::connect(ring.addr).await.unwrap();
    // The first also opens the server connection: not timed.
    c.send(b"GET /small HTTP/1.1\r\nHost: t\r\n\r\n").await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 200);
    for _ in 0..3 {
        // Corked bytes would wait for the kernel's 200 ms cork ceiling, at least.
        c.send(b"GET /small HTTP/1.1\r\nHost: t\r\n\r\n").await.unwrap();
        let r = tokio::time::timeout(std::time::Duration::from_millis(150), c.read_response()).await;
        assert_eq!(r.expect("answered at once").unwrap().status, 200);
    }
}

/// A client that sends more after asking to close still gets its answer whole: the switch
/// closes with those bytes unread (the kernel then resets the connection), so the answer
/// and its FIN must be on the wire before the close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_answer_survives_bytes_the_client_sent_after_it() {
    let ring = start(&["s1"], "[global]\nworkers = 1\nio = \"uring\"\n").await;
    for _ in 0..5 {
        let mut c = TcpStream::connect(ring.addr).await.unwrap();
        c.write_all(b"GET /slow/200 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        c.write_all(b"more bytes the switch will not read").await.unwrap();
        let mut answer = Vec::new();
        let _ = c.read_to_end(&mut answer).await; // may end in a reset, after the answer
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    }
}
