//! The access log as an operator lives with it, through the binary: rotation (SIGUSR1,
//! `cswitch ctl reopen`, reload) under a client loop loses no line and writes each to one
//! file; a reload that changes `path` and `format` applies; the named fields hold what the
//! client sent and what the switch did; syslog gets RFC 5424 datagrams; lines reach the
//! file within the flush period without further traffic.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{cswitch, tempdir, Running};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOKEN: &str = "access-log-test-token-0123456789";

fn config(origin: SocketAddr, access_log: &str) -> String {
    format!(
        "[global]\nworkers = 2\ngrace_period = \"2s\"\n[access_log]\n{access_log}\n\
         [admin]\nbind = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
         trusted_proxies = [\"127.0.0.0/8\"]\n\
         [[group]]\nname = \"web\"\nservers = [ {{ name = \"o1\", addr = \"{origin}\" }} ]\n"
    )
}

/// The `addr=IP:PORT` field of a log line.
fn addr_in(line: &str) -> SocketAddr {
    let field = line.split_whitespace().find_map(|w| w.strip_prefix("addr=")).unwrap();
    field.parse().unwrap_or_else(|_| panic!("{line}"))
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
}

/// How many times each `/r/N` target appears in `files`.
fn targets_in(files: &[&Path]) -> HashMap<String, usize> {
    let mut seen = HashMap::new();
    for f in files {
        for line in std::fs::read_to_string(f).unwrap_or_default().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
            *seen.entry(v["target"].as_str().unwrap().to_string()).or_insert(0) += 1;
        }
    }
    seen
}

/// The file's text once it contains `needle` (at most 2 s: the flush period is 250 ms).
fn wait_for_text(path: &Path, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) || Instant::now() > deadline {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn rotation_under_load_loses_no_line_and_writes_each_once() {
    let rt = rt();
    let origin = rt.block_on(testkit::Origin::start("o1"));
    let dir = tempdir("log-rotate");
    let (path, log) = (dir.join("cswitch.toml"), dir.join("access.log"));
    let fields = "format = \"json\"\nfields = [\"time\", \"target\", \"status\"]\npath = \"access.log\"";
    std::fs::write(&path, config(origin.addr(), fields)).unwrap();
    let mut run = Running::start(&path);
    let web = addr_in(&run.wait_for("listening"));
    let admin = addr_in(&run.wait_for("admin listener"));

    const N: usize = 600;
    let done = Arc::new(AtomicUsize::new(0));
    let client = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let rt = crate::rt();
            for i in 0..N {
                let r = rt.block_on(testkit::get(web, &format!("/r/{i}"))).unwrap();
                assert_eq!(r.status, 200);
                done.store(i + 1, Ordering::SeqCst);
                // Paced so that several 250 ms flushes fall between rotations.
                std::thread::sleep(Duration::from_millis(3));
            }
        })
    };
    let wait_until = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while done.load(Ordering::SeqCst) < n && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    // Rotation 1: move the file away, SIGUSR1.
    wait_until(150);
    std::fs::rename(&log, dir.join("access.log.1")).unwrap();
    run.signal("-USR1");
    run.wait_for("access log reopened");
    // Rotation 2: move it again, `cswitch ctl reopen`.
    wait_until(300);
    std::fs::rename(&log, dir.join("access.log.2")).unwrap();
    let out = cswitch()
        .args(["ctl", "--addr", &admin.to_string(), "reopen"])
        .env("CSWITCH_ADMIN_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "access log reopened\n");
    // Rotation 3: move it again, SIGHUP (every reload reopens).
    wait_until(450);
    std::fs::rename(&log, dir.join("access.log.3")).unwrap();
    run.signal("-HUP");
    run.wait_for("config reloaded");
    client.join().unwrap();
    run.signal("-TERM");
    assert!(run.child.wait().unwrap().success());

    let files: Vec<_> =
        ["access.log.1", "access.log.2", "access.log.3", "access.log"].map(|f| dir.join(f)).into();
    let refs: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
    let seen = targets_in(&refs);
    for i in 0..N {
        assert_eq!(
            seen.get(&format!("/r/{i}")),
            Some(&1),
            "/r/{i} logged {:?} times",
            seen.get(&format!("/r/{i}"))
        );
    }
    assert_eq!(seen.len(), N);
    assert_eq!(targets_in(&[&dir.join("access.log")]).get(&format!("/r/{}", N - 1)), Some(&1));
    for f in &refs {
        assert!(!targets_in(&[f]).is_empty(), "{} got no line", f.display());
    }
}

