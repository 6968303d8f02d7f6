//! The agent's hand-off server (one-way switching, issue 12): switches connect to it,
//! authenticate with the shared token, and hand it live client connections. For each one it
//! restores the socket with `TCP_REPAIR` (`oneway::restore`, the routed request — or
//! ClientHello — put back in the receive queue), answers READY, and on GO leaves repair
//! mode and gives the connection to a local server through a `splice(2)` relay (`relay`) —
//! the one for the VIP port the client connected to (`HandoffConfig::local_for`: a TLS
//! listener's connections go to the host's TLS server) — so an unmodified server reads the
//! request (or the ClientHello) as the client sent it and its answer goes to the client
//! directly.
//! On ABORT, or when no GO comes in time, the restored socket is dropped in repair mode:
//! nothing is sent. Once a relayed connection has closed, the switch is told (ENDED), so it
//! stops steering the flow (`report`).
//!
//! Later requests on a handed-off connection (the listener's `connection_persistence`):
//! under `pin` they go to the same server through the splice relay; under `close` and
//! `redirect` a `session` reads them, judged by the switch's rules (`policy`, pushed by the
//! switch over the control channel). A group's cookie persistence (`cookies`) is applied by
//! the session too: the answers never pass the switch.
//!
//! When a served connection has closed, the switch that handed it off is told (`report`),
//! so it stops steering the flow.
//!
//! Blocking threads: a thread per switch connection, two per relayed connection, and one
//! watching ended connections until they close. The agent serves one host's hand-offs; a
//! thread costs less than a runtime here.

mod control;
mod cookies;
mod migrate;
mod pass;
mod policy;
mod relay;
mod report;
mod session;

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How the hand-off server runs.
#[derive(Clone, Debug)]
pub struct HandoffConfig {
    /// Where switches connect (the `agent` address in the switch's config).
    pub listen: SocketAddr,
    /// The shared token (`[oneway] token` on the switch).
    pub token: String,
    /// The local server restored connections are relayed to, unless `local_ports` names
    /// one for their VIP port.
    pub local: SocketAddr,
    /// Local servers by the VIP port the client connected to (e.g. 443 → the host's TLS
    /// server, when the switch has a one-way TLS passthrough listener there).
    pub local_ports: BTreeMap<u16, SocketAddr>,
    /// How long a restored connection waits for GO before it is dropped (silently).
    pub go_timeout: Duration,
    /// A relayed connection with no byte either way for this long is closed.
    pub idle_timeout: Duration,
    /// The Unix socket of a local server that takes connections as descriptors
    /// (`SCM_RIGHTS`): `pin` connections without cookie persistence are passed to it
    /// instead of relayed.
    pub pass_fd: Option<std::path::PathBuf>,
}

impl HandoffConfig {
    /// The local server for a connection the client made to the VIP's port `vip_port`.
    pub fn local_for(&self, vip_port: u16) -> SocketAddr {
        self.local_ports.get(&vip_port).copied().unwrap_or(self.local)
    }
}

/// What the server did, for logs and tests.
#[derive(Debug, Default)]
pub struct HandoffCounts {
    /// Connections restored and handed to the local server (GO).
    pub served: AtomicU64,
    /// Restores that failed (answered FAILED).
    pub failed: AtomicU64,
    /// Restored connections dropped: ABORT, or no GO in time.
    pub aborted: AtomicU64,
    /// Switch connections refused (bad token or not the protocol).
    pub refused: AtomicU64,
    /// Later requests answered with a redirect (`connection_persistence = "redirect"`).
    pub redirected: AtomicU64,
    /// Connections given to the local server as descriptors (`--pass-fd`).
    pub passed: AtomicU64,
    /// Connections moved to another server (`connection_persistence = "migrate"`).
    pub migrated: AtomicU64,
    /// Ends of served connections reported to their switch (ENDED sent).
    pub reported: AtomicU64,
    /// Ends not reported: no control connection from that switch was open.
    pub unreported: AtomicU64,
}

/// What the agent's threads share.
pub(crate) struct Shared {
    counts: Arc<HandoffCounts>,
    /// The switch's rules for its one-way listeners.
    policies: policy::Policies,
    /// The server that takes descriptors, if any.
    passer: Option<pass::Passer>,
    /// Where the ends of served connections are reported.
    reports: report::Reports,
    /// Connections waiting for the switch to move them.
    migrations: migrate::Migrations,
}

/// A running hand-off server; dropping it stops accepting (relays finish by themselves).
pub struct HandoffServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl HandoffServer {
    /// Binds `cfg.listen` and starts accepting switches.
    pub fn start(cfg: HandoffConfig) -> io::Result<HandoffServer> {
        let listener = TcpListener::bind(cfg.listen)?;
        let addr = listener.local_addr()?;
        let counts = Arc::new(HandoffCounts::default());
        let shared = Arc::new(Shared {
            reports: report::Reports::start(Arc::clone(&counts))?,
            counts,
            policies: policy::Policies::default(),
            passer: cfg.pass_fd.clone().map(pass::Passer::new),
            migrations: migrate::Migrations::default(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (local, ports) = (cfg.local, format!("{:?}", cfg.local_ports));
        let thread = {
            let (shared, stop, cfg) = (Arc::clone(&shared), Arc::clone(&stop), Arc::new(cfg));
            std::thread::Builder::new()
                .name("handoff-accept".into())
                .spawn(move || accept_loop(&listener, &cfg, &shared, &stop))?
        };
        tracing::info!(%addr, %local, local_ports = %ports, "hand-off server listening");
        Ok(HandoffServer { addr, shared, stop, thread: Some(thread) })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The counters.
    pub fn counts(&self) -> &HandoffCounts {
        &self.shared.counts
    }

    /// Blocks until the server stops (never, unless stopped from another thread).
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for HandoffServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the blocking accept so the loop sees the flag.
        let _ = std::net::TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Accepts switch connections until stopped (polling the flag every 100 ms).
fn accept_loop(listener: &TcpListener, cfg: &Arc<HandoffConfig>, shared: &Arc<Shared>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, peer)) => {
                let (cfg, shared) = (Arc::clone(cfg), Arc::clone(shared));
                let spawned = std::thread::Builder::new()
                    .name("handoff-control".into())
                    .spawn(move || control::serve(conn, peer, &cfg, &shared));
                if let Err(e) = spawned {
                    tracing::warn!(error = %e, "cannot start a control thread");
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "hand-off accept failed");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vip_port_chooses_the_local_server() {
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        let cfg = HandoffConfig {
            listen: addr("127.0.0.1:9000"),
            token: "0123456789abcdef".into(),
            local: addr("127.0.0.1:8080"),
            local_ports: BTreeMap::from([(443, addr("127.0.0.1:8443")), (8443, addr("[::1]:9443"))]),
            go_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(300),
            pass_fd: None,
        };
        assert_eq!(cfg.local_for(443), addr("127.0.0.1:8443"));
        assert_eq!(cfg.local_for(8443), addr("[::1]:9443"));
        // Any other port: the default.
        for port in [80, 8080, 444, 0] {
            assert_eq!(cfg.local_for(port), addr("127.0.0.1:8080"), "{port}");
        }
    }
}
