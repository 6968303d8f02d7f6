//! What a host lacks to run the L4 tier, for `cswitch check`: `nft` (the table is loaded
//! with it), `conntrack` (a dead node's unanswered flows are deleted with it) and IPv4
//! forwarding (without it no flow to the VIP passes).

/// One thing the host lacks, and how to get it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lack {
    /// What is missing.
    pub what: String,
    /// How to fix it.
    pub fix: String,
}

/// What this host lacks to run the tier.
pub fn missing() -> Vec<Lack> {
    let mut out = Vec::new();
    let nft = std::process::Command::new("nft").arg("--version").output();
    if !nft.is_ok_and(|o| o.status.success()) {
        out.push(Lack {
            what: "`nft` (nftables) is not installed: the tier loads its table with it".into(),
            fix: "apt-get install nftables".into(),
        });
    }
    let conntrack = std::process::Command::new("conntrack").arg("--version").output();
    if !conntrack.is_ok_and(|o| o.status.success()) {
        out.push(Lack {
            what: "`conntrack` (conntrack-tools) is not installed: without it, clients that \
                   connected to a crashed node keep retrying it until they time out"
                .into(),
            fix: "apt-get install conntrack".into(),
        });
    }
    let forwarding = std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward");
    if !forwarding.as_deref().is_ok_and(|f| f.trim() == "1") {
        out.push(Lack {
            what: "net.ipv4.ip_forward is not 1: no flow to the VIP would pass this host".into(),
            fix: "sysctl -w net.ipv4.ip_forward=1 (and in /etc/sysctl.d/ to keep it)".into(),
        });
    }
    out
}
