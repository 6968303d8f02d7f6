//! Where a switch's sockets come from: each listener's `SO_REUSEPORT` sockets (one per
//! worker), bound here or inherited from a binary upgrade's old process, the `[agents]`
//! socket, and the number of workers.

use crate::upgrade::Inherited;
use config::Config;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::SocketAddr;

pub(crate) fn worker_count(config: &Config) -> usize {
    match config.global.workers {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
}

/// Binds `[agents]`'s UDP socket, if configured.
pub(crate) fn bind_agents(config: &Config) -> io::Result<Option<std::net::UdpSocket>> {
    let Some(agents) = &config.agents else { return Ok(None) };
    let socket = std::net::UdpSocket::bind(agents.bind)
        .map_err(|e| io::Error::new(e.kind(), format!("[agents] cannot bind {}: {e}", agents.bind)))?;
    socket.set_nonblocking(true)?;
    Ok(Some(socket))
}

pub(crate) type Bound = (Vec<(String, SocketAddr)>, Vec<Vec<std::net::TcpListener>>);

/// One socket per (worker, listener). The first binds the configured address (port 0 picks
/// one); the others bind the address it got, with SO_REUSEPORT so the kernel spreads
/// connections over the workers. Sockets inherited from an old process come first.
pub(crate) fn bind_all(config: &Config, workers: usize, inherited: &mut Inherited) -> io::Result<Bound> {
    let mut per_worker: Vec<Vec<std::net::TcpListener>> = (0..workers).map(|_| Vec::new()).collect();
    let mut addrs = Vec::new();
    for l in &config.listeners {
        let mut addr = l.bind;
        let mut adopted = inherited.take(&l.name, l.bind).unwrap_or_default().into_iter();
        for sockets in per_worker.iter_mut() {
            if let Some(socket) = adopted.next() {
                socket.set_nonblocking(true)?;
                addr = socket.local_addr()?;
                sockets.push(socket);
                continue;
            }
            let socket = bind_one(addr).map_err(|e| {
                io::Error::new(e.kind(), format!("listener '{}' cannot bind {}: {e}", l.name, addr))
            })?;
            addr = socket.local_addr()?;
            sockets.push(socket);
        }
        addrs.push((l.name.clone(), addr));
    }
    Ok((addrs, per_worker))
}

/// Second descriptors of the workers' listening sockets, by listener name.
pub(crate) fn keep_copies(
    config: &Config,
    per_worker: &[Vec<std::net::TcpListener>],
) -> io::Result<Vec<(String, Vec<std::net::TcpListener>)>> {
    let mut kept = Vec::with_capacity(config.listeners.len());
    for (i, l) in config.listeners.iter().enumerate() {
        let copies = per_worker.iter().map(|w| w[i].try_clone()).collect::<io::Result<_>>()?;
        kept.push((l.name.clone(), copies));
    }
    Ok(kept)
}

fn bind_one(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    Ok(socket.into())
}
