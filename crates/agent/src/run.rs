//! The reporting thread: measure, compute, send to every switch, wait for the next tick.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::capacity::CapacityFn;
use crate::measure::{Meter, Metric};
use crate::wire::{Report, MAX_DATAGRAM};

/// Everything an agent needs; `cswitch agent` builds it from its command line.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// The address the switches know this server by; sent in every report.
    pub server: SocketAddr,
    /// Where reports go; all IPv4 or all IPv6 (one socket sends them all).
    pub switches: Vec<SocketAddr>,
    /// What load is.
    pub metric: Metric,
    /// Count only sockets on this local port (socket metrics only).
    pub port_filter: Option<u16>,
    /// Load to capacity.
    pub capacity: CapacityFn,
    /// Time between reports; more than zero.
    pub interval: Duration,
    /// Shared secret sent with each report.
    pub token: Option<String>,
    /// Stop after this many rounds (one measurement, one report to each switch);
    /// `None` runs until stopped. A round whose measurement fails still counts, so a
    /// count always ends.
    pub count: Option<u64>,
}

/// A running agent. Dropping the handle also stops the agent (without waiting for it).
#[derive(Debug)]
pub struct AgentHandle {
    stop: Sender<()>,
    thread: JoinHandle<()>,
    sent: Arc<AtomicU64>,
}

impl AgentHandle {
    /// Datagrams sent so far (one per switch per round; failed sends not counted).
    pub fn reports_sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// Whether the thread has ended (its count is reached).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }

    /// Stops the agent now, even mid-wait, and joins its thread.
    pub fn stop(self) {
        // A send error means the thread already ended; joining is all that is left.
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }

    /// Waits for the agent to end by itself (its count reached); forever if it has no
    /// count. Returns the datagrams sent; Err if the thread panicked.
    pub fn wait(self) -> Result<u64, String> {
        let AgentHandle { stop, thread, sent } = self;
        let result = thread.join().map_err(|_| "the agent thread panicked".to_string());
        // Kept alive until here: dropping the sender tells the thread to stop.
        drop(stop);
        result.map(|()| sent.load(Ordering::Relaxed))
    }
}

/// Starts an agent on its own thread. Fails at once if the configuration cannot work
/// (no switch, mixed address families, zero interval) or the socket cannot be bound.
pub fn spawn(cfg: AgentConfig) -> io::Result<AgentHandle> {
    let socket = bind_for(&cfg.switches)?;
    if cfg.interval.is_zero() {
        return Err(invalid_input("the interval must be more than zero"));
    }
    let (stop, stopped) = mpsc::channel();
    let sent = Arc::new(AtomicU64::new(0));
    let agent = Agent {
        meter: Meter::new(cfg.metric.clone(), cfg.port_filter),
        cfg,
        socket,
        sent: Arc::clone(&sent),
        buf: Vec::with_capacity(MAX_DATAGRAM),
    };
    let thread = thread::Builder::new().name("cswitch-agent".into()).spawn(move || agent.run(stopped))?;
    Ok(AgentHandle { stop, thread, sent })
}

/// An unbound-port UDP socket of the switches' address family.
fn bind_for(switches: &[SocketAddr]) -> io::Result<UdpSocket> {
    let first = switches.first().ok_or_else(|| invalid_input("at least one switch is needed"))?;
    // One socket cannot send to both families portably, so mixing them is refused.
    if switches.iter().any(|s| s.is_ipv4() != first.is_ipv4()) {
        return Err(invalid_input("switches must be all IPv4 or all IPv6"));
    }
    let local: SocketAddr = match first {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    UdpSocket::bind(local)
}

fn invalid_input(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.to_string())
}

/// The thread's state.
struct Agent {
    cfg: AgentConfig,
    meter: Meter,
    socket: UdpSocket,
    sent: Arc<AtomicU64>,
    buf: Vec<u8>,
}

