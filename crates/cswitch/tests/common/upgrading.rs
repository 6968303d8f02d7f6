//! A switch under a binary upgrade, for the tests that need more than one listener's
//! plain round trips: a keep-alive origin with a slow path (so a request can be in flight
//! in the old process), requests on a client socket, the switch started by the test and
//! every process an upgrade starts (stopped when dropped), fields of its log.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use super::{cswitch, log_lines, tempdir, wait_for};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// How long the origin takes to answer `/slow`: the old process drains that long.
pub const SLOW: Duration = Duration::from_millis(1500);

/// An HTTP/1.1 origin (keep-alive): `/slow` is answered after [`SLOW`], anything else at
/// once; the body names the path.
pub fn origin() -> SocketAddr {
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
pub fn get<S: Read + Write>(stream: &mut S, path: &str) -> std::io::Result<String> {
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

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// The switch the test started (killed when dropped, with any process an upgrade started).
pub struct Switch {
    pub first: Child,
    pub log: Receiver<String>,
    pub admin: SocketAddr,
    pub web: SocketAddr,
    /// Every listener, by name.
    pub listeners: Vec<(String, SocketAddr)>,
    /// The directory of its config (certificates go there).
    pub dir: PathBuf,
    pub others: Vec<u32>,
}

impl Switch {
    /// Starts a switch whose listener `web` goes to a slow-path [`origin`], with `more`
    /// (listeners of the same group, certificates from [`Switch::dir_for`]) in its config;
    /// `binary`: what an upgrade starts instead of the binary itself.
    pub fn start(tag: &str, more: &str, binary: Option<&Path>) -> Switch {
        let dir = Switch::dir_for(tag);
        let path = dir.join("cswitch.toml");
        let config = format!(
            "[global]\nworkers = 2\ngrace_period = \"10s\"\n[access_log]\nenabled = false\n\
             [admin]\nbind = \"127.0.0.1:0\"\n\
             [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n{more}\n\
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
        let mut listeners = Vec::new();
        let admin = loop {
            let line = wait_for(&log, "addr=");
            let addr = field(&line, "addr").parse().unwrap();
            if line.contains("admin listener") {
                break addr; // logged after every listener
            }
            if line.contains("listening") {
                listeners.push((field(&line, "listener"), addr));
            }
        };
        let web = listeners.iter().find(|(n, _)| n == "web").unwrap().1;
        Switch { first, log, admin, web, listeners, dir, others: Vec::new() }
    }

    /// The directory a switch started with `tag` runs from (made if missing).
    pub fn dir_for(tag: &str) -> PathBuf {
        tempdir(tag)
    }

    /// The address of listener `name`.
    pub fn addr(&self, name: &str) -> SocketAddr {
        self.listeners.iter().find(|(n, _)| n == name).unwrap().1
    }

    /// `cswitch ctl --json upgrade` on a thread: its output once it returns.
    pub fn upgrade_in_background(&self) -> std::thread::JoinHandle<Output> {
        let admin = self.admin.to_string();
        std::thread::spawn(move || {
            cswitch().args(["ctl", "--addr", &admin, "--json", "upgrade"]).output().unwrap()
        })
    }

    /// `cswitch ctl --json upgrade --status`: where an upgrade is, as the process that
    /// answers on the admin address sees it.
    pub fn upgrade_status(&self) -> serde_json::Value {
        let out = cswitch()
            .args(["ctl", "--addr", &self.admin.to_string(), "--json", "upgrade", "--status"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The PID of the process the upgrade started, from the old process's log.
    pub fn new_pid(&mut self) -> u32 {
        let pid = field(&wait_for(&self.log, "upgrade: new process started"), "pid").parse().unwrap();
        self.others.push(pid);
        pid
    }

    pub fn signal(&self, sig: &str) {
        assert!(std::process::Command::new("kill")
            .args([sig, &self.first.id().to_string()])
            .status()
            .unwrap()
            .success());
    }

    /// Waits (at most `limit`) for the first process to exit.
    pub fn first_exits_within(&mut self, limit: Duration) {
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
pub fn field(line: &str, name: &str) -> String {
    let prefix = format!("{name}=");
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("{line}"))
        .to_string()
}

pub fn alive(pid: u32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}
