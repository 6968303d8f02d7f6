//! Admission control and timeouts: each limit refuses with its status, is counted, and
//! leaves the switch serving.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{get, start};
use proxy::Counter;
use std::time::{Duration, Instant};
use testkit::RawClient;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// At the limit with every connection busy, a new one is closed at once; with idle
/// keep-alive connections, the oldest of them is closed to admit it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_limit_are_closed_at_accept() {
    let h = start(&["s1"], "[limits]\nmax_client_connections = 3\n").await;
    let mut held = Vec::new();
    for _ in 0..3 {
        let mut c = RawClient::connect(h.addr).await.unwrap();
        c.send(&get("/slow/800")).await.unwrap();
        held.push(c);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut extra = RawClient::connect(h.addr).await.unwrap();
    assert!(extra.closed_within(Duration::from_secs(2)).await);
    assert_eq!(h.count(Counter::RefusedConnLimit), 1);
    for c in &mut held {
        assert_eq!(c.read_response().await.unwrap().status, 200, "busy connections are kept");
    }
    // Now idle: a new client is admitted by closing the oldest idle connection.
    let r = testkit::get(h.addr, "/").await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(h.count(Counter::EvictedIdle), 1);
    assert!(held[0].closed_within(Duration::from_secs(2)).await, "the oldest idle one went");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_head_gets_431_and_oversized_body_413() {
    let h =
        start(&["s1"], "[limits]\nmax_head_bytes = 2048\nmax_headers = 10\nmax_body_bytes = 1000\n").await;
    let big = format!("GET / HTTP/1.1\r\nHost: a\r\nX-Big: {}\r\n\r\n", "a".repeat(3000));
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(big.as_bytes()).await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 431);

    let many: String = (0..12).map(|i| format!("X-{i}: v\r\n")).collect();
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(format!("GET / HTTP/1.1\r\nHost: a\r\n{many}\r\n").as_bytes()).await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 431);

    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 1001\r\n\r\n").await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 413);

    // Chunked bodies are measured as they stream.
    let mut c = RawClient::connect(h.addr).await.unwrap();
    let chunk = format!("3e8\r\n{}\r\n", "b".repeat(1000));
    c.send(
        format!(
            "POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n{chunk}{chunk}0\r\n\r\n"
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 413);
    assert_eq!(h.count(Counter::HeadTooLarge), 2);
    assert_eq!(h.count(Counter::BodyTooLarge), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_head_gets_408_and_idle_keep_alive_is_closed() {
    let h = start(&["s1"], "[timeouts]\nclient_head = \"300ms\"\nclient_idle = \"300ms\"\n").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(b"GET / HTTP/1.1\r\nHost: a\r\n").await.unwrap(); // never finished
    let started = Instant::now();
    let r = c.read_response().await.unwrap();
    assert_eq!(r.status, 408);
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(h.count(Counter::HeadTimeout), 1);

    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(&get("/")).await.unwrap();
    assert_eq!(c.read_response().await.unwrap().status, 200);
    assert!(c.closed_within(Duration::from_secs(2)).await);
    assert_eq!(h.count(Counter::IdleTimeout), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_server_queue_and_queue_timeout_give_503() {
    let o = testkit::Origin::start("s1").await;
    let text = format!(
        "[global]\nworkers = 1\n[access_log]\nenabled = false\n[limits]\nmax_queue = 1\n[timeouts]\nqueue = \"300ms\"\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
         [[group]]\nname = \"web\"\nservers = [ {{ name = \"s1\", addr = \"{}\", maxconn = 1 }} ]\n",
        o.addr()
    );
    let sw = proxy::Switch::start(config::parse(&text, std::path::Path::new("t.toml")).unwrap()).unwrap();
    let addr = sw.local_addr("web").unwrap();
    // One request holds the only slot for 1.5 s; one waits in the queue and times out; a
    // third finds the queue full.
    let busy = tokio::spawn(testkit::get(addr, "/slow/1500"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let queued = tokio::spawn(testkit::get(addr, "/queued"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let full = testkit::get(addr, "/full").await.unwrap();
    assert_eq!(full.status, 503);
    assert!(full.body_str().contains("queue full"));
    let queued = queued.await.unwrap().unwrap();
    assert_eq!(queued.status, 503);
    assert!(queued.body_str().contains("timed out"));
    assert_eq!(busy.await.unwrap().unwrap().status, 200);
    assert_eq!(sw.stats().get(Counter::QueueFull), 1);
    assert_eq!(sw.stats().get(Counter::QueueTimeout), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_request_gets_the_slot_when_it_frees() {
    let o = testkit::Origin::start("s1").await;
    let text = format!(
        "[global]\nworkers = 1\n[access_log]\nenabled = false\n[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\n\
         default_group = \"web\"\n[[group]]\nname = \"web\"\nservers = [ {{ name = \"s1\", addr = \"{}\", maxconn = 1 }} ]\n",
        o.addr()
    );
    let sw = proxy::Switch::start(config::parse(&text, std::path::Path::new("t.toml")).unwrap()).unwrap();
    let addr = sw.local_addr("web").unwrap();
    let busy = tokio::spawn(testkit::get(addr, "/slow/300"));
    tokio::time::sleep(Duration::from_millis(50)).await;
    let r = testkit::get(addr, "/after").await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(busy.await.unwrap().unwrap().status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_server_gets_504() {
    let h = start(&["s1"], "[timeouts]\nserver_response = \"200ms\"\n").await;
    let r = testkit::get(h.addr, "/slow/1500").await.unwrap();
    assert_eq!(r.status, 504);
    assert_eq!(h.count(Counter::ServerTimeout), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_connect_timeout_gives_504() {
    // A listening socket with a full accept backlog drops further SYNs: connects hang.
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(&"127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
    sock.listen(0).unwrap();
    let addr = sock.local_addr().unwrap().as_socket().unwrap();
    let mut fillers = Vec::new();
    for _ in 0..4 {
        if let Ok(Ok(s)) =
            tokio::time::timeout(Duration::from_millis(200), tokio::net::TcpStream::connect(addr)).await
        {
            fillers.push(s);
        }
    }
    let text = format!(
        "[global]\nworkers = 1\n[access_log]\nenabled = false\n[limits]\nretries = 0\n[timeouts]\nserver_connect = \"200ms\"\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
         [[group]]\nname = \"web\"\nservers = [ {{ name = \"hang\", addr = \"{addr}\" }} ]\n"
    );
    let sw = proxy::Switch::start(config::parse(&text, std::path::Path::new("t.toml")).unwrap()).unwrap();
    let r = testkit::get(sw.local_addr("web").unwrap(), "/").await.unwrap();
    assert_eq!(r.status, 504);
    assert_eq!(sw.stats().get(Counter::ConnectTimeout), 1);
}

/// A client whose WebSocket upgrade the switch (and testkit's echo origin) accepted.
async fn websocket_tunnel(addr: std::net::SocketAddr) -> RawClient {
    let mut c = RawClient::connect(addr).await.unwrap();
    c.send(b"GET /ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").await.unwrap();
    assert_eq!(c.read_response_to_head().await.unwrap().status, 101);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tunnel_is_closed() {
    let h = start(&["s1"], "[timeouts]\ntunnel_idle = \"300ms\"\n").await;
    let mut c = websocket_tunnel(h.addr).await;
    assert!(c.closed_within(Duration::from_secs(3)).await);
}

/// `tunnel_idle` counts from the last byte either way: a tunnel that keeps talking outlives
/// it many times over (its one timer re-armed each time it fires), and closes once quiet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_active_tunnel_outlives_its_idle_timeout_and_closes_once_quiet() {
    let h = start(&["s1"], "[timeouts]\ntunnel_idle = \"300ms\"\n").await;
    let c = websocket_tunnel(h.addr).await;
    let (mut stream, mut pending) = c.into_parts();
    let began = Instant::now();
    let mut last_echo = began;
    for i in 0..12 {
        // 1.2 s of talk, four idle timeouts' worth: each frame is echoed through the tunnel.
        let msg = format!("frame {i}");
        stream.write_all(&testkit::ws_client_frame(msg.as_bytes(), [1, 2, 3, 4])).await.unwrap();
        let (_, payload) = testkit::ws_read_frame(&mut stream, &mut pending).await.unwrap();
        assert_eq!(payload, msg.as_bytes(), "the tunnel still carries bytes");
        last_echo = Instant::now();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(began.elapsed() >= Duration::from_millis(1200));
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(3), stream.read(&mut byte)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "closed once quiet: {read:?}");
    let quiet = last_echo.elapsed();
    assert!(quiet >= Duration::from_millis(250), "closed after the idle time, not before: {quiet:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_request_body_gets_408() {
    let h = start(&["s1"], "[timeouts]\nclient_io = \"300ms\"\n").await;
    let mut c = RawClient::connect(h.addr).await.unwrap();
    c.send(b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nonly part").await.unwrap();
    let r = c.read_response().await.unwrap();
    assert_eq!(r.status, 408);
    assert_eq!(h.count(Counter::ClientTimeout), 1);
}
