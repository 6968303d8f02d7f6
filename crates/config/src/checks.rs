//! Checks across entries, run once every listener and group is read: unique names, unique
//! bind addresses (the admin listener's included), `default_group` naming a group that
//! exists, and what one-way listeners need (HashNAT's hand-off to peers included).

use crate::diag::Sink;
use crate::entries::{GroupDraft, ListenerDraft};
use crate::suggest;
use crate::walk::Located;
use crate::Admin;
use std::net::SocketAddr;

pub(crate) fn run(
    listeners: &[ListenerDraft],
    groups: &[GroupDraft],
    admin: Option<&Located<Admin>>,
    sink: &mut Sink,
) {
    unique(sink, "listener", "", listeners.iter().filter_map(|l| l.name.as_ref()));
    unique(sink, "group", "", groups.iter().filter_map(|g| g.name.as_ref()));
    for group in groups {
        let servers = group.servers.iter().filter_map(|s| s.name.as_ref());
        let within = match &group.name {
            Some(name) => format!(" in group `{}`", name.value),
            None => " in this group".to_string(),
        };
        unique(sink, "server", &within, servers);
        unique(sink, "server cookie token", &within, group.servers.iter().filter_map(|s| s.cookie.as_ref()));
    }
    binds(sink, listeners);
    if let Some(admin) = admin {
        admin_bind(sink, listeners, admin);
    }
    references(sink, listeners, groups);
}

/// Reports every name that repeats an earlier one, at the repeat.
fn unique<'a>(sink: &mut Sink, what: &str, within: &str, names: impl Iterator<Item = &'a Located<String>>) {
    let mut seen: Vec<&Located<String>> = Vec::new();
    for name in names {
        if let Some(first) = seen.iter().find(|s| s.value == name.value) {
            let message = format!("duplicate {what} name `{}`{within}", name.value);
            let line = sink.line_of(&first.span);
            let hint = Some(format!("`{}` is already used on line {line}; names must be unique", name.value));
            sink.error(&name.span, &name.key, message, hint);
        } else {
            seen.push(name);
        }
    }
}

/// Two listeners cannot bind the same address, nor the same port where one of them binds
/// the wildcard address of that family: the second bind would fail at start, or (with
/// SO_REUSEPORT) silently share the socket's traffic with the first.
fn binds(sink: &mut Sink, listeners: &[ListenerDraft]) {
    let binds: Vec<&Located<SocketAddr>> = listeners.iter().filter_map(|l| l.bind.as_ref()).collect();
    for (i, bind) in binds.iter().enumerate() {
        let Some(first) = binds[..i].iter().find(|b| overlaps(b.value, bind.value)) else {
            continue;
        };
        let line = sink.line_of(&first.span);
        let message = if first.value == bind.value {
            format!("duplicate bind address {}", bind.value)
        } else {
            format!("bind address {} overlaps {}", bind.value, first.value)
        };
        let hint = Some(format!("{} is already bound on line {line}; use another port", first.value));
        sink.error(&bind.span, &bind.key, message, hint);
    }
}

/// The admin listener is bound without SO_REUSEPORT, so an address a listener holds (or
/// overlaps through a wildcard) makes `cswitch run` fail with "address in use" at start.
/// (`[agents]` receives on UDP, so it cannot collide with the TCP listeners.)
fn admin_bind(sink: &mut Sink, listeners: &[ListenerDraft], admin: &Located<Admin>) {
    let wanted = admin.value.bind;
    let mut binds = listeners.iter().filter_map(|l| l.bind.as_ref());
    let Some(taken) = binds.find(|b| overlaps(b.value, wanted)) else {
        return;
    };
    let line = sink.line_of(&taken.span);
    let message = if taken.value == wanted {
        format!("[admin] bind address {wanted} is a listener's address too")
    } else {
        format!("[admin] bind address {wanted} overlaps the listener address {}", taken.value)
    };
    let hint =
        Some(format!("{} is bound by a listener on line {line}; give [admin] its own port", taken.value));
    sink.error(&admin.span, &admin.key, message, hint);
}

fn overlaps(a: SocketAddr, b: SocketAddr) -> bool {
    // Port 0 asks the OS for a free port, so such listeners never collide.
    if a.port() != b.port() || a.port() == 0 || a.is_ipv4() != b.is_ipv4() {
        return false;
    }
    a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified()
}

