//! Binary upgrades (issue 16) through the running binary: `cswitch ctl upgrade` while
//! bounded client loops run (keep-alive and a new connection per request) loses no request
//! and refuses no connection, and every idle keep-alive client socket is still served
//! afterwards (by the new process: the old one has exited); a broken new binary or a bad
//! config changes nothing; ten upgrades in a row under load, to a second build of the
//! binary.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{cswitch, log_lines, tempdir, wait_for};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn config(origin: &testkit::Origin) -> String {
    format!(
        "[global]\nworkers = 2\ngrace_period = \"2s\"\n[access_log]\nenabled = false\n\
         [admin]\nbind = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
         [[group]]\nname = \"web\"\nscheduler = \"rr\"\nservers = [ {{ name = \"s1\", addr = \"{}\" }} ]\n",
        origin.addr()
    )
}

/// A switch started by the test, and whichever process serves it after upgrades (stopped
/// when dropped).
struct Switch {
    first: Child,
    log: Receiver<String>,
    pids: Vec<u32>,
    admin: SocketAddr,
    web: SocketAddr,
}

impl Switch {
    fn start(path: &Path, binary_override: Option<&Path>) -> Switch {
        let env: Vec<(&str, &Path)> =
            binary_override.map(|b| ("CSWITCH_UPGRADE_BINARY", b)).into_iter().collect();
        Switch::start_with_env(path, &env)
    }

    fn start_with_env(path: &Path, env: &[(&str, &Path)]) -> Switch {
        let mut command = cswitch();
        command.args(["run", "--config"]).arg(path).stderr(Stdio::piped());
        command.envs(env.iter().copied());
        let mut first = command.spawn().unwrap();
        let log = log_lines(first.stderr.take().unwrap());
        let web = addr_in(&wait_for(&log, "listening"));
        let admin = addr_in(&wait_for(&log, "admin listener"));
        let pids = vec![first.id()];
        Switch { first, log, pids, admin, web }
    }

    /// `cswitch ctl --json upgrade`: the report, or the error it printed.
    fn upgrade(&mut self) -> Result<serde_json::Value, String> {
        let mut ctl = cswitch();
        let out = ctl.arg("ctl").arg("--addr").arg(self.admin.to_string()).args(["--json", "upgrade"]);
        let out = out.output().unwrap();
        if !out.status.success() {
            // The switch's log so far, for a failure to be read with its cause.
            std::thread::sleep(Duration::from_millis(200));
            let log: Vec<String> = self.log.try_iter().collect();
            return Err(format!("{}\nswitch log:\n{}", String::from_utf8_lossy(&out.stderr), log.join("\n")));
        }
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        self.pids.push(u32::try_from(report["new_pid"].as_u64().unwrap()).unwrap());
        Ok(report)
    }

    /// Waits (at most 10 s) for the process the test started to exit; its status.
    fn first_exits(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.first.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the old process did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Switch {
    /// Stops the process serving now. The first is the test's child (killed through its
    /// handle); the ones between exited after handing over, and their PIDs may be another
    /// process's by now, so only the last is signalled by PID.
    fn drop(&mut self) {
        let _ = self.first.kill();
        if let Some(&pid) = self.pids.last().filter(|_| self.pids.len() > 1) {
            let _ = std::process::Command::new("kill").arg(pid.to_string()).stderr(Stdio::null()).status();
        }
        let _ = self.first.wait();
    }
}

/// The `addr=IP:PORT` field of a log line.
fn addr_in(line: &str) -> SocketAddr {
    let field = line.split_whitespace().find_map(|w| w.strip_prefix("addr=")).unwrap();
    field.parse().unwrap_or_else(|_| panic!("{line}"))
}

/// One request on `stream`; Ok if answered 200 (body read by Content-Length).
fn request(stream: &mut TcpStream, close: bool) -> std::io::Result<()> {
    let connection = if close { "Connection: close\r\n" } else { "" };
    stream.write_all(format!("GET /upgrade HTTP/1.1\r\nHost: t\r\n{connection}\r\n").as_bytes())?;
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::other("closed before the answer"));
        }
        got.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&got[..head_end]).to_lowercase();
    if !head.starts_with("http/1.1 200") {
        return Err(std::io::Error::other(format!("answered {head}")));
    }
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| std::io::Error::other("no content-length"))?;
    while got.len() < head_end + length {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::other("closed inside the body"));
        }
        got.extend_from_slice(&chunk[..n]);
    }
    Ok(())
}

