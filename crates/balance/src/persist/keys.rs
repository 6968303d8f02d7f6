//! Keys for the affinity modes that need no cookie: the client's address (`source`)
//! and a URL parameter. The proxy looks them up in a [`super::StickTable`] (or hashes
//! them); this file only extracts them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `ip` with all but its first `v4_prefix` (IPv4) or `v6_prefix` (IPv6) bits cleared, so
/// clients behind one NAT pool or one /64 share a key. IPv4-mapped IPv6 addresses
/// (`::ffff:a.b.c.d`, from dual-stack listeners) are treated as the IPv4 address they
/// carry. Prefixes past the address length keep every bit.
pub fn mask_ip(ip: IpAddr, v4_prefix: u8, v6_prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(a) => IpAddr::V4(mask_v4(a, v4_prefix)),
        IpAddr::V6(a) => match a.to_ipv4_mapped() {
            Some(a) => IpAddr::V4(mask_v4(a, v4_prefix)),
            None => {
                let keep = u128::MAX.checked_shl(128 - u32::from(v6_prefix.min(128))).unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & keep))
            }
        },
    }
}

fn mask_v4(a: Ipv4Addr, prefix: u8) -> Ipv4Addr {
    let keep = u32::MAX.checked_shl(32 - u32::from(prefix.min(32))).unwrap_or(0);
    Ipv4Addr::from(u32::from(a) & keep)
}

/// The value of the first query parameter `name` of a request-target: the query is what
/// follows the first `?` (up to a `#`, which real request-targets never carry), parameters are separated by `&` or `;`, nothing is
/// decoded. A bare `name` (no `=`) has an empty value; an empty `name` finds nothing.
pub fn url_param<'a>(target: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    if name.is_empty() {
        return None;
    }
    let target = target.split(|&b| b == b'#').next().unwrap_or_default();
    let query = &target[target.iter().position(|&b| b == b'?')? + 1..];
    query.split(|&b| b == b'&' || b == b';').find_map(|param| {
        let (n, v) = match param.iter().position(|&b| b == b'=') {
            Some(eq) => (&param[..eq], &param[eq + 1..]),
            None => (param, &param[param.len()..]),
        };
        (n == name).then_some(v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn masks_both_families() {
        assert_eq!(mask_ip(ip("192.168.7.9"), 24, 64), ip("192.168.7.0"));
        assert_eq!(mask_ip(ip("192.168.7.9"), 0, 64), ip("0.0.0.0"));
        assert_eq!(mask_ip(ip("192.168.7.9"), 40, 64), ip("192.168.7.9"));
        assert_eq!(mask_ip(ip("2001:db8:1:2:3:4:5:6"), 24, 64), ip("2001:db8:1:2::"));
        assert_eq!(mask_ip(ip("2001:db8::1"), 24, 0), ip("::"));
        assert_eq!(mask_ip(ip("2001:db8::1"), 24, 200), ip("2001:db8::1"));
        assert_eq!(mask_ip(ip("::ffff:10.1.2.3"), 16, 64), ip("10.1.0.0"));
    }

    #[test]
    fn finds_query_parameters() {
        let t = b"/a?x=1;sid=abc&y&sid=2#sid=frag";
        assert_eq!(url_param(t, b"sid"), Some(&b"abc"[..]));
        assert_eq!(url_param(t, b"y"), Some(&b""[..]));
        assert_eq!(url_param(t, b"z"), None);
        assert_eq!(url_param(b"/a#?sid=1", b"sid"), None);
        assert_eq!(url_param(b"/sid=1", b"sid"), None);
        assert_eq!(url_param(b"/a?=1", b""), None);
    }
}
