//! `[cluster.l4]` (issue 13, part 5): the kernel L4 tier a node programs in front of the
//! cluster — the VIP, its ports, which nodes may take flows, and the nftables table it owns.

use crate::diag::Sink;
use crate::keys::{home_of, CLUSTER_L4_KEYS};
use crate::walk::Table;
use crate::ClusterL4;
use std::net::{IpAddr, Ipv4Addr};

/// The default nftables table (family ip) of the tier.
const DEFAULT_TABLE: &str = "cswitch_l4";

/// `[cluster.l4]` of `cluster`, `Ok(None)` when absent, `Err(())` when an error was reported.
pub(crate) fn section(cluster: &Table, sink: &mut Sink) -> Result<Option<ClusterL4>, ()> {
    if !cluster.has("l4") {
        return Ok(None);
    }
    let t = cluster.section(sink, "l4").ok_or(())?;
    t.reject_unknown(sink, CLUSTER_L4_KEYS, home_of);
    let vip = vip(&t, sink);
    let ports = ports(&t, sink);
    let nodes = t.strings(sink, "nodes");
    let table = table(&t, sink);
    let nodes = if t.has("nodes") { nodes.ok_or(())? } else { Vec::new() };
    match (vip, ports, table) {
        (Some(vip), Some(ports), Some(table)) => Ok(Some(ClusterL4 { vip, ports, nodes, table })),
        _ => Err(()),
    }
}

/// `vip`: an IPv4 address a host can receive on.
fn vip(t: &Table, sink: &mut Sink) -> Option<Ipv4Addr> {
    let text = t.required_string(sink, "vip", "\"192.0.2.10\"")?;
    let refuse = |sink: &mut Sink, message: String, hint: &str| {
        sink.error(&text.span, &text.key, message, Some(hint.to_string()));
    };
    match text.value.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) if !ip.is_unspecified() && !ip.is_multicast() && !ip.is_broadcast() => Some(ip),
        Ok(IpAddr::V4(_)) => {
            refuse(
                sink,
                format!("`{}` cannot be a VIP", text.value),
                "use this host's (or a routed) unicast address",
            );
            None
        }
        Ok(IpAddr::V6(_)) => {
            let message = format!("`{}` is IPv6; the L4 tier spreads IPv4 flows only", text.value);
            refuse(sink, message, "use an IPv4 VIP, e.g. \"192.0.2.10\"");
            None
        }
        Err(_) => {
            let message = format!("`{}` is not an IP address", text.value);
            refuse(sink, message, "write the address alone, without a port, e.g. \"192.0.2.10\"");
            None
        }
    }
}

/// `ports`: at least one, each once.
fn ports(t: &Table, sink: &mut Sink) -> Option<Vec<u16>> {
    if !t.has("ports") {
        t.missing(sink, "ports", "[80, 443]");
        return None;
    }
    let ports = t.ports(sink, "ports")?;
    let mut seen = std::collections::BTreeSet::new();
    let repeated = ports.iter().find(|p| !seen.insert(**p));
    let problem = match (ports.is_empty(), repeated) {
        (true, _) => Some("`ports` is empty: the tier would spread nothing".to_string()),
        (false, Some(p)) => Some(format!("port {p} is listed twice")),
        (false, None) => None,
    };
    if let Some(message) = problem {
        let hint = Some("list each of the VIP's ports once, e.g. ports = [80, 443]".to_string());
        sink.error(&t.value_span("ports"), &t.key_path("ports"), message, hint);
        return None;
    }
    Some(ports)
}

/// `table`: an nftables table name (letters, digits, `_`; up to 32).
fn table(t: &Table, sink: &mut Sink) -> Option<String> {
    let Some(text) = t.string(sink, "table") else {
        return (!t.has("table")).then(|| DEFAULT_TABLE.to_string());
    };
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if text.value.is_empty() || text.value.len() > 32 || !text.value.chars().all(ok) {
        let message = format!("`{}` is not an nftables table name", text.value);
        let hint = Some(format!("use up to 32 letters, digits or '_', e.g. \"{DEFAULT_TABLE}\""));
        sink.error(&text.span, &text.key, message, hint);
        return None;
    }
    Some(text.value.to_string())
}