fn connect(web: SocketAddr) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&web, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    Ok(stream)
}

/// Idle keep-alive clients: each has made one request and waits.
fn idle_clients(web: SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let mut s = connect(web).unwrap();
            request(&mut s, false).unwrap();
            s
        })
        .collect()
}

/// What the client loops saw.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    failed: AtomicU64,
    refused: AtomicU64,
    last_error: std::sync::Mutex<Option<String>>,
}

impl Tally {
    fn fail(&self, refused: bool, e: &std::io::Error) {
        let counter = if refused { &self.refused } else { &self.failed };
        counter.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock().unwrap() = Some(e.to_string());
    }
}

/// Client loops until `stop` (at most 20,000 requests each or 60 s): two keep-alive, two
/// with a new connection per request.
fn load(web: SocketAddr, stop: &Arc<AtomicBool>, tally: &Arc<Tally>) -> Vec<std::thread::JoinHandle<()>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    (0..4)
        .map(|i| {
            let (stop, tally) = (Arc::clone(stop), Arc::clone(tally));
            std::thread::spawn(move || {
                let keep_alive = i % 2 == 0;
                let mut kept: Option<TcpStream> = None;
                for _ in 0..20_000 {
                    if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                        return;
                    }
                    let mut stream = match kept.take() {
                        Some(s) => s,
                        None => match connect(web) {
                            Ok(s) => s,
                            Err(e) => {
                                tally.fail(true, &e);
                                continue;
                            }
                        },
                    };
                    match request(&mut stream, !keep_alive) {
                        Ok(()) => {
                            tally.ok.fetch_add(1, Ordering::Relaxed);
                            if keep_alive {
                                kept = Some(stream);
                            }
                        }
                        Err(e) => tally.fail(false, &e),
                    }
                }
            })
        })
        .collect()
}

fn assert_clean(tally: &Tally) {
    let last = tally.last_error.lock().unwrap().clone();
    assert_eq!(tally.failed.load(Ordering::Relaxed), 0, "failed requests; last: {last:?}");
    assert_eq!(tally.refused.load(Ordering::Relaxed), 0, "refused connections; last: {last:?}");
    let answered = tally.ok.load(Ordering::Relaxed);
    eprintln!("client loops: {answered} requests answered, none failed");
    assert!(answered > 0);
}

fn origin() -> (tokio::runtime::Runtime, testkit::Origin) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let origin = rt.block_on(testkit::Origin::start("s1"));
    (rt, origin)
}

