//! Memory per idle keep-alive connection after one request (issue 14): once parked out of
//! the runtime (`floor::parked`), a connection costs its slot in the worker's table and
//! nothing else; the target is 512 bytes, under nginx's 526. Resident bytes, not timing.
//! Alone in its test binary, so no other test allocates while it measures; with the
//! binary's allocator (mimalloc, which returns freed pages: the tasks the connections had
//! before they parked leave nothing resident).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::wait_for;
use proxy::{Counter, Switch};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn rss_kib() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// An origin that answers every request with 2 bytes and remembers nothing (testkit's
/// origins keep every request they saw, which would be counted here), on threads of its own.
fn quiet_origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { return };
            std::thread::spawn(move || answer(conn));
        }
    });
    addr
}

fn answer(conn: TcpStream) {
    let Ok(mut out) = conn.try_clone() else { return };
    let mut lines = BufReader::new(conn);
    let mut line = String::new();
    loop {
        line.clear();
        match lines.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line == "\r\n" => {
                if out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").is_err() {
                    return;
                }
            }
            Ok(_) => {}
        }
    }
}

/// The switch: one worker, in front of the quiet origin, one server connection for all
/// requests (`reuse = "always"`).
fn switch(origin: SocketAddr) -> (Switch, SocketAddr) {
    let text = format!(
        "[global]\nworkers = 1\n[access_log]\nenabled = false\n[limits]\nmax_client_connections = 20000\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
         [[group]]\nname = \"web\"\nreuse = \"always\"\nservers = [ {{ name = \"s1\", addr = \"{origin}\" }} ]\n"
    );
    let cfg = config::parse(&text, std::path::Path::new("test.toml")).unwrap();
    let switch = Switch::start(cfg).unwrap();
    let addr = switch.local_addr("web").unwrap();
    (switch, addr)
}

/// One keep-alive request on a new connection (std sockets: the client side costs no
/// user-space memory), answered; the connection is kept open.
fn one_request(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 1024];
    while !got.ends_with(b"\r\n\r\nok") {
        let n = std::io::Read::read(&mut s, &mut chunk).unwrap();
        assert!(n > 0, "closed before the answer");
        got.extend_from_slice(&chunk[..n]);
    }
    assert!(got.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));
    s
}

/// Opens `n` connections with one request each, `batch` at a time (each batch parked
/// before the next opens: clients arrive over time, as in the shared harness's idle
/// workload), and returns the resident bytes the process gained per connection.
async fn per_connection(
    switch: &Switch,
    addr: SocketAddr,
    n: usize,
    batch: usize,
    conns: &mut Vec<TcpStream>,
) -> usize {
    let before = rss_kib();
    let mut opened = 0;
    while opened < n {
        let parked = switch.stats().get(Counter::Parked);
        let now = batch.min(n - opened);
        for _ in 0..now {
            conns.push(one_request(addr));
        }
        opened += now;
        let target = parked + now as u64;
        let all = wait_for(Duration::from_secs(20), || switch.stats().get(Counter::Parked) >= target).await;
        assert!(all.is_some(), "{} of {now} parked", switch.stats().get(Counter::Parked) - parked);
    }
    rss_kib().saturating_sub(before) * 1024 / n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_after_one_request_costs_under_512_bytes() {
    let (switch, addr) = switch(quiet_origin());
    let mut conns = Vec::new();
    // Warm-up: the reactor's, the tables' and the allocator's first pages.
    per_connection(&switch, addr, 500, 500, &mut conns).await;
    let idle = per_connection(&switch, addr, 4000, 500, &mut conns).await;
    eprintln!("per idle connection after one request: {idle} B");
    assert!(idle <= 512, "idle connection after one request: {idle} B");
    assert_eq!(switch.stats().get(Counter::IdleTimeout), 0);
    assert_eq!(switch.status().connections, 4500);
}
