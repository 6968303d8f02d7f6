use super::{diff, Change};
use crate::{parse, Config};
use balance::SchedulerKind;
use std::path::Path;

const BASE: &str = r#"
[[listener]]
name = "web"
bind = "127.0.0.1:8080"
default_group = "web"

[[group]]
name = "web"
scheduler = "wlc"
servers = [
  { name = "s1", addr = "127.0.0.1:9001", weight = 2 },
  { name = "s2", addr = "127.0.0.1:9002" },
]

[[group]]
name = "static"
servers = [{ name = "st1", addr = "127.0.0.1:9011" }]
"#;

fn config(text: &str) -> Config {
    match parse(text, Path::new("c.toml")) {
        Ok(config) => config,
        Err(e) => panic!("{e}"),
    }
}

/// The changes from BASE to BASE with `from` replaced by `to`, as log lines.
fn changes(from: &str, to: &str) -> Vec<String> {
    assert!(BASE.contains(from), "{from}");
    let new = config(&BASE.replace(from, to));
    diff(&config(BASE), &new).iter().map(ToString::to_string).collect()
}

#[test]
fn same_config_has_no_changes() {
    assert_eq!(diff(&config(BASE), &config(BASE)), vec![]);
    // Where the file is, and in what order entries are written, is not a change.
    let mut moved = config(BASE);
    moved.source = "elsewhere.toml".into();
    moved.groups.reverse();
    moved.groups[1].servers.reverse();
    assert_eq!(diff(&config(BASE), &moved), vec![]);
}

#[test]
fn sections_report_each_changed_field() {
    let got = changes("[[listener]]", "[global]\nworkers = 4\n[limits]\nretries = 0\nmax_queue = 5\n[timeouts]\nqueue = \"1m30s\"\n[access_log]\nformat = \"json\"\n[[listener]]");
    assert_eq!(
        got,
        [
            "[global] changed: workers 0 → 4",
            "[access_log] changed: format text → json",
            "[limits] changed: max_queue 100 → 5, retries 2 → 0",
            "[timeouts] changed: queue 5s → 90s",
        ]
    );
}

#[test]
fn listener_bind_change_needs_a_restart() {
    let old = config(BASE);
    let new = config(&BASE.replace("8080", "8081"));
    let changes = diff(&old, &new);
    assert_eq!(changes.len(), 1);
    assert!(changes[0].changes_bind());
    assert!(changes[0].needs_restart());
    assert_eq!(changes[0].to_string(), "listener `web` changed: bind 127.0.0.1:8080 → 127.0.0.1:8081");
}

#[test]
fn listener_other_change_is_applied_in_place() {
    let old = config(BASE);
    let new = config(
        &BASE.replace("default_group = \"web\"", "default_group = \"static\"\nx_forwarded_for = false"),
    );
    let changes = diff(&old, &new);
    assert_eq!(changes.len(), 1);
    assert!(!changes[0].needs_restart());
    assert_eq!(
        changes[0].to_string(),
        "listener `web` changed: default_group web → static, x_forwarded_for true → false"
    );
}

#[test]
fn workers_change_needs_a_restart_but_grace_period_does_not() {
    let old = config(BASE);
    let workers = diff(&old, &config(&format!("[global]\nworkers = 2\n{BASE}")));
    assert!(workers[0].needs_restart() && !workers[0].changes_bind());
    let grace = diff(&old, &config(&format!("[global]\ngrace_period = \"1s\"\n{BASE}")));
    assert!(!grace[0].needs_restart());
}

#[test]
fn listeners_added_and_removed_by_name() {
    let got = changes("name = \"web\"\nbind", "name = \"www\"\nbind");
    assert_eq!(got, ["listener `web` removed", "listener `www` added (127.0.0.1:8080)"]);
}

#[test]
fn groups_added_removed_and_scheduler_changed() {
    let old = config(BASE);
    let new = config(&BASE.replace("name = \"static\"", "name = \"images\"").replace("\"wlc\"", "\"rr\""));
    let changes = diff(&old, &new);
    assert_eq!(
        changes[0],
        Change::SchedulerChanged {
            group: "web".into(),
            old: SchedulerKind::WeightedLeastConnections,
            new: SchedulerKind::RoundRobin,
        }
    );
    assert_eq!(changes[1], Change::GroupRemoved(old.groups[1].clone()));
    assert_eq!(changes[2], Change::GroupAdded(new.groups[1].clone()));
    let shown: Vec<String> = changes.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "group `web` changed: scheduler wlc → rr",
            "group `static` removed",
            "group `images` added (1 server)",
        ]
    );
}

#[test]
fn servers_added_removed_and_changed() {
    let got = changes(
        "  { name = \"s1\", addr = \"127.0.0.1:9001\", weight = 2 },\n  { name = \"s2\", addr = \"127.0.0.1:9002\" },",
        "  { name = \"s1\", addr = \"127.0.0.1:9101\", weight = 3, maxconn = 10 },\n  { name = \"s3\", addr = \"127.0.0.1:9003\" },",
    );
    assert_eq!(
        got,
        [
            "server `s1` of group `web` changed: addr 127.0.0.1:9001 → 127.0.0.1:9101, weight 2 → 3, maxconn 0 → 10",
            "server `s2` removed from group `web`",
            "server `s3` (127.0.0.1:9003) added to group `web`",
        ]
    );
}

#[test]
fn server_change_carries_both_versions() {
    let old = config(BASE);
    let new = config(&BASE.replace("weight = 2", "weight = 0"));
    let changes = diff(&old, &new);
    let Change::ServerChanged { group, old: before, new: after } = &changes[0] else {
        panic!("{changes:?}");
    };
    assert_eq!((group.as_str(), before.weight, after.weight), ("web", 2, 0));
    assert_eq!(before.name, "s1");
}
