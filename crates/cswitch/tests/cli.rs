//! The binary as an operator runs it: `check` on good and bad files, and `run` with SIGHUP
//! reloads (valid and invalid) and SIGTERM.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{cswitch, tempdir, Running};
use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// `cswitch check FILE` works as `cswitch check --config FILE` does; giving neither, or
/// both, is a usage error.
#[test]
fn check_takes_the_config_path_as_an_argument_too() {
    let example = workspace_file("examples/cswitch.toml");
    let out = cswitch().arg("check").arg(&example).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bad = tempdir("check-positional").join("bad.toml");
    std::fs::write(&bad, "[global]\nworkers = \"two\"\n").unwrap();
    let out = cswitch().arg("check").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad.toml:2:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(cswitch().arg("check").output().unwrap().status.code(), Some(2), "no config: usage error");
    let both = cswitch().args(["check", "--config"]).arg(&example).arg(&example).output().unwrap();
    assert_eq!(both.status.code(), Some(2), "both: usage error");
}

#[test]
fn check_accepts_the_demo_config_and_its_rules() {
    let out =
        cswitch().args(["check", "--config"]).arg(workspace_file("examples/demo.toml")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
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

#[test]
fn run_reloads_on_sighup_and_stops_on_sigterm() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (a, b) =
        rt.block_on(async { (testkit::Origin::start("a").await, testkit::Origin::start("b").await) });
    let dir = tempdir("run");
    let path = dir.join("cswitch.toml");
    let port = free_port();
    std::fs::write(&path, config(port, a.addr(), "a")).unwrap();
    let mut run = Running::start(&path);
    run.wait_for("listening");
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let origin_of = |rt: &tokio::runtime::Runtime| {
        let r = rt.block_on(testkit::get(addr, "/")).unwrap();
        r.header("X-Origin").unwrap().to_string()
    };
    assert_eq!(origin_of(&rt), "a");

    // An invalid file changes nothing and says why.
    std::fs::write(&path, "[[listener]]\nname = 1\n").unwrap();
    run.signal("-HUP");
    let refused = run.wait_for("reload refused");
    assert!(refused.contains("config unchanged"), "{refused}");
    assert_eq!(origin_of(&rt), "a");

    // A valid one switches new requests to b.
    std::fs::write(&path, config(port, b.addr(), "b")).unwrap();
    run.signal("-HUP");
    run.wait_for("config reloaded");
    assert_eq!(origin_of(&rt), "b");

    run.signal("-TERM");
    let status = run.child.wait().unwrap();
    assert!(status.success(), "exit status {status}");
}

fn rules_fixture(tag: &str, rules: &str) -> PathBuf {
    let dir = tempdir(tag);
    std::fs::write(dir.join("web.rules"), rules).unwrap();
    std::fs::write(
        dir.join("cswitch.toml"),
        "[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8080\"\ndefault_group = \"web\"\nrules = \"web.rules\"\n\
         [[group]]\nname = \"web\"\nservers = [ { name = \"s1\", addr = \"127.0.0.1:9001\" } ]\n\
         [[group]]\nname = \"hsServers\"\nscheduler = \"wrr\"\nservers = [ { name = \"h1\", addr = \"127.0.0.1:9101\", weight = 1 }, { name = \"h2\", addr = \"127.0.0.1:9102\", weight = 3 } ]\n\
         [[group]]\nname = \"defaultServers\"\nservers = [ { name = \"d1\", addr = \"127.0.0.1:9201\" } ]\n",
    )
    .unwrap();
    dir
}

#[test]
fn check_reports_the_papers_misspelled_action() {
    let dir = rules_fixture(
        "routto",
        "R6: if (xml.purchase/totalAmount > 5000) { routeTo(hsServers, NONSTICKY); } else { routTo(defaultServers, NONSTICKY); }\n",
    );
    let out = cswitch().args(["check", "--config"]).arg(dir.join("cswitch.toml")).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("web.rules:1:84: error: unknown action 'routTo' — did you mean 'routeTo'?"),
        "{err}"
    );
    assert!(err.contains('^'), "a caret line: {err}");
}

