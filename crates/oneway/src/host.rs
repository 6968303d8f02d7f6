//! What a host needs before it can hand connections off (the switch) or take them (an
//! agent): `CAP_NET_ADMIN` for `TCP_REPAIR`, a kernel with `TCP_REPAIR_WINDOW` (4.8), and
//! on the switch the interface its steering hooks and `nft` to install the table. `cswitch check` reports each one missing.

use socket2::{Domain, Protocol, Socket, Type};

/// One thing the host lacks, and how to get it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    /// What is missing.
    pub what: String,
    /// How to fix it.
    pub fix: String,
}

/// What this host lacks to switch one-way on `interface` (`None`: an agent, no interface).
pub fn missing(interface: Option<&str>) -> Vec<Missing> {
    let mut out = Vec::new();
    if let Some(problem) = repair_refused() {
        out.push(Missing {
            what: format!("TCP_REPAIR is refused ({problem}): the process lacks CAP_NET_ADMIN"),
            fix: "run as root, or grant it: setcap cap_net_admin+ep $(command -v cswitch)".into(),
        });
    }
    if let Some(release) =
        std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().filter(|r| !at_least(r, 4, 8))
    {
        out.push(Missing {
            what: format!("kernel {} has no TCP_REPAIR_WINDOW", release.trim()),
            fix: "run on Linux 4.8 or later".into(),
        });
    }
    let nft = std::process::Command::new("nft").arg("--version").output();
    if interface.is_some() && !nft.is_ok_and(|o| o.status.success()) {
        out.push(Missing {
            what: "`nft` (nftables) is not installed: the switch installs its steering table with it".into(),
            fix: "apt-get install nftables".into(),
        });
    }
    if let Some(name) = interface.filter(|n| !std::path::Path::new("/sys/class/net").join(n).exists()) {
        out.push(Missing {
            what: format!("interface `{name}` does not exist on this host"),
            fix: "name the interface client packets arrive on (`ip link` lists them)".into(),
        });
    }
    out
}

/// Why repair mode is refused on a fresh socket, if it is.
fn repair_refused() -> Option<String> {
    let sock = match Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)) {
        Ok(s) => s,
        Err(e) => return Some(e.to_string()),
    };
    crate::enter_repair(&sock).err().map(|e| e.to_string())
}

/// Whether a release string (`6.18.44-…`) is at least `major.minor`.
fn at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit()).filter_map(|p| p.parse::<u32>().ok());
    let (ma, mi) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (ma, mi) >= (major, minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases() {
        assert!(at_least("6.18.44-cloud", 4, 8));
        assert!(at_least("4.8.0", 4, 8));
        assert!(!at_least("4.7.10", 4, 8));
        assert!(!at_least("3.19", 4, 8));
    }

    #[test]
    fn a_missing_interface_is_named() {
        let m = missing(Some("csw-absent0"));
        assert!(m.iter().any(|m| m.what == "interface `csw-absent0` does not exist on this host"), "{m:?}");
        assert!(!missing(Some("lo")).iter().any(|m| m.what.contains("interface")));
    }
}