impl Agent {
    fn run(mut self, stopped: Receiver<()>) {
        tracing::info!(server = %self.cfg.server, metric = %self.cfg.metric, "capacity agent started");
        let count = self.cfg.count;
        let done = |rounds: u64| count.is_some_and(|count| rounds >= count);
        let mut rounds = 0;
        let mut tick = Instant::now();
        while !done(rounds) {
            self.round();
            rounds += 1;
            if done(rounds) {
                break;
            }
            tick = next_tick(tick, self.cfg.interval, Instant::now());
            // Waiting on the channel rather than sleeping makes stop() prompt; a dropped
            // handle (Disconnected) stops the agent too.
            match stopped.recv_timeout(tick.saturating_duration_since(Instant::now())) {
                Err(RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        tracing::info!(server = %self.cfg.server, rounds, "capacity agent stopped");
    }

    /// One measurement and one report to each switch.
    fn round(&mut self) {
        let load = match self.meter.measure() {
            Ok(load) => load,
            Err(e) => {
                // Send nothing: a host that cannot measure itself should not claim
                // capacity, and after 2 s of silence the switch gives it capacity 0.
                tracing::warn!(metric = %self.cfg.metric, error = %e, "cannot measure load; no report this round");
                return;
            }
        };
        if let Err(len) = self.encode(load) {
            tracing::warn!(load, len, "report longer than {MAX_DATAGRAM} bytes; not sent");
            return;
        }
        for switch in &self.cfg.switches {
            match self.socket.send_to(&self.buf, switch) {
                Ok(_) => {
                    self.sent.fetch_add(1, Ordering::Relaxed);
                }
                // Not fatal: the switch may be restarting, and the next round retries.
                Err(e) => tracing::warn!(%switch, error = %e, "cannot send capacity report"),
            }
        }
    }

    /// Fills `buf` with the report for `load`; Err(length) if it would be refused as
    /// too long (a long token, or an absurd figure from a metric file).
    fn encode(&mut self, load: f64) -> Result<(), usize> {
        let report = Report {
            server: self.cfg.server,
            capacity: self.cfg.capacity.capacity(load),
            load,
            metric: self.cfg.metric.name().to_string(),
            token: self.cfg.token.clone(),
        };
        self.buf.clear();
        report.encode(&mut self.buf);
        tracing::debug!(server = %report.server, load, capacity = report.capacity, "capacity report");
        if self.buf.len() > MAX_DATAGRAM {
            return Err(self.buf.len());
        }
        Ok(())
    }
}

/// The tick after `prev`. Ticks stay on a fixed grid so the time a round takes does not
/// make reports drift; if the agent fell behind (a stalled host), the grid restarts
/// from `now` instead of sending the missed reports in a burst.
fn next_tick(prev: Instant, interval: Duration, now: Instant) -> Instant {
    let next = prev + interval;
    if next > now {
        next
    } else {
        now + interval
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_stay_on_the_grid() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        assert_eq!(next_tick(t0, s, t0 + Duration::from_millis(3)), t0 + s);
        assert_eq!(next_tick(t0 + s, s, t0 + Duration::from_millis(1999)), t0 + 2 * s);
    }

    #[test]
    fn late_ticks_are_not_made_up() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let late = t0 + Duration::from_millis(3500);
        assert_eq!(next_tick(t0, s, late), late + s);
    }

    fn config(switches: Vec<SocketAddr>) -> AgentConfig {
        AgentConfig {
            server: "127.0.0.1:80".parse().unwrap(),
            switches,
            metric: Metric::LoadAvg,
            port_filter: None,
            capacity: CapacityFn::default(),
            interval: Duration::from_secs(1),
            token: None,
            count: Some(1),
        }
    }

    #[test]
    fn refuses_configs_that_cannot_work() {
        let kind = |cfg| spawn(cfg).map(|_| ()).unwrap_err().kind();
        assert_eq!(kind(config(vec![])), io::ErrorKind::InvalidInput);
        let mixed = vec!["127.0.0.1:9".parse().unwrap(), "[::1]:9".parse().unwrap()];
        assert_eq!(kind(config(mixed)), io::ErrorKind::InvalidInput);
        let zero = AgentConfig { interval: Duration::ZERO, ..config(vec!["127.0.0.1:9".parse().unwrap()]) };
        assert_eq!(kind(zero), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn count_zero_sends_nothing() {
        let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
        let cfg = AgentConfig { count: Some(0), ..config(vec![sink.local_addr().unwrap()]) };
        assert_eq!(spawn(cfg).unwrap().wait(), Ok(0));
    }
}
