//! Keep-alive connections parked out of the runtime (issue 14, ADR 0009): after a second
//! without a request a plain HTTP connection leaves its task and waits in the worker's
//! epoll set. Parked, it is still the same connection: its next request is answered, it is
//! closed at `client_idle`, evicted when admission needs room, counted as open until it
//! closes, and closed at shutdown.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{get, start, wait_for, Harness};
use proxy::Counter;
use std::time::Duration;
use testkit::RawClient;

/// A keep-alive connection that has had one answer, once it is parked.
async fn parked_client(h: &Harness, parked_before: u64) -> RawClient {
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(&get("/")).await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 200);
    let parked = wait_for(Duration::from_secs(5), || h.count(Counter::Parked) > parked_before).await;
    assert!(parked.is_some(), "parked within 5 s");
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_connection_answers_its_next_requests() {
    let h = start(&["s1"], "").await;
    let mut c = parked_client(&h, 0).await;
    assert_eq!(h.switch.status().connections, 1, "still counted as open");
    for _ in 0..2 {
        c.send(&get("/again")).await.unwrap();
        let r = c.read_response().await.unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(common::origin_of(&r), "s1");
    }
    // Pipelined requests sent while parked are all answered, in order.
    let _ = wait_for(Duration::from_secs(5), || h.count(Counter::Parked) == 2).await;
    let two = [get("/p1"), get("/p2")].concat();
    c.send(&two).await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 200);
    assert_eq!(c.read_response().await.unwrap().status, 200);
    assert_eq!(h.count(Counter::Requests), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_connection_is_closed_at_client_idle() {
    let h = start(&["s1"], "[timeouts]\nclient_idle = \"2s\"\n").await;
    let mut c = parked_client(&h, 0).await;
    assert!(c.closed_within(Duration::from_secs(3)).await, "closed at client_idle");
    // Counted by the sweep just after it closes the sockets it expired.
    let counted = wait_for(Duration::from_secs(1), || h.count(Counter::IdleTimeout) == 1).await;
    assert!(counted.is_some(), "counted as an idle timeout: {}", h.count(Counter::IdleTimeout));
    let closed = wait_for(Duration::from_secs(2), || h.switch.status().connections == 0).await;
    assert!(closed.is_some(), "no longer counted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_closing_a_parked_connection_is_noticed() {
    let h = start(&["s1"], "").await;
    let c = parked_client(&h, 0).await;
    assert_eq!(h.switch.status().connections, 1);
    drop(c);
    let closed = wait_for(Duration::from_secs(2), || h.switch.status().connections == 0).await;
    assert!(closed.is_some(), "uncounted once the client closed it");
    assert_eq!(h.count(Counter::Requests), 1, "a close is not a request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_evicts_the_longest_parked_connection() {
    let h = start(&["s1"], "[limits]\nmax_client_connections = 2\n").await;
    let mut first = parked_client(&h, 0).await;
    let mut second = parked_client(&h, 1).await;
    let r = testkit::get(h.addr, "/").await.unwrap();
    assert_eq!(r.status, 200, "admitted by closing a parked connection");
    assert_eq!(h.count(Counter::EvictedIdle), 1);
    assert!(first.closed_within(Duration::from_secs(2)).await, "the one parked longest went");
    second.send(&get("/")).await.unwrap();
    assert_eq!(second.read_response().await.unwrap().status, 200, "the other one is served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_parked_connections() {
    let h = start(&["s1"], "").await;
    let mut c = parked_client(&h, 0).await;
    h.switch.shutdown();
    assert!(c.closed_within(Duration::from_secs(3)).await);
}
