//! A `[cluster]` node upgrades its binary (issue 16) under load: the gossip socket goes to
//! the new process with the listeners, the other node sees the node live again (a new
//! generation of it) and the new process sees the other node; gossip works through the new
//! process (an agent's report to it reaches the other node); no request fails.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cluster_bed;
mod common;

use cluster_bed::*;
use common::{cswitch, tempdir};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One GET on `stream`; Ok if answered 200 (body read by Content-Length).
fn request(stream: &mut TcpStream) -> std::io::Result<()> {
    stream.write_all(b"GET /c HTTP/1.1\r\nHost: t\r\n\r\n")?;
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_lowercase();
            if !head.starts_with("http/1.1 200") {
                return Err(std::io::Error::other(head));
            }
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| std::io::Error::other("no content-length"))?;
            if got.len() >= end + 4 + length {
                return Ok(());
            }
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::other("closed before the whole answer"));
        }
        got.extend_from_slice(&chunk[..n]);
    }
}

/// Two clients (keep-alive, and a new connection per request) until `stop`, at most
/// 20,000 requests each or 60 s; failures counted.
fn load(
    web: SocketAddr,
    stop: &Arc<AtomicBool>,
    ok: &Arc<AtomicU64>,
    failed: &Arc<AtomicU64>,
) -> Vec<std::thread::JoinHandle<()>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    (0..2)
        .map(|i| {
            let (stop, ok, failed) = (Arc::clone(stop), Arc::clone(ok), Arc::clone(failed));
            std::thread::spawn(move || {
                let mut kept: Option<TcpStream> = None;
                for _ in 0..20_000 {
                    if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                        return;
                    }
                    let stream = kept.take().map_or_else(|| TcpStream::connect(web), Ok);
                    let result = stream.and_then(|mut s| request(&mut s).map(|()| s));
                    match result {
                        Ok(s) => {
                            ok.fetch_add(1, Ordering::Relaxed);
                            kept = (i == 0).then_some(s);
                        }
                        Err(e) => {
                            eprintln!("request failed: {e}");
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect()
}

#[test]
fn a_cluster_node_upgrades_under_load_and_gossips_on() {
    let dir = tempdir("cluster-upgrade");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let origin = rt.block_on(testkit::Origin::start("s1"));
    let group = format!(
        "[[group]]\nname = \"web\"\nscheduler = \"rr\"\nservers = [ {{ name = \"s1\", addr = \"{}\" }} ]\n",
        origin.addr()
    );
    let (ga, gb) = (free_udp("127.0.0.91"), free_udp("127.0.0.92"));
    let a = start_with(&dir, "a", ga, &[], KEY, &group);
    let b = start_with(&dir, "b", gb, &[ga], KEY, &group);
    until(&b, &["cluster"], Duration::from_secs(5), "a live at b", |v| node_live(v, "a") == Some(true));

    let (stop, ok, failed) = (Arc::new(AtomicBool::new(false)), Arc::default(), Arc::default());
    let clients = load(a.web, &stop, &ok, &failed);
    std::thread::sleep(Duration::from_millis(300));
    let out = cswitch()
        .args(["ctl", "--json", "--addr", &a.admin.to_string(), "--token", TOKEN, "upgrade"])
        .output()
        .unwrap();
    assert!(out.status.success(), "upgrade: {}", String::from_utf8_lossy(&out.stderr));
    let upgraded: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("upgrade report: {upgraded}");
    let new_pid = upgraded["new_pid"].as_u64().unwrap();
    // Whatever happens next, the new process is stopped at the end.
    struct Kill(u64);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = std::process::Command::new("kill").arg(self.0.to_string()).status();
        }
    }
    let _kill = Kill(new_pid);

    // The new process is a member: b sees a live (its new generation), a (new) sees b.
    until(&a, &["cluster"], Duration::from_secs(5), "b live at the new a", |v| {
        node_live(v, "b") == Some(true) && v["node"] == "a"
    });
    until(&b, &["cluster"], Duration::from_secs(5), "a live at b after the upgrade", |v| {
        node_live(v, "a") == Some(true)
    });
    // Gossip goes through the new process: a report to a's agents socket (taken over too)
    // reaches b's weights.
    until(&b, &["servers"], Duration::from_secs(5), "a's agent report at b", |v| {
        report(a.agents, &origin.addr().to_string(), 70);
        server(v, "s1")["capacity"] == 70
    });
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    clients.into_iter().for_each(|c| c.join().unwrap());
    let (ok, failed) = (ok.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    eprintln!("{ok} requests answered, {failed} failed");
    assert_eq!(failed, 0);
    assert!(ok > 20, "only {ok} requests");
    drop((a, b));
    let _ = std::fs::remove_dir_all(dir);
}