#[test]
fn an_upgrade_under_load_loses_no_request_and_moves_idle_connections() {
    let (_rt, s1) = origin();
    let dir = tempdir("upgrade-load");
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, config(&s1)).unwrap();
    // A service manager's notification socket: it must hear of the new main process.
    let notify_path = dir.join("notify.sock");
    let _ = std::fs::remove_file(&notify_path);
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut switch = Switch::start_with_env(&path, &[("NOTIFY_SOCKET", &notify_path)]);
    // Parked ones (idle over a second) and ones still waiting as tasks.
    let mut idle = idle_clients(switch.web, 10);
    std::thread::sleep(Duration::from_millis(1500));
    let parked = ctl_json(&switch, &["status"])["counters"]["parked"].as_u64().unwrap();
    assert!(parked >= 10, "the first ten idle clients parked: {parked}");
    idle.extend(idle_clients(switch.web, 10));
    let (stop, tally) = (Arc::new(AtomicBool::new(false)), Arc::new(Tally::default()));
    let loops = load(switch.web, &stop, &tally);
    std::thread::sleep(Duration::from_millis(300));

    let report = switch.upgrade().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    loops.into_iter().for_each(|t| t.join().unwrap());

    assert_clean(&tally);
    assert!(report["moved"].as_u64().unwrap() >= 20, "{report}");
    assert_eq!(report["failed_to_move"], 0, "{report}");
    assert!(switch.first_exits().success());
    wait_for(&switch.log, "upgrade done; this process exits");
    let mut told = [0u8; 64];
    let n = notify.recv(&mut told).unwrap();
    assert_eq!(std::str::from_utf8(&told[..n]).unwrap(), format!("MAINPID={}\n", report["new_pid"]));
    for (i, client) in idle.iter_mut().enumerate() {
        request(client, false).unwrap_or_else(|e| panic!("idle client {i} after the upgrade: {e}"));
    }
}

#[test]
fn a_broken_binary_or_a_bad_config_changes_nothing() {
    let (_rt, s1) = origin();
    let dir = tempdir("upgrade-broken");
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, config(&s1)).unwrap();
    let broken = dir.join("broken.sh");
    std::fs::write(&broken, "#!/bin/sh\necho 'broken build' >&2\nexit 1\n").unwrap();
    std::fs::set_permissions(&broken, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let mut switch = Switch::start(&path, Some(&broken));
    let mut idle = idle_clients(switch.web, 3);
    let error = switch.upgrade().unwrap_err();
    assert!(error.contains("nothing changed") && error.contains("exited"), "{error}");
    assert!(error.contains("upgrade failed, this process goes on serving"), "logged too: {error}");
    for client in &mut idle {
        request(client, false).unwrap();
    }
    request(&mut connect(switch.web).unwrap(), true).unwrap();
    assert!(switch.first.try_wait().unwrap().is_none(), "the old process must go on");
    drop(switch);

    // The real binary, but a config that does not load.
    let mut switch = Switch::start(&path, None);
    let mut idle = idle_clients(switch.web, 3);
    let good = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, good.replace("scheduler = \"rr\"", "scheduler = \"no-such\"")).unwrap();
    let error = switch.upgrade().unwrap_err();
    assert!(error.contains("nothing changed") && error.contains("invalid config"), "{error}");
    for client in &mut idle {
        request(client, false).unwrap();
    }
    request(&mut connect(switch.web).unwrap(), true).unwrap();
    assert!(switch.first.try_wait().unwrap().is_none(), "the old process must go on");
    // Fixed, the same switch upgrades.
    std::fs::write(&path, good).unwrap();
    switch.upgrade().unwrap();
    for client in &mut idle {
        request(client, false).unwrap();
    }
}

/// A second build of the binary: a copy with bytes appended past the ELF image (still the
/// same program, but another file with another hash, as a rebuilt binary would be).
fn second_build(dir: &Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let copy = dir.join("cswitch-second-build");
    std::fs::copy(env!("CARGO_BIN_EXE_cswitch"), &copy).unwrap();
    std::fs::OpenOptions::new().append(true).open(&copy).unwrap().write_all(b"second build").unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    copy
}

#[test]
fn ten_upgrades_in_a_row_under_load_to_a_second_build() {
    let (_rt, s1) = origin();
    let dir = tempdir("upgrade-ten");
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, config(&s1)).unwrap();
    let next = second_build(&dir);
    let mut switch = Switch::start(&path, Some(&next));
    let mut idle = idle_clients(switch.web, 5);
    let (stop, tally) = (Arc::new(AtomicBool::new(false)), Arc::new(Tally::default()));
    let loops = load(switch.web, &stop, &tally);
    for round in 0..10 {
        let report = switch.upgrade().unwrap_or_else(|e| panic!("upgrade {round}: {e}"));
        assert_eq!(report["failed_to_move"], 0, "upgrade {round}: {report}");
    }
    let serving = *switch.pids.last().unwrap();
    let exe = std::fs::read_link(format!("/proc/{serving}/exe")).unwrap();
    assert_eq!(exe, next, "the process serving now runs the second build");
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    loops.into_iter().for_each(|t| t.join().unwrap());
    assert_clean(&tally);
    for client in &mut idle {
        request(client, false).unwrap();
    }
}

