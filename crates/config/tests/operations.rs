//! The operational keys: a group's `health`, `passive`, `slow_start`, `drain_timeout`,
//! `weights`, a server's `state`, `[admin]` and `[agents]` — values, defaults, refusals.
#![allow(clippy::unwrap_used)] // in tests a panic is the failure report

use cswitch_config::{
    parse, Admin, Agents, Check, Config, Diagnostic, Diagnostics, Health, HttpCheck, Passive, ServerState,
    WeightSource,
};
use std::path::Path;
use std::time::Duration;

const LISTENER: &str = r#"[[listener]]
name = "web"
bind = "127.0.0.1:8080"
default_group = "web"
"#;

fn config(text: &str) -> Config {
    match parse(&format!("{LISTENER}{text}"), Path::new("/etc/cswitch/c.toml")) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    }
}

/// The only diagnostic; `text` starts on line 5 (after the listener).
fn one(text: &str) -> Diagnostic {
    match parse(&format!("{LISTENER}{text}"), Path::new("/etc/cswitch/c.toml")) {
        Ok(c) => panic!("accepted: {c:?}"),
        Err(Diagnostics(mut d)) => {
            assert_eq!(d.len(), 1, "{}", Diagnostics(d.clone()));
            d.remove(0)
        }
    }
}

const GROUP: &str = r#"[[group]]
name = "web"
servers = [{ name = "s1", addr = "127.0.0.1:9001" }]
"#;

#[test]
fn every_operational_key_is_read() {
    let c = config(
        r#"[admin]
bind = "0.0.0.0:9900"
token = "0123456789abcdef0123"
[agents]
bind = "127.0.0.1:9901"
silent_after = "3s"
[[group]]
name = "web"
health = { check = "http", method = "HEAD", path = "/health", host = "example.com", expect_status = ["2xx", "301-302", "404"], expect_body = "ok", interval = "1s", timeout = "500ms", rise = 1, fall = 2, jitter = "100ms", port = 8081 }
passive = { failures = 5, on_5xx = true, backoff = "30s" }
slow_start = "20s"
drain_timeout = "1m"
weights = "agent"
servers = [{ name = "s1", addr = "127.0.0.1:9001", state = "drain" }, { name = "s2", addr = "127.0.0.1:9002", state = "maint" }]
"#,
    );
    assert_eq!(
        c.admin,
        Some(Admin { bind: "0.0.0.0:9900".parse().unwrap(), token: Some("0123456789abcdef0123".into()) })
    );
    assert_eq!(
        c.agents,
        Some(Agents {
            bind: "127.0.0.1:9901".parse().unwrap(),
            token: None,
            silent_after: Duration::from_secs(3)
        })
    );
    let g = &c.groups[0];
    let http = HttpCheck {
        method: "HEAD".into(),
        path: "/health".into(),
        host: Some("example.com".into()),
        expect_status: vec![(200, 299), (301, 302), (404, 404)],
        expect_body: Some("ok".into()),
    };
    let health = Health {
        check: Check::Http(http),
        interval: Duration::from_secs(1),
        timeout: Duration::from_millis(500),
        rise: 1,
        fall: 2,
        jitter: Duration::from_millis(100),
        port: Some(8081),
    };
    assert_eq!(g.health, Some(health));
    assert_eq!(g.passive, Some(Passive { failures: 5, on_5xx: true, backoff: Duration::from_secs(30) }));
    assert_eq!((g.slow_start, g.drain_timeout), (Duration::from_secs(20), Duration::from_secs(60)));
    assert_eq!(g.weights, WeightSource::Agent);
    let states: Vec<ServerState> = g.servers.iter().map(|s| s.state).collect();
    assert_eq!(states, [ServerState::Drain, ServerState::Maint]);
}

#[test]
fn defaults() {
    let c = config(GROUP);
    assert_eq!((c.admin.clone(), c.agents.clone()), (None, None));
    let g = &c.groups[0];
    assert_eq!((g.health.clone(), g.passive.clone()), (None, None));
    assert_eq!((g.slow_start, g.drain_timeout), (Duration::ZERO, Duration::from_secs(300)));
    assert_eq!(g.weights, WeightSource::Config);
    assert_eq!(g.servers[0].state, ServerState::Ready);
    let c = config(&GROUP.replace("servers", "health = { check = \"tcp\" }\npassive = {}\nservers"));
    let h = c.groups[0].health.clone().unwrap();
    assert_eq!(
        (h.check, h.interval, h.timeout, h.rise, h.fall),
        (Check::Tcp, Duration::from_secs(2), Duration::from_secs(1), 2, 3)
    );
    assert_eq!(
        c.groups[0].passive,
        Some(Passive { failures: 3, on_5xx: false, backoff: Duration::from_secs(10) })
    );
    let c = config(&format!("[agents]\nbind = \"127.0.0.1:9901\"\n{GROUP}"));
    assert_eq!(c.agents.unwrap().silent_after, Duration::from_secs(2));
}

#[test]
fn banner_checks_parse() {
    for (name, check) in [("smtp", Check::Smtp), ("pop3", Check::Pop3), ("imap", Check::Imap)] {
        let c = config(&GROUP.replace("servers", &format!("health = {{ check = \"{name}\" }}\nservers")));
        assert_eq!(c.groups[0].health.clone().unwrap().check, check);
    }
}

#[test]
fn unknown_check_suggests_one() {
    let d = one(&GROUP.replace("servers", "health = { check = \"htpp\" }\nservers"));
    assert_eq!((d.line, d.col, d.key.as_str()), (7, 20, "group[0].health.check"));
    assert!(d.message.contains("unknown health check `htpp`"), "{}", d.message);
    assert_eq!(d.hint.as_deref(), Some("did you mean `http`?"));
}

