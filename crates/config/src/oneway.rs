//! One-way switching's keys (issue 12): the `[oneway]` section, a listener's `mode`, a
//! server's `agent` and `mac`, and the checks across them (a one-way listener needs
//! `[oneway]`, speaks HTTP without TLS termination, and has servers with agents).

use crate::diag::Sink;
use crate::entries::{GroupDraft, ListenerDraft};
use crate::keys::{home_of, ONEWAY_KEYS};
use crate::walk::{Located, Table};
use crate::{addr, Handoff, Mode, OneWay, Protocol};
use std::path::Path;
use std::time::Duration;

/// `[oneway]`, located at its section (the cross checks point there).
pub(crate) fn section(root: &Table, sink: &mut Sink, base: &Path) -> Option<Located<OneWay>> {
    let t = root.section(sink, "oneway")?;
    t.reject_unknown(sink, ONEWAY_KEYS, home_of);
    let interface = t.required_string(sink, "interface", "\"eth0\"")?;
    if interface.value.is_empty() || interface.value.len() > 15 || interface.value.contains(['/', ' ']) {
        let hint = Some("the name `ip link` shows, e.g. \"eth0\"".to_string());
        sink.error(
            &interface.span,
            &interface.key,
            format!("`{}` is not an interface name", interface.value),
            hint,
        );
        return None;
    }
    let token = crate::endpoints::read_token(&t, sink, base, "one-way hand-offs")?;
    let Some(token) = token else {
        let message = "one-way hand-offs need a token: whoever reaches an agent could inject a connection under the VIP";
        sink.error(
            &interface.span,
            "oneway",
            message,
            Some("add token_file = \"…\" (or token = \"…\")".into()),
        );
        return None;
    };
    let table = t.string(sink, "table").map_or("cswitch", |s| s.value).to_string();
    let value = OneWay {
        interface: interface.value.to_string(),
        token,
        handoff_timeout: t.duration_or(sink, "handoff_timeout", Duration::from_millis(50), false),
        flow_timeout: t.duration_or(sink, "flow_timeout", Duration::from_secs(600), false),
        table,
    };
    Some(Located { value, span: interface.span, key: "oneway".into() })
}

/// A listener's `mode`; `None` when absent (two-way).
pub(crate) fn mode(t: &Table, sink: &mut Sink) -> Option<Located<Mode>> {
    let m = t.string(sink, "mode")?;
    let value = match m.value {
        "two-way" => Mode::TwoWay,
        "one-way" => Mode::OneWay,
        other => {
            let hint = crate::suggest::hint(other, ["two-way", "one-way"])
                .or(Some("valid: two-way, one-way".into()));
            sink.error(&m.span, &m.key, format!("unknown mode `{other}`"), hint);
            return None;
        }
    };
    Some(Located { value, span: m.span, key: m.key })
}

/// A server's `agent` and `mac`, which come together.
pub(crate) fn handoff(t: &Table, sink: &mut Sink) -> Option<Handoff> {
    let agent = t.string(sink, "agent");
    let mac = t.string(sink, "mac");
    let (agent, mac) = match (agent, mac) {
        (None, None) => return None,
        (Some(a), Some(m)) => (a, m),
        (Some(one), None) | (None, Some(one)) => {
            let hint = Some(
                "a server with an agent needs both: agent = \"IP:port\", mac = \"02:00:00:00:00:11\"".into(),
            );
            sink.error(&one.span, &one.key, "`agent` and `mac` go together", hint);
            return None;
        }
    };
    let agent_addr = match addr::parse_server(agent.value) {
        Ok(a) => a,
        Err(e) => {
            sink.error(&agent.span, &agent.key, e.message, e.hint);
            return None;
        }
    };
    let Some(mac_bytes) = parse_mac(mac.value) else {
        let hint = Some("six hex bytes separated by colons, e.g. \"02:00:00:00:00:11\"".into());
        sink.error(&mac.span, &mac.key, format!("`{}` is not a MAC address", mac.value), hint);
        return None;
    };
    Some(Handoff { agent: agent_addr, mac: mac_bytes })
}

/// `aa:bb:cc:dd:ee:ff`.
pub(crate) fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = text.split(':');
    for byte in &mut out {
        let part = parts.next().filter(|p| p.len() == 2)?;
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// A one-way listener needs `[oneway]`, HTTP without TLS termination, and at least one
/// server with an agent in its default group. `section_written`: `[oneway]` is in the file
/// (when it is there but invalid, its own error is the one to read).
pub(crate) fn check(
    listeners: &[ListenerDraft],
    groups: &[GroupDraft],
    section_written: bool,
    sink: &mut Sink,
) {
    for l in listeners {
        let Some(mode) = l.mode.as_ref().filter(|m| m.value == Mode::OneWay) else { continue };
        let fail = |sink: &mut Sink, message: String, hint: &str| {
            sink.error(&mode.span, &mode.key, message, Some(hint.to_string()));
        };
        if l.protocol != Protocol::Http {
            fail(
                sink,
                format!("mode = \"one-way\" is built for protocol = \"http\", not \"{}\"", l.protocol.name()),
                "remove `mode` (two-way)",
            );
        } else if l.tls.is_some() {
            fail(
                sink,
                "a listener that terminates TLS stays two-way (the TLS session cannot move)".into(),
                "remove `mode`, or `tls`",
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

#[cfg(test)]
mod tests {
    use super::parse_mac;

    #[test]
    fn macs() {
        assert_eq!(parse_mac("02:00:00:00:00:1f"), Some([2, 0, 0, 0, 0, 0x1f]));
        for bad in ["02:00:00:00:00", "02:00:00:00:00:11:22", "2:00:00:00:00:11", "zz:00:00:00:00:11", ""] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
    }
}
