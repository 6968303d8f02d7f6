//! A binary upgrade's hand-over, as the workers see it (issue 16): once the new process
//! serves, the old one stops accepting and gives each idle plain HTTP client connection
//! (parked or waiting as a task, none with a request in flight) to a [`Sink`] that passes
//! its socket to the new process, and each tunnel (WebSocket, TLS passthrough, a mail
//! session after its switch point; `upstream::tunnel::moving`) with its server's socket
//! and the bytes it had read and not yet written. How the sockets travel (`SCM_RIGHTS`
//! over a Unix socket) is the binary's business; the proxy only hands over and counts.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// One client connection leaving for the new process: between two requests, nothing of a
/// request has been read (bytes the client sent since wait in the kernel's receive queue,
/// which moves with the socket); or a tunnel, paused with its server's socket.
pub struct Moving {
    /// The socket, out of the runtime.
    pub stream: std::net::TcpStream,
    /// The listener it came in on (by name: the new process may number them otherwise).
    pub listener: String,
    /// The client's address.
    pub peer: SocketAddr,
    /// A request of this connection has been answered by a server (`reuse = "safe"`).
    pub served: bool,
    /// A tunnel's other end and buffered bytes (`None`: an HTTP connection between
    /// requests).
    pub tunnel: Option<Box<Tunnel>>,
}

/// A tunnel paused for a binary upgrade: what the new process needs to go on copying.
pub struct Tunnel {
    /// The server's socket.
    pub server: std::net::TcpStream,
    /// Read from the client, not yet written to the server.
    pub to_server: Vec<u8>,
    /// Read from the server, not yet written to the client.
    pub to_client: Vec<u8>,
    /// What it is, for the logs: `websocket` (any HTTP upgrade), `tls-passthrough`,
    /// `pop3`, `imap`, `smtp`.
    pub kind: String,
    /// Its server (group and server names), counted as in flight there by the new process.
    pub server_name: Option<(String, String)>,
}

/// Passes a connection's socket to the new process; an error leaves the socket with the
/// caller (the old process goes on serving it) and says why.
pub type Sink = Box<dyn Fn(&Moving) -> std::io::Result<()> + Send + Sync>;

/// The hand-over in progress: where connections go and how many went. Taken back
/// ([`Handover::take_back`]) when the new process dies before this one is done: the
/// workers accept and keep their connections again, and a later upgrade starts it anew.
pub struct Handover {
    sink: Mutex<Sink>,
    active: AtomicBool,
    moved: AtomicU64,
    tunnels: AtomicU64,
    buffered: AtomicU64,
    tls_closed: AtomicU64,
    tunnels_kept: AtomicU64,
    failed: AtomicU64,
    last_failure: Mutex<Option<String>>,
}

/// What the hand-over did so far.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct HandoverTally {
    /// Client connections now served by the new process (tunnels included).
    pub moved: u64,
    /// Of those, tunnels (with their server's socket).
    pub tunnels_moved: u64,
    /// Bytes those tunnels had read and not yet written (both ways), moved with them.
    pub tunnel_bytes_buffered: u64,
    /// TLS-terminated connections closed here once idle (their sessions cannot move).
    pub tls_closed: u64,
    /// Tunnels that ended here because they cannot move (a TLS-terminated client: a
    /// WebSocket over HTTPS, a mail session after STARTTLS).
    pub tunnels_kept: u64,
    /// Connections that could not be passed (the old process kept serving them).
    pub failed: u64,
    /// Why the last of those failed.
    pub last_failure: Option<String>,
}

impl Handover {
    /// A hand-over into `sink`.
    pub fn new(sink: Sink) -> Handover {
        Handover {
            sink: Mutex::new(sink),
            active: AtomicBool::new(true),
            moved: AtomicU64::new(0),
            tunnels: AtomicU64::new(0),
            buffered: AtomicU64::new(0),
            tls_closed: AtomicU64::new(0),
            tunnels_kept: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            last_failure: Mutex::new(None),
        }
    }

    /// Whether connections are being handed over now (not taken back).
    pub fn active(&self) -> bool {
        self.active.load(Ordering::Acquire)
    }

    /// The new process is gone: connections stay here from now on.
    pub fn take_back(&self) {
        self.active.store(false, Ordering::Release);
    }

    /// A new hand-over into `sink` after one was taken back, counted from zero.
    pub fn restart(&self, sink: Sink) {
        *self.sink.lock().unwrap_or_else(|p| p.into_inner()) = sink;
        let counts =
            [&self.moved, &self.tunnels, &self.buffered, &self.tls_closed, &self.tunnels_kept, &self.failed];
        for count in counts {
            count.store(0, Ordering::Relaxed);
        }
        *self.last_failure.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.active.store(true, Ordering::Release);
    }

    /// Passes `conn` on; on failure it is given back (and the failure counted and kept).
    pub fn pass(&self, conn: Moving) -> Result<(), Moving> {
        let sent = (self.sink.lock().unwrap_or_else(|p| p.into_inner()))(&conn);
        match sent {
            Ok(()) => {
                self.moved.fetch_add(1, Ordering::Relaxed);
                if let Some(t) = &conn.tunnel {
                    self.tunnels.fetch_add(1, Ordering::Relaxed);
                    let bytes = t.to_server.len() + t.to_client.len();
                    self.buffered.fetch_add(bytes as u64, Ordering::Relaxed);
                }
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

    /// `n` TLS-terminated connections closed here once idle.
    pub fn note_tls_closed(&self, n: u64) {
        self.tls_closed.fetch_add(n, Ordering::Relaxed);
    }

    /// A tunnel that could not move ended here.
    pub fn note_tunnel_kept(&self) {
        self.tunnels_kept.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn tally(&self) -> HandoverTally {
        HandoverTally {
            moved: self.moved.load(Ordering::Relaxed),
            tunnels_moved: self.tunnels.load(Ordering::Relaxed),
            tunnel_bytes_buffered: self.buffered.load(Ordering::Relaxed),
            tls_closed: self.tls_closed.load(Ordering::Relaxed),
            tunnels_kept: self.tunnels_kept.load(Ordering::Relaxed),
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
    let conn = Moving { stream, listener: name.unwrap_or_default(), peer, served, tunnel: None };
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
