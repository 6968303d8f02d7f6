//! Server failures: killed servers, resets after the request went out, malformed responses.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{get, origin_of, start};
use proxy::Counter;
use testkit::RawClient;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_is_skipped_by_retrying_another() {
    let h = start(&["s1", "s2", "s3"], "").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(&get("/warm")).await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 200);
    h.origin("s2").kill();
    // Every request, GET or POST, succeeds: a refused connect is retried on another server.
    for i in 0..9 {
        let req = if i % 2 == 0 {
            get("/after-kill")
        } else {
            b"POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi".to_vec()
        };
        c.send(&req).await.unwrap();
        let r = c.read_response().await.unwrap();
        assert_eq!(r.status, 200, "request {i}");
        assert_ne!(origin_of(&r), "s2");
    }
    assert!(h.count(Counter::ConnectFailed) >= 1 || h.count(Counter::Retries) >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_after_request_is_retried_only_when_idempotent_and_bodyless() {
    let h = start(&["s1", "s2"], "[limits]\nretries = 1\n").await;
    // GET: the server resets after reading it; it is sent once more (to the other server),
    // which resets too: 502.
    let r = testkit::get(h.addr, "/reset").await.unwrap();
    assert_eq!(r.status, 502);
    let gets: usize = h.origins.iter().map(|o| o.requests().len()).sum();
    assert_eq!(gets, 2, "GET tried twice");
    // POST with a body: never sent twice.
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(b"POST /reset HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc").await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 502);
    let all: usize = h.origins.iter().map(|o| o.requests().len()).sum();
    assert_eq!(all, 3, "POST tried once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_response_gives_502_and_the_connection_is_not_reused() {
    let h = start(&["s1"], "").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(&get("/malformed")).await.unwrap();
    let r = c.read_response().await.unwrap();
    assert_eq!(r.status, 502);
    assert!(r.body_str().contains("malformed"));
    assert_eq!(h.count(Counter::BadResponse), 1);
    // The next request opens a fresh server connection.
    let r = testkit::get(h.addr, "/fine").await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(h.origin("s1").connections(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_servers_down_gives_502_with_a_reason() {
    let h = start(&["s1", "s2"], "").await;
    h.origin("s1").kill();
    h.origin("s2").kill();
    let r = testkit::get(h.addr, "/").await.unwrap();
    assert_eq!(r.status, 502);
    assert!(r.body_str().contains("could not connect"));
}