/// Every listener's `default_group` must name a group.
fn references(sink: &mut Sink, listeners: &[ListenerDraft], groups: &[GroupDraft]) {
    let names: Vec<&str> = groups.iter().filter_map(|g| g.name.as_ref().map(|n| n.value.as_str())).collect();
    for wanted in listeners.iter().filter_map(|l| l.default_group.as_ref()) {
        if names.contains(&wanted.value.as_str()) {
            continue;
        }
        let message = format!("default_group `{}` names no [[group]]", wanted.value);
        let hint = suggest::hint(&wanted.value, names.iter().copied()).or_else(|| {
            Some(match names.is_empty() {
                true => format!("add a [[group]] named `{}`", wanted.value),
                false => format!("groups defined: {}", names.join(", ")),
            })
        });
        sink.error(&wanted.span, &wanted.key, message, hint);
    }
}

/// A one-way listener needs `[oneway]`, HTTP without TLS termination or TLS passthrough
/// (`protocol = "tls"`, which never terminates), and at least one server with an agent in
/// its default group. `section_written`: `[oneway]` is in the file
/// (when it is there but invalid, its own error is the one to read).
pub(crate) fn oneway_listeners(
    listeners: &[ListenerDraft],
    groups: &[GroupDraft],
    section_written: bool,
    sink: &mut Sink,
) {
    for l in listeners {
        let Some(mode) = l.mode.as_ref().filter(|m| m.value == crate::Mode::OneWay) else { continue };
        let fail = |sink: &mut Sink, message: String, hint: &str| {
            sink.error(&mode.span, &mode.key, message, Some(hint.to_string()));
        };
        if !matches!(l.protocol, crate::Protocol::Http | crate::Protocol::Tls) {
            fail(
                sink,
                format!(
                    "mode = \"one-way\" is built for protocol = \"http\" and \"tls\", not \"{}\"",
                    l.protocol.name()
                ),
                "remove `mode` (two-way)",
            );
        } else if l.tls.is_some() {
            fail(
                sink,
                "a listener that terminates TLS stays two-way (the TLS session cannot move)".into(),
                "remove `mode`, or `tls`; protocol = \"tls\" (passthrough) can be one-way",
            );
        } else if !section_written {
            fail(
                sink,
                "mode = \"one-way\" needs a [oneway] section".into(),
                "add [oneway] with interface and token_file",
            );
        } else if !default_group_has_agent(l, groups) {
            let group = l.default_group.as_ref().map_or("", |g| g.value.as_str());
            fail(
                sink,
                format!("no server of group `{group}` has an agent to hand connections to"),
                "give its servers agent = \"IP:port\" and mac = \"…\" (where `cswitch agent --handoff-listen` runs)",
            );
        }
    }
}

fn default_group_has_agent(l: &ListenerDraft, groups: &[GroupDraft]) -> bool {
    let Some(name) = &l.default_group else { return true };
    let group = groups.iter().find(|g| g.name.as_ref().is_some_and(|n| n.value == name.value));
    group.is_none_or(|g| g.servers.iter().any(|s| s.agent_written))
}

/// HashNAT with hand-offs (ADR 0019): a one-way listener hands connections to the other
/// hosts, which hold the listener's address on `lo` to answer for it. So that address
/// cannot be any host's peer address (a HashNAT server's `addr`, where its peer listener,
/// and usually its gossip and agent, live): the hosts holding it on `lo` could no longer
/// reach that host there. Reported at the listener's `bind`.
pub(crate) fn oneway_hashnat(listeners: &[ListenerDraft], groups: &[GroupDraft], sink: &mut Sink) {
    let peers: Vec<(&str, SocketAddr)> = groups
        .iter()
        .flat_map(|g| &g.servers)
        .filter(|s| s.local_addr.is_some() && s.agent_written)
        .filter_map(|s| Some((s.name.as_ref()?.value.as_str(), s.addr.as_ref()?.value)))
        .collect();
    for l in listeners.iter().filter(|l| l.mode.as_ref().is_some_and(|m| m.value == crate::Mode::OneWay)) {
        let Some(bind) = &l.bind else { continue };
        let Some((name, addr)) = peers.iter().find(|(_, a)| a.ip() == bind.value.ip()) else { continue };
        sink.error(
            &bind.span,
            &bind.key,
            format!(
                "a one-way listener on HashNAT server `{name}`'s peer address {}: the other hosts hold this \
                 address on lo to answer the connections handed to them, and could not reach `{name}` at {addr}",
                bind.value.ip()
            ),
            Some("bind the listener to an address of its own that clients reach (e.g. the host's public address), and keep the peer listener, gossip and agent on the host's private one".into()),
        );
    }
}
