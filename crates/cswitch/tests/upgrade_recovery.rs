//! Binary upgrades (issue 16) that go wrong late, through the running binary: a new process
//! that crashes (SIGKILL) after it said it serves, while the old one still drains, is
//! replaced by the old one (it accepts again, keeps its connections, answers the admin API,
//! and a later upgrade works); SIGTERM to the old process while the new one starts
//! abandons the upgrade (the new process is ended, the old one stops); SIGTERM to the old
//! process while it drains lets its last request finish and leaves the new one serving.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{cswitch, log_lines, tempdir, wait_for};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// How long the origin takes to answer `/slow`: the old process drains that long.
const SLOW: Duration = Duration::from_millis(1500);

/// An HTTP/1.1 origin (keep-alive): `/slow` is answered after [`SLOW`], anything else at
/// once; the body names the path.
fn origin() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut w = stream.try_clone().unwrap();
                let mut r = BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
                    while r.read_line(&mut line).is_ok_and(|n| n > 2) {
                        line.clear();
                    }
                    if path == "/slow" {
                        std::thread::sleep(SLOW);
                    }
                    let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{path}", path.len());
                    if w.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// One request for `path` on `stream`; the body, if answered 200.
fn get(stream: &mut TcpStream, path: &str) -> std::io::Result<String> {
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes())?;
    let mut got = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if got.len() >= end + 4 + length {
                if !head.starts_with("http/1.1 200") {
                    return Err(std::io::Error::other(head));
                }
                return Ok(String::from_utf8_lossy(&got[end + 4..end + 4 + length]).into_owned());
            }
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::Error::other("closed before the whole answer"));
        }
        got.extend_from_slice(&chunk[..n]);
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// The switch the test started (killed when dropped, with any process an upgrade started).
struct Switch {
    first: Child,
    log: Receiver<String>,
    admin: SocketAddr,
    web: SocketAddr,
    others: Vec<u32>,
}

impl Switch {
    fn start(tag: &str, binary: Option<&Path>) -> Switch {
        let dir = tempdir(tag);
        let path = dir.join("cswitch.toml");
        let config = format!(
            "[global]\nworkers = 2\ngrace_period = \"10s\"\n[access_log]\nenabled = false\n\
             [admin]\nbind = \"127.0.0.1:0\"\n\
             [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
             [[group]]\nname = \"web\"\nservers = [ {{ name = \"s1\", addr = \"{}\" }} ]\n",
            origin()
        );
        std::fs::write(&path, config).unwrap();
        let mut command = cswitch();
        command.args(["run", "--config"]).arg(&path).stderr(Stdio::piped());
        if let Some(binary) = binary {
            command.env("CSWITCH_UPGRADE_BINARY", binary);
        }
        let mut first = command.spawn().unwrap();
        let log = log_lines(first.stderr.take().unwrap());
        let web = field(&wait_for(&log, "listening"), "addr").parse().unwrap();
        let admin = field(&wait_for(&log, "admin listener"), "addr").parse().unwrap();
        Switch { first, log, admin, web, others: Vec::new() }
    }

    /// `cswitch ctl --json upgrade` on a thread: its output once it returns.
    fn upgrade_in_background(&self) -> std::thread::JoinHandle<Output> {
        let admin = self.admin.to_string();
        std::thread::spawn(move || {
            cswitch().args(["ctl", "--addr", &admin, "--json", "upgrade"]).output().unwrap()
        })
    }

    /// The PID of the process the upgrade started, from the old process's log.
    fn new_pid(&mut self) -> u32 {
        let pid = field(&wait_for(&self.log, "upgrade: new process started"), "pid").parse().unwrap();
        self.others.push(pid);
        pid
    }

    fn signal(&self, sig: &str) {
        assert!(std::process::Command::new("kill")
            .args([sig, &self.first.id().to_string()])
            .status()
            .unwrap()
            .success());
    }

