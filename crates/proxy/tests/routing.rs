//! Per-request routing on keep-alive connections, pipelining, pooling and switch-back,
//! and what the origin sees of a forwarded head.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{get, origin_of, start};
use testkit::RawClient;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_on_one_connection_is_routed_on_its_own() {
    let h = start(&["s1", "s2", "s3"], "").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..6 {
        c.send(&get("/index.html")).await.unwrap();
        let r = c.read_response().await.unwrap();
        assert_eq!(r.status, 200);
        seen.push(origin_of(&r));
    }
    assert_eq!(seen, ["s1", "s2", "s3", "s1", "s2", "s3"]);
    // One client connection, and each origin got exactly one server connection (reused).
    for o in &h.origins {
        assert_eq!(o.requests().len(), 2, "{}", o.name());
        assert_eq!(o.connections(), 1, "{} connections", o.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order_across_servers() {
    let h = start(&["s1", "s2", "s3"], "").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    // The first goes to s1 and is slow; the later ones must still come after it.
    let mut batch = get("/slow/150");
    batch.extend(get("/second"));
    batch.extend(get("/third"));
    c.send(&batch).await.unwrap();
    let bodies: Vec<String> = [0, 1, 2].iter().map(|_| String::new()).collect();
    let mut got = Vec::new();
    for _ in bodies {
        let r = c.read_response().await.unwrap();
        got.push(r.body_str());
    }
    assert_eq!(got, ["s1 GET /slow/150\n", "s2 GET /second\n", "s3 GET /third\n"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_back_reuses_the_pooled_server_connection() {
    // `always`: pooled connections are shared across client connections too (the default,
    // `safe`, gives each client connection's first request a fresh one).
    let h = start(&["s1", "s2"], "reuse = \"always\"\n").await;
    for _ in 0..3 {
        let mut c = RawClient::connect(h.addr).await.unwrap();
        for _ in 0..4 {
            c.send(&get("/x")).await.unwrap();
            assert_eq!(c.read_response().await.unwrap().status, 200);
        }
    }
    // 12 requests over 3 client connections, alternating servers: one server connection each.
    assert_eq!(h.origin("s1").requests().len(), 6);
    assert_eq!(h.origin("s1").connections(), 1);
    assert_eq!(h.origin("s2").connections(), 1);
    assert!(h.count(proxy::Counter::PoolReuse) >= 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_head_is_byte_for_byte_except_hop_by_hop_and_x_forwarded() {
    let h = start(&["s1"], "").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    let req = b"GET /headers?q=1 HTTP/1.1\r\nHost: Example.COM\r\nX-Custom:  odd   spacing \r\n\
        Connection: keep-alive, X-Private\r\nX-Private: secret\r\nKeep-Alive: timeout=5\r\n\
        TE: trailers\r\nX-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Proto: https\r\nAccept: */*\r\n\r\n";
    c.send(req).await.unwrap();
    let r = c.read_response().await.unwrap();
    assert_eq!(r.status, 200);
    let seen = h.origin("s1").requests().pop().unwrap();
    let head = String::from_utf8(seen.raw_head.clone()).unwrap();
    assert!(
        head.starts_with("GET /headers?q=1 HTTP/1.1\r\nHost: Example.COM\r\nX-Custom:  odd   spacing \r\n"),
        "{head}"
    );
    for gone in ["Keep-Alive", "X-Private", "TE:", "Connection: keep-alive, X-Private", "https"] {
        assert!(!head.contains(gone), "{gone} should be gone:\n{head}");
    }
    assert!(head.contains("\r\nAccept: */*\r\n"), "{head}");
    assert!(head.contains("X-Forwarded-For: 10.0.0.1, 127.0.0.1\r\n"), "{head}");
    assert!(head.contains("X-Forwarded-Proto: http\r\n"), "{head}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x_forwarded_headers_can_be_switched_off() {
    let o = testkit::Origin::start("s1").await;
    let text = format!(
        "[global]\nworkers = 1\n[access_log]\nenabled = false\n[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\n\
         default_group = \"web\"\nx_forwarded_for = false\nx_forwarded_proto = false\n\
         [[group]]\nname = \"web\"\nservers = [ {{ name = \"s1\", addr = \"{}\" }} ]\n",
        o.addr()
    );
    let cfg = config::parse(&text, std::path::Path::new("t.toml")).unwrap();
    let sw = proxy::Switch::start(cfg).unwrap();
    let r = testkit::get(sw.local_addr("web").unwrap(), "/").await.unwrap();
    assert_eq!(r.status, 200);
    let seen = o.requests().pop().unwrap();
    assert!(seen.header("X-Forwarded-For").is_none());
    assert!(seen.header("X-Forwarded-Proto").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http10_client_gets_keep_alive_only_when_asked_and_chunked_is_dechunked() {
    let h = start(&["s1"], "").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").await.unwrap();
    let r = c.read_response().await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Connection"), Some("keep-alive"));
    // Chunked response to an HTTP/1.0 client: de-chunked, close-delimited.
    c.send(b"GET /chunked HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").await.unwrap();
    let r = c.read_response().await.unwrap();
    assert_eq!(r.status, 200);
    assert!(r.header("Transfer-Encoding").is_none());
    assert_eq!(r.body_str(), "s1-1\ns1-2\ns1-3\n");
    assert!(c.closed_within(std::time::Duration::from_secs(2)).await);
    // The origin saw HTTP/1.0 requests but a persistent connection was still possible.
    let seen = h.origin("s1").requests();
    assert_eq!(seen[0].version, "HTTP/1.0");
    assert_eq!(seen[0].header("Connection"), Some("keep-alive"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodyless_responses_and_close_delimited_responses() {
    let h = start(&["s1"], "").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(b"HEAD /index.html HTTP/1.1\r\nHost: t\r\n\r\n").await.unwrap();
    let r = c.read_response_to_head().await.unwrap();
    assert_eq!(r.status, 200);
    assert!(r.header("Content-Length").is_some());
    for status in [204u16, 304] {
        c.send(&get(&format!("/status/{status}"))).await.unwrap();
        let r = c.read_response().await.unwrap();
        assert_eq!(r.status, status);
        assert!(r.body.is_empty());
    }
    // Still in sync after HEAD/204/304: a normal request works on the same connection.
    c.send(&get("/after")).await.unwrap();
    assert_eq!(c.read_response().await.unwrap().body_str(), "s1 GET /after\n");
    // Close-delimited: the body arrives whole and the client connection is closed after it.
    c.send(&get("/close")).await.unwrap();
    let r = c.read_response().await.unwrap();
    assert_eq!(r.status, 200);
    assert!(!r.body.is_empty());
    assert_eq!(r.header("Connection"), Some("close"));
    assert!(c.closed_within(std::time::Duration::from_secs(2)).await);
}
