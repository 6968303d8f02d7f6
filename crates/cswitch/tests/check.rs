//! `cswitch check` reports everything `cswitch run` would refuse, in one run: TLS pairs that
//! do not load, access logs that cannot be opened, rule files missing or not compiling —
//! each at the config value naming it — and the config's own errors beside them.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::{cswitch, tempdir};
use std::path::{Path, PathBuf};
use std::process::Output;

const GROUP: &str = "[[group]]\nname = \"web\"\nservers = [ { name = \"s1\", addr = \"127.0.0.1:9001\" } ]\n";

/// A self-signed certificate and its key, as `{name}.pem` and `{name}.key` in `dir`.
fn cert_files(dir: &Path, name: &str) {
    let made = rcgen::generate_simple_self_signed(vec![format!("{name}.example")]).unwrap();
    std::fs::write(dir.join(format!("{name}.pem")), made.cert.pem()).unwrap();
    std::fs::write(dir.join(format!("{name}.key")), made.signing_key.serialize_pem()).unwrap();
}

fn check(config: &Path) -> Output {
    cswitch().args(["check", "--config"]).arg(config).output().unwrap()
}

/// Writes `text` as `cswitch.toml` in a fresh directory; returns the config path.
fn config_file(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[track_caller]
fn refused(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    err
}

#[test]
fn a_key_that_does_not_match_its_certificate_is_reported_at_the_key() {
    let dir = tempdir("check-tls");
    cert_files(&dir, "a");
    cert_files(&dir, "b");
    let listener = "[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8443\"\ndefault_group = \"web\"\n";
    let path =
        config_file(&dir, &format!("{listener}tls = {{ cert = \"a.pem\", key = \"b.key\" }}\n{GROUP}"));
    let err = refused(&check(&path));
    let at = format!(
        "{}:5:31: error: the TLS certificate and key of listener `web` do not load: ",
        path.display()
    );
    assert!(err.contains(&at), "{err}");
    assert!(err.contains("does not match"), "the switch's reason: {err}");
    assert!(err.contains("  tls = { cert = \"a.pem\", key = \"b.key\" }\n"), "the source line: {err}");
    assert!(err.ends_with("1 error\n"), "{err}");

    // The matching pair passes, and so does every other pair of the same kind.
    std::fs::write(&path, format!("{listener}tls = {{ cert = \"b.pem\", key = \"b.key\" }}\n{GROUP}"))
        .unwrap();
    let out = check(&path);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // A certificate file with a PEM block that is not a certificate is reported at `cert`.
    std::fs::write(
        dir.join("bad.pem"),
        "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    std::fs::write(&path, format!("{listener}tls = {{ cert = \"bad.pem\", key = \"b.key\" }}\n{GROUP}"))
        .unwrap();
    let err = refused(&check(&path));
    assert!(err.contains(&format!("{}:5:16: error: the TLS certificate", path.display())), "{err}");
}

#[test]
fn an_access_log_in_a_missing_directory_is_reported_at_its_path() {
    let dir = tempdir("check-log");
    let path = config_file(
        &dir,
        &format!(
            "[access_log]\npath = \"no-such-dir/access.log\"\n\
             [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8080\"\ndefault_group = \"web\"\n{GROUP}"
        ),
    );
    let err = refused(&check(&path));
    let at = format!(
        "{}:2:8: error: cannot create the access log `{}`: its directory `{}` cannot be used: ",
        path.display(),
        dir.join("no-such-dir/access.log").display(),
        dir.join("no-such-dir").display()
    );
    assert!(err.contains(&at), "{err}");
    assert!(err.contains("hint: create the directory"), "{err}");
    assert!(!dir.join("no-such-dir").exists());
}

#[test]
fn an_access_log_is_opened_without_being_created_or_truncated() {
    let dir = tempdir("check-log-ok");
    let text = |log: &str| {
        format!(
            "[access_log]\nenabled = false\npath = \"{log}\"\n\
             [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8080\"\ndefault_group = \"web\"\n{GROUP}"
        )
    };
    // A file that does not exist yet, in a writable directory: fine, and still not there.
    let path = config_file(&dir, &text("new.log"));
    let out = check(&path);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!dir.join("new.log").exists(), "check created the log");
    // An existing log keeps its content.
    std::fs::write(dir.join("old.log"), "earlier record\n").unwrap();
    std::fs::write(&path, text("old.log")).unwrap();
    let out = check(&path);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(dir.join("old.log")).unwrap(), "earlier record\n");
    // A directory cannot be appended to (even with logging disabled, the switch opens it).
    std::fs::write(&path, text(".")).unwrap();
    let err = refused(&check(&path));
    assert!(err.contains(&format!("{}:3:8: error: cannot open the access log", path.display())), "{err}");
}