    /// Waits (at most `limit`) for the first process to exit.
    fn first_exits_within(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.first.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the old process did not exit within {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        let _ = self.first.kill();
        let _ = self.first.wait();
        for pid in &self.others {
            let _ = std::process::Command::new("kill").arg(pid.to_string()).stderr(Stdio::null()).status();
        }
    }
}

/// The `NAME=VALUE` field of a log line.
fn field(line: &str, name: &str) -> String {
    let prefix = format!("{name}=");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("{line}"))
        .to_string()
}

fn alive(pid: u32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// A request in flight in the old process (answered after [`SLOW`]) on its own thread:
/// the body, and the socket for more.
fn slow_request(web: SocketAddr) -> std::thread::JoinHandle<(String, TcpStream)> {
    let mut stream = connect(web);
    get(&mut stream, "/warm").unwrap();
    std::thread::spawn(move || {
        let body = get(&mut stream, "/slow").unwrap();
        (body, stream)
    })
}

#[test]
fn a_new_process_that_crashes_while_the_old_one_drains_is_replaced_by_the_old_one() {
    let mut switch = Switch::start("upgrade-crash", None);
    let slow = slow_request(switch.web);
    std::thread::sleep(Duration::from_millis(100)); // the request reached the origin
    let upgrade = switch.upgrade_in_background();
    let pid = switch.new_pid();
    wait_for(&switch.log, "the new process serves; handing connections over");
    assert!(std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap().success());

    let out = upgrade.join().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the upgrade was reported done: {}", String::from_utf8_lossy(&out.stdout));
    assert!(said.contains("died") && said.contains("serves on"), "{said}");
    wait_for(&switch.log, "accepting again");
    // The request in flight is answered, and its connection stays with the old process.
    let (body, mut kept) = slow.join().unwrap();
    assert_eq!(body, "/slow");
    assert_eq!(get(&mut kept, "/again").unwrap(), "/again");
    // New connections are accepted again, by the old process.
    for i in 0..20 {
        assert_eq!(get(&mut connect(switch.web), &format!("/new{i}")).unwrap(), format!("/new{i}"));
    }
    assert!(switch.first.try_wait().unwrap().is_none(), "the old process exited");

    // A later upgrade works (the admin listener answers again; the hand-over starts anew).
    let out = switch.upgrade_in_background().join().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    switch.others.push(u32::try_from(report["new_pid"].as_u64().unwrap()).unwrap());
    assert!(report["moved"].as_u64() >= Some(1), "the kept connection moves: {report}");
    switch.first_exits_within(Duration::from_secs(10));
    assert_eq!(get(&mut kept, "/moved").unwrap(), "/moved");
}

#[test]
fn sigterm_while_the_new_process_starts_abandons_the_upgrade() {
    let dir = tempdir("upgrade-sigterm-start");
    let hanging = dir.join("hanging-binary");
    std::fs::write(&hanging, "#!/bin/sh\nsleep 30\n").unwrap();
    std::fs::set_permissions(&hanging, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut switch = Switch::start("upgrade-sigterm-start-switch", Some(&hanging));
    let upgrade = switch.upgrade_in_background();
    let pid = switch.new_pid();
    assert!(alive(pid));
    switch.signal("-TERM");
    switch.first_exits_within(Duration::from_secs(5));
    wait_for(&switch.log, "the upgrade is abandoned");
    assert!(!alive(pid), "the new process {pid} was left running");
    assert!(!upgrade.join().unwrap().status.success());
}

#[test]
fn sigterm_while_the_old_process_drains_finishes_its_request_and_leaves_the_new_one_serving() {
    let mut switch = Switch::start("upgrade-sigterm-drain", None);
    let slow = slow_request(switch.web);
    std::thread::sleep(Duration::from_millis(100));
    let upgrade = switch.upgrade_in_background();
    let pid = switch.new_pid();
    wait_for(&switch.log, "the new process serves; handing connections over");
    switch.signal("-TERM");
    let (body, _) = slow.join().unwrap();
    assert_eq!(body, "/slow", "the request in flight is answered");
    switch.first_exits_within(Duration::from_secs(5));
    let _ = upgrade.join().unwrap();
    assert!(alive(pid), "the new process stopped too");
    for i in 0..10 {
        assert_eq!(get(&mut connect(switch.web), &format!("/n{i}")).unwrap(), format!("/n{i}"));
    }
}
