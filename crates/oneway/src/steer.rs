//! The switch's steering datapath (spike §3.1): an nftables `netdev` table on the ingress of
//! the interface clients' packets arrive on. A migrated flow's packets get the server's MAC
//! as destination and the switch's as source (P9), and leave by the same interface; a
//! frozen flow's packets are dropped (P1: a socket in repair mode still receives); a new
//! SYN marks its flow `fresh`, which shadows a stale entry of an earlier connection on the
//! same client port (P11); FIN or RST from the client lands the flow in `ended`, and each
//! later packet of an ended flow refreshes that entry, so its age says how long the client
//! has been quiet since (what the switch's sweep reads before it forgets a flow).
//!
//! The table is installed once, at start, from generated text through `nft -f -` (rule
//! expressions over raw netlink are a large encoder for a one-time job; ADR 0007). Each
//! freeze and flip is one raw netlink batch — one atomic transaction, no process spawned
//! (`netlink`): the spike measured 21 µs per batch against 111 µs through libnftables.
//! The sweep reads `ended` and `flows` with netlink dumps.
//!
//! One table serves one VIP; flows are keyed by the client's address and port.

mod netlink;

use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::{Command, Stdio};
use std::time::Duration;

/// How long an `ended` entry lives without a packet of its flow: the longest quiet time
/// [`Steering::ended`] can report.
pub const ENDED_TIMEOUT: Duration = Duration::from_secs(120);

/// What the table is installed for.
#[derive(Clone, Debug)]
pub struct TableSpec {
    /// nftables table name (family netdev).
    pub table: String,
    /// The interface clients' packets arrive on.
    pub iface: String,
    /// The VIP and the ports of the one-way listeners.
    pub vip: std::net::Ipv4Addr,
    /// Listener ports on the VIP.
    pub ports: Vec<u16>,
    /// The switch's MAC on `iface` (the source of steered frames).
    pub switch_mac: [u8; 6],
    /// A steered flow idle this long is forgotten.
    pub flow_timeout: Duration,
}

/// The ruleset text for `spec`.
pub fn ruleset(spec: &TableSpec) -> String {
    let mac = fmt_mac(spec.switch_mac);
    let ports: Vec<String> = spec.ports.iter().map(u16::to_string).collect();
    let secs = spec.flow_timeout.as_secs().max(1);
    let ended = ENDED_TIMEOUT.as_secs();
    format!(
        "table netdev {t} {{\n\
         \tmap flows {{ type ipv4_addr . inet_service : ether_addr; flags dynamic, timeout; timeout {secs}s; counter; }}\n\
         \tset frozen {{ type ipv4_addr . inet_service; flags timeout; timeout 5s; }}\n\
         \tset fresh {{ type ipv4_addr . inet_service; flags dynamic, timeout; timeout 60s; }}\n\
         \tset ended {{ type ipv4_addr . inet_service; flags dynamic, timeout; timeout {ended}s; }}\n\
         \tchain ingress {{\n\
         \t\ttype filter hook ingress device \"{iface}\" priority -500; policy accept;\n\
         \t\tip daddr {vip} tcp dport {{ {ports} }} jump vip\n\
         \t}}\n\
         \tchain vip {{\n\
         \t\ttcp flags & (syn|ack) == syn update @fresh {{ ip saddr . tcp sport }} accept\n\
         \t\tip saddr . tcp sport @frozen counter drop\n\
         \t\tip saddr . tcp sport @fresh accept\n\
         \t\ttcp flags & (fin|rst) != 0 ip saddr . tcp sport @flows add @ended {{ ip saddr . tcp sport }}\n\
         \t\tip saddr . tcp sport @ended update @ended {{ ip saddr . tcp sport }}\n\
         \t\tether daddr set ip saddr . tcp sport map @flows update @flows {{ ip saddr . tcp sport : ether daddr }} \
         ether saddr set {mac} counter fwd to \"{iface}\"\n\
         \t}}\n\
         }}\n",
        t = spec.table,
        iface = spec.iface,
        vip = spec.vip,
        ports = ports.join(", "),
    )
}

/// Installs the table (replacing one of the same name) with `nft -f -`.
pub fn install(spec: &TableSpec) -> io::Result<()> {
    let _ = remove(&spec.table);
    nft(&ruleset(spec))
}

/// Removes the table, if it is there.
pub fn remove(table: &str) -> io::Result<()> {
    nft(&format!("destroy table netdev {table}\n"))
        .or_else(|_| nft(&format!("delete table netdev {table}\n")))
}