#[test]
fn config_errors_and_rule_errors_come_in_one_report() {
    let dir = tempdir("check-both");
    std::fs::write(dir.join("web.rules"), "Images: if (match(url, \"[.]gif$\")) { routTo(static); }\n")
        .unwrap();
    let path = config_file(
        &dir,
        "[[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8080\"\ndefault_group = \"web\"\nrules = \"web.rules\"\n\
         [[listener]]\nname = \"api\"\nbind = \"127.0.0.1:8081\"\ndefault_group = \"web\"\nrules = \"api.rules\"\n\
         [[group]]\nname = \"web\"\nschedular = \"wlc\"\nservers = [ { name = \"s1\", addr = \"127.0.0.1:9001\" } ]\n\
         [[group]]\nname = \"static\"\nservers = [ { name = \"s2\", addr = \"127.0.0.1:9002\" } ]\n",
    );
    let err = refused(&check(&path));
    // The config's own error…
    assert!(err.contains(&format!("{}:13:1: error: unknown key `schedular`", path.display())), "{err}");
    // …a rule file that is missing, at the `rules` value naming it…
    let missing = format!(
        "{}:10:9: error: cannot read rule file `{}`",
        path.display(),
        dir.join("api.rules").display()
    );
    assert!(err.contains(&missing), "{err}");
    // …and the compile error in the other rule file, which routes to a group the config defines.
    let rules = format!(
        "{}:1:38: error: unknown action 'routTo' — did you mean 'routeTo'?",
        dir.join("web.rules").display()
    );
    assert!(err.contains(&rules), "{err}");
    assert!(!err.contains("unknown group"), "groups come from the file even when it has errors: {err}");
    assert!(err.ends_with("3 errors\n"), "{err}");
}

/// One-way switching needs the host's cooperation: a missing interface (and, unless root, a
/// missing CAP_NET_ADMIN) is reported at `[oneway] interface`; `lo` as root passes.
#[test]
fn oneway_needs_are_checked_on_this_host() {
    let dir = tempdir("check-oneway");
    let text = |iface: &str| {
        format!(
            "[oneway]\ninterface = \"{iface}\"\ntoken = \"0123456789abcdef0123\"\n\
             [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:8080\"\ndefault_group = \"web\"\nmode = \"one-way\"\n\
             [[group]]\nname = \"web\"\nservers = [ {{ name = \"b1\", addr = \"127.0.0.1:9001\", agent = \"127.0.0.1:9000\", mac = \"02:00:00:00:00:11\" }} ]\n"
        )
    };
    let path = config_file(&dir, &text("csw-absent0"));
    let err = refused(&check(&path));
    let at = format!(
        "{}:2:13: error: one-way: interface `csw-absent0` does not exist on this host",
        path.display()
    );
    assert!(err.contains(&at), "{err}");
    assert!(err.contains("hint: name the interface client packets arrive on"), "{err}");
    std::fs::write(&path, text("lo")).unwrap();
    let out = check(&path);
    let root = std::env::var_os("CSWITCH_REQUIRE_KERNEL").is_some();
    if out.status.success() || root {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("lacks CAP_NET_ADMIN"), "{err}");
    }
}

/// The L4 tier needs `nft` and IPv4 forwarding: in a fresh network namespace (forwarding
/// off) `check` reports it at `[cluster.l4] vip`; with forwarding on, the node (no listener,
/// no group) passes.
#[test]
fn l4_tier_needs_are_checked_on_this_host() {
    if !testkit::netns::available() {
        return;
    }
    let dir = tempdir("check-l4");
    let path = config_file(
        &dir,
        "[cluster]\nnode = \"l4\"\nbind = \"127.0.0.1:7946\"\n\
         [cluster.l4]\nvip = \"192.0.2.10\"\nports = [80]\n",
    );
    let bed = testkit::netns::Testbed::new(&[("h", 5)]);
    let check_in_bed = || {
        let bin = env!("CARGO_BIN_EXE_cswitch");
        std::process::Command::new("ip")
            .args(["netns", "exec", &bed.ns("h"), bin, "check", "--config"])
            .arg(&path)
            .output()
            .unwrap()
    };
    let err = refused(&check_in_bed());
    let at = format!("{}:5:7: error: L4 tier: net.ipv4.ip_forward is not 1", path.display());
    assert!(err.contains(&at), "{err}");
    assert!(err.contains("hint: sysctl -w net.ipv4.ip_forward=1"), "{err}");
    bed.run("h", &["sysctl", "-qw", "net.ipv4.ip_forward=1"]);
    let out = check_in_bed();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok (0 listener(s), 0 group(s))"));
}
