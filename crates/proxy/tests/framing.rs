//! Message framing through the switch: heads and bodies cut at every byte, chunked bodies
//! with extensions and trailers, 100-continue, and WebSocket upgrades.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{origin_of, start};
use std::time::Duration;
use testkit::{ws_client_frame, ws_read_frame, RawClient};
use tokio::io::AsyncWriteExt;

/// Writes `bytes` as two TCP segments cut at `at` (with NODELAY and a short pause the
/// switch reads them separately).
async fn send_split(c: &mut RawClient, bytes: &[u8], at: usize) {
    let s = c.stream();
    s.set_nodelay(true).unwrap();
    s.write_all(&bytes[..at]).await.unwrap();
    s.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(2)).await;
    s.write_all(&bytes[at..]).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_cut_at_any_byte_is_handled_as_if_whole() {
    let h = start(&["s1"], "").await;
    let body = "<purchase><totalAmount>753</totalAmount></purchase>";
    // As in seed 000 §4.1: the cut can fall inside "Content-Length: 753" itself.
    let req = format!(
        "POST /echo HTTP/1.1\r\nHost: viva.uccs.edu\r\nContent-type: text/xml\r\nContent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut c = RawClient::connect(h.addr).await.unwrap();
    for at in 1..req.len() {
        send_split(&mut c, req.as_bytes(), at).await;
        let r = c.read_response().await.unwrap();
        assert_eq!(r.status, 200, "cut at {at}");
        assert_eq!(r.body_str(), body, "cut at {at}");
    }
    let seen = h.origin("s1").requests();
    assert_eq!(seen.len(), req.len() - 1);
    assert!(seen.iter().all(|s| s.body == body.as_bytes()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_request_with_extensions_and_trailers_arrives_intact() {
    let h = start(&["s1"], "").await;
    let req = b"POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
        5;name=value\r\nhello\r\n1;quoted=\"a b\"\r\n \r\n5\r\nworld\r\n0\r\nX-Checksum: abc\r\n\r\n";
    let mut c = RawClient::connect(h.addr).await.unwrap();
    for at in [1, 40, 60, 65, 70, 90, req.len() - 3, req.len() - 1] {
        send_split(&mut c, req, at).await;
        let r = c.read_response().await.unwrap();
        assert_eq!(r.status, 200, "cut at {at}");
        assert_eq!(r.body_str(), "hello world", "cut at {at}");
    }
    // The origin got the chunked framing as sent, trailers included.
    let seen = h.origin("s1").requests().pop().unwrap();
    assert_eq!(seen.header("Transfer-Encoding"), Some("chunked"));
    assert_eq!(seen.body, b"hello world");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_response_keeps_extensions_and_trailers() {
    let h = start(&["s1"], "").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(b"GET /chunked HTTP/1.1\r\nHost: t\r\n\r\n").await.unwrap();
    let r = c.read_response().await.unwrap();
    assert_eq!(r.header("Transfer-Encoding"), Some("chunked"));
    assert_eq!(r.body_str(), "s1-1\ns1-2\ns1-3\n");
    assert_eq!(r.trailers, vec![("X-Trailer".to_string(), "done".to_string())]);
    // Connection still usable.
    c.send(b"GET /next HTTP/1.1\r\nHost: t\r\n\r\n").await.unwrap();
    assert_eq!(c.read_response().await.unwrap().body_str(), "s1 GET /next\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expect_100_continue_is_relayed_before_the_body() {
    let h = start(&["s1"], "").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(b"POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
        .await
        .unwrap();
    let interim = c.read_response().await.unwrap();
    assert_eq!(interim.status, 100);
    c.send(b"ping").await.unwrap();
    let r = c.read_response().await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body_str(), "ping");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_upgrade_becomes_a_tunnel() {
    let h = start(&["s1"], "").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(
        b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
    )
    .await
    .unwrap();
    let r = c.read_response_to_head().await.unwrap();
    assert_eq!(r.status, 101);
    assert_eq!(r.header("Sec-WebSocket-Accept"), Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="));
    assert!(r.header("Upgrade").is_some_and(|v| v.eq_ignore_ascii_case("websocket")));
    let (mut stream, mut pending) = c.into_parts();
    for msg in ["hello", "through the switch"] {
        stream.write_all(&ws_client_frame(msg.as_bytes(), [1, 2, 3, 4])).await.unwrap();
        let (opcode, payload) = ws_read_frame(&mut stream, &mut pending).await.unwrap();
        assert_eq!(opcode, 1);
        assert_eq!(payload, msg.as_bytes());
    }
    assert_eq!(h.count(proxy::Counter::Tunnels), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_stream_both_ways() {
    let h = start(&["s1"], "").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    let n = 8 * 1024 * 1024;
    c.send(format!("GET /big/{n} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes()).await.unwrap();
    let r = c.read_response().await.unwrap();
    assert_eq!(r.body.len(), n);
    assert!(r.body.iter().enumerate().all(|(i, b)| *b == testkit::big_byte(i as u64)));
    let upload = vec![b'z'; 3 * 1024 * 1024 + 7];
    let mut req =
        format!("POST /sink HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n", upload.len()).into_bytes();
    req.extend_from_slice(&upload);
    c.send(&req).await.unwrap();
    let r = c.read_response().await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(h.origin("s1").requests().pop().unwrap().body_len, upload.len() as u64);
    assert_eq!(origin_of(&r), "s1");
}
