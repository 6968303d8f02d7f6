//! The new process's side of a moved tunnel: the client's and the server's sockets join
//! this worker's runtime, the bytes the old process had read and not yet written are
//! written first, and the copy goes on (`upstream::tunnel::moving`, so a later upgrade
//! moves it again). The tunnel counts as an open client connection of its listener, as
//! busy work (a shutdown waits for it within the grace period, as the old one did), and as
//! in flight on its server (found by group and server name; a `maxconn` slot is taken if
//! one is free: the connection exists already, so it is never refused for want of one).

use crate::floor::conns::{ConnState, Watch};
use crate::floor::handover::Tunnel;
use crate::floor::worker::{BusyGuard, Open, Worker};
use crate::upstream::slots::ActiveGuard;
use crate::upstream::tunnel::moving::{self, buffer_with, Origin};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::net::TcpStream;

/// Goes on with `tunnel` (client socket `client`, from `peer`, on listener `index`).
pub(super) fn adopt(
    worker: &Rc<Worker>,
    index: usize,
    client: std::net::TcpStream,
    peer: SocketAddr,
    tunnel: Tunnel,
    idle: Duration,
) {
    let register = |s: std::net::TcpStream| s.set_nonblocking(true).and_then(|()| TcpStream::from_std(s));
    let (mut client, server) = match (register(client), register(tunnel.server)) {
        (Ok(c), Ok(s)) => (c, s),
        (Err(e), _) | (_, Err(e)) => {
            tracing::warn!(%peer, kind = tunnel.kind, error = %e, "moved tunnel not registered; closed");
            return;
        }
    };
    worker.shared.client_conns.fetch_add(1, Ordering::AcqRel);
    let open = Open::new(Rc::clone(worker), index);
    let size = worker.bufs.size();
    let mut cbuf = buffer_with(&tunnel.to_server, size);
    let mut sbuf = buffer_with(&tunnel.to_client, size);
    let buffered = (tunnel.to_server.len(), tunnel.to_client.len());
    tracing::debug!(%peer, kind = tunnel.kind, to_server = buffered.0, to_client = buffered.1, "tunnel taken over");
    let kind = tunnel.kind;
    let snap = worker.shared.snapshot.load_full();
    let target = tunnel.server_name.and_then(|(group, name)| {
        let group = snap.groups.iter().find(|g| g.name == group)?;
        group.servers.iter().find(|s| s.name == name).cloned()
    });
    let task = tokio::task::spawn_local(async move {
        let worker = Rc::clone(&open.worker);
        let _busy = BusyGuard::new(&worker);
        // In flight on its server here too (least-connections, `maxconn`, a server's drain).
        let _active = target.as_deref().map(ActiveGuard::new);
        let slots = target.as_ref().and_then(|s| s.slots.clone());
        let _slot = slots.and_then(|s| s.try_acquire_owned().ok());
        let from = Origin { listener: index, peer, kind: &kind, server: target.as_deref() };
        let mut server = crate::floor::socket::Socket::Tcp(server);
        let carried = moving::run(&worker, from, &mut client, &mut cbuf, &mut server, &mut sbuf, idle).await;
        tracing::debug!(%peer, kind, up = carried.up, down = carried.down, moved = carried.moved, "moved tunnel ended");
        drop(open);
    });
    worker.conns.add(Rc::new(Watch::with(ConnState::Busy)), task.abort_handle());
}
