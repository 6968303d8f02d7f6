//! The origin's endpoints, checked with the testkit's own clients (no proxy involved).

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use cswitch_testkit::{
    big_byte, get, ws_accept_key, ws_client_frame, ws_client_frame_op, ws_read_frame, Origin, RawClient,
    Response, WS_BINARY, WS_CLOSE, WS_TEXT,
};
use tokio::io::AsyncReadExt;

const SHORT: Duration = Duration::from_secs(5);

/// Sends `request` on a fresh connection and reads one response.
async fn exchange(addr: SocketAddr, request: &[u8]) -> (RawClient, Response) {
    let mut c = RawClient::connect(addr).await.expect("connect");
    c.send(request).await.expect("send");
    let r = c.read_response().await.expect("response");
    (c, r)
}

#[tokio::test]
async fn default_path_names_the_origin_and_is_recorded() {
    let o = Origin::start("s1").await;
    let r = get(o.addr(), "/some/thing?x=1").await.expect("get");
    assert_eq!((r.status, r.version.as_str()), (200, "HTTP/1.1"));
    assert_eq!(r.header("x-origin"), Some("s1"));
    assert_eq!(r.header("content-length"), Some("19"));
    assert_eq!(r.body_str(), "s1 GET /some/thing\n");
    let seen = o.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].target, "/some/thing?x=1");
    assert_eq!(seen[0].header("HOST"), Some(o.addr().to_string().as_str()));
    assert_eq!((seen[0].conn_id, o.connections(), o.name()), (0, 1, "s1"));
}

#[tokio::test]
async fn demo_pages() {
    let o = Origin::start("s2").await;
    let html = get(o.addr(), "/index.html").await.expect("get");
    assert_eq!(html.header("content-type"), Some("text/html"));
    assert!(html.body_str().contains("s2"));
    let gif = get(o.addr(), "/img/a.gif").await.expect("get");
    assert_eq!(gif.header("content-type"), Some("image/gif"));
    assert!(gif.body.starts_with(b"GIF89a"));
    let post = b"POST /cgi/xmlprocess.pl HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n<a>hi</a>\r\n";
    let (_, xml) = exchange(o.addr(), post).await;
    assert_eq!(xml.header("content-type"), Some("text/xml"));
    assert!(xml.body_str().contains("server=\"s2\""));
    assert!(xml.body_str().contains("received=\"11\""));
}

