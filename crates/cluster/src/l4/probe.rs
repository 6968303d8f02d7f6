//! A direct check of the tier's targets from the tier's own host. The failure detector
//! needs about a second to call a node dead (ADR 0011), and every new flow the tier gives a
//! dead node in that second fails. So the tier's host also connects to each target's
//! listener (the VIP's first port, at the node's address) every [`EVERY`]: a refused
//! connection (the process is gone, the host answers with a reset) takes the node out of
//! the targets at once, three connects in a row that time out (the host is gone or cut off)
//! likewise; the next connect that succeeds brings it back, if the membership still says it
//! serves. The probe opens a connection and closes it without sending a byte, as an L4
//! balancer's TCP check does. A target whose last connect timed out (and is not down yet)
//! is checked again at once rather than after [`EVERY`], so a crashed host is out ~0.3 s
//! after its first timeout: before its clients' first SYN retransmits (1 s), which the
//! tier then balances anew (ADR 0018).

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

/// How often each target is checked.
pub(crate) const EVERY: Duration = Duration::from_millis(100);
/// How long a connect may take before it counts as timed out.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(100);
/// Timed-out connects in a row that take a target out.
const TIMEOUTS_DOWN: u32 = 3;

/// What the probe found of each address: down (out of the targets), and the timeouts in a
/// row so far.
#[derive(Default)]
pub(crate) struct Findings {
    state: HashMap<Ipv4Addr, (bool, u32)>,
}

/// One check's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Accepted,
    Refused,
    TimedOut,
}

impl Findings {
    /// Whether `ip` is out of the targets by the probe.
    pub(crate) fn down(&self, ip: Ipv4Addr) -> bool {
        self.state.get(&ip).is_some_and(|s| s.0)
    }

    /// Takes one outcome in; true when it changed whether `ip` is down.
    pub(crate) fn record(&mut self, ip: Ipv4Addr, outcome: Outcome) -> bool {
        let (down, timeouts) = self.state.entry(ip).or_default();
        let was = *down;
        match outcome {
            Outcome::Accepted => (*down, *timeouts) = (false, 0),
            Outcome::Refused => *down = true,
            Outcome::TimedOut => {
                *timeouts += 1;
                *down |= *timeouts >= TIMEOUTS_DOWN;
            }
        }
        was != *down
    }

    /// Whether a target timed out last time and is not down yet: worth checking again now.
    pub(crate) fn suspect(&self) -> bool {
        self.state.values().any(|(down, timeouts)| !down && *timeouts > 0)
    }

    /// Forgets addresses no longer checked (a node that left the membership).
    pub(crate) fn keep_only(&mut self, ips: &[Ipv4Addr]) {
        self.state.retain(|ip, _| ips.contains(ip));
    }
}

/// Connects to `ip:port` and closes the connection.
pub(crate) fn check(ip: Ipv4Addr, port: u16) -> Outcome {
    match TcpStream::connect_timeout(&SocketAddr::from((ip, port)), CONNECT_TIMEOUT) {
        Ok(stream) => {
            drop(stream);
            Outcome::Accepted
        }
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Outcome::Refused,
        Err(_) => Outcome::TimedOut,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_takes_a_target_out_at_once_timeouts_after_three_and_a_connect_brings_it_back() {
        let ip = Ipv4Addr::new(10, 0, 0, 2);
        let mut f = Findings::default();
        assert!(!f.record(ip, Outcome::Accepted) && !f.down(ip));
        assert!(f.record(ip, Outcome::Refused) && f.down(ip), "refused: out at once");
        assert!(f.record(ip, Outcome::Accepted) && !f.down(ip), "accepted: back");
        assert!(!f.record(ip, Outcome::TimedOut) && !f.record(ip, Outcome::TimedOut));
        assert!(f.suspect(), "timed out, not down yet: checked again at once");
        assert!(f.record(ip, Outcome::TimedOut) && f.down(ip), "the third timeout in a row");
        assert!(!f.suspect(), "down: checked at the usual pace");
        f.keep_only(&[]);
        assert!(!f.down(ip), "forgotten with its node");
    }

    #[test]
    fn a_closed_port_is_refused_and_an_open_one_accepted() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        assert_eq!(check(Ipv4Addr::LOCALHOST, port), Outcome::Accepted);
        drop(listener);
        assert_eq!(check(Ipv4Addr::LOCALHOST, port), Outcome::Refused);
    }
}
