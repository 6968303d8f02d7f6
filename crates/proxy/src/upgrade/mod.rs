//! A binary upgrade, the data plane's part (issue 16). The old process's listening
//! sockets are adopted by the new one ([`Inherited`]: the same socket objects, so no SYN
//! meets a closed port and no queued connection is lost); once the new process serves, the
//! old one's workers stop accepting and hand their idle plain HTTP connections over
//! (`floor::handover`), and the new one's workers adopt them ([`adopt_loop`]) as if they
//! had just finished a request. Connections with a request in flight move at their next
//! request boundary; tunnels (WebSocket, TLS passthrough, mail sessions after their
//! switch point) move paused, with both sockets and their buffered bytes
//! (`upstream::tunnel::moving`), and go on here (`tunnels`); TLS-terminated connections
//! finish in the old process (closed with close_notify once idle). If the new process
//! crashes before the old one is done, the hand-over is taken back: the old workers accept
//! again on the sockets they kept.
//! The channel between the processes (a Unix socket, `SCM_RIGHTS`) is the binary's;
//! the run-time state that goes along (`state`) travels on it as plain values.

pub mod edits;
pub mod state;
mod tunnels;

use crate::floor::conns::{ConnState, Slot, Watch};
use crate::floor::handover::{move_out, Moving};
use crate::floor::worker::{uncount, Open, Worker};
use crate::http::Client;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use tokio::sync::mpsc::UnboundedReceiver;

/// Sockets a new process takes over from the old one instead of binding its own.
#[derive(Default)]
pub struct Inherited {
    /// Each listener's sockets (one per old worker, all `SO_REUSEPORT` on one address), by
    /// listener name.
    pub listeners: Vec<(String, Vec<std::net::TcpListener>)>,
    /// The `[agents]` UDP socket.
    pub agents: Option<std::net::UdpSocket>,
    /// The `[cluster]` gossip socket.
    pub gossip: Option<std::net::UdpSocket>,
}

impl Inherited {
    /// The sockets of listener `name` if they are bound where `bind` asks (a port-0 bind
    /// takes whatever port they have), else `None` (a listener that moved is bound anew).
    pub(crate) fn take(
        &mut self,
        name: &str,
        bind: std::net::SocketAddr,
    ) -> Option<Vec<std::net::TcpListener>> {
        let at = self.listeners.iter().position(|(n, _)| n == name)?;
        let (_, sockets) = self.listeners.remove(at);
        let addr = sockets.first()?.local_addr().ok()?;
        let fits = addr.ip() == bind.ip() && (bind.port() == 0 || bind.port() == addr.port());
        if !fits {
            tracing::warn!(listener = name, was = %addr, now = %bind, "listener moved: bound anew");
        }
        fits.then_some(sockets)
    }
}

/// A worker's part of the hand-over, once the new process serves: stop accepting, pass
/// every parked connection on, and ask every connection waiting for a request to leave.
pub(crate) fn hand_over(worker: &Worker) {
    let Some(handover) = worker.shared.handing_over() else { return };
    // The accept loops stop and wait, holding their sockets, in case the new process dies
    // and the hand-over is taken back (`Switch::take_back`); tunnels pause and move.
    worker.shutdown.notify_waiters();
    for r in worker.parked.take_all() {
        let listener = r.listener as usize;
        match move_out(&worker.shared, handover, r) {
            Ok(()) => uncount(&worker.shared, listener),
            // Kept (and still counted): served here if it speaks, closed at shutdown.
            Err(r) => {
                if let Err(r) = worker.parked.park(r) {
                    uncount(&worker.shared, r.listener as usize);
                }
            }
        }
    }
    let closed = worker.conns.hand_over_waiting();
    if closed > 0 {
        handover.note_tls_closed(closed as u64);
        tracing::info!(closed, "idle connections that could not be woken closed: they cannot move");
    }
}

/// How the roof serves an HTTP connection (`accept::spawn_http`), passed in so this area
/// does not import the roof.
pub(crate) type SpawnHttp = fn(&Worker, Open, Client, Slot);

/// Serves the connections the old process hands this worker, each as a keep-alive
/// connection between two requests.
pub(crate) async fn adopt_loop(worker: Rc<Worker>, mut adopted: UnboundedReceiver<Moving>, spawn: SpawnHttp) {
    while let Some(conn) = adopted.recv().await {
        adopt(&worker, conn, spawn);
    }
}

fn adopt(worker: &Rc<Worker>, conn: Moving, spawn: SpawnHttp) {
    let snap = worker.shared.snapshot.load();
    let Some(index) = snap.listeners.iter().position(|l| l.name == conn.listener) else {
        tracing::warn!(listener = conn.listener, peer = %conn.peer, "moved connection's listener is gone; closed");
        return;
    };
    if let Some(tunnel) = conn.tunnel {
        let idle = snap.config.timeouts.tunnel_idle;
        return tunnels::adopt(worker, index, conn.stream, conn.peer, *tunnel, idle);
    }
    let plain_http =
        snap.listeners[index].protocol == config::Protocol::Http && snap.listeners[index].tls.is_none();
    if !plain_http {
        tracing::warn!(listener = conn.listener, peer = %conn.peer, "moved connection's listener no longer plain HTTP; closed");
        return;
    }
    let _ = conn.stream.set_nonblocking(true);
    let stream = match tokio::net::TcpStream::from_std(conn.stream) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(peer = %conn.peer, error = %e, "moved connection not registered; closed");
            return;
        }
    };
    worker.shared.client_conns.fetch_add(1, Ordering::AcqRel);
    let open = Open::new(Rc::clone(worker), index);
    let state: Slot = Rc::new(Watch::with(ConnState::Idle));
    let client = Client::adopted(stream, conn.peer, Rc::clone(&state), worker.client_id(), conn.served);
    spawn(worker, open, client, state);
}
