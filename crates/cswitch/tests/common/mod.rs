//! Helpers for tests that run the `cswitch` binary: the command, temp dirs, and a child
//! whose log is read on a thread (so waits time out) and which is killed when dropped
//! (so a failed assertion leaves no process behind).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![allow(dead_code)] // each test file uses part of this

pub mod counting;
pub mod load;
pub mod tls12;
pub mod upgrading;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// The binary under test (without an admin token from the environment).
pub fn cswitch() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cswitch"));
    c.env_remove("CSWITCH_ADMIN_TOKEN");
    c
}

/// A fresh directory under the temp dir, unique per test tag and process.
pub fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cswitch-test-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A `cswitch run --config PATH` child, killed when dropped.
pub struct Running {
    pub child: Child,
    pub log: Receiver<String>,
}

impl Running {
    /// Starts the switch with the config at `path`.
    pub fn start(path: &Path) -> Running {
        let mut child = cswitch().args(["run", "--config"]).arg(path).stderr(Stdio::piped()).spawn().unwrap();
        let log = log_lines(child.stderr.take().unwrap());
        Running { child, log }
    }

    /// Waits (at most 10 s) for a log line containing `needle`.
    pub fn wait_for(&self, needle: &str) -> String {
        wait_for(&self.log, needle)
    }

    /// Sends a signal (`-HUP`, `-TERM`) to the child.
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill").arg(sig).arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success());
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits (at most 10 s) for a line of `log` containing `needle`.
pub fn wait_for(log: &Receiver<String>, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match log.recv_timeout(left) {
            Ok(line) if line.contains(needle) => return line,
            Ok(line) => seen.push(line),
            Err(_) => panic!("no '{needle}' in the log within 10 s; saw:\n{}", seen.join("\n")),
        }
    }
}

/// The child's stderr, line by line, read on a thread so the pipe never fills and waits
/// can time out.
pub fn log_lines(stderr: std::process::ChildStderr) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}