#[test]
fn explain_shows_the_rules_tried_and_the_server() {
    let dir = rules_fixture(
        "explain",
        "R5: if (match(url, \"xmlprocess.pl\")) { goto R6; }\n\
         R6: if (xml.purchase/totalAmount > 5000) { routeTo(hsServers, NONSTICKY); } else { routeTo(defaultServers, NONSTICKY); }\n",
    );
    let body = "<purchase><totalAmount>7000</totalAmount></purchase>";
    let raw = format!(
        "POST /cgi/xmlprocess.pl HTTP/1.1\nHost: shop\nContent-Type: text/xml\nContent-Length: {}\n\n{body}",
        body.len()
    );
    std::fs::write(dir.join("req.http"), raw).unwrap();
    let out = cswitch()
        .args(["explain", "--config"])
        .arg(dir.join("cswitch.toml"))
        .arg("--request")
        .arg(dir.join("req.http"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("R5") && text.contains("R6"), "{text}");
    assert!(text.contains("7000"), "the value the condition saw: {text}");
    assert!(text.contains("decision: rule R6 routes to group hsServers"), "{text}");
    assert!(text.contains("server: h2"), "wrr picks the heavier server first: {text}");
}

#[test]
fn explain_shows_json_values_and_why_a_json_path_is_absent() {
    let dir = rules_fixture(
        "explain-json",
        "R6: if (json.purchase.total > 5000 || exists(json[\"gift note\"])) { routeTo(hsServers, NONSTICKY); }\n",
    );
    let cases = [
        ("application/json", r#"{"purchase": {"total": 7000}}"#, "[json.purchase.total = \"7000\"]"),
        ("text/plain", r#"{"purchase": {"total": 7000}}"#, "json.purchase.total absent (not a JSON body"),
        (
            "application/json",
            r#"{"purchase": {"total" 7000}}"#,
            "absent (the body is not valid JSON at byte 22)",
        ),
    ];
    for (content_type, body, want) in cases {
        let raw = format!(
            "POST /buy HTTP/1.1\nHost: shop\nContent-Type: {content_type}\nContent-Length: {}\n\n{body}",
            body.len()
        );
        std::fs::write(dir.join("req.http"), raw).unwrap();
        let out = cswitch()
            .args(["explain", "--config"])
            .arg(dir.join("cswitch.toml"))
            .arg("--request")
            .arg(dir.join("req.http"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains(want), "{content_type} {body}: {text}");
    }
}

#[test]
fn a_changed_rule_file_is_reloaded_without_a_signal() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (a, b) =
        rt.block_on(async { (testkit::Origin::start("a").await, testkit::Origin::start("b").await) });
    let dir = tempdir("watch");
    let port = free_port();
    std::fs::write(dir.join("web.rules"), "A: if (prefix(path, \"/\")) { routeTo(ga); }\n").unwrap();
    let text = format!(
        "[global]\nworkers = 1\ngrace_period = \"1s\"\n[access_log]\nenabled = false\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:{port}\"\ndefault_group = \"ga\"\nrules = \"web.rules\"\n\
         [[group]]\nname = \"ga\"\nservers = [ {{ name = \"a\", addr = \"{}\" }} ]\n\
         [[group]]\nname = \"gb\"\nservers = [ {{ name = \"b\", addr = \"{}\" }} ]\n",
        a.addr(),
        b.addr()
    );
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, text).unwrap();
    let mut run = Running::start(&path);
    run.wait_for("listening");
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let origin = |rt: &tokio::runtime::Runtime| {
        rt.block_on(testkit::get(addr, "/")).unwrap().header("X-Origin").unwrap().to_string()
    };
    assert_eq!(origin(&rt), "a");
    // mtime resolution: make sure the new file's time differs.
    std::thread::sleep(Duration::from_millis(1100));
    std::fs::write(dir.join("web.rules"), "B: if (prefix(path, \"/\")) { routeTo(gb); }\n").unwrap();
    // Only the rule file changed: the log says how its rules did, and why it reloaded.
    let rules = run.wait_for("rules changed");
    assert!(rules.contains("added=[\"B\"]") && rules.contains("removed=[\"A\"]"), "{rules}");
    let reloaded = run.wait_for("config reloaded");
    assert!(reloaded.contains("file watch"), "{reloaded}");
    assert!(reloaded.contains("changes=0 rule_files_changed=1"), "{reloaded}");
    assert_eq!(origin(&rt), "b");
    // A kept label with another condition is "changed"; the file is named.
    std::thread::sleep(Duration::from_millis(1100));
    let next =
        "B: if (prefix(path, \"/x\")) { routeTo(gb); }\nC: if (prefix(path, \"/\")) { routeTo(ga); }\n";
    std::fs::write(dir.join("web.rules"), next).unwrap();
    let rules = run.wait_for("rules changed");
    assert!(rules.contains("changed=[\"B\"]") && rules.contains("added=[\"C\"]"), "{rules}");
    assert!(rules.contains("removed=[]") && rules.contains("web.rules"), "{rules}");
    run.signal("-TERM");
    assert!(run.child.wait().unwrap().success());
}

#[test]
fn explain_feeds_the_hash_key_to_a_keyed_scheduler() {
    let dir = tempdir("explain-key");
    let servers: Vec<String> =
        (1..=8).map(|i| format!("{{ name = \"s{i}\", addr = \"127.0.0.1:{}\" }}", 9000 + i)).collect();
    let text = format!(
        "[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8080\"\ndefault_group = \"web\"\n\
         [[group]]\nname = \"web\"\nscheduler = \"consistent\"\nhash_key = \"header:X-User\"\nservers = [ {} ]\n",
        servers.join(", ")
    );
    std::fs::write(dir.join("cswitch.toml"), text).unwrap();
    let server_for = |user: &str| {
        std::fs::write(dir.join("req.http"), format!("GET /a HTTP/1.1\nHost: h\nX-User: {user}\n\n"))
            .unwrap();
        let out = cswitch()
            .args(["explain", "--config"])
            .arg(dir.join("cswitch.toml"))
            .arg("--request")
            .arg(dir.join("req.http"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(text.contains(&format!("hash key: {user}")), "{text}");
        text.lines().find(|l| l.starts_with("server: ")).unwrap().to_string()
    };
    // The same key always names the same server; keys differ in where they go.
    assert_eq!(server_for("alice"), server_for("alice"));
    let servers: std::collections::HashSet<String> =
        ["alice", "bob", "carol", "dave", "erin", "frank"].iter().map(|u| server_for(u)).collect();
    assert!(servers.len() > 1, "{servers:?}");
}

/// `cswitch demo` as a newcomer runs it: editing the rule file it names reloads it, and
/// Ctrl-C removes its temporary directory. (It binds the demo's fixed ports, 8080,
/// 9001–9003 and 9900; no other test uses them.)
#[test]
fn demo_reloads_its_rule_file_and_removes_its_directory() {
    use std::io::BufRead;
    let child = cswitch()
        .arg("demo")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Killed on drop if an assertion fails, so no demo outlives the test holding its ports.
    let mut run = Running { child, log: std::sync::mpsc::channel().1 };
    run.log = common::log_lines(run.child.stderr.take().unwrap());
    let mut stdout = std::io::BufReader::new(run.child.stdout.take().unwrap()).lines();
    let rules = loop {
        let line = stdout.next().expect("the banner names the rule file").unwrap();
        if let Some(rest) = line.trim().strip_prefix("They are in ") {
            break PathBuf::from(rest.split(" (").next().unwrap());
        }
    };
    let dir = rules.parent().unwrap().to_path_buf();
    assert!(rules.exists(), "{}", rules.display());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let addr: std::net::SocketAddr = "127.0.0.1:8080".parse().unwrap();
    assert_eq!(rt.block_on(testkit::get(addr, "/admin/")).unwrap().status, 403);

    let edited = std::fs::read_to_string(&rules).unwrap().replace("deny(403)", "deny(404)");
    assert!(edited.contains("deny(404)"));
    std::fs::write(&rules, edited).unwrap();
    run.wait_for("config reloaded");
    assert_eq!(rt.block_on(testkit::get(addr, "/admin/")).unwrap().status, 404);

    run.signal("-INT");
    assert!(run.child.wait().unwrap().success());
    assert!(!dir.exists(), "{} left behind", dir.display());
}
