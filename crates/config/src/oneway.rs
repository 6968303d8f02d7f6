//! One-way switching's keys (issue 12): the `[oneway]` section, a listener's `mode`, a
//! server's `agent` and `mac`. The checks across them are in `checks` (`oneway_listeners`).

use crate::diag::Sink;
use crate::keys::{home_of, ONEWAY_KEYS};
use crate::walk::{Located, Table};
use crate::{addr, Handoff, Mode, OneWay};
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

/// `aa:bb:cc:dd:ee:ff` (also how `/sys/class/net/*/address` writes it).
pub fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut out = [0u8; 6];
    let mut parts = text.split(':');
    for byte in &mut out {
        let part = parts.next().filter(|p| p.len() == 2)?;
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
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
