//! The repeated sections: `[[listener]]` and `[[group]]` (with its servers).
//!
//! Each entry is read into a draft that keeps the spans of its names and addresses, because
//! the checks across entries (duplicates, `default_group` references) run after all of them
//! are read and must point at the offending value.

use crate::balancing;
use crate::diag::Sink;
use crate::health;
use crate::keys::{home_of, GROUP_KEYS, LISTENER_KEYS, SERVER_KEYS};
use crate::walk::{Located, Table};
use crate::{
    addr, suggest, ConnectionPersistence, Group, HashKey, Listener, Params, Persistence, Protocol, Server,
    ServerState,
};
use balance::SchedulerKind;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// A `[[listener]]` as read; required fields are `None` when missing or invalid (reported).
pub(crate) struct ListenerDraft {
    pub(crate) name: Option<Located<String>>,
    pub(crate) bind: Option<Located<SocketAddr>>,
    pub(crate) default_group: Option<Located<String>>,
    pub(crate) protocol: Protocol,
    pub(crate) mode: Option<Located<crate::Mode>>,
    pub(crate) rules: Option<Located<PathBuf>>,
    x_forwarded_for: bool,
    x_forwarded_proto: bool,
    trusted_proxies: Vec<crate::IpNet>,
    pub(crate) xml_form_field: Option<String>,
    connection_persistence: ConnectionPersistence,
    preallocate: bool,
    pub(crate) tls: Option<crate::certs::TlsDraft>,
    mail: crate::MailOptions,
    http2: crate::Http2,
}

impl ListenerDraft {
    /// The validated listener; `None` only when an error was already reported.
    pub(crate) fn build(self) -> Option<Listener> {
        Some(Listener {
            name: self.name?.value,
            bind: self.bind?.value,
            protocol: self.protocol,
            mode: self.mode.map_or(crate::Mode::TwoWay, |m| m.value),
            default_group: self.default_group?.value,
            rules: self.rules.map(|r| r.value),
            x_forwarded_for: self.x_forwarded_for,
            x_forwarded_proto: self.x_forwarded_proto,
            trusted_proxies: self.trusted_proxies,
            xml_form_field: self.xml_form_field,
            connection_persistence: self.connection_persistence,
            preallocate: self.preallocate,
            tls: self.tls.and_then(crate::certs::TlsDraft::build),
            mail: self.mail,
            http2: self.http2,
        })
    }
}

/// A `[[group]]` as read.
pub(crate) struct GroupDraft {
    pub(crate) name: Option<Located<String>>,
    scheduler: SchedulerKind,
    hash_key: HashKey,
    params: Params,
    pub(crate) persistence: Option<Persistence>,
    ops: GroupOps,
    pub(crate) servers: Vec<ServerDraft>,
}

/// A group's operational keys (health, passive, slow start, drain, weights).
struct GroupOps {
    health: Option<crate::Health>,
    passive: Option<crate::Passive>,
    slow_start: std::time::Duration,
    drain_timeout: std::time::Duration,
    weights: crate::WeightSource,
    reuse: crate::Reuse,
    server_protocol: crate::ServerProtocol,
}

impl GroupDraft {
    /// The validated group; `None` only when an error was already reported.
    pub(crate) fn build(self) -> Option<Group> {
        let servers: Option<Vec<Server>> = self.servers.into_iter().map(ServerDraft::build).collect();
        Some(Group {
            name: self.name?.value,
            scheduler: self.scheduler,
            hash_key: self.hash_key,
            params: self.params,
            persistence: self.persistence,
            health: self.ops.health,
            passive: self.ops.passive,
            slow_start: self.ops.slow_start,
            drain_timeout: self.ops.drain_timeout,
            weights: self.ops.weights,
            reuse: self.ops.reuse,
            server_protocol: self.ops.server_protocol,
            servers: servers?,
        })
    }
}

/// One server of a group, as read.
pub(crate) struct ServerDraft {
    pub(crate) name: Option<Located<String>>,
    pub(crate) addr: Option<Located<SocketAddr>>,
    weight: u32,
    maxconn: u32,
    pub(crate) cookie: Option<Located<String>>,
    state: ServerState,
    pub(crate) handoff: Option<crate::Handoff>,
    /// `agent` or `mac` is written (even if invalid, and reported as such).
    pub(crate) agent_written: bool,
    /// HashNAT's `local_addr` (checked against `[cluster]` in `load`).
    pub(crate) local_addr: Option<Located<SocketAddr>>,
}