fn nft(script: &str) -> io::Result<()> {
    let mut child =
        Command::new("nft").args(["-f", "-"]).stdin(Stdio::piped()).stderr(Stdio::piped()).spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(script.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if out.status.success() {
        return Ok(());
    }
    Err(io::Error::other(format!("nft: {}", String::from_utf8_lossy(&out.stderr).trim())))
}

fn fmt_mac(mac: [u8; 6]) -> String {
    mac.map(|b| format!("{b:02x}")).join(":")
}

/// The per-flow operations, each one atomic transaction on the switch's table.
pub struct Steering {
    nl: netlink::Batcher,
}

impl Steering {
    /// Opens a netlink socket for the table `table`.
    pub fn open(table: &str) -> io::Result<Steering> {
        Ok(Steering { nl: netlink::Batcher::open(table)? })
    }

    /// The client's packets are dropped from now on (before the dump: P1).
    pub fn freeze(&mut self, client: SocketAddrV4) -> io::Result<()> {
        self.nl.run(&[netlink::Op::add("frozen", key(client), None)])
    }

    /// One transaction: the client's packets go to `server_mac`, and are neither fresh
    /// nor frozen any more. An entry left by an earlier connection on the same client port
    /// (to another server) is replaced: adding a key that maps elsewhere would fail; and
    /// that connection's `ended` entry goes, so the new one is not taken for ended.
    pub fn flip(&mut self, client: SocketAddrV4, server_mac: [u8; 6]) -> io::Result<()> {
        let k = key(client);
        self.nl.run(&[
            netlink::Op::destroy("flows", k),
            netlink::Op::add("flows", k, Some(server_mac.to_vec())),
            netlink::Op::destroy("fresh", k),
            netlink::Op::destroy("frozen", k),
            netlink::Op::destroy("ended", k),
        ])
    }

    /// `flip` for a client port with no entry in `flows` or `ended` (the common case: the
    /// switch forgets a flow's entries together): two fewer operations in the transaction.
    /// Fails, changing nothing, when an entry is there after all (`flip` then).
    pub fn flip_new(&mut self, client: SocketAddrV4, server_mac: [u8; 6]) -> io::Result<()> {
        let k = key(client);
        self.nl.run(&[
            netlink::Op::add("flows", k, Some(server_mac.to_vec())),
            netlink::Op::destroy("fresh", k),
            netlink::Op::destroy("frozen", k),
        ])
    }

    /// The hand-off did not happen: the client's packets reach the switch again.
    pub fn unfreeze(&mut self, client: SocketAddrV4) -> io::Result<()> {
        self.nl.run(&[netlink::Op::destroy("frozen", key(client))])
    }

    /// The flow ended: forget it.
    pub fn forget(&mut self, client: SocketAddrV4) -> io::Result<()> {
        let k = key(client);
        self.nl.run(&[netlink::Op::destroy("flows", k), netlink::Op::destroy("ended", k)])
    }

    /// Forgets the flow only if it is still in `ended`, in one transaction: `Ok(false)`
    /// (nothing changed) when a flip since the dump that listed it gave the client port to
    /// a new connection (the flip removed the `ended` entry).
    pub fn forget_ended(&mut self, client: SocketAddrV4) -> io::Result<bool> {
        let k = key(client);
        match self.nl.run(&[netlink::Op::delete("ended", k), netlink::Op::destroy("flows", k)]) {
            Ok(()) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The flows in `ended` (the client sent FIN or RST on a steered flow), each with the
    /// time since the client's last packet (at most [`ENDED_TIMEOUT`]); one netlink dump.
    pub fn ended(&mut self) -> io::Result<Vec<Ended>> {
        let elements = self.nl.dump("ended")?;
        Ok(elements
            .iter()
            .filter_map(|e| {
                let client = client_of(&e.key)?;
                let timeout = e.timeout_ms.map_or(ENDED_TIMEOUT, Duration::from_millis);
                // No expiry listed: unknown, so not quiet at all.
                let left = e.expires_ms.map_or(timeout, Duration::from_millis);
                Some(Ended { client, quiet: timeout.saturating_sub(left) })
            })
            .collect())
    }

    /// The clients of every steered flow (`flows`); one netlink dump.
    pub fn flows(&mut self) -> io::Result<Vec<SocketAddrV4>> {
        Ok(self.nl.dump("flows")?.iter().filter_map(|e| client_of(&e.key)).collect())
    }
}

/// A flow in `ended`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    /// The client's address and port.
    pub client: SocketAddrV4,
    /// Time since the client's last packet on the flow (its FIN or RST, or a later one).
    pub quiet: Duration,
}

/// `ipv4_addr . inet_service`: each field in a 4-byte register, the port in network order.
fn key(client: SocketAddrV4) -> [u8; 8] {
    let [a, b, c, d] = client.ip().octets();
    let [p, q] = client.port().to_be_bytes();
    [a, b, c, d, p, q, 0, 0]
}

/// The inverse of [`key`].
fn client_of(key: &[u8]) -> Option<SocketAddrV4> {
    let [a, b, c, d, p, q, ..] = *key else { return None };
    Some(SocketAddrV4::new(Ipv4Addr::new(a, b, c, d), u16::from_be_bytes([p, q])))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_pad_the_port_to_a_register() {
        let client = "10.0.0.10:40000".parse().unwrap();
        assert_eq!(key(client), [10, 0, 0, 10, 0x9c, 0x40, 0, 0]);
        assert_eq!(client_of(&key(client)), Some(client));
        assert_eq!(client_of(&[10, 0, 0]), None);
    }

    #[test]
    fn the_ruleset_names_the_vip_ports_and_mac() {
        let spec = TableSpec {
            table: "cswitch".into(),
            iface: "eth0".into(),
            vip: "10.0.0.100".parse().unwrap(),
            ports: vec![80, 8080],
            switch_mac: [2, 0, 0, 0, 0, 2],
            flow_timeout: Duration::from_secs(600),
        };
        let text = ruleset(&spec);
        assert!(text.contains("ip daddr 10.0.0.100 tcp dport { 80, 8080 } jump vip"), "{text}");
        assert!(text.contains("ether saddr set 02:00:00:00:00:02 counter fwd to \"eth0\""), "{text}");
        assert!(text.contains("timeout 600s"), "{text}");
        assert!(text.contains("@ended update @ended"), "later packets refresh an ended flow: {text}");
    }
}
