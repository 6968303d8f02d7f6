//! The tier's nftables table (family ip) as text, and `nft -f -` to load it. Changes are
//! rare (a node joins, dies, drains) and each is one atomic transaction of a few lines, so
//! the `nft` tool is enough (~10 ms a change, ADR 0013); no netlink encoder for chains and
//! rule expressions.
//!
//! - chain `spread` (nat prerouting): a new flow to the VIP's ports is DNATed to one of the
//!   targets, in turn (`numgen inc mod N`); conntrack keeps every later packet of the flow
//!   on the node it got, whatever the rule says afterwards — which is what lets a drained
//!   node's connections finish.
//! - set `gone` and chain `reset_gone` (filter forward): a packet of a flow whose node died
//!   is answered with a TCP reset, so its client fails at once instead of retransmitting
//!   into the void until it times out.
//! - chain `retry_refused` (filter forward): a TCP reset a target answers to a flow that
//!   never got established (conntrack has not marked it assured: the node's port is closed,
//!   its process just died) is dropped. Conntrack has already forgotten the flow (a reset as
//!   the first reply deletes the entry), so the client's SYN retransmit, ~1 s later, is a
//!   new flow that `spread` gives a live node (ADR 0018). Its counter is what the tier saved.

use super::Plan;
use config::ClusterL4;
use std::io::{self, Write};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

/// The whole table, replacing one of the same name, with no target yet.
pub(crate) fn install_text(cfg: &ClusterL4) -> String {
    let t = &cfg.table;
    format!(
        "add table ip {t}\n\
         delete table ip {t}\n\
         table ip {t} {{\n\
         \tset gone {{ type ipv4_addr; }}\n\
         \tchain spread {{\n\
         \t\ttype nat hook prerouting priority dstnat; policy accept;\n\
         \t}}\n\
         \tchain reset_gone {{\n\
         \t\ttype filter hook forward priority filter; policy accept;\n\
         \t\tct status dnat ct original ip daddr {vip} ct reply ip saddr @gone counter reject with tcp reset\n\
         \t}}\n\
         \tchain retry_refused {{\n\
         \t\ttype filter hook forward priority filter; policy accept;\n\
         \t\tct status dnat ct original ip daddr {vip} ct direction reply tcp flags rst ct status & assured != assured counter drop\n\
         \t}}\n\
         }}\n",
        vip = cfg.vip,
    )
}

/// One transaction: the `spread` rule for `plan`'s targets (none: the VIP's flows reach
/// this host's own stack, which refuses them) and the `gone` set.
pub(crate) fn update_text(cfg: &ClusterL4, plan: &Plan) -> String {
    let t = &cfg.table;
    let mut text = format!("flush chain ip {t} spread\nflush set ip {t} gone\n");
    if !plan.targets.is_empty() {
        let ports: Vec<String> = cfg.ports.iter().map(u16::to_string).collect();
        let slots: Vec<String> =
            plan.targets.iter().enumerate().map(|(i, target)| format!("{i} : {}", target.ip)).collect();
        text.push_str(&format!(
            "add rule ip {t} spread ip daddr {vip} tcp dport {{ {ports} }} counter dnat to numgen inc mod {n} map {{ {slots} }}\n",
            vip = cfg.vip,
            ports = ports.join(", "),
            n = plan.targets.len(),
            slots = slots.join(", "),
        ));
    }
    if !plan.gone.is_empty() {
        let gone: Vec<String> = plan.gone.iter().map(Ipv4Addr::to_string).collect();
        text.push_str(&format!("add element ip {t} gone {{ {} }}\n", gone.join(", ")));
    }
    text
}

/// Deletes the table (nothing if it is not there).
pub(crate) fn remove_text(cfg: &ClusterL4) -> String {
    format!("add table ip {t}\ndelete table ip {t}\n", t = cfg.table)
}

/// Runs `nft -f -` with `script`; its stderr on failure.
pub(crate) fn load(script: &str) -> io::Result<()> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot run nft: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(script.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if out.status.success() {
        return Ok(());
    }
    let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Err(io::Error::other(format!("nft refused the L4 table ({}): {why}", out.status)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::l4::Target;

    fn cfg() -> ClusterL4 {
        ClusterL4 {
            vip: Ipv4Addr::new(192, 0, 2, 10),
            ports: vec![80, 443],
            nodes: vec![],
            table: "t4".into(),
        }
    }

    #[test]
    fn an_update_spreads_over_the_targets_in_turn_and_lists_the_gone() {
        let target = |name: &str, ip: [u8; 4]| Target { name: name.into(), ip: Ipv4Addr::from(ip) };
        let plan = Plan {
            targets: vec![target("cs1", [10, 0, 0, 1]), target("cs2", [10, 0, 0, 2])],
            gone: vec![Ipv4Addr::new(10, 0, 0, 3)],
            dead: vec![Ipv4Addr::new(10, 0, 0, 3)],
        };
        let text = update_text(&cfg(), &plan);
        assert_eq!(
            text,
            "flush chain ip t4 spread\nflush set ip t4 gone\n\
             add rule ip t4 spread ip daddr 192.0.2.10 tcp dport { 80, 443 } counter dnat to numgen inc mod 2 \
             map { 0 : 10.0.0.1, 1 : 10.0.0.2 }\n\
             add element ip t4 gone { 10.0.0.3 }\n"
        );
        let empty = update_text(&cfg(), &Plan::default());
        assert_eq!(empty, "flush chain ip t4 spread\nflush set ip t4 gone\n", "no target: no rule");
    }

    #[test]
    fn the_table_resets_flows_of_gone_nodes_to_the_vip_only() {
        let text = install_text(&cfg());
        assert!(text.starts_with("add table ip t4\ndelete table ip t4\ntable ip t4 {"), "{text}");
        assert!(text.contains("ct original ip daddr 192.0.2.10 ct reply ip saddr @gone"), "{text}");
        assert!(
            text.contains("ct direction reply tcp flags rst ct status & assured != assured counter drop"),
            "a refused first SYN is retried, not refused: {text}"
        );
    }
}
