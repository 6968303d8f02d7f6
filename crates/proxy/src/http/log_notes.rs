//! What the access log keeps of a request head: the head's bytes are consumed (forwarded,
//! or overwritten by the next pipelined request) long before the line is written, so the
//! values the configured fields need are copied when the head arrives — and only those.

use config::{AccessLog, IpNet, LogField};
use http1::{RequestHead, Version};
use std::net::IpAddr;

/// The copied values (reused from request to request).
#[derive(Default)]
pub struct LogNotes {
    /// Method.
    pub method: String,
    /// Request-target.
    pub target: String,
    /// `HTTP/1.0` or `HTTP/1.1`.
    pub version: &'static str,
    /// `Host` header.
    pub host: String,
    /// `User-Agent` header.
    pub user_agent: String,
    /// Client IP after `X-Forwarded-For` from trusted proxies.
    pub real_client: Option<IpAddr>,
}

impl LogNotes {
    /// Forgets the previous request.
    pub fn clear(&mut self) {
        self.method.clear();
        self.target.clear();
        self.version = "";
        self.host.clear();
        self.user_agent.clear();
        self.real_client = None;
    }

    /// Copies what `log`'s fields need from the head in `bytes`.
    pub fn capture(
        &mut self,
        log: &AccessLog,
        bytes: &[u8],
        req: &RequestHead,
        peer: IpAddr,
        trusted: &[IpNet],
    ) {
        let lossy = |out: &mut String, b: &[u8]| out.push_str(&String::from_utf8_lossy(b));
        lossy(&mut self.method, req.method.slice(bytes));
        lossy(&mut self.target, req.target.slice(bytes));
        self.version = match req.version {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
        };
        if log.wants(LogField::Host) {
            if let Some(host) = req.host {
                lossy(&mut self.host, host.slice(bytes));
            }
        }
        if log.wants(LogField::UserAgent) {
            if let Some(ua) = req.header(bytes, "user-agent") {
                lossy(&mut self.user_agent, ua);
            }
        }
        if log.wants(LogField::RealClient) {
            self.real_client = Some(real_client(bytes, req, peer, trusted));
        }
    }
}

/// The client behind trusted proxies: walking `X-Forwarded-For` from the right (the entry
/// the nearest proxy added), the first address that is not a trusted proxy. A peer that
/// is not trusted is the client, whatever it claims; an entry that is not an IP stops the
/// walk at the last trusted hop (it could be forged beyond).
fn real_client(bytes: &[u8], req: &RequestHead, peer: IpAddr, trusted: &[IpNet]) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|n| n.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    let hops: Vec<&[u8]> = req
        .headers
        .iter()
        .filter(|h| h.name.slice(bytes).eq_ignore_ascii_case(b"x-forwarded-for"))
        .flat_map(|h| h.value.slice(bytes).split(|b| *b == b','))
        .collect();
    let mut client = peer;
    for hop in hops.iter().rev() {
        let Some(ip) = std::str::from_utf8(hop).ok().and_then(|s| s.trim().parse::<IpAddr>().ok()) else {
            break;
        };
        client = ip;
        if !is_trusted(ip) {
            break;
        }
    }
    client
}

#[cfg(test)]
mod tests {
    use super::*;
    use http1::HeadLimits;

    fn head(text: &str) -> RequestHead {
        let mut req = RequestHead::new();
        let limits = HeadLimits { max_head_bytes: 4096, max_headers: 20 };
        req.parse(text.as_bytes(), &limits).unwrap();
        req
    }

    fn net(s: &str) -> IpNet {
        let (a, p) = s.split_once('/').unwrap();
        IpNet { addr: a.parse().unwrap(), prefix: p.parse().unwrap() }
    }

    #[test]
    fn walks_trusted_hops_from_the_right() {
        let text = "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 6.6.6.6, 1.2.3.4\r\nX-Forwarded-For: 10.0.0.7\r\n\r\n";
        let req = head(text);
        let trusted = [net("10.0.0.0/8"), net("127.0.0.1/32")];
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // The proxy 127.0.0.1 says 10.0.0.7 (trusted) got it from 1.2.3.4: that is the client.
        assert_eq!(real_client(text.as_bytes(), &req, ip("127.0.0.1"), &trusted), ip("1.2.3.4"));
        // An untrusted peer's header is not believed.
        assert_eq!(real_client(text.as_bytes(), &req, ip("8.8.8.8"), &trusted), ip("8.8.8.8"));
        // Nothing trusted: the peer.
        assert_eq!(real_client(text.as_bytes(), &req, ip("127.0.0.1"), &[]), ip("127.0.0.1"));
    }

    #[test]
    fn garbage_stops_at_the_last_trusted_hop() {
        let text = "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 1.2.3.4, unknown, 10.0.0.7\r\n\r\n";
        let req = head(text);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(real_client(text.as_bytes(), &req, ip("10.0.0.1"), &[net("10.0.0.0/8")]), ip("10.0.0.7"));
    }
}
