//! A listener's HTTP/2 keys (issue 15), named as HAProxy's `bind` options are: `alpn`, the
//! protocols a TLS-terminating listener offers (default `["h2", "http/1.1"]`, as HAProxy
//! 2.8+ offers on its TLS binds), and `h2c`, whether a plain listener takes a connection
//! that opens with the HTTP/2 preface as HTTP/2 with prior knowledge (default true, as
//! HAProxy detects the preface on clear-text HTTP binds). One-way listeners hand HTTP/1.1
//! connections to agents, so neither applies to them.

use crate::diag::Sink;
use crate::walk::Table;
use crate::{Http2, Mode, Protocol};

/// The protocols ALPN may name.
const ALPN_NAMES: &[&str] = &["h2", "http/1.1"];

/// The listener's HTTP/2 settings; errors (reported) leave the defaults.
pub(crate) fn listener_http2(t: &Table, sink: &mut Sink, protocol: Protocol, mode: Option<Mode>) -> Http2 {
    let tls = t.has("tls");
    let one_way = mode == Some(Mode::OneWay);
    let applies = |key: &str, sink: &mut Sink, ok: bool, why: &str, hint: &str| {
        if t.has(key) && !ok {
            let message = format!("`{key}` {why}");
            sink.error(&t.value_span(key), &t.key_path(key), message, Some(hint.to_string()));
        }
    };
    if protocol != Protocol::Http {
        // Reported by the HTTP-only keys check.
        return Http2 { alpn: Vec::new(), h2c: false };
    }
    applies(
        "alpn",
        sink,
        tls,
        "applies only to a listener with `tls` (it is offered in the TLS handshake)",
        "remove `alpn`; on a plain listener `h2c` says whether HTTP/2 with prior knowledge is taken",
    );
    applies(
        "h2c",
        sink,
        !tls,
        "applies only to a plain listener (a TLS listener offers HTTP/2 through `alpn`)",
        "remove `h2c`, or write alpn = [\"http/1.1\"] to offer HTTP/1.1 only",
    );
    applies(
        "alpn",
        sink,
        !one_way,
        "does not apply to a one-way listener (HTTP/2 connections are not handed off)",
        "remove `alpn`",
    );
    applies(
        "h2c",
        sink,
        !one_way,
        "does not apply to a one-way listener (HTTP/2 connections are not handed off)",
        "remove `h2c`",
    );
    if one_way {
        return Http2 { alpn: vec!["http/1.1".into()], h2c: false };
    }
    Http2 { alpn: alpn(t, sink), h2c: t.bool_or(sink, "h2c", true) }
}

/// `alpn = ["h2", "http/1.1"]`: known names, none twice, at least one.
fn alpn(t: &Table, sink: &mut Sink) -> Vec<String> {
    let default = || ALPN_NAMES.iter().map(|s| s.to_string()).collect();
    let Some(names) = t.strings(sink, "alpn") else { return default() };
    let (span, key) = (t.value_span("alpn"), t.key_path("alpn"));
    if names.is_empty() {
        let hint = Some("write alpn = [\"h2\", \"http/1.1\"] (the default), or leave it out".into());
        sink.error(&span, &key, "`alpn` must name at least one protocol", hint);
        return default();
    }
    for (i, name) in names.iter().enumerate() {
        if !ALPN_NAMES.contains(&name.as_str()) {
            let message = format!("ALPN protocol `{name}` is not supported; supported: h2, http/1.1");
            let hint = crate::suggest::hint(name, ALPN_NAMES.iter().copied())
                .or_else(|| Some("write alpn = [\"h2\", \"http/1.1\"]".into()));
            sink.error(&span, &key, message, hint);
            return default();
        }
        if names[..i].contains(name) {
            let message = format!("ALPN protocol `{name}` is named twice");
            sink.error(&span, &key, message, Some(format!("remove the second \"{name}\"")));
            return default();
        }
    }
    names
}
