//! End-of-connection reports (issue 12, part 3): when a relayed connection is over, the
//! switch that handed it off is told ([`Frame::Ended`]) so it can stop steering the flow.
//!
//! "Over" is the client socket's TCP state, not the relay's: a duplicate of the client's
//! descriptor goes to a watcher thread when the relay ends (the relay's own close then
//! closes nothing; the watcher sends the FIN if the relay did not), which reports the
//! connection once that socket reaches CLOSE — every byte and both FINs acknowledged, or
//! reset — so a switch never stops steering while the client still has data, an ACK or a
//! FIN to deliver to this host. A connection that does not get there within
//! [`LINGER_LIMIT`] (a client that never closes after the server did) is reported then.
//!
//! A switch holds several control connections to this agent (one per worker, pooled), and
//! the one a hand-off came on may have closed before its connection ends: the report goes
//! to that connection if it is still open, else to any other from the same switch address.
//! Each control thread sends the reports routed to it between frames (its loop wakes at
//! least every 100 ms), so writes to a connection never interleave.

use super::HandoffCounts;
use oneway::Frame;
use std::collections::HashMap;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a connection whose relay ended may take to reach CLOSE before it is reported
/// anyway (the client's side half open: its kernel keeps an orphaned FIN_WAIT2 as long).
pub(super) const LINGER_LIMIT: Duration = Duration::from_secs(60);

/// How often the watcher looks at the sockets it watches.
const TICK: Duration = Duration::from_millis(20);

/// Which control connection a hand-off came on.
#[derive(Clone, Copy, Debug)]
pub(super) struct Origin {
    switch: IpAddr,
    conn: u64,
}

/// The open control connections of each switch address: (connection number, the sender of
/// its thread's report queue).
type BySwitch = HashMap<IpAddr, Vec<(u64, Sender<Frame>)>>;

/// The open control connections, and the next connection number.
#[derive(Default)]
struct Routes {
    next: AtomicU64,
    by_switch: Mutex<BySwitch>,
}

/// What the control threads share for reports: the routes and the watcher's queue.
#[derive(Clone)]
pub(super) struct Reports {
    routes: Arc<Routes>,
    watch: Sender<Watch>,
}

/// A control connection's place in the routes; removed on drop.
pub(super) struct Registration {
    routes: Arc<Routes>,
    origin: Origin,
}

/// A connection whose relay is over, until its socket reaches CLOSE.
struct Watch {
    origin: Origin,
    id: u64,
    client: SocketAddr,
    sock: TcpStream,
    since: Instant,
    /// Passed to the local server as a descriptor (`--pass-fd`): the server owns it, so
    /// the watcher neither closes it nor gives up on it.
    passed: bool,
}

impl Reports {
    /// The reports of one hand-off server, and its watcher thread (which ends once every
    /// sender is gone and nothing is left to watch).
    pub(super) fn start(counts: Arc<HandoffCounts>) -> std::io::Result<Reports> {
        let routes = Arc::new(Routes::default());
        let (watch, queue) = mpsc::channel();
        let r = Arc::clone(&routes);
        std::thread::Builder::new()
            .name("handoff-ends".into())
            .spawn(move || watcher(&queue, &r, &counts))?;
        Ok(Reports { routes, watch })
    }

    /// Registers the control connection from `switch`; its thread sends what the receiver
    /// yields.
    pub(super) fn register(&self, switch: IpAddr) -> (Registration, Receiver<Frame>) {
        let conn = self.routes.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        lock(&self.routes).entry(switch).or_default().push((conn, tx));
        (Registration { routes: Arc::clone(&self.routes), origin: Origin { switch, conn } }, rx)
    }

    /// What the relay calls when it is over: the connection of hand-off `id` (whose client
    /// socket `sock` duplicates) is watched until it closes, then reported.
    pub(super) fn on_end(
        &self,
        origin: Origin,
        id: u64,
        client: SocketAddr,
        sock: TcpStream,
    ) -> Box<dyn FnOnce() + Send> {
        let watch = self.watch.clone();
        Box::new(move || {
            let _ = watch.send(Watch { origin, id, client, sock, since: Instant::now(), passed: false });
        })
    }

