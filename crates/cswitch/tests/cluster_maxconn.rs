//! Cluster-wide admission through running binaries on 127.0.0.x: a server's `maxconn` of
//! 10 holds across three `[cluster]` nodes under 60 concurrent clients (20 per node),
//! counted by the server itself (requests it is serving at once). Each node alone would
//! admit 10, 30 in all.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cluster_bed;
mod common;

use cluster_bed::*;
use common::tempdir;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Requests the server is serving now, the most at once, and how many it served.
#[derive(Default)]
struct Counts {
    now: AtomicU32,
    most: AtomicU32,
    served: AtomicU32,
}

/// A keep-alive HTTP server that holds each request `hold` and counts them.
async fn counting_server(counts: Arc<Counts>, hold: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, Arc::clone(&counts), hold));
        }
    });
    addr
}

async fn serve(mut stream: TcpStream, counts: Arc<Counts>, hold: Duration) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        buf.drain(..end);
        let now = counts.now.fetch_add(1, Ordering::SeqCst) + 1;
        counts.most.fetch_max(now, Ordering::SeqCst);
        tokio::time::sleep(hold).await;
        counts.now.fetch_sub(1, Ordering::SeqCst);
        counts.served.fetch_add(1, Ordering::SeqCst);
        if stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await.is_err() {
            return;
        }
    }
}

/// One client: `requests` requests, each on a new connection through `node`; the statuses.
async fn client(node: SocketAddr, requests: usize, deadline: Instant) -> Vec<u16> {
    let mut statuses = Vec::with_capacity(requests);
    for _ in 0..requests {
        if Instant::now() > deadline {
            break;
        }
        let mut c = testkit::RawClient::connect(node).await.unwrap();
        c.send(b"GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await.unwrap();
        statuses.push(c.read_response().await.map_or(0, |r| r.status));
    }
    statuses
}

#[test]
fn a_servers_maxconn_holds_across_three_nodes() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let counts = Arc::new(Counts::default());
    let origin = rt.block_on(counting_server(Arc::clone(&counts), Duration::from_millis(30)));
    let dir = tempdir("cluster-maxconn");
    let group = format!(
        "[timeouts]\nqueue = \"20s\"\n[[group]]\nname = \"web\"\nscheduler = \"rr\"\n\
         servers = [ {{ name = \"s1\", addr = \"{origin}\", maxconn = 10 }} ]\n"
    );
    let (ga, gb, gc) = (free_udp("127.0.0.81"), free_udp("127.0.0.82"), free_udp("127.0.0.83"));
    let a = start_with(&dir, "a", ga, &[], KEY, &group);
    let b = start_with(&dir, "b", gb, &[ga], KEY, &group);
    let c = start_with(&dir, "c", gc, &[ga, gb], KEY, &group);
    for node in [&a, &b, &c] {
        until(node, &["cluster"], Duration::from_secs(5), "three live nodes", |v| {
            ["a", "b", "c"].iter().all(|n| node_live(v, n) == Some(true))
        });
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let started = Instant::now();
    let statuses: Vec<u16> = rt.block_on(async {
        let mut clients = Vec::new();
        for i in 0..60 {
            let node = [a.web, b.web, c.web][i % 3];
            clients.push(tokio::spawn(client(node, 10, deadline)));
        }
        let mut all = Vec::new();
        for c in clients {
            all.extend(c.await.unwrap());
        }
        all
    });
    let (most, served) = (counts.most.load(Ordering::SeqCst), counts.served.load(Ordering::SeqCst));
    eprintln!(
        "60 clients through 3 nodes, maxconn 10: {} requests in {:?}, at most {most} at once at the \
         server (overshoot {})",
        statuses.len(),
        started.elapsed(),
        most.saturating_sub(10)
    );
    assert_eq!(statuses.len(), 600, "the load finished within its deadline");
    assert!(statuses.iter().all(|s| *s == 200), "every request answered 200: {statuses:?}");
    assert_eq!(served, 600);
    // The documented bound (docs/cluster.md): while the others' counts are not heard yet,
    // each node may grow by its part of the slots it believes free, 2 + 2 + 2 here when
    // the 60 clients start at once; a node on its own would admit 10 (30 in all).
    assert!(most <= 16, "the server saw {most} requests at once (maxconn 10 across the cluster)");
    let _ = std::fs::remove_dir_all(dir);
}