#[test]
fn http_keys_on_a_tcp_check_are_refused() {
    let d = one(&GROUP.replace("servers", "health = { check = \"tcp\", path = \"/h\" }\nservers"));
    assert!(d.message.contains("`path` applies only to check = \"http\""), "{}", d.message);
}

#[test]
fn bad_status_and_timeout_over_interval_are_refused() {
    let d =
        one(&GROUP.replace("servers", "health = { check = \"http\", expect_status = [\"2x\"] }\nservers"));
    assert!(d.message.contains("`2x` is not a status"), "{}", d.message);
    let d = one(&GROUP
        .replace("servers", "health = { check = \"tcp\", interval = \"1s\", timeout = \"2s\" }\nservers"));
    assert!(d.message.contains("longer than `interval`"), "{}", d.message);
    assert_eq!(d.key, "group[0].health.timeout");
}

#[test]
fn bad_state_and_weights_suggest_the_right_word() {
    let d = one(&GROUP.replace("addr = \"127.0.0.1:9001\"", "addr = \"127.0.0.1:9001\", state = \"drian\""));
    assert_eq!(d.key, "group[0].servers[0].state");
    assert_eq!(d.hint.as_deref(), Some("did you mean `drain`?"));
    let d = one(&GROUP.replace("servers", "weights = \"agents\"\nservers"));
    assert_eq!((d.line, d.key.as_str()), (7, "group[0].weights"));
    assert_eq!(d.hint.as_deref(), Some("did you mean `agent`?"));
}

#[test]
fn admin_off_loopback_needs_a_token() {
    let d = one(&format!("[admin]\nbind = \"0.0.0.0:9900\"\n{GROUP}"));
    assert_eq!((d.line, d.col, d.key.as_str()), (6, 8, "admin.bind"));
    assert!(d.message.contains("reachable from other hosts but has no token"), "{}", d.message);
    assert!(d.hint.as_deref().unwrap_or("").contains("token_file"));
    let d = one(&format!("[agents]\nbind = \"[::]:9901\"\n{GROUP}"));
    assert_eq!(d.key, "agents.bind");
}

#[test]
fn short_tokens_and_both_token_keys_are_refused() {
    let d = one(&format!("[admin]\nbind = \"127.0.0.1:9900\"\ntoken = \"abc\"\n{GROUP}"));
    assert!(d.message.contains("use 16 to 128"), "{}", d.message);
    let file = std::env::temp_dir().join(format!("cswitch-token-{}", std::process::id()));
    std::fs::write(&file, "0123456789abcdef0123\n").unwrap();
    let text = format!("[admin]\nbind = \"0.0.0.0:9900\"\ntoken_file = \"{}\"\n{GROUP}", file.display());
    assert_eq!(config(&text).admin.unwrap().token.as_deref(), Some("0123456789abcdef0123"));
    let both = format!(
        "[admin]\nbind = \"0.0.0.0:9900\"\ntoken = \"0123456789abcdef0123\"\ntoken_file = \"{}\"\n{GROUP}",
        file.display()
    );
    assert!(one(&both).message.contains("both `token` and `token_file`"));
    let _ = std::fs::remove_file(file);
}

#[test]
fn operational_keys_are_documented() {
    let docs =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/config.md")).unwrap();
    for key in [
        "health",
        "check",
        "interval",
        "rise",
        "fall",
        "jitter",
        "port",
        "method",
        "expect_status",
        "expect_body",
        "passive",
        "failures",
        "on_5xx",
        "backoff",
        "slow_start",
        "drain_timeout",
        "weights",
        "state",
        "[admin]",
        "token",
        "token_file",
        "[agents]",
        "silent_after",
    ] {
        assert!(docs.contains(&format!("`{key}`")), "docs/config.md lacks `{key}`");
    }
}

#[test]
fn admin_cannot_share_a_listeners_address() {
    // The listener binds 127.0.0.1:8080 on line 3; `[admin]` starts on line 5.
    let d = one(&format!("[admin]\nbind = \"127.0.0.1:8080\"\n{GROUP}"));
    assert_eq!((d.line, d.col, d.key.as_str()), (6, 8, "admin.bind"));
    assert_eq!(d.message, "[admin] bind address 127.0.0.1:8080 is a listener's address too");
    assert_eq!(
        d.hint.as_deref(),
        Some("127.0.0.1:8080 is bound by a listener on line 3; give [admin] its own port")
    );
    let wildcard = format!("[admin]\nbind = \"0.0.0.0:8080\"\ntoken = \"0123456789abcdef\"\n{GROUP}");
    let d = one(&wildcard);
    assert_eq!(d.message, "[admin] bind address 0.0.0.0:8080 overlaps the listener address 127.0.0.1:8080");
    // Another port, or UDP `[agents]` on the same address, is fine.
    config(&format!("[admin]\nbind = \"127.0.0.1:8081\"\n[agents]\nbind = \"127.0.0.1:8080\"\n{GROUP}"));
}

#[test]
fn reuse_policy_defaults_to_safe_and_names_the_valid_ones() {
    assert_eq!(config(GROUP).groups[0].reuse, cswitch_config::Reuse::Safe);
    let never = GROUP.replace("servers =", "reuse = \"never\"\nservers =");
    assert_eq!(config(&never).groups[0].reuse, cswitch_config::Reuse::Never);
    let bad = GROUP.replace("servers =", "reuse = \"alway\"\nservers =");
    let d = one(&bad);
    assert!(d.message.contains("unknown reuse policy `alway`; valid: safe, always, never"), "{}", d.message);
    assert_eq!(d.hint.as_deref(), Some("did you mean `always`?"));
}
