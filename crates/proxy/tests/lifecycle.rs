//! Graceful shutdown and reload with requests in flight; the access log.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{config_text, start};
use proxy::Counter;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_in_flight_requests_then_stops_accepting() {
    let h = start(&["s1"], "").await;
    let addr = h.addr;
    let in_flight = tokio::spawn(testkit::get(addr, "/slow/500"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let switch = Arc::new(h.switch);
    let stopper = Arc::clone(&switch);
    let stopped = tokio::task::spawn_blocking(move || stopper.shutdown());
    let r = in_flight.await.unwrap().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body_str(), "s1 GET /slow/500\n");
    stopped.await.unwrap();
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "no longer accepting");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_idle_keep_alive_connections_at_once() {
    let h = start(&["s1"], "").await;
    let mut c = testkit::RawClient::connect(h.addr).await.unwrap();
    c.send(&common::get("/")).await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 200);
    let started = std::time::Instant::now();
    let switch = h.switch;
    tokio::task::spawn_blocking(move || switch.shutdown()).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(c.closed_within(Duration::from_secs(1)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_switches_new_requests_and_in_flight_ones_finish_on_the_old_config() {
    let h = start(&["old"], "").await;
    let new = testkit::Origin::start("new").await;
    let in_flight = tokio::spawn(testkit::get(h.addr, "/slow/400"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let text = config_text(std::slice::from_ref(&new), "rr", "");
    let cfg = config::parse(&text, Path::new("t.toml")).unwrap();
    assert_eq!(h.switch.reload(cfg).unwrap(), 1);
    let r = testkit::get(h.addr, "/after").await.unwrap();
    assert_eq!(r.header("X-Origin"), Some("new"));
    let r = in_flight.await.unwrap().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("X-Origin"), Some("old"));
    assert_eq!(h.count(Counter::Reloads), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_that_moves_a_listener_changes_nothing() {
    let h = start(&["s1"], "").await;
    let text = config_text(&h.origins, "rr", "").replace("name = \"web\"\nbind", "name = \"other\"\nbind");
    let cfg = config::parse(&text, Path::new("t.toml")).unwrap();
    assert!(h.switch.reload(cfg).is_err());
    assert_eq!(testkit::get(h.addr, "/").await.unwrap().status, 200);
    assert_eq!(h.count(Counter::ReloadsFailed), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_log_has_one_line_per_request_in_json() {
    let dir = std::env::temp_dir().join(format!("cswitch-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("access.log");
    let _ = std::fs::remove_file(&path);
    let extra = format!("[access_log]\nenabled = true\nformat = \"json\"\npath = \"{}\"\n", path.display());
    let h = start(&["s1"], &extra).await;
    for p in ["/one", "/two"] {
        assert_eq!(testkit::get(h.addr, p).await.unwrap().status, 200);
    }
    let mut c = testkit::RawClient::connect(h.addr).await.unwrap();
    c.send(b"GET / HTTP/1.1\r\n\r\n").await.unwrap(); // no Host: 400
    assert_eq!(c.read_response().await.unwrap().status, 400);
    drop(h); // shutdown flushes the log
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].contains("\"listener\":\"web\"") && lines[0].contains("\"target\":\"/one\""),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("\"group\":\"web\",\"server\":\"s1\""), "{}", lines[0]);
    assert!(lines[0].contains("\"status\":200"), "{}", lines[0]);
    assert!(
        lines[2].contains("\"status\":400")
            && lines[2].contains("\"error\":\"missing or repeated Host header\""),
        "{}",
        lines[2]
    );
}