impl ServerDraft {
    fn build(self) -> Option<Server> {
        let name = self.name?.value;
        Some(Server {
            cookie: self.cookie.map_or_else(|| name.clone(), |c| c.value),
            name,
            addr: self.addr?.value,
            weight: self.weight,
            maxconn: self.maxconn,
            state: self.state,
            handoff: self.handoff,
            local_addr: self.local_addr.map(|l| l.value),
        })
    }
}

pub(crate) fn listener(t: &Table, sink: &mut Sink, base: &Path) -> ListenerDraft {
    t.reject_unknown(sink, LISTENER_KEYS, home_of);
    let name = name(t, sink, "\"web\"");
    let bind = socket_addr(t, sink, "bind", "\"127.0.0.1:8080\"", addr::parse_bind);
    let default_group = t.required_string(sink, "default_group", "\"web\"");
    let protocol = protocol(t, sink);
    if protocol != Protocol::Http {
        http_only_keys(t, sink, protocol);
    }
    if protocol == Protocol::Tls && t.has("tls") {
        let message = "`tls` (certificates to terminate with) does not apply to protocol = \"tls\", which passes TLS through".to_string();
        sink.error(
            &t.value_span("tls"),
            &t.key_path("tls"),
            message,
            Some("remove `tls`, or use protocol = \"http\" to terminate".into()),
        );
    }
    let mode = crate::oneway::mode(t, sink);
    let one_way = mode.as_ref().is_some_and(|m| m.value == crate::Mode::OneWay);
    let http2 = crate::http2::listener_http2(t, sink, protocol, mode.as_ref().map(|m| m.value));
    ListenerDraft {
        name,
        bind,
        default_group: default_group.map(owned),
        protocol,
        mode,
        rules: rules(t, sink, base),
        x_forwarded_for: t.bool_or(sink, "x_forwarded_for", true),
        x_forwarded_proto: t.bool_or(sink, "x_forwarded_proto", true),
        trusted_proxies: trusted_proxies(t, sink),
        xml_form_field: t.string(sink, "xml_form_field").map(|f| f.value.to_string()),
        connection_persistence: balancing::connection_persistence(t, sink, one_way),
        preallocate: t.bool_or(sink, "preallocate", false),
        tls: crate::certs::listener_tls(t, sink, base, protocol),
        mail: mail_options(t, sink, protocol),
        http2,
    }
}

/// `hostname` (mail listeners), `deny_text` and `xclient` (SMTP).
fn mail_options(t: &Table, sink: &mut Sink, protocol: Protocol) -> crate::MailOptions {
    let d = crate::MailOptions::default();
    let mail = matches!(protocol, Protocol::Smtp | Protocol::Pop3 | Protocol::Imap);
    for (key, applies, to) in [
        ("hostname", mail, "smtp, pop3 or imap"),
        ("deny_text", protocol == Protocol::Smtp, "smtp"),
        ("xclient", protocol == Protocol::Smtp, "smtp"),
    ] {
        if t.has(key) && !applies {
            let message = format!("`{key}` applies only to protocol = {to}, not \"{}\"", protocol.name());
            sink.error(&t.value_span(key), &t.key_path(key), message, Some(format!("remove `{key}`")));
        }
    }
    let text = |sink: &mut Sink, key: &str, default: String| {
        let Some(v) = t.string(sink, key) else { return default };
        if v.value.is_empty() || v.value.chars().any(|c| c.is_control()) {
            let message = format!("`{key}` must be one line of text");
            sink.error(&v.span, &v.key, message, Some(format!("write e.g. {key} = \"{default}\"")));
            return default;
        }
        v.value.to_string()
    };
    crate::MailOptions {
        hostname: text(sink, "hostname", d.hostname),
        deny_text: text(sink, "deny_text", d.deny_text),
        xclient: t.bool_or(sink, "xclient", d.xclient),
    }
}

const PROTOCOLS: &[&str] = &["http", "tls", "smtp", "pop3", "imap"];

fn protocol(t: &Table, sink: &mut Sink) -> Protocol {
    let Some(p) = t.string(sink, "protocol") else {
        return Protocol::Http;
    };
    match p.value {
        "http" => Protocol::Http,
        "tls" => Protocol::Tls,
        "smtp" => Protocol::Smtp,
        "pop3" => Protocol::Pop3,
        "imap" => Protocol::Imap,
        other => {
            let message = format!("protocol `{other}` is not supported; supported: {}", PROTOCOLS.join(", "));
            let hint = suggest::hint(other, PROTOCOLS.iter().copied())
                .or_else(|| Some("write `protocol = \"http\"` or leave it out".to_string()));
            sink.error(&p.span, &p.key, message, hint);
            Protocol::Http
        }
    }
}

