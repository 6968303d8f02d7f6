//! `inspect`: what a config names outside itself (rule files, certificates, the access log),
//! each with the place naming it — also from a file with errors, so `cswitch check` can
//! report on those files in the same run as on the config.
#![allow(clippy::unwrap_used)] // in tests a panic is the failure report

use cswitch_config::{inspect, inspect_text, Place, Refs};
use std::path::{Path, PathBuf};

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cswitch-config-inspect-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[track_caller]
fn assert_place(place: &Place, line: usize, col: usize, key: &str) {
    assert_eq!((place.line, place.col, place.key.as_str()), (line, col, key), "{place:?}");
}

#[test]
fn refs_carry_the_resolved_path_and_the_place_of_each_value() {
    let d = dir("valid");
    std::fs::write(d.join("site.pem"), "-----BEGIN CERTIFICATE-----\n").unwrap();
    std::fs::write(d.join("site.key"), "-----BEGIN PRIVATE KEY-----\n").unwrap();
    let text = r#"[access_log]
path = "logs/access.log"

[[listener]]
name = "web"
bind = "127.0.0.1:8443"
default_group = "web"
rules = "web.rules"
xml_form_field = "xml"
tls = { cert = "site.pem", key = "site.key" }

[[group]]
name = "web"
servers = [{ name = "s1", addr = "127.0.0.1:9001" }]
"#;
    let path = d.join("c.toml");
    let inspection = inspect_text(text, &path);
    let config = inspection.config.unwrap();
    let refs = inspection.refs;
    assert_eq!(refs.groups, ["web"]);

    let log = refs.access_log.unwrap();
    assert_eq!(log.path, d.join("logs/access.log"));
    assert_eq!(Some(&log.path), config.access_log.path.as_ref());
    assert_place(&log.place, 2, 8, "access_log.path");
    assert_eq!(log.place.source_line, "path = \"logs/access.log\"");
    assert_eq!(log.place.file, path);

    let [rules] = &refs.rules[..] else { panic!("{:?}", refs.rules) };
    assert_eq!(rules.listener.as_deref(), Some("web"));
    assert_eq!(rules.file.path, d.join("web.rules"));
    assert_eq!(rules.xml_form_field.as_deref(), Some("xml"));
    assert_place(&rules.file.place, 8, 9, "listener[0].rules");

    let [tls] = &refs.tls[..] else { panic!("{:?}", refs.tls) };
    assert_eq!(Some(vec![tls.pair()]), config.listeners[0].tls);
    assert_place(&tls.cert.place, 10, 16, "listener[0].tls.cert");
    assert_place(&tls.key.place, 10, 34, "listener[0].tls.key");

    let diag = tls.key.place.error("no match", Some("fix it".into()));
    assert_eq!((diag.line, diag.col, diag.key.as_str()), (10, 34, "listener[0].tls.key"));
    assert!(diag.to_string().starts_with(&format!("{}:10:34: error: no match\n", path.display())));
}

#[test]
fn a_file_with_errors_still_gives_what_could_be_read() {
    let d = dir("errors");
    std::fs::write(d.join("a.pem"), "-----BEGIN CERTIFICATE-----\n").unwrap();
    std::fs::write(d.join("a.key"), "-----BEGIN EC PRIVATE KEY-----\n").unwrap();
    let text = r#"[[listener]]
name = "web"
bind = "127.0.0.1:8080"
default_group = "nowhere"
rules = "web.rules"
schedular = "wlc"

[[listener]]
name = "mail"
protocol = "smtp"
bind = "127.0.0.1:2525"
default_group = "web"
tls = [{ cert = "a.pem", key = "a.key" }, { cert = "missing.pem", key = "a.key" }]

[[group]]
name = "web"
servers = [{ name = "s1", addr = "127.0.0.1:9001" }]

[[group]]
name = "bad name"
servers = [{ name = "s1", addr = "127.0.0.1:9001" }]

[[group]]
name = "static"
servers = []
"#;
    let inspection = inspect_text(text, &d.join("c.toml"));
    let errors = inspection.config.unwrap_err();
    assert_eq!(errors.0.len(), 5, "{errors}");
    let refs = inspection.refs;
    // Only valid group names: rule files may route to these.
    assert_eq!(refs.groups, ["web", "static"]);
    let [rules] = &refs.rules[..] else { panic!("{:?}", refs.rules) };
    assert_place(&rules.file.place, 5, 9, "listener[0].rules");
    // The good pair of the mail listener; the unreadable one is a config error already.
    let [tls] = &refs.tls[..] else { panic!("{:?}", refs.tls) };
    assert_eq!(tls.listener.as_deref(), Some("mail"));
    assert_eq!(tls.cert.path, d.join("a.pem"));
    assert_eq!(refs.access_log, None);
}

#[test]
fn unreadable_or_unparsable_files_name_nothing() {
    let missing = Path::new("/nonexistent/cswitch.toml");
    let inspection = inspect(missing);
    assert_eq!(inspection.refs, Refs::default());
    assert_eq!(inspection.config.unwrap_err().0[0].line, 0);
    let inspection = inspect_text("[[listener]\nrules = \"x\"\n", Path::new("c.toml"));
    assert_eq!(inspection.refs, Refs::default());
    assert!(inspection.config.is_err());
}
