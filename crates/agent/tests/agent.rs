//! The agent end to end on loopback: real UDP sockets as switches, a metric file the test
//! controls, real TCP connections for the socket metric. Every wait is bounded.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cswitch_agent::{spawn, token_matches, AgentConfig, CapacityFn, Metric, Report};

/// A UDP socket standing in for a switch; reads give up after `timeout`.
fn switch(timeout: Duration) -> UdpSocket {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_read_timeout(Some(timeout)).unwrap();
    socket
}

fn recv(socket: &UdpSocket) -> Report {
    let mut buf = [0u8; 1024];
    let n = socket.recv(&mut buf).expect("a report within the timeout");
    Report::parse(&buf[..n]).unwrap()
}

/// Whether nothing arrives within the socket's read timeout.
fn silent(socket: &UdpSocket) -> bool {
    let mut buf = [0u8; 1024];
    match socket.recv(&mut buf) {
        Err(e) => matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        Ok(_) => false,
    }
}

/// A metric file unique to this process and test.
fn load_file(test: &str) -> PathBuf {
    std::env::temp_dir().join(format!("cswitch-agent-{}-{test}", std::process::id()))
}

/// Replaces the file's content in one step, so the agent never reads it half-written.
fn set_load(path: &PathBuf, load: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, load).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn config(switches: &[&UdpSocket], metric: Metric) -> AgentConfig {
    AgentConfig {
        server: "127.0.0.1:8081".parse().unwrap(),
        switches: switches.iter().map(|s| s.local_addr().unwrap()).collect(),
        metric,
        port_filter: None,
        capacity: CapacityFn::default(),
        interval: Duration::from_millis(100),
        token: None,
        count: None,
    }
}

#[test]
fn capacity_follows_the_metric_file() {
    let path = load_file("follows");
    set_load(&path, "100\n");
    let sw = switch(Duration::from_secs(2));
    let agent = spawn(config(&[&sw], Metric::File(path.clone()))).unwrap();

    let first = recv(&sw);
    let g = CapacityFn::default();
    assert_eq!(first.server, "127.0.0.1:8081".parse::<SocketAddr>().unwrap());
    assert_eq!((first.load, first.capacity), (100.0, g.capacity(100.0)));
    assert_eq!((first.metric.as_str(), first.token), ("file", None));

    set_load(&path, "5000");
    let deadline = Instant::now() + Duration::from_secs(2);
    let later = loop {
        let r = recv(&sw);
        if r.load == 5000.0 || Instant::now() > deadline {
            break r;
        }
    };
    assert_eq!((later.load, later.capacity), (5000.0, g.capacity(5000.0)));
    assert!(later.capacity < first.capacity);

    let started = Instant::now();
    agent.stop();
    assert!(started.elapsed() < Duration::from_millis(500));
    let _ = std::fs::remove_file(&path);
}

#[test]
fn stop_does_not_wait_out_the_interval() {
    let path = load_file("stop");
    set_load(&path, "1");
    let sw = switch(Duration::from_secs(2));
    let cfg = AgentConfig { interval: Duration::from_secs(30), ..config(&[&sw], Metric::File(path.clone())) };
    let agent = spawn(cfg).unwrap();
    recv(&sw); // the first report goes out at once
    let started = Instant::now();
    agent.stop();
    assert!(started.elapsed() < Duration::from_millis(500), "stop took {:?}", started.elapsed());
    let _ = std::fs::remove_file(&path);
}

#[test]
fn count_sends_exactly_that_many_then_ends() {
    let path = load_file("count");
    set_load(&path, "7");
    let sw = switch(Duration::from_secs(2));
    let cfg = AgentConfig {
        interval: Duration::from_millis(50),
        count: Some(3),
        ..config(&[&sw], Metric::File(path.clone()))
    };
    let agent = spawn(cfg).unwrap();
    for _ in 0..3 {
        assert_eq!(recv(&sw).load, 7.0);
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while !agent.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(agent.is_finished(), "the agent did not end after its count");
    assert_eq!(agent.wait(), Ok(3));
    sw.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    assert!(silent(&sw), "a fourth report arrived");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn every_switch_gets_each_report() {
    let path = load_file("two");
    set_load(&path, "42");
    let (a, b) = (switch(Duration::from_secs(2)), switch(Duration::from_secs(2)));
    let cfg = AgentConfig { count: Some(2), ..config(&[&a, &b], Metric::File(path.clone())) };
    let agent = spawn(cfg).unwrap();
    for sw in [&a, &b] {
        for _ in 0..2 {
            assert_eq!(recv(sw).load, 42.0);
        }
    }
    assert_eq!(agent.wait(), Ok(4));
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_host_that_cannot_measure_sends_nothing() {
    let sw = switch(Duration::from_millis(300));
    let missing = load_file("never-written");
    let cfg = AgentConfig { interval: Duration::from_millis(50), ..config(&[&sw], Metric::File(missing)) };
    let agent = spawn(cfg).unwrap();
    assert!(silent(&sw), "a report arrived without a measurement");
    assert_eq!(agent.reports_sent(), 0);
    agent.stop();
}

#[cfg(target_os = "linux")]
#[test]
fn established_counts_only_the_filtered_local_port() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let clients: Vec<TcpStream> = (0..3).map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    let accepted: Vec<TcpStream> = (0..3).map(|_| listener.accept().unwrap().0).collect();

    let sw = switch(Duration::from_secs(2));
    let cfg = AgentConfig { port_filter: Some(port), count: Some(1), ..config(&[&sw], Metric::Established) };
    let agent = spawn(cfg).unwrap();
    let report = recv(&sw);
    // The accepted sides have the listener's port as local port; the client sides have
    // it as remote port and do not count.
    assert!(report.load >= 3.0, "load {}", report.load);
    assert_eq!(report.metric, "established");
    assert_eq!(report.capacity, CapacityFn::default().capacity(report.load));
    assert_eq!(agent.wait(), Ok(1));
    drop((clients, accepted));
}

#[test]
fn token_is_sent_and_checked() {
    let path = load_file("token");
    set_load(&path, "0");
    let sw = switch(Duration::from_secs(2));
    let cfg = AgentConfig {
        token: Some("s3cret".into()),
        count: Some(1),
        ..config(&[&sw], Metric::File(path.clone()))
    };
    let agent = spawn(cfg).unwrap();
    let report = recv(&sw);
    assert_eq!(report.token.as_deref(), Some("s3cret"));
    assert!(token_matches("s3cret", report.token.as_deref()));
    assert!(!token_matches("other", report.token.as_deref()));
    assert!(!token_matches("s3cret", None));
    agent.wait().unwrap();
    let _ = std::fs::remove_file(&path);
}
