//! The binary as an operator runs it: `check` on good and bad files, and `run` with SIGHUP
//! reloads (valid and invalid) and SIGTERM.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn cswitch() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cswitch"))
}

fn workspace_file(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel)
}

#[test]
fn check_accepts_the_commented_example() {
    let out =
        cswitch().args(["check", "--config"]).arg(workspace_file("examples/cswitch.toml")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains(": ok"));
}

#[test]
fn check_reports_every_error_with_position_and_hint() {
    let dir = tempdir("check");
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        "[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8080\"\ndefault_group = \"webb\"\n\n\
         [[group]]\nname = \"web\"\nschedular = \"wlc\"\nservers = [ { name = \"s1\", addr = \"127.0.0.1:9001\" } ]\n",
    )
    .unwrap();
    let out = cswitch().args(["check", "--config"]).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml:4:17: error: default_group `webb` names no [[group]]"), "{err}");
    assert!(err.contains("hint: did you mean `web`?"), "{err}");
    assert!(err.contains("bad.toml:8:1: error: unknown key `schedular`"), "{err}");
    assert!(err.contains("hint: did you mean `scheduler`?"), "{err}");
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cswitch-cli-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn config(listen_port: u16, origin: std::net::SocketAddr, name: &str) -> String {
    format!(
        "[global]\nworkers = 1\ngrace_period = \"3s\"\n[access_log]\nenabled = false\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:{listen_port}\"\ndefault_group = \"web\"\n\
         [[group]]\nname = \"web\"\nservers = [ {{ name = \"{name}\", addr = \"{origin}\" }} ]\n"
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill").args([sig, &child.id().to_string()]).status().unwrap();
    assert!(ok.success());
}

/// Waits until stderr shows a line containing `needle`.
fn wait_for_log(lines: &mut impl Iterator<Item = String>, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    for line in lines.by_ref() {
        if line.contains(needle) {
            return line;
        }
        assert!(Instant::now() < deadline, "no '{needle}' in the log");
    }
    panic!("log ended before '{needle}'");
}

#[test]
fn run_reloads_on_sighup_and_stops_on_sigterm() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (a, b) =
        rt.block_on(async { (testkit::Origin::start("a").await, testkit::Origin::start("b").await) });
    let dir = tempdir("run");
    let path = dir.join("cswitch.toml");
    let port = free_port();
    std::fs::write(&path, config(port, a.addr(), "a")).unwrap();
    let mut child = cswitch().args(["run", "--config"]).arg(&path).stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines().map_while(Result::ok);
    wait_for_log(&mut lines, "listening");
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let origin_of = |rt: &tokio::runtime::Runtime| {
        let r = rt.block_on(testkit::get(addr, "/")).unwrap();
        r.header("X-Origin").unwrap().to_string()
    };
    assert_eq!(origin_of(&rt), "a");

    // An invalid file changes nothing and says why.
    std::fs::write(&path, "[[listener]]\nname = 1\n").unwrap();
    signal(&child, "-HUP");
    let refused = wait_for_log(&mut lines, "reload refused");
    assert!(refused.contains("config unchanged"), "{refused}");
    assert_eq!(origin_of(&rt), "a");

    // A valid one switches new requests to b.
    std::fs::write(&path, config(port, b.addr(), "b")).unwrap();
    signal(&child, "-HUP");
    wait_for_log(&mut lines, "config reloaded");
    assert_eq!(origin_of(&rt), "b");

    signal(&child, "-TERM");
    let status = child.wait().unwrap();
    assert!(status.success(), "exit status {status}");
}
