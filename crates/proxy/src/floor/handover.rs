//! A binary upgrade's hand-over, as the workers see it (issue 16): once the new process
//! serves, the old one stops accepting and gives each idle plain HTTP client connection
//! (parked or waiting as a task, none with a request in flight) to a [`Sink`] that passes
//! its socket to the new process. How the socket travels (`SCM_RIGHTS` over a Unix
//! socket) is the binary's business; the proxy only hands over and counts.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// One client connection leaving for the new process, between two requests: nothing of a
/// request has been read (bytes the client sent since wait in the kernel's receive queue,
/// which moves with the socket).
pub struct Moving {
    /// The socket, out of the runtime.
    pub stream: std::net::TcpStream,
    /// The listener it came in on (by name: the new process may number them otherwise).
    pub listener: String,
    /// The client's address.
    pub peer: SocketAddr,
    /// A request of this connection has been answered by a server (`reuse = "safe"`).
    pub served: bool,
}

/// Passes a connection's socket to the new process; an error leaves the socket with the
/// caller (the old process goes on serving it) and says why.
pub type Sink = Box<dyn Fn(&Moving) -> std::io::Result<()> + Send + Sync>;

/// The hand-over in progress: where connections go and how many went.
pub struct Handover {
    sink: Sink,
    moved: AtomicU64,
    failed: AtomicU64,
    last_failure: Mutex<Option<String>>,
}

/// What the hand-over did so far.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct HandoverTally {
    /// Idle client connections now served by the new process.
    pub moved: u64,
    /// Connections that could not be passed (the old process kept serving them).
    pub failed: u64,
    /// Why the last of those failed.
    pub last_failure: Option<String>,
}

impl Handover {
    /// A hand-over into `sink`.
    pub fn new(sink: Sink) -> Handover {
        Handover { sink, moved: AtomicU64::new(0), failed: AtomicU64::new(0), last_failure: Mutex::new(None) }
    }

    /// Passes `conn` on; on failure it is given back (and the failure counted and kept).
    pub fn pass(&self, conn: Moving) -> Result<(), Moving> {
        match (self.sink)(&conn) {
            Ok(()) => {
                self.moved.fetch_add(1, Ordering::Relaxed);
                Ok(()) // dropping our descriptor; the new process holds the socket
            }
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(peer = %conn.peer, error = %e, "connection not moved; the old process serves it");
                *self.last_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                Err(conn)
            }
        }
    }

    /// The counts so far.
    pub fn tally(&self) -> HandoverTally {
        HandoverTally {
            moved: self.moved.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            last_failure: self.last_failure.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }
}

/// Passes a connection taken out of the runtime (parked, or leaving its task) to the new
/// process; on failure it is given back as it was. Its open count stays with the caller.
pub fn move_out(
    shared: &crate::floor::shared::Shared,
    handover: &Handover,
    r: crate::floor::parked::Resting,
) -> Result<(), crate::floor::parked::Resting> {
    let crate::floor::parked::Resting { stream, peer, listener, since, id, served, extra } = r;
    let name = shared.snapshot.load().listeners.get(listener as usize).map(|l| l.name.clone());
    let conn = Moving { stream, listener: name.unwrap_or_default(), peer, served };
    handover.pass(conn).map_err(|conn| crate::floor::parked::Resting {
        stream: conn.stream,
        peer,
        listener,
        since,
        id,
        served,
        extra,
    })
}
