//! The agent's hand-off server (one-way switching, issue 12): switches connect to it,
//! authenticate with the shared token, and hand it live client connections. For each one it
//! restores the socket with `TCP_REPAIR` (`oneway::restore`, the routed request put back in
//! the receive queue), answers READY, and on GO leaves repair mode and gives the connection
//! to the local web server through a `splice(2)` relay (`relay`), so an unmodified server
//! reads the request as the client sent it and its answer goes to the client directly.
//! On ABORT, or when no GO comes in time, the restored socket is dropped in repair mode:
//! nothing is sent. Once a relayed connection has closed, the switch is told (ENDED), so it
//! stops steering the flow (`report`).
//!
//! Blocking threads: a thread per switch connection, two per relayed connection, and one
//! watching ended connections until they close. The agent serves one host's hand-offs; a
//! thread costs less than a runtime here.

mod control;
mod relay;
mod report;

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
    /// The local web server restored connections are relayed to.
    pub local: SocketAddr,
    /// How long a restored connection waits for GO before it is dropped (silently).
    pub go_timeout: Duration,
    /// A relayed connection with no byte either way for this long is closed.
    pub idle_timeout: Duration,
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
    /// Ends of served connections reported to their switch (ENDED sent).
    pub reported: AtomicU64,
    /// Ends not reported: no control connection from that switch was open.
    pub unreported: AtomicU64,
}

/// A running hand-off server; dropping it stops accepting (relays finish by themselves).
pub struct HandoffServer {
    addr: SocketAddr,
    counts: Arc<HandoffCounts>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl HandoffServer {
    /// Binds `cfg.listen` and starts accepting switches.
    pub fn start(cfg: HandoffConfig) -> io::Result<HandoffServer> {
        let listener = TcpListener::bind(cfg.listen)?;
        let addr = listener.local_addr()?;
        let counts = Arc::new(HandoffCounts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let local = cfg.local;
        let reports = report::Reports::start(Arc::clone(&counts))?;
        let thread = {
            let (counts, stop, cfg) = (Arc::clone(&counts), Arc::clone(&stop), Arc::new(cfg));
            std::thread::Builder::new()
                .name("handoff-accept".into())
                .spawn(move || accept_loop(&listener, &cfg, &counts, &stop, &reports))?
        };
        tracing::info!(%addr, %local, "hand-off server listening");
        Ok(HandoffServer { addr, counts, stop, thread: Some(thread) })
    }

    /// The bound address (useful with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The counters.
    pub fn counts(&self) -> &HandoffCounts {
        &self.counts
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
fn accept_loop(
    listener: &TcpListener,
    cfg: &Arc<HandoffConfig>,
    counts: &Arc<HandoffCounts>,
    stop: &AtomicBool,
    reports: &report::Reports,
) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, peer)) => {
                let (cfg, counts, reports) = (Arc::clone(cfg), Arc::clone(counts), reports.clone());
                let spawned = std::thread::Builder::new()
                    .name("handoff-control".into())
                    .spawn(move || control::serve(conn, peer, &cfg, &counts, &reports));
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
