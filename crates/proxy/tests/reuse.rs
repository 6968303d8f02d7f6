//! Pooled server connections under each `reuse` policy when clients send one request and
//! close (`Connection: close`), the harness's `close` workload: what each policy opens,
//! keeps and shares, counted at the server.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::wait_for;
use proxy::{Counter, Switch};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use testkit::RawClient;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Connections a server accepted and saw closed.
#[derive(Default)]
struct Seen {
    opened: AtomicUsize,
    closed: AtomicUsize,
}

impl Seen {
    fn open_now(&self) -> usize {
        self.opened.load(Ordering::SeqCst) - self.closed.load(Ordering::SeqCst)
    }
}

/// A keep-alive server answering every request with `ok`, counting its connections.
async fn counting_server() -> (SocketAddr, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let counted = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            counted.opened.fetch_add(1, Ordering::SeqCst);
            let counted = Arc::clone(&counted);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await.is_err()
                    {
                        break;
                    }
                }
                counted.closed.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    (addr, seen)
}

fn switch_with(policy: &str, server: SocketAddr) -> Switch {
    let text = format!(
        "[global]\nworkers = 1\n[access_log]\nenabled = false\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
         [[group]]\nname = \"web\"\nreuse = \"{policy}\"\nservers = [ {{ name = \"s\", addr = \"{server}\" }} ]\n"
    );
    Switch::start(config::parse(&text, Path::new("t.toml")).unwrap()).unwrap()
}

/// Five clients, one `Connection: close` request each, one after another.
async fn five_closing_clients(addr: SocketAddr) {
    for _ in 0..5 {
        let r = testkit::get(addr, "/").await.unwrap();
        assert_eq!((r.status, r.body_str().as_str()), (200, "ok"));
    }
}

/// `never`: a server connection only its own client connection may take again is closed
/// when that client leaves, not kept idle in the pool for no one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_closes_the_server_connection_of_a_client_that_leaves() {
    let (server, seen) = counting_server().await;
    let switch = switch_with("never", server);
    five_closing_clients(switch.local_addr("web").unwrap()).await;
    assert_eq!(seen.opened.load(Ordering::SeqCst), 5, "one server connection per client");
    let closed = wait_for(Duration::from_secs(3), || seen.open_now() == 0).await;
    assert!(closed.is_some(), "{} server connections kept idle for clients that left", seen.open_now());
    assert_eq!(switch.stats().get(Counter::PoolReuse), 0);
}

/// `safe` (default): each client's first request gets a server connection of its own (as
/// HAProxy's `http-reuse safe`: one connect per closing client); the connections of clients
/// that left stay pooled, and a keep-alive client's later requests ride them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn safe_opens_one_per_first_request_and_shares_them_with_later_requests() {
    let (server, seen) = counting_server().await;
    let switch = switch_with("safe", server);
    let addr = switch.local_addr("web").unwrap();
    five_closing_clients(addr).await;
    assert_eq!(seen.opened.load(Ordering::SeqCst), 5, "a first request never rides another's");
    let mut c = RawClient::connect(addr).await.unwrap();
    for _ in 0..3 {
        c.send(&common::get("/")).await.unwrap();
        assert_eq!(c.read_response().await.unwrap().body_str(), "ok");
    }
    // Its first request connected; the two after it took pooled connections.
    assert_eq!(seen.opened.load(Ordering::SeqCst), 6);
    assert_eq!(switch.stats().get(Counter::PoolReuse), 2);
}

/// `always`: closing clients share one server connection, one after another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_shares_one_server_connection_among_closing_clients() {
    let (server, seen) = counting_server().await;
    let switch = switch_with("always", server);
    five_closing_clients(switch.local_addr("web").unwrap()).await;
    assert_eq!(seen.opened.load(Ordering::SeqCst), 1);
    assert_eq!(switch.stats().get(Counter::PoolReuse), 4);
}
