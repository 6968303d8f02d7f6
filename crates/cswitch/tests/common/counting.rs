//! A keep-alive HTTP server that holds each request a while and counts how many it serves
//! at once: what a server with a `maxconn` sees of a switch (or a cluster) in front of it.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Requests the server is serving now, the most at once, and how many it served.
#[derive(Default)]
pub struct Counts {
    pub now: AtomicU32,
    pub most: AtomicU32,
    pub served: AtomicU32,
}

/// The server on `at` (port 0 for any), holding each request `hold`; its address.
pub async fn counting_server(at: SocketAddr, counts: Arc<Counts>, hold: Duration) -> SocketAddr {
    let listener = TcpListener::bind(at).await.unwrap();
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

/// One client: `requests` requests, each on a new connection to `to`, until `deadline`;
/// the statuses (0: no answer).
pub async fn client(to: SocketAddr, requests: usize, deadline: std::time::Instant) -> Vec<u16> {
    let mut statuses = Vec::with_capacity(requests);
    for _ in 0..requests {
        if std::time::Instant::now() > deadline {
            break;
        }
        let Ok(mut c) = testkit::RawClient::connect(to).await else {
            statuses.push(0);
            continue;
        };
        if c.send(b"GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").await.is_err() {
            statuses.push(0);
            continue;
        }
        statuses.push(c.read_response().await.map_or(0, |r| r.status));
    }
    statuses
}
