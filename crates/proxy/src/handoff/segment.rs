//! Whether a server host shares the switch's L2 segment: the steering table forwards a
//! handed-off flow by rewriting MAC addresses only (ADR 0007), so a host the kernel
//! reaches through a gateway, or by another interface than `[oneway] interface`, would
//! never see the client's packets. The kernel's IPv4 main routing table (`/proc/net/route`)
//! says: the longest prefix that holds the agent's address must be a direct route (no
//! gateway) on that interface, for the agent's address or the server's (an agent may listen
//! on a management network of its own). Read at most once a second per worker thread, so a
//! hand-off pays a lookup in a few routes, not a file read. Policy routing (other tables)
//! is not consulted.

use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

/// How long a worker keeps the routes it read.
const FRESH: Duration = Duration::from_secs(1);
/// A host found off the segment is logged at most this often per worker.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// One IPv4 route: destination, mask, whether it goes through a gateway, its interface,
/// its metric.
#[derive(Clone, Debug, PartialEq)]
struct Route {
    dest: u32,
    mask: u32,
    via_gateway: bool,
    iface: String,
    metric: u32,
}

#[derive(Default)]
struct Cache {
    routes: Vec<Route>,
    read_at: Option<Instant>,
    logged_at: Option<Instant>,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// Whether a host known by `addresses` (its agent's, its server's) is directly on `iface`
/// by any of them (see the module's header). True when the routes cannot be read (nothing
/// to judge by: the hand-off is tried, as before this check) or an address is not IPv4.
pub fn shared(iface: &str, addresses: &[IpAddr]) -> bool {
    let mut v4 = Vec::with_capacity(addresses.len());
    for a in addresses {
        match a {
            IpAddr::V4(ip) => v4.push(*ip),
            IpAddr::V6(_) => return true,
        }
    }
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.read_at.is_none_or(|at| at.elapsed() > FRESH) {
            c.routes = std::fs::read_to_string("/proc/net/route").map(|t| parse(&t)).unwrap_or_default();
            c.read_at = Some(Instant::now());
        }
        if c.routes.is_empty() {
            return true;
        }
        let on = v4.iter().any(|ip| on_link(&c.routes, iface, *ip));
        if !on && c.logged_at.is_none_or(|at| at.elapsed() > LOG_EVERY) {
            c.logged_at = Some(Instant::now());
            tracing::warn!(host = ?v4, iface, "a server host is not on the switch's segment (routed, or on another interface): hand-offs to it are served two-way");
        }
        on
    })
}

/// Whether the route that `ip` takes is direct on `iface`.
fn on_link(routes: &[Route], iface: &str, ip: Ipv4Addr) -> bool {
    let ip = u32::from(ip);
    routes
        .iter()
        .filter(|r| ip & r.mask == r.dest & r.mask)
        .max_by(|a, b| a.mask.count_ones().cmp(&b.mask.count_ones()).then(b.metric.cmp(&a.metric)))
        .is_some_and(|r| !r.via_gateway && r.iface == iface)
}

/// `/proc/net/route`: a header line, then `Iface Destination Gateway Flags RefCnt Use
/// Metric Mask …`, addresses as the kernel's in-memory u32 in hex.
fn parse(text: &str) -> Vec<Route> {
    const RTF_UP: u32 = 0x1;
    const RTF_GATEWAY: u32 = 0x2;
    let addr =
        |hex: &str| u32::from_str_radix(hex, 16).ok().map(|v| u32::from(Ipv4Addr::from(v.to_ne_bytes())));
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let flags = u32::from_str_radix(f.get(3)?, 16).ok()?;
            (flags & RTF_UP != 0).then_some(())?;
            Some(Route {
                iface: f.first()?.to_string(),
                dest: addr(f.get(1)?)?,
                via_gateway: flags & RTF_GATEWAY != 0,
                metric: f.get(6)?.parse().ok()?,
                mask: addr(f.get(7)?)?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a host with a default route through 192.0.2.1 on eth0, 192.0.2.0/24 on eth0
    /// and 10.9.0.0/16 on eth1 lists (little-endian, as the kernel prints it here).
    fn table() -> Vec<Route> {
        let hex = |ip: [u8; 4]| format!("{:08X}", u32::from_ne_bytes(ip));
        let line = |iface: &str, dest: [u8; 4], gw: [u8; 4], flags: u32, mask: [u8; 4]| {
            format!("{iface}\t{}\t{}\t{flags:04X}\t0\t0\t0\t{}\t0\t0\t0\n", hex(dest), hex(gw), hex(mask))
        };
        let text = String::from(
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n",
        ) + &line("eth0", [0, 0, 0, 0], [192, 0, 2, 1], 3, [0, 0, 0, 0])
            + &line("eth0", [192, 0, 2, 0], [0, 0, 0, 0], 1, [255, 255, 255, 0])
            + &line("eth1", [10, 9, 0, 0], [0, 0, 0, 0], 1, [255, 255, 0, 0])
            + &line("eth0", [10, 8, 0, 0], [0, 0, 0, 0], 0, [255, 255, 0, 0]);
        parse(&text)
    }

    #[test]
    fn a_host_on_the_interfaces_subnet_shares_the_segment() {
        let routes = table();
        assert_eq!(routes.len(), 3, "the route that is not up is left out: {routes:?}");
        assert!(on_link(&routes, "eth0", Ipv4Addr::new(192, 0, 2, 77)));
    }

    #[test]
    fn a_routed_host_or_one_on_another_interface_does_not() {
        let routes = table();
        assert!(!on_link(&routes, "eth0", Ipv4Addr::new(198, 51, 100, 7)), "through the gateway");
        assert!(!on_link(&routes, "eth0", Ipv4Addr::new(10, 9, 3, 4)), "on eth1");
        assert!(on_link(&routes, "eth1", Ipv4Addr::new(10, 9, 3, 4)));
        assert!(!on_link(&routes, "eth0", Ipv4Addr::new(10, 8, 0, 1)), "a route that is down is not used");
        assert!(!on_link(&[], "eth0", Ipv4Addr::new(192, 0, 2, 77)), "no route at all");
    }
}
