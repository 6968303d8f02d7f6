//! The operational keys of a `[[group]]` (`health`, `passive`, `slow_start`,
//! `drain_timeout`, `weights`) and a server's `state`.

use crate::diag::Sink;
use crate::keys::{home_of, HEALTH_KEYS, PASSIVE_KEYS};
use crate::walk::Table;
use crate::{suggest, Check, Health, HttpCheck, Passive, ServerState, WeightSource};
use std::time::Duration;

const CHECKS: &[&str] = &["tcp", "http", "smtp", "pop3", "imap"];
const STATES: &[&str] = &["ready", "drain", "maint"];
const WEIGHT_SOURCES: &[&str] = &["config", "agent"];

/// `health = { check = "…", … }`.
pub(crate) fn health(t: &Table, sink: &mut Sink) -> Option<Health> {
    let h = t.section(sink, "health")?;
    h.reject_unknown(sink, HEALTH_KEYS, home_of);
    let kind = h.required_string(sink, "check", "\"http\"")?;
    let check = match kind.value {
        "tcp" => Check::Tcp,
        "http" => Check::Http(http_check(&h, sink)),
        "smtp" => Check::Smtp,
        "pop3" => Check::Pop3,
        "imap" => Check::Imap,
        other => {
            let message = format!("unknown health check `{other}`; valid: {}", CHECKS.join(", "));
            let hint = suggest::hint(other, CHECKS.iter().copied());
            sink.error(&kind.span, &kind.key, message, hint);
            return None;
        }
    };
    if kind.value != "http" {
        for key in ["method", "path", "host", "expect_status", "expect_body"] {
            if h.has(key) {
                let message = format!("`{key}` applies only to check = \"http\"");
                let hint = Some(format!("remove `{key}`, or write check = \"http\""));
                sink.error(&h.value_span(key), &h.key_path(key), message, hint);
            }
        }
    }
    let interval = h.duration_or(sink, "interval", Duration::from_secs(2), false);
    let timeout = h.duration_or(sink, "timeout", Duration::from_secs(1), false);
    if timeout > interval && h.has("timeout") {
        let message = "`timeout` is longer than `interval`: checks would overlap".to_string();
        let hint =
            Some("make timeout shorter than interval, e.g. interval = \"1s\", timeout = \"500ms\"".into());
        sink.error(&h.value_span("timeout"), &h.key_path("timeout"), message, hint);
    }
    let count =
        |sink: &mut Sink, key, default| u32::try_from(h.int_or(sink, key, default, 1..=100)).unwrap_or(1);
    Some(Health {
        check,
        interval,
        timeout,
        rise: count(sink, "rise", 2),
        fall: count(sink, "fall", 3),
        jitter: h.duration_or(sink, "jitter", Duration::ZERO, true),
        port: h.has("port").then(|| u16::try_from(h.int_or(sink, "port", 1, 1..=65535)).unwrap_or(1)),
    })
}

fn http_check(h: &Table, sink: &mut Sink) -> HttpCheck {
    let text = |sink: &mut Sink, key| h.string(sink, key).map(|s| s.value.to_string());
    let method = text(sink, "method").unwrap_or_else(|| "GET".into());
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        let message = format!("health check method `{method}` is not an HTTP method");
        sink.error(
            &h.value_span("method"),
            &h.key_path("method"),
            message,
            Some("write method = \"GET\"".into()),
        );
    }
    let path = text(sink, "path").unwrap_or_else(|| "/".into());
    if !path.starts_with('/') || path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        let message = format!("health check path `{path}` must start with '/' and have no spaces");
        sink.error(
            &h.value_span("path"),
            &h.key_path("path"),
            message,
            Some("write path = \"/health\"".into()),
        );
    }
    HttpCheck {
        method,
        path,
        host: text(sink, "host"),
        expect_status: expect_status(h, sink),
        expect_body: text(sink, "expect_body"),
    }
}

/// `expect_status = ["200-299", "3xx", "404"]` (default 200–399).
fn expect_status(h: &Table, sink: &mut Sink) -> Vec<(u16, u16)> {
    let default = vec![(200, 399)];
    let Some(items) = h.strings(sink, "expect_status") else {
        return default;
    };
    let mut ranges = Vec::with_capacity(items.len());
    for item in &items {
        match status_range(item) {
            Some(range) => ranges.push(range),
            None => {
                let message = format!("`{item}` is not a status, a range or a class");
                let hint = Some("write e.g. expect_status = [\"200-299\", \"3xx\", \"404\"]".into());
                sink.error(&h.value_span("expect_status"), &h.key_path("expect_status"), message, hint);
            }
        }
    }
    if ranges.is_empty() {
        default
    } else {
        ranges
    }
}

fn status_range(text: &str) -> Option<(u16, u16)> {
    let status = |s: &str| s.parse::<u16>().ok().filter(|n| (100..=599).contains(n));
    if let Some(class) = text.strip_suffix("xx") {
        let c = status(&format!("{class}00"))?;
        return Some((c, c + 99));
    }
    match text.split_once('-') {
        Some((lo, hi)) => Some((status(lo)?, status(hi)?)).filter(|(lo, hi)| lo <= hi),
        None => status(text).map(|s| (s, s)),
    }
}

/// `passive = { failures = 3, on_5xx = false, backoff = "10s" }`.
pub(crate) fn passive(t: &Table, sink: &mut Sink) -> Option<Passive> {
    let p = t.section(sink, "passive")?;
    p.reject_unknown(sink, PASSIVE_KEYS, home_of);
    Some(Passive {
        failures: u32::try_from(p.int_or(sink, "failures", 3, 1..=1000)).unwrap_or(3),
        on_5xx: p.bool_or(sink, "on_5xx", false),
        backoff: p.duration_or(sink, "backoff", Duration::from_secs(10), false),
    })
}

/// `weights = "config" | "agent"` (default config).
pub(crate) fn weights(t: &Table, sink: &mut Sink) -> WeightSource {
    let Some(w) = t.string(sink, "weights") else {
        return WeightSource::Config;
    };
    match w.value {
        "config" => WeightSource::Config,
        "agent" => WeightSource::Agent,
        other => {
            let message = format!("unknown weights source `{other}`; valid: {}", WEIGHT_SOURCES.join(", "));
            sink.error(&w.span, &w.key, message, suggest::hint(other, WEIGHT_SOURCES.iter().copied()));
            WeightSource::Config
        }
    }
}

/// A server's `state` (default ready).
pub(crate) fn server_state(t: &Table, sink: &mut Sink) -> ServerState {
    let Some(s) = t.string(sink, "state") else {
        return ServerState::Ready;
    };
    ServerState::from_name(s.value).unwrap_or_else(|| {
        let message = format!("unknown server state `{}`; valid: {}", s.value, STATES.join(", "));
        sink.error(&s.span, &s.key, message, suggest::hint(s.value, STATES.iter().copied()));
        ServerState::Ready
    })
}
