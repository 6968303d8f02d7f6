//! Our table of RFC 9112 request-smuggling and malformed-request cases: each is refused
//! with its status, the connection is closed, and no origin sees any of it.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::start;
use std::time::Duration;
use testkit::RawClient;

/// (name, raw request, expected status)
const CASES: &[(&str, &str, u16)] = &[
    ("CL and TE together", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("TE and CL together", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400),
    ("differing CL values", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", 400),
    ("CL list with differing values", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\nhello", 400),
    ("non-numeric CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: five\r\n\r\n", 400),
    ("signed CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\nhello", 400),
    ("hex CL", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\nhello", 400),
    ("TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    ("chunked not last", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400),
    ("chunked twice", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    ("unknown coding", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n", 501),
    ("bad chunk size", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n", 400),
    ("chunk size overflow", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1ffffffffffffffffff\r\nx\r\n0\r\n\r\n", 400),
    ("bad chunk extension", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;\"bad\r\nhello\r\n0\r\n\r\n", 400),
    ("chunk data without CRLF", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n", 400),
    ("bare LF line ends", "GET / HTTP/1.1\nHost: a\n\n", 400),
    ("bare LF in one field", "GET / HTTP/1.1\r\nHost: a\nX: y\r\n\r\n", 400),
    ("bare CR", "GET / HTTP/1.1\r\nHost: a\rX: y\r\n\r\n", 400),
    ("obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-Long: one\r\n two\r\n\r\n", 400),
    ("space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400),
    ("tab before colon", "GET / HTTP/1.1\r\nHost: a\r\nX-A\t: b\r\n\r\n", 400),
    ("missing Host in 1.1", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", 400),
    ("repeated Host", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    ("control char in target", "GET /a\x01b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("DEL in target", "GET /a\x7fb HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("space in target", "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("unsupported version", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
    ("garbage start line", "HELLO\r\n\r\n", 400),
    ("NUL in field value", "GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n", 400),
    // RFC 9112 §3.2: the target's form must fit the method.
    ("CONNECT", "CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n", 501),
    ("CONNECT to a path", "CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("asterisk with GET", "GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("asterisk with a path", "OPTIONS */x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("bare word target", "GET admin HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("authority target without CONNECT", "GET host:80 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("fragment in target", "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    ("Host port not digits", "GET / HTTP/1.1\r\nHost: a:8o\r\n\r\n", 400),
    ("empty TE list element", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ,chunked\r\n\r\n0\r\n\r\n", 400),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_smuggling_case_is_refused_and_closed() {
    let h = start(&["s1"], "").await;
    for (name, raw, status) in CASES {
        let mut c = RawClient::connect(h.addr).await.unwrap();
        c.send(raw.as_bytes()).await.unwrap();
        let r = c.read_response().await.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(r.status, *status, "{name}");
        assert_eq!(r.header("Connection"), Some("close"), "{name}");
        assert!(!r.body.is_empty(), "{name}: a short reason is given");
        assert!(c.closed_within(Duration::from_secs(2)).await, "{name}: connection closed");
    }
    // Nothing reached the origin: heads are checked before routing, and a body that arrives
    // with its head is scanned before the first byte is forwarded.
    assert!(h.origin("s1").requests().is_empty());
    assert!(h.count(proxy::Counter::BadRequest) >= 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bytes_in_a_byte_high_target_are_refused() {
    let h = start(&["s1"], "").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(b"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n").await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 400);
    assert!(h.origin("s1").requests().is_empty());
}

/// RFC 9112 §3.2.2 and §6.3: the server gets the absolute form's authority as Host (the
/// client's disagreeing Host replaced) and one Content-Length for a repeated one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_and_length_are_settled_before_the_server_sees_them() {
    let h = start(&["s1"], "").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    let raw = "POST http://shop.example/echo HTTP/1.1\r\nHost: elsewhere\r\nContent-Length: 5, 5\r\nContent-Length: 5\r\n\r\nhello";
    c.send(raw.as_bytes()).await.unwrap();
    let r = c.read_response().await.unwrap();
    assert_eq!((r.status, r.body_str().as_str()), (200, "hello"));
    let seen = h.origin("s1").requests();
    let head = String::from_utf8_lossy(&seen[0].raw_head).to_string();
    assert!(head.contains("Host: shop.example\r\n") && !head.contains("elsewhere"), "{head}");
    assert_eq!(head.matches("Content-Length").count(), 1, "{head}");
    assert!(head.contains("Content-Length: 5\r\n"), "{head}");
}

/// A WebSocket upgrade without Sec-WebSocket-Key is forwarded as a plain request (no
/// Upgrade reaches the server), never tunnelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_websocket_upgrade_is_not_tunnelled() {
    let h = start(&["s1"], "").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(b"GET /headers HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
        .await
        .unwrap();
    let r = c.read_response().await.unwrap();
    assert_eq!(r.status, 200);
    let head = String::from_utf8_lossy(&h.origin("s1").requests()[0].raw_head).to_string();
    assert!(!head.to_ascii_lowercase().contains("upgrade"), "{head}");
}

/// A NUL after a complete request is refused at once (400), not held until a timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noise_after_a_complete_request_is_refused_at_once() {
    let h = start(&["s1"], "").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n\0").await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 200);
    let refused = tokio::time::timeout(Duration::from_secs(2), c.read_response()).await;
    assert_eq!(refused.expect("answered at once, not after client_head").unwrap().status, 400);
}
