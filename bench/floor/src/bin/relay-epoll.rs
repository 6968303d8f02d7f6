//! The readiness floor: one thread, level-triggered epoll, a read and a write per wake-up.

use cswitch_floor::{args, connect, listen};
use std::io::ErrorKind;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};

const LISTENER: u64 = u64::MAX;
const BUF: usize = 16 * 1024;

fn main() {
    let args = args();
    let listener = listen(args.listen, true);
    // SAFETY: plain syscalls on descriptors this process owns; `events` outlives each call.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert!(ep >= 0, "epoll_create1");
    watch(ep, listener.as_raw_fd(), LISTENER);
    let mut peer: Vec<RawFd> = Vec::new();
    let mut buf = vec![0u8; BUF];
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 512];
    let mut accepted = 0usize;
    loop {
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, -1) };
        if n < 0 {
            continue; // EINTR
        }
        for ev in &events[..n as usize] {
            if ev.u64 == LISTENER {
                while let Ok((client, _)) = listener.accept() {
                    client.set_nodelay(true).expect("nodelay");
                    client.set_nonblocking(true).expect("nonblocking");
                    let c = client.into_raw_fd();
                    let u = connect(&args.upstreams, accepted, true);
                    accepted += 1;
                    let need = c.max(u) as usize + 1;
                    if peer.len() < need {
                        peer.resize(need, -1);
                    }
                    peer[c as usize] = u;
                    peer[u as usize] = c;
                    watch(ep, c, c as u64);
                    watch(ep, u, u as u64);
                }
                continue;
            }
            let fd = ev.u64 as RawFd;
            let other = peer[fd as usize];
            if other < 0 {
                continue;
            }
            let got = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), BUF) };
            if got > 0 && write_all(other, &buf[..got as usize]) {
                continue;
            }
            if got < 0 && std::io::Error::last_os_error().kind() == ErrorKind::WouldBlock {
                continue;
            }
            peer[fd as usize] = -1;
            peer[other as usize] = -1;
            unsafe {
                libc::close(fd);
                libc::close(other);
            }
        }
    }
}

fn watch(ep: RawFd, fd: RawFd, token: u64) {
    let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
    // SAFETY: `ev` is read by the kernel during the call only.
    let rc = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) };
    assert_eq!(rc, 0, "epoll_ctl");
}

/// Writes everything (the benchmark's messages fit the socket buffer; a full buffer is waited
/// out with poll, which never happens under the benchmark and keeps the relay simple).
fn write_all(fd: RawFd, mut data: &[u8]) -> bool {
    while !data.is_empty() {
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n > 0 {
            data = &data[n as usize..];
        } else if n < 0 && std::io::Error::last_os_error().kind() == ErrorKind::WouldBlock {
            let mut p = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
            unsafe { libc::poll(&mut p, 1, 1000) };
        } else {
            return false;
        }
    }
    true
}