/// Keys that only mean something on an HTTP listener are refused on others, so nobody
/// believes, say, X-Forwarded-For is added to a TLS stream.
fn http_only_keys(t: &Table, sink: &mut Sink, protocol: Protocol) {
    const HTTP_ONLY: &[&str] = &[
        "x_forwarded_for",
        "x_forwarded_proto",
        "trusted_proxies",
        "xml_form_field",
        "connection_persistence",
        "preallocate",
        "alpn",
        "h2c",
    ];
    for key in HTTP_ONLY.iter().filter(|k| t.has(k)) {
        let message = format!("`{key}` applies only to protocol = \"http\", not \"{}\"", protocol.name());
        sink.error(&t.value_span(key), &t.key_path(key), message, Some(format!("remove `{key}`")));
    }
}

/// `trusted_proxies = ["10.0.0.0/8", "127.0.0.1"]`: networks whose `X-Forwarded-For` the
/// access log believes.
fn trusted_proxies(t: &Table, sink: &mut Sink) -> Vec<crate::IpNet> {
    let Some(nets) = t.strings(sink, "trusted_proxies") else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(nets.len());
    for text in &nets {
        match addr::parse_net(text) {
            Ok(net) => out.push(net),
            Err(e) => sink.error(
                &t.value_span("trusted_proxies"),
                &t.key_path("trusted_proxies"),
                e.message,
                e.hint,
            ),
        }
    }
    out
}

/// The rule file, resolved against the config file's directory; whether it exists is the
/// rules engine's check, made when it compiles the file (`cswitch check` reports it here,
/// through `refs`).
fn rules(t: &Table, sink: &mut Sink, base: &Path) -> Option<Located<PathBuf>> {
    let rules = t.string(sink, "rules")?;
    if rules.value.is_empty() {
        let hint = Some("name a rule file, or remove `rules` to send everything to default_group".into());
        sink.error(&rules.span, &rules.key, "`rules` is empty", hint);
        return None;
    }
    Some(Located { value: base.join(rules.value), span: rules.span, key: rules.key })
}

pub(crate) fn group(t: &Table, sink: &mut Sink) -> GroupDraft {
    t.reject_unknown(sink, GROUP_KEYS, home_of);
    let name = name(t, sink, "\"web\"");
    let servers = servers(t, sink, name.as_ref());
    GroupDraft {
        name,
        scheduler: scheduler(t, sink),
        hash_key: balancing::hash_key(t, sink),
        params: balancing::params(t, sink),
        persistence: balancing::persistence(t, sink),
        ops: GroupOps {
            health: health::health(t, sink),
            passive: health::passive(t, sink),
            slow_start: t.duration_or(sink, "slow_start", std::time::Duration::ZERO, true),
            drain_timeout: t.duration_or(sink, "drain_timeout", std::time::Duration::from_secs(300), false),
            weights: health::weights(t, sink),
            reuse: reuse(t, sink),
            server_protocol: server_protocol(t, sink),
        },
        servers,
    }
}

/// A group's `reuse` policy for pooled server connections (default safe).
fn reuse(t: &Table, sink: &mut Sink) -> crate::Reuse {
    let Some(r) = t.string(sink, "reuse") else { return crate::Reuse::default() };
    crate::Reuse::from_name(r.value).unwrap_or_else(|| {
        let message =
            format!("unknown reuse policy `{}`; valid: {}", r.value, crate::Reuse::NAMES.join(", "));
        sink.error(&r.span, &r.key, message, suggest::hint(r.value, crate::Reuse::NAMES.iter().copied()));
        crate::Reuse::default()
    })
}

/// The protocol spoken to a group's servers (default HTTP/1.1).
fn server_protocol(t: &Table, sink: &mut Sink) -> crate::ServerProtocol {
    let Some(p) = t.string(sink, "server_protocol") else { return crate::ServerProtocol::default() };
    crate::ServerProtocol::from_name(p.value).unwrap_or_else(|| {
        let valid = crate::ServerProtocol::NAMES.join(", ");
        let message = format!("unknown server_protocol `{}`; valid: {valid}", p.value);
        let hint = suggest::hint(p.value, crate::ServerProtocol::NAMES.iter().copied()).or_else(|| {
            Some("write `server_protocol = \"h2\"` (HTTP/2 to the servers) or leave it out (HTTP/1.1)".into())
        });
        sink.error(&p.span, &p.key, message, hint);
        crate::ServerProtocol::default()
    })
}

