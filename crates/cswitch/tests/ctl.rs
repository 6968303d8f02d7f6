//! `cswitch ctl` against a real `cswitch run` process: tables, `--json`, edits, reload,
//! explain, the token from each of its sources, and errors that exit 1 with the API's
//! message.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{cswitch, tempdir, Running};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Output;

const TOKEN: &str = "ctl-test-token-0123456789";

fn config(origins: &[&testkit::Origin]) -> String {
    let servers: Vec<String> =
        origins.iter().map(|o| format!("{{ name = \"{}\", addr = \"{}\" }}", o.name(), o.addr())).collect();
    format!(
        "[global]\nworkers = 1\ngrace_period = \"1s\"\n[access_log]\nenabled = false\n\
         [admin]\nbind = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
         [[group]]\nname = \"web\"\nscheduler = \"rr\"\nservers = [ {} ]\n",
        servers.join(", ")
    )
}

/// A running switch and the addresses its log names.
struct Switch {
    run: Running,
    admin: SocketAddr,
    web: SocketAddr,
}

/// Starts `cswitch run` and reads the listener's and the admin listener's addresses from
/// its log (both bind port 0).
fn start(path: &Path) -> Switch {
    let run = Running::start(path);
    let web = addr_in(&run.wait_for("listening"));
    let admin = addr_in(&run.wait_for("admin listener"));
    Switch { run, admin, web }
}

/// The `addr=IP:PORT` field of a log line.
fn addr_in(line: &str) -> SocketAddr {
    let field = line.split_whitespace().find_map(|w| w.strip_prefix("addr=")).unwrap();
    field.parse().unwrap_or_else(|_| panic!("{line}"))
}

/// `cswitch ctl --addr ADMIN args…` with the token in the environment.
fn ctl(run: &Switch, args: &[&str]) -> Output {
    cswitch()
        .arg("ctl")
        .arg("--addr")
        .arg(run.admin.to_string())
        .args(args)
        .env("CSWITCH_ADMIN_TOKEN", TOKEN)
        .output()
        .unwrap()
}

/// As [`ctl`], expecting success; its stdout.
fn ok(run: &Switch, args: &[&str]) -> String {
    let out = ctl(run, args);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "ctl {args:?}: {stdout}{stderr}");
    stdout.into_owned()
}

/// As [`ctl`], expecting exit code 1; its stderr.
fn fails(run: &Switch, args: &[&str]) -> String {
    let out = ctl(run, args);
    assert_eq!(out.status.code(), Some(1), "ctl {args:?}: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn server_json(run: &Switch, name: &str) -> serde_json::Value {
    let all: serde_json::Value = serde_json::from_str(&ok(run, &["--json", "servers"])).unwrap();
    all.as_array().unwrap().iter().find(|s| s["name"] == name).cloned().unwrap()
}

#[test]
fn ctl_reads_and_edits_a_running_switch() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (s1, s2, s3) = rt.block_on(async {
        (
            testkit::Origin::start("s1").await,
            testkit::Origin::start("s2").await,
            testkit::Origin::start("s3").await,
        )
    });
    let dir = tempdir("edits");
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, config(&[&s1, &s2])).unwrap();
    let run = start(&path);
    rt.block_on(async { testkit::get(run.web, "/").await.unwrap() });

    let status = ok(&run, &["status"]);
    assert!(status.contains("config generation 0"), "{status}");
    assert!(status.contains(&format!("web       {}", run.web)), "{status}");

    let table = ok(&run, &["servers"]);
    let header = table.lines().next().unwrap();
    assert!(header.starts_with("GROUP  SERVER  ADDR"), "{table}");
    assert!(header.ends_with("P99") && header.contains("EFF") && header.contains("2xx"), "{table}");
    assert!(
        table.lines().any(|l| l.starts_with("web    s1      ") && l.contains(&s1.addr().to_string())),
        "{table}"
    );
    assert_eq!(table.lines().count(), 3, "{table}");

    let json: serde_json::Value = serde_json::from_str(&ok(&run, &["--json", "servers"])).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 2);

    let weight = ok(&run, &["weight", "web/s1", "4"]);
    assert!(weight.contains("applied: config generation 1"), "{weight}");
    assert!(weight.contains("server `s1` of group `web` changed: weight 1 → 4"), "{weight}");
    let drain = ok(&run, &["drain", "web/s2"]);
    assert!(drain.contains("state ready → drain"), "{drain}");
    assert_eq!(server_json(&run, "s2")["state"], "drain");
    assert!(ok(&run, &["ready", "web/s2"]).contains("state drain → ready"));
    assert!(ok(&run, &["maint", "web/s2"]).contains("state ready → maint"));

    let add = ok(&run, &["add", "web", "s3", &s3.addr().to_string(), "--weight", "2", "--maxconn", "5"]);
    assert!(add.contains("server `s3`"), "{add}");
    assert_eq!(server_json(&run, "s3")["maxconn"], 5);
    let remove = ok(&run, &["remove", "web/s3"]);
    assert!(remove.starts_with("draining web/s3: removed once idle, at most 5m00s from now"), "{remove}");

    // The file again: the admin edits are replaced by its content.
    let reload = ok(&run, &["reload"]);
    assert!(reload.contains("applied: config generation"), "{reload}");
    assert!(reload.contains("weight 4 → 1"), "{reload}");
    assert_eq!(server_json(&run, "s1")["weight"], 1);

    let request = dir.join("req.http");
    std::fs::write(&request, "GET /index.html HTTP/1.1\nHost: shop\n\n").unwrap();
    let explain = ok(&run, &["explain", "--request", request.to_str().unwrap(), "--src", "10.1.2.3:4000"]);
    assert!(explain.contains("decision: no rules: default group web"), "{explain}");
    assert!(explain.contains("server: s1"), "{explain}");
}

#[test]
fn ctl_errors_exit_1_with_the_apis_message() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let s1 = rt.block_on(testkit::Origin::start("s1"));
    let dir = tempdir("errors");
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, config(&[&s1])).unwrap();
    let run = start(&path);

    let missing = fails(&run, &["weight", "web/zz", "2"]);
    assert!(missing.contains("404: group `web` has no server `zz`"), "{missing}");
    let last = fails(&run, &["remove", "web/s1"]);
    assert!(last.contains("400: `s1` is the last server of group `web`"), "{last}");
    let form = fails(&run, &["drain", "s1"]);
    assert!(form.contains("name a server as GROUP/SERVER"), "{form}");
    std::fs::write(&path, "[[listener]]\nname = 1\n").unwrap();
    let broken = fails(&run, &["reload"]);
    assert!(broken.contains("400:") && broken.contains("cswitch.toml:"), "{broken}");
    // The switch's own log says it too, at ERROR, with the cause.
    let logged = run.run.wait_for("reload refused");
    assert!(logged.contains("ERROR") && logged.contains("POST /api/reload"), "{logged}");
    assert!(ok(&run, &["status"]).contains("config generation 0"), "nothing changed");

    // The token: none → 401 with a hint; --token and --token-file work.
    let admin = run.admin.to_string();
    let out = cswitch().args(["ctl", "--addr", &admin, "status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("401: missing or wrong admin token (give --token"), "{err}");
    let out = cswitch().args(["ctl", "--addr", &admin, "--token", TOKEN, "status"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
    let file = dir.join("token");
    let out =
        cswitch().args(["ctl", "--addr", &admin, "--token-file"]).arg(&file).arg("status").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Nothing listening.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let out = cswitch().args(["ctl", "--addr", &closed, "status"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach the admin listener"));
}
