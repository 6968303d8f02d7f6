//! Shared pieces of the two floor relays: arguments and socket setup.
//!
//! Both relays are byte relays with no HTTP work: each accepted client is paired with its own
//! connection to one of the upstreams (round robin), and whatever one side sends is written
//! to the other. Under a keep-alive load without pipelining that is exactly the kernel work of
//! an HTTP proxy that reuses server connections (a read and a write per direction per request),
//! with none of the user-space work, so the CPU it costs is the floor of a design on that
//! readiness or completion model.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{IntoRawFd, RawFd};

/// Where to listen and whom to relay to.
pub struct Args {
    pub listen: SocketAddr,
    pub upstreams: Vec<SocketAddr>,
}

/// `--listen ADDR --upstream ADDR [--upstream ADDR ...]`
pub fn args() -> Args {
    let mut listen = None;
    let mut upstreams = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--multishot" || flag == "--defer" {
            continue; // the uring relays' own switches
        }
        let value = it.next().unwrap_or_else(|| usage());
        let addr: SocketAddr = value.parse().unwrap_or_else(|_| usage());
        match flag.as_str() {
            "--listen" => listen = Some(addr),
            "--upstream" => upstreams.push(addr),
            _ => usage(),
        }
    }
    match listen {
        Some(listen) if !upstreams.is_empty() => Args { listen, upstreams },
        _ => usage(),
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: relay-epoll|relay-uring [--multishot|--defer] --listen ADDR --upstream ADDR [--upstream ADDR ...]"
    );
    std::process::exit(2)
}

/// A listening socket (backlog as std's default, 128 is enough for the benchmark's 64-256).
pub fn listen(addr: SocketAddr, nonblocking: bool) -> TcpListener {
    let listener = TcpListener::bind(addr).unwrap_or_else(|e| panic!("bind {addr}: {e}"));
    listener.set_nonblocking(nonblocking).expect("nonblocking listener");
    listener
}

/// A connection to the `n`th upstream (round robin), TCP_NODELAY, as a raw descriptor the
/// relay owns from now on.
pub fn connect(upstreams: &[SocketAddr], n: usize, nonblocking: bool) -> RawFd {
    let addr = upstreams[n % upstreams.len()];
    let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream.set_nodelay(true).expect("nodelay");
    stream.set_nonblocking(nonblocking).expect("nonblocking");
    stream.into_raw_fd()
}

/// TCP_NODELAY on a descriptor the relay got from accept.
pub fn nodelay(fd: RawFd) {
    let one: libc::c_int = 1;
    // SAFETY: setsockopt reads `one` (an int, its size given) and nothing else.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "TCP_NODELAY");
}