#[tokio::test]
async fn echo_with_length_and_chunked_bodies() {
    let o = Origin::start("s1").await;
    let (mut c, r) =
        exchange(o.addr(), b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello").await;
    assert_eq!(r.body, b"hello");
    c.send(
        b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
          3;ext=1\r\nabc\r\n4\r\ndefg\r\n0\r\nX-T: 1\r\n\r\n",
    )
    .await
    .expect("send");
    let r = c.read_response().await.expect("response");
    assert_eq!(r.body, b"abcdefg");
    let seen = o.requests();
    assert_eq!((seen[1].body.as_slice(), seen[1].body_len), (&b"abcdefg"[..], 7));
    assert_eq!(seen[0].conn_id, seen[1].conn_id);
}

#[tokio::test]
async fn headers_returns_the_raw_head() {
    let o = Origin::start("s1").await;
    let head = b"GET /headers HTTP/1.1\r\nHost: x\r\nX-Odd:   spaced  \r\n\r\n";
    let (_, r) = exchange(o.addr(), head).await;
    assert_eq!(r.body, head);
    assert_eq!(o.requests()[0].raw_head, head);
    assert_eq!(o.requests()[0].header("x-odd"), Some("spaced"));
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order() {
    let o = Origin::start("s3").await;
    let two = b"GET /first HTTP/1.1\r\nHost: x\r\n\r\nGET /second HTTP/1.1\r\nHost: x\r\n\r\n";
    let (mut c, first) = exchange(o.addr(), two).await;
    let second = c.read_response().await.expect("second response");
    assert_eq!(first.body_str(), "s3 GET /first\n");
    assert_eq!(second.body_str(), "s3 GET /second\n");
    assert_eq!(o.connections(), 1);
}

#[tokio::test]
async fn chunked_response_has_extension_and_trailer() {
    let o = Origin::start("s1").await;
    let (_, r) = exchange(o.addr(), b"GET /chunked HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.header("content-length"), None);
    assert_eq!(r.body_str(), "s1-1\ns1-2\ns1-3\n");
    assert_eq!(r.trailers, [("X-Trailer".to_string(), "done".to_string())]);

    let mut c = RawClient::connect(o.addr()).await.expect("connect");
    c.send(b"GET /chunked HTTP/1.1\r\nConnection: close\r\n\r\n").await.expect("send");
    let mut raw = Vec::new();
    c.stream().read_to_end(&mut raw).await.expect("read");
    let raw = String::from_utf8(raw).expect("text");
    assert!(raw.ends_with("5;foo=bar\r\ns1-2\n\r\n5\r\ns1-3\n\r\n0\r\nX-Trailer: done\r\n\r\n"));
}

#[tokio::test]
async fn close_delimited_body() {
    let o = Origin::start("s1").await;
    let (mut c, r) = exchange(o.addr(), b"GET /close HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(r.header("content-length"), None);
    assert_eq!(r.header("connection"), Some("close"));
    assert_eq!(r.body_str(), "s1 GET /close\n");
    assert!(c.closed_within(SHORT).await);
}

#[tokio::test]
async fn status_codes_and_bodiless_responses() {
    let o = Origin::start("s1").await;
    let mut c = RawClient::connect(o.addr()).await.expect("connect");
    for (path, status, body) in [
        ("/status/503", 503, "status 503\n"),
        ("/status/204", 204, ""),
        ("/status/304", 304, ""),
        ("/status/101", 400, "status must be 200 to 599\n"),
        ("/status/404", 404, "status 404\n"),
    ] {
        let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
        c.send(req.as_bytes()).await.expect("send");
        let r = c.read_response().await.expect("response");
        assert_eq!((r.status, r.body_str().as_str()), (status, body), "{path}");
    }
}

#[tokio::test]
async fn head_request_gets_length_but_no_body() {
    let o = Origin::start("s1").await;
    let mut c = RawClient::connect(o.addr()).await.expect("connect");
    c.send(b"HEAD /x HTTP/1.1\r\nHost: x\r\n\r\nGET /y HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("send");
    let head = c.read_response_to_head().await.expect("head response");
    assert_eq!((head.header("content-length"), head.body.len()), (Some("11"), 0));
    let next = c.read_response().await.expect("next response");
    assert_eq!(next.body_str(), "s1 GET /y\n");
}

#[tokio::test]
async fn slow_waits_before_answering() {
    let o = Origin::start("s1").await;
    let started = Instant::now();
    let r = get(o.addr(), "/slow/50").await.expect("get");
    assert!(started.elapsed() >= Duration::from_millis(50));
    assert_eq!(r.body_str(), "s1 GET /slow/50\n");
}

#[tokio::test]
async fn big_streams_the_pattern() {
    let o = Origin::start("s1").await;
    let n: usize = 8 * 1024 * 1024 + 7;
    let r = get(o.addr(), &format!("/big/{n}")).await.expect("get");
    assert_eq!(r.header("content-length"), Some(n.to_string().as_str()));
    assert_eq!(r.body.len(), n);
    assert!(r.body.iter().enumerate().all(|(i, &b)| b == big_byte(i as u64)));
}

#[tokio::test]
async fn big_is_held_back_by_a_slow_reader() {
    let o = Origin::start("s1").await;
    let mut c = RawClient::connect(o.addr()).await.expect("connect");
    c.send(b"GET /big/67108864 HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("send");
    // Read a little, then stop: the origin must block on a full socket, not buffer 64 MiB.
    let mut first = [0u8; 4096];
    c.stream().read_exact(&mut first).await.expect("read");
    assert!(first.starts_with(b"HTTP/1.1 200 OK\r\n"));
    assert!(!c.closed_within(Duration::from_millis(100)).await);
}

#[tokio::test]
async fn sink_counts_but_keeps_one_mib() {
    let o = Origin::start("s1").await;
    let n = 3 * 1024 * 1024;
    let mut req = format!("POST /sink HTTP/1.1\r\nHost: x\r\nContent-Length: {n}\r\n\r\n").into_bytes();
    req.resize(req.len() + n, b'z');
    let (_, r) = exchange(o.addr(), &req).await;
    assert_eq!(r.body_str(), format!("{n}\n"));
    let seen = &o.requests()[0];
    assert_eq!((seen.body.len(), seen.body_len), (1024 * 1024, n as u64));
}

#[tokio::test]
async fn malformed_response_is_rejected_by_the_client() {
    let o = Origin::start("s1").await;
    let mut c = RawClient::connect(o.addr()).await.expect("connect");
    c.send(b"GET /malformed HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("send");
    let err = c.read_response().await.expect_err("bad content-length");
    assert_eq!(err.kind(), ErrorKind::InvalidData);
}

#[tokio::test]
async fn reset_sends_rst_without_a_response() {
    let o = Origin::start("s1").await;
    let mut c = RawClient::connect(o.addr()).await.expect("connect");
    c.send(b"GET /reset HTTP/1.1\r\nHost: x\r\n\r\n").await.expect("send");
    let err = c.read_response().await.expect_err("no response");
    assert_eq!(err.kind(), ErrorKind::ConnectionReset);
    assert_eq!(o.requests()[0].target, "/reset");
}

#[tokio::test]
async fn expect_100_continue_comes_before_the_body_is_read() {
    let o = Origin::start("s1").await;
    let mut c = RawClient::connect(o.addr()).await.expect("connect");
    c.send(b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
        .await
        .expect("send");
    let interim = c.read_response().await.expect("100");
    assert_eq!((interim.status, interim.body.len()), (100, 0));
    c.send(b"data").await.expect("send body");
    let r = c.read_response().await.expect("final");
    assert_eq!((r.status, r.body_str().as_str()), (200, "data"));
}

#[tokio::test]
async fn connection_close_and_http10_keep_alive() {
    let o = Origin::start("s1").await;
    let (mut c, r) = exchange(o.addr(), b"GET / HTTP/1.1\r\nConnection: close\r\n\r\n").await;
    assert_eq!(r.header("connection"), Some("close"));
    assert!(c.closed_within(SHORT).await);

    let (mut c, r) = exchange(o.addr(), b"GET / HTTP/1.0\r\n\r\n").await;
    assert_eq!((r.version.as_str(), r.header("connection")), ("HTTP/1.1", Some("close")));
    assert!(c.closed_within(SHORT).await);

    let keep = b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    let (mut c, r) = exchange(o.addr(), keep).await;
    assert_eq!(r.header("connection"), Some("keep-alive"));
    c.send(keep).await.expect("send again");
    assert_eq!(c.read_response().await.expect("second").status, 200);
    assert_eq!(o.connections(), 3);
}

#[tokio::test]
async fn malformed_request_gets_400_and_close() {
    let o = Origin::start("s1").await;
    for bad in [
        &b"NONSENSE\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ] {
        let (mut c, r) = exchange(o.addr(), bad).await;
        assert_eq!((r.status, r.header("x-origin")), (400, Some("s1")));
        assert!(c.closed_within(SHORT).await);
    }
}

#[tokio::test]
async fn websocket_echo() {
    let o = Origin::start("s1").await;
    let key = "dGhlIHNhbXBsZSBub25jZQ==";
    let upgrade = format!(
        "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    let (mut c, r) = exchange(o.addr(), upgrade.as_bytes()).await;
    assert_eq!(r.status, 101);
    assert_eq!(r.header("sec-websocket-accept"), Some(ws_accept_key(key).as_str()));
    let (stream, pending) = c.parts_mut();
    let mask = [7, 1, 2, 3];
    stream_send(stream, &ws_client_frame(b"hello", mask)).await;
    assert_eq!(ws_read_frame(stream, pending).await.expect("echo"), (WS_TEXT, b"hello".to_vec()));
    let big: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
    stream_send(stream, &ws_client_frame_op(WS_BINARY, &big, mask)).await;
    assert_eq!(ws_read_frame(stream, pending).await.expect("echo"), (WS_BINARY, big));
    stream_send(stream, &ws_client_frame_op(WS_CLOSE, &[3, 232], mask)).await;
    assert_eq!(ws_read_frame(stream, pending).await.expect("close"), (WS_CLOSE, vec![3, 232]));
    assert!(c.closed_within(SHORT).await);
}

#[tokio::test]
async fn websocket_without_upgrade_is_refused() {
    let o = Origin::start("s1").await;
    let r = get(o.addr(), "/ws").await.expect("get");
    assert_eq!(r.status, 400);
}

async fn stream_send(stream: &mut tokio::net::TcpStream, bytes: &[u8]) {
    use tokio::io::AsyncWriteExt;
    stream.write_all(bytes).await.expect("write");
}

#[tokio::test]
async fn kill_refuses_connects_and_resets_open_ones() {
    let o = Origin::start("s1").await;
    let (mut idle, _) = exchange(o.addr(), b"GET / HTTP/1.1\r\n\r\n").await;
    o.kill();
    let refused = RawClient::connect(o.addr()).await.expect_err("killed origin");
    assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);
    // A request on the open connection is never answered: the connection just dies.
    let _ = idle.send(b"GET /after HTTP/1.1\r\n\r\n").await;
    assert!(idle.read_response().await.is_err());
    assert_eq!(o.requests().len(), 1);
}

#[tokio::test]
async fn start_on_a_taken_address_fails() {
    let o = Origin::start("s1").await;
    assert!(Origin::start_on("s2", o.addr()).await.is_err());
    let free = Origin::start_on("s2", "127.0.0.1:0".parse().expect("addr")).await.expect("start");
    assert_ne!(free.addr().port(), 0);
}