#[test]
fn reload_applies_a_new_path_and_format() {
    let rt = rt();
    let origin = rt.block_on(testkit::Origin::start("o1"));
    let dir = tempdir("log-reload");
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, config(origin.addr(), "path = \"first.log\"")).unwrap();
    let mut run = Running::start(&path);
    let web = addr_in(&run.wait_for("listening"));
    rt.block_on(testkit::get(web, "/before")).unwrap();
    // A line still in a worker's buffer at the reload would go to the new file: wait for
    // the flush (at most 250 ms) first.
    wait_for_text(&dir.join("first.log"), "/before");
    let json = "path = \"second.log\"\nformat = \"json\"";
    std::fs::write(&path, config(origin.addr(), json)).unwrap();
    run.signal("-HUP");
    let line = run.wait_for("[access_log] changed");
    assert!(line.contains("path") && line.contains("second.log"), "{line}");
    rt.block_on(testkit::get(web, "/after")).unwrap();
    run.signal("-TERM");
    assert!(run.child.wait().unwrap().success());
    let first = std::fs::read_to_string(dir.join("first.log")).unwrap();
    let second = std::fs::read_to_string(dir.join("second.log")).unwrap();
    assert!(first.contains("\"GET /before HTTP/1.1\"") && !first.contains("/after"), "{first}");
    let v: serde_json::Value = serde_json::from_str(second.trim()).unwrap();
    assert_eq!(v["target"], "/after", "{second}");
}

#[test]
fn named_fields_hold_what_client_and_switch_did() {
    let rt = rt();
    let origin = rt.block_on(testkit::Origin::start("o1"));
    let dir = tempdir("log-fields");
    let path = dir.join("cswitch.toml");
    let fields = "format = \"json\"\npath = \"access.log\"";
    std::fs::write(&path, config(origin.addr(), fields)).unwrap();
    let run = Running::start(&path);
    let web = addr_in(&run.wait_for("listening"));
    let response = rt.block_on(async {
        let mut c = testkit::RawClient::connect(web).await.unwrap();
        c.send(
            b"GET /f?x=1 HTTP/1.1\r\nHost: shop.example\r\nUser-Agent: probe/1.0 (test)\r\n\
              X-Forwarded-For: 203.0.113.9, 127.0.0.5\r\n\r\n",
        )
        .await
        .unwrap();
        c.read_response().await.unwrap()
    });
    assert_eq!(response.status, 200);
    // No more traffic: the line must still reach the file within the flush period.
    let text = wait_for_text(&dir.join("access.log"), "/f?x=1");
    let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(v["host"], "shop.example");
    assert_eq!(v["user_agent"], "probe/1.0 (test)");
    assert_eq!(v["version"], "HTTP/1.1");
    assert_eq!(v["method"], "GET");
    assert_eq!(v["target"], "/f?x=1");
    assert_eq!(v["real_client"], "203.0.113.9", "the hop 127.0.0.5 is trusted, 203.0.113.9 is not");
    assert_eq!(v["chosen_by"], "scheduler");
    assert_eq!(v["server"], "o1");
    assert_eq!(v["status"], 200);
    assert_eq!(v["retries"], 0);
    assert!(v["connect_ms"].as_f64().unwrap() >= 0.0, "{v}");
    assert!(v["ttfb_ms"].as_f64().unwrap() <= v["total_ms"].as_f64().unwrap(), "{v}");
    assert!(v["bytes_in"].as_u64().unwrap() > 50 && v["bytes_out"].as_u64().unwrap() > 50, "{v}");
    // Absent values are null, never "-".
    assert!(
        v["rule"].is_null() && v["sni"].is_null() && v["tls_version"].is_null() && v["error"].is_null(),
        "{v}"
    );
    assert!(!text.contains("\"-\""), "{text}");
}

#[test]
fn syslog_gets_one_rfc5424_datagram_per_line() {
    let rt = rt();
    let origin = rt.block_on(testkit::Origin::start("o1"));
    let collector = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    collector.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let dir = tempdir("log-syslog");
    let path = dir.join("cswitch.toml");
    let to = format!("syslog = \"udp://{}\"\nfacility = \"local2\"", collector.local_addr().unwrap());
    std::fs::write(&path, config(origin.addr(), &to)).unwrap();
    let run = Running::start(&path);
    let web = addr_in(&run.wait_for("listening"));
    for p in ["/s1", "/s2"] {
        rt.block_on(testkit::get(web, p)).unwrap();
    }
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while got.len() < 2 {
        let n = collector.recv(&mut buf).expect("a syslog datagram within 5 s");
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    // Two workers: the two lines may come in either order (docs/config.md).
    got.sort_by_key(|m| m.contains("/s2"));
    for (msg, target) in got.iter().zip(["/s1", "/s2"]) {
        // local2 (18) × 8 + informational (6) = 150; version 1.
        assert!(msg.starts_with("<150>1 "), "{msg}");
        let pid = run.child.id().to_string();
        assert!(msg.contains(&format!(" cswitch {pid} access - ")), "{msg}");
        assert!(msg.contains(&format!("\"GET {target} HTTP/1.1\" 200")), "{msg}");
        assert!(!msg.ends_with('\n'), "one line per datagram, no newline: {msg:?}");
    }
}