/// `cswitch ctl --json ARGS`, parsed.
fn ctl_json(switch: &Switch, args: &[&str]) -> serde_json::Value {
    let out =
        cswitch().arg("ctl").arg("--addr").arg(switch.admin.to_string()).arg("--json").args(args).output();
    let out = out.unwrap();
    assert!(out.status.success(), "ctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The `X-Origin` of one `path` request from `ip` (a loopback address) on a new connection.
fn origin_for(web: SocketAddr, ip: &str, path: &str) -> String {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::new(ip.parse().unwrap(), 0).into()).unwrap();
    socket.connect(&web.into()).unwrap();
    let mut stream: TcpStream = socket.into();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes())
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let line = answer.lines().find(|l| l.to_ascii_lowercase().starts_with("x-origin:")).unwrap();
    line["x-origin:".len()..].trim().to_string()
}

fn health_of(switch: &Switch, name: &str) -> String {
    let servers = ctl_json(switch, &["servers"]);
    let s = servers.as_array().unwrap().iter().find(|s| s["name"] == name).unwrap();
    s["health"].as_str().unwrap().to_string()
}

#[test]
fn admin_edits_sticky_and_persistence_entries_health_verdicts_and_counters_move_with_the_upgrade() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (w1, w2, p1, p2) = rt.block_on(async {
        use testkit::Origin;
        (
            Origin::start("w1").await,
            Origin::start("w2").await,
            Origin::start("p1").await,
            Origin::start("p2").await,
        )
    });
    let dir = tempdir("upgrade-state");
    let (path, rules) = (dir.join("cswitch.toml"), dir.join("web.rules"));
    std::fs::write(
        &rules,
        "R1: if (match(url, \"^/sticky\")) { routeTo(pool, STICKY_IP); }\nR2: if (match(url, \"^/pool\")) { routeTo(pool, NONSTICKY); }\n\
         R3: if (match(url, \"^/source\")) { routeTo(src, NONSTICKY); }\n",
    )
    .unwrap();
    // One worker: the round robin is one sequence, so a new process that did not know the
    // entries would give the reversed queries other servers.
    let text = format!(
        "[global]\nworkers = 1\ngrace_period = \"2s\"\n[access_log]\nenabled = false\n\
         [admin]\nbind = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\nrules = \"{}\"\n\
         [[group]]\nname = \"web\"\nscheduler = \"rr\"\n\
         health = {{ check = \"tcp\", interval = \"100ms\", timeout = \"100ms\", rise = 100, fall = 1 }}\n\
         servers = [ {{ name = \"w1\", addr = \"{}\" }}, {{ name = \"w2\", addr = \"{}\" }} ]\n\
         [[group]]\nname = \"pool\"\nscheduler = \"rr\"\n\
         servers = [ {{ name = \"p1\", addr = \"{}\" }}, {{ name = \"p2\", addr = \"{}\" }} ]\n\
         [[group]]\nname = \"src\"\nscheduler = \"rr\"\npersistence = {{ mode = \"source\" }}\n\
         servers = [ {{ name = \"q1\", addr = \"{}\" }}, {{ name = \"q2\", addr = \"{}\" }} ]\n",
        rules.display(),
        w1.addr(),
        w2.addr(),
        p1.addr(),
        p2.addr(),
        p1.addr(),
        p2.addr()
    );
    std::fs::write(&path, text).unwrap();
    let mut switch = Switch::start(&path, None);

    // w2 goes down, and comes back: with rise = 100 (10 s of passing checks) it stays down in this process.
    let w2_addr = w2.addr();
    w2.kill();
    let deadline = Instant::now() + Duration::from_secs(10);
    while health_of(&switch, "w2") != "down" {
        assert!(Instant::now() < deadline, "w2 never went down");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _w2_again = rt.block_on(testkit::Origin::start_on("w2", w2_addr)).unwrap();
    std::thread::sleep(Duration::from_millis(300)); // checks pass now; w2 stays down
    assert_eq!(health_of(&switch, "w2"), "down");

    let ips: Vec<String> = (2..10).map(|i| format!("127.0.0.{i}")).collect();
    let before: Vec<String> = ips.iter().map(|ip| origin_for(switch.web, ip, "/sticky")).collect();
    assert!(before.contains(&"p1".to_string()) && before.contains(&"p2".to_string()), "{before:?}");
    // The `src` group's persistence by source address (its own stick table), from other
    // addresses (a STICKY_IP entry would win over it).
    let src_ips: Vec<String> = (12..20).map(|i| format!("127.0.0.{i}")).collect();
    let by_source: Vec<String> = src_ips.iter().map(|ip| origin_for(switch.web, ip, "/source")).collect();
    assert!(by_source.contains(&"p1".to_string()) && by_source.contains(&"p2".to_string()), "{by_source:?}");
    let requests_before = ctl_json(&switch, &["status"])["counters"]["requests"].as_u64().unwrap();
    // Admin edits that are not in the file.
    ctl_json(&switch, &["weight", "web/w1", "7"]);
    ctl_json(&switch, &["maint", "web/w1"]);
    ctl_json(&switch, &["add", "pool", "p3", &w1.addr().to_string()]);

    switch.upgrade().unwrap();
    assert!(switch.first_exits().success());
    assert_eq!(
        health_of(&switch, "w2"),
        "down",
        "the verdict moved: a check that passes once does not make it up"
    );
    for (ip, was) in ips.iter().zip(&before).rev() {
        assert_eq!(&origin_for(switch.web, ip, "/sticky"), was, "{ip} keeps its server");
    }
    for (ip, was) in src_ips.iter().zip(&by_source).rev() {
        assert_eq!(&origin_for(switch.web, ip, "/source"), was, "{ip} keeps its persistence entry");
    }
    let requests_after = ctl_json(&switch, &["status"])["counters"]["requests"].as_u64().unwrap();
    let servers = ctl_json(&switch, &["servers"]);
    let server = |name: &str| servers.as_array().unwrap().iter().find(|s| s["name"] == name).cloned();
    let w1_now = server("w1").unwrap();
    assert_eq!((&w1_now["weight"], &w1_now["state"]), (&serde_json::json!(7), &serde_json::json!("maint")));
    assert_eq!(server("p3").expect("the added server is still there")["group"], "pool");
    assert!(
        requests_after >= requests_before + 8,
        "counters carried over: {requests_before} then {requests_after}"
    );
}

#[test]
fn sigusr2_upgrades_too() {
    let (_rt, s1) = origin();
    let dir = tempdir("upgrade-usr2");
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, config(&s1)).unwrap();
    let mut switch = Switch::start(&path, None);
    let mut idle = idle_clients(switch.web, 3);
    let status = std::process::Command::new("kill").arg("-USR2").arg(switch.first.id().to_string()).status();
    assert!(status.unwrap().success());
    let done = wait_for(&switch.log, "upgrade done; this process exits");
    let pid = done.split_whitespace().find_map(|w| w.strip_prefix("new_pid=")).unwrap();
    switch.pids.push(pid.parse().unwrap());
    assert!(switch.first_exits().success());
    for client in &mut idle {
        request(client, false).unwrap();
    }
    request(&mut connect(switch.web).unwrap(), true).unwrap();
}