fn scheduler(t: &Table, sink: &mut Sink) -> SchedulerKind {
    let default = SchedulerKind::WeightedLeastConnections;
    let Some(s) = t.string(sink, "scheduler") else {
        return default;
    };
    SchedulerKind::from_name(s.value).unwrap_or_else(|| {
        let valid = SchedulerKind::NAMES.join(", ");
        let message = format!("unknown scheduler `{}`; valid: {valid}", s.value);
        let hint = suggest::hint(s.value, SchedulerKind::NAMES.iter().copied());
        sink.error(&s.span, &s.key, message, hint);
        default
    })
}

const SERVERS_SHAPE: &str = "write servers = [ { name = \"s1\", addr = \"127.0.0.1:9001\" }, … ]";

fn servers(t: &Table, sink: &mut Sink, group: Option<&Located<String>>) -> Vec<ServerDraft> {
    if !t.has("servers") {
        t.missing(sink, "servers", "[ { name = \"s1\", addr = \"127.0.0.1:9001\" } ]");
        return Vec::new();
    }
    let entries = t.entries(sink, "servers", SERVERS_SHAPE);
    if t.is_empty_array("servers") {
        let which = group.map_or(String::new(), |g| format!(" `{}`", g.value));
        let message = format!("group{which} has no servers; a group needs at least one");
        let span = t.value_span("servers");
        sink.error(&span, &t.key_path("servers"), message, Some(SERVERS_SHAPE.into()));
    }
    entries.iter().map(|s| server(s, sink)).collect()
}

fn server(t: &Table, sink: &mut Sink) -> ServerDraft {
    t.reject_unknown(sink, SERVER_KEYS, home_of);
    let int = |sink: &mut Sink, key, default, max| {
        u32::try_from(t.int_or(sink, key, default, 0..=max)).unwrap_or(0)
    };
    ServerDraft {
        name: name(t, sink, "\"s1\""),
        addr: socket_addr(t, sink, "addr", "\"127.0.0.1:9001\"", addr::parse_server),
        weight: int(sink, "weight", 1, 1_000_000),
        maxconn: int(sink, "maxconn", 0, 1_000_000),
        cookie: cookie_token(t, sink),
        state: health::server_state(t, sink),
        handoff: crate::oneway::handoff(t, sink),
        agent_written: t.has("agent") || t.has("mac"),
        local_addr: t
            .has("local_addr")
            .then(|| socket_addr(t, sink, "local_addr", "\"127.0.0.1:80\"", addr::parse_server))
            .flatten(),
    }
}

/// A server's optional `cookie` token: what persistence cookies carry to name it.
fn cookie_token(t: &Table, sink: &mut Sink) -> Option<Located<String>> {
    let c = t.string(sink, "cookie")?;
    let allowed = |ch: char| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '_' | '.');
    if c.value.is_empty() || !c.value.chars().all(allowed) {
        let message = format!("cookie token `{}` may only use letters, digits, '-', '_' and '.'", c.value);
        sink.error(&c.span, &c.key, message, Some("write e.g. cookie = \"s1\"".into()));
        return None;
    }
    Some(owned(c))
}

/// A required `name`. Names appear in logs, metrics labels and the admin API's paths, so
/// they are kept to characters that need no quoting in any of them.
fn name(t: &Table, sink: &mut Sink, example: &str) -> Option<Located<String>> {
    let name = t.required_string(sink, "name", example)?;
    if !crate::edit::valid_name(name.value) {
        let message = match name.value {
            "" => "`name` is empty".to_string(),
            other => format!("name `{other}` may only use letters, digits, '-', '_' and '.'"),
        };
        let hint = Some(format!("write e.g. name = {example}"));
        sink.error(&name.span, &name.key, message, hint);
        return None;
    }
    Some(owned(name))
}

fn socket_addr(
    t: &Table,
    sink: &mut Sink,
    key: &str,
    example: &str,
    parse: fn(&str) -> Result<SocketAddr, addr::AddrError>,
) -> Option<Located<SocketAddr>> {
    let text = t.required_string(sink, key, example)?;
    match parse(text.value) {
        Ok(value) => Some(Located { value, span: text.span, key: text.key }),
        Err(e) => {
            sink.error(&text.span, &text.key, e.message, e.hint);
            None
        }
    }
}

fn owned(s: Located<&str>) -> Located<String> {
    Located { value: s.value.to_string(), span: s.span, key: s.key }
}