    /// The connection of hand-off `id` went to the local server as a descriptor (`sock`
    /// duplicates it): watched until it closes, however long the server keeps it, then
    /// reported.
    pub(super) fn passed(&self, origin: Origin, id: u64, client: SocketAddr, sock: TcpStream) {
        let _ = self.watch.send(Watch { origin, id, client, sock, since: Instant::now(), passed: true });
    }
}

impl Reports {
    /// Sends `frame` (a request of the agent's own, such as `Migrate`) on the control
    /// connection `origin`, else another from the same switch; false when none is open.
    pub(super) fn send(&self, origin: Origin, frame: Frame) -> bool {
        let by_switch = lock(&self.routes);
        let conns = by_switch.get(&origin.switch).map_or(&[][..], Vec::as_slice);
        let first = conns.iter().filter(|(c, _)| *c == origin.conn);
        let mut all = first.chain(conns.iter().filter(|(c, _)| *c != origin.conn));
        all.any(|(_, tx)| tx.send(frame.clone()).is_ok())
    }

    /// Sends a report taken from a connection that closed to another connection from
    /// `switch`, if there is one.
    pub(super) fn reroute(&self, switch: IpAddr, frame: Frame, counts: &HandoffCounts) {
        route(&self.routes, Origin { switch, conn: u64::MAX }, frame, counts);
    }
}

impl Registration {
    /// Where hand-offs on this connection came from.
    pub(super) fn origin(&self) -> Origin {
        self.origin
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut routes = lock(&self.routes);
        if let Some(conns) = routes.get_mut(&self.origin.switch) {
            conns.retain(|(conn, _)| *conn != self.origin.conn);
            if conns.is_empty() {
                routes.remove(&self.origin.switch);
            }
        }
    }
}

fn lock(routes: &Routes) -> std::sync::MutexGuard<'_, BySwitch> {
    routes.by_switch.lock().unwrap_or_else(|e| e.into_inner())
}

/// Watches ended relays' sockets until they close (or linger too long), then routes each
/// report; returns when no relay can hand it a socket any more and none is left.
fn watcher(queue: &Receiver<Watch>, routes: &Routes, counts: &HandoffCounts) {
    let mut watching: Vec<Watch> = Vec::new();
    let mut open = true;
    while open || !watching.is_empty() {
        match queue.recv_timeout(TICK) {
            Ok(w) => {
                // What the relay's close would have done while it held the last descriptor:
                // a FIN, if the relay ended without sending one (an error, an unreachable
                // local server). Nothing when it did.
                if !w.passed {
                    let _ = w.sock.shutdown(Shutdown::Write);
                }
                watching.push(w);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                open = false;
                std::thread::sleep(TICK);
            }
        }
        watching.retain(|w| {
            let closed = oneway::closed(&w.sock).unwrap_or(true);
            if !closed && (w.passed || w.since.elapsed() < LINGER_LIMIT) {
                return true;
            }
            if !closed {
                tracing::debug!(client = %w.client, "connection not closed within the linger limit; reported ended");
            }
            route(routes, w.origin, Frame::Ended { id: w.id, client: w.client }, counts);
            false
        });
    }
}

/// Hands `frame` to the origin connection's thread, else to another of the same switch.
fn route(routes: &Routes, origin: Origin, frame: Frame, counts: &HandoffCounts) {
    let by_switch = lock(routes);
    let conns = by_switch.get(&origin.switch).map_or(&[][..], Vec::as_slice);
    let first = conns.iter().filter(|(c, _)| *c == origin.conn);
    for (_, tx) in first.chain(conns.iter().filter(|(c, _)| *c != origin.conn)) {
        if tx.send(frame.clone()).is_ok() {
            return;
        }
    }
    counts.unreported.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(switch = %origin.switch, ?frame, "no control connection from the switch: end not reported");
}
