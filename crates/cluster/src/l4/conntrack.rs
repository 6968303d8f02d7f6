//! Forgetting the flows the tier gave a node that died before answering them. A client's
//! SYN to a crashed host gets no answer, and conntrack keeps its entry (`SYN_SENT`,
//! unreplied) for two minutes: every retransmit of that SYN follows the entry to the dead
//! node, whatever `spread` says now, until the client gives up. Deleting those entries when
//! the node leaves the targets makes the next retransmit (1 s, 3 s, … after the first SYN)
//! a new flow, which `spread` gives a live node. Entries that got an answer are the node's
//! connections in flight and are left alone (the `gone` reset handles them, ADR 0013).
//!
//! Deleted with the `conntrack` tool (Debian's `conntrack`, conntrack-tools), once per
//! node death, like the table's changes with `nft` (ADR 0018 says why not a netlink crate).

use std::io;
use std::net::Ipv4Addr;
use std::process::Command;

/// Deletes the tier's flows to `node` that never got a reply (TCP `SYN_SENT`, original
/// destination `vip`); how many there were.
pub(crate) fn forget_unanswered(vip: Ipv4Addr, node: Ipv4Addr) -> io::Result<u64> {
    let out = Command::new("conntrack")
        .args(["-D", "-p", "tcp", "--state", "SYN_SENT"])
        .args(["--orig-dst", &vip.to_string(), "--reply-src", &node.to_string()])
        .output()
        .map_err(|e| {
            io::Error::new(e.kind(), format!("cannot run conntrack (apt-get install conntrack): {e}"))
        })?;
    let said = String::from_utf8_lossy(&out.stderr);
    // It exits 1 when nothing matched, and says how many it deleted either way.
    match deleted(&said) {
        Some(n) => Ok(n),
        None if out.status.success() => Ok(0),
        None => Err(io::Error::other(format!("conntrack -D failed ({}): {}", out.status, said.trim()))),
    }
}

/// The count in conntrack's "N flow entries have been deleted."
fn deleted(said: &str) -> Option<u64> {
    let (before, _) = said.split_once(" flow entries have been deleted")?;
    before.rsplit(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_count_is_read_from_what_conntrack_says() {
        let said = "conntrack v1.4.7 (conntrack-tools): 2 flow entries have been deleted.\n";
        assert_eq!(deleted(said), Some(2));
        assert_eq!(
            deleted("conntrack v1.4.7 (conntrack-tools): 0 flow entries have been deleted.\n"),
            Some(0)
        );
        assert_eq!(deleted("conntrack: Operation not permitted\n"), None);
    }
}
