//! Binary upgrades (issue 16) that go wrong late, through the running binary: a new process
//! that crashes (SIGKILL) after it said it serves, while the old one still drains, is
//! replaced by the old one (it accepts again, keeps its connections, answers the admin API,
//! and a later upgrade works); SIGTERM to the old process while the new one starts
//! abandons the upgrade (the new process is ended, the old one stops); SIGTERM to the old
//! process while it drains lets its last request finish and leaves the new one serving.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::upgrading::{alive, connect, get, Switch};
use common::{tempdir, wait_for};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

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
    let mut switch = Switch::start("upgrade-crash", "", None);
    let slow = slow_request(switch.web);
    std::thread::sleep(Duration::from_millis(100)); // the request reached the origin
    let upgrade = switch.upgrade_in_background();
    let pid = switch.new_pid();
    wait_for(&switch.log, "the new process serves; handing connections over");
    // The admin address is the new process's now: it says it is taking over.
    let status = switch.upgrade_status();
    assert!(status["taking_over"]["adopted_so_far"].is_u64(), "{status}");
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
    // Its admin API answers again, with how the upgrade ended.
    let status = switch.upgrade_status();
    assert!(status["running"].is_null(), "{status}");
    assert_eq!(status["last"]["status"], 500, "{status}");
    assert!(status["last"]["failed"].as_str().unwrap().contains("died"), "{status}");

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
    let mut switch = Switch::start("upgrade-sigterm-start-switch", "", Some(&hanging));
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
    let mut switch = Switch::start("upgrade-sigterm-drain", "", None);
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
