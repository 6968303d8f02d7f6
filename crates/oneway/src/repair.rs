//! `TCP_REPAIR` (Linux ≥ 4.8 for `TCP_REPAIR_WINDOW`): the raw socket options that dump an
//! established connection and restore it on a new socket, as CRIU does. The only module of
//! the workspace allowed `unsafe` code: each `unsafe` block is one libc call on a descriptor
//! the caller owns, with a buffer of the size passed, and says so in its `SAFETY` line.
//!
//! The order of a restore is the spike's (`oneway-spike.md` §5, §6), each step there for a
//! failure it caused when missing: sequence numbers; `TCP_MAXSEG` *before* `connect` (P5,
//! or segments of 524 bytes); `bind` + `connect` (no SYN in repair mode); options; the
//! timestamp (P4, or the client drops segments by PAWS); the queues; the window (P6).
//! Needs `CAP_NET_ADMIN` in the socket's network namespace.
#![allow(unsafe_code)]

use crate::state::{TcpState, Window};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

// linux/tcp.h, linux/sockios.h (not all of them are in every libc release).
const TCP_MAXSEG: i32 = 2;
const TCP_INFO: i32 = 11;
const TCP_REPAIR: i32 = 19;
const TCP_REPAIR_QUEUE: i32 = 20;
const TCP_QUEUE_SEQ: i32 = 21;
const TCP_REPAIR_OPTIONS: i32 = 22;
const TCP_TIMESTAMP: i32 = 24;
const TCP_REPAIR_WINDOW: i32 = 29;
const TCP_NO_QUEUE: u32 = 0;
const TCP_RECV_QUEUE: u32 = 1;
const TCP_SEND_QUEUE: u32 = 2;
const TCP_REPAIR_ON: i32 = 1;
const TCP_REPAIR_OFF: i32 = 0;
const TCP_REPAIR_OFF_NO_WP: i32 = -1;
const TCPOPT_MSS: u32 = 2;
const TCPOPT_WINDOW: u32 = 3;
const TCPOPT_SACK_PERM: u32 = 4;
const TCPOPT_TIMESTAMP: u32 = 8;
const TCPI_OPT_TIMESTAMPS: u8 = 1;
const TCPI_OPT_SACK: u8 = 2;
const TCPI_OPT_WSCALE: u8 = 4;
const TCP_ESTABLISHED: u8 = 1;
const TCP_CLOSE: u8 = 7;
const SIOCINQ: libc::c_ulong = 0x541B;
const SIOCOUTQ: libc::c_ulong = 0x5411;
const SIOCOUTQNSD: libc::c_ulong = 0x894B;

/// Why a dump or a restore failed: the step, and the kernel's answer.
#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    /// A socket call failed (`EPERM` without `CAP_NET_ADMIN`; `EADDRNOTAVAIL` when a live
    /// socket holds the 4-tuple on the restoring host).
    #[error("{step}: {source}")]
    Sys {
        /// Which step.
        step: &'static str,
        /// The error.
        source: io::Error,
    },
    /// The connection is not one that can move (not established).
    #[error("cannot move this connection: {0}")]
    State(&'static str),
}

fn sys(step: &'static str) -> impl FnOnce(io::Error) -> RepairError {
    move |source| RepairError::Sys { step, source }
}

/// Puts the socket in repair mode: from now on it sends nothing by itself (no ACK, window
/// update, FIN or RST) and its queues and sequence numbers can be read and written. It still
/// *receives* (P1): freeze the flow in the datapath before [`dump`].
pub fn enter_repair(sock: &impl AsFd) -> io::Result<()> {
    set_i32(sock.as_fd(), TCP_REPAIR, TCP_REPAIR_ON)
}

/// Leaves repair mode. With `window_probe` the kernel sends a probe at once, whose ACK
/// comes back along the new path (the restored side, after the steering flip); without it
/// nothing is sent (the switch's fallback, which then serves the connection itself).
pub fn leave_repair(sock: &impl AsFd, window_probe: bool) -> io::Result<()> {
    set_i32(sock.as_fd(), TCP_REPAIR, if window_probe { TCP_REPAIR_OFF } else { TCP_REPAIR_OFF_NO_WP })
}

/// Whether the connection has reached CLOSE: every byte and both FINs acknowledged, or
/// reset. Read on a descriptor kept open while the connection ends (an open socket never
/// shows TIME_WAIT: its side goes to CLOSE and a TIME_WAIT entry takes over the 4-tuple).
pub fn closed(sock: &impl AsFd) -> io::Result<bool> {
    let mut info = [0u8; 8];
    let got = getsockopt(sock.as_fd(), TCP_INFO, &mut info)?;
    Ok(got >= 1 && info[0] == TCP_CLOSE)
}

/// Reads an established connection's state. The socket must be in repair mode and its flow
/// frozen; the socket is left in repair mode with no queue selected.
pub fn dump(sock: &impl AsFd) -> Result<TcpState, RepairError> {
    let fd = sock.as_fd();
    let mut info = [0u8; 104];
    let got = getsockopt(fd, TCP_INFO, &mut info).map_err(sys("TCP_INFO"))?;
    if got < 8 || info[0] != TCP_ESTABLISHED {
        return Err(RepairError::State("not established"));
    }
    let (options, scales) = (info[5], info[6]);
    let mss = get_u32(fd, TCP_MAXSEG).map_err(sys("TCP_MAXSEG"))?;
    let tsval = if options & TCPI_OPT_TIMESTAMPS != 0 {
        Some(get_u32(fd, TCP_TIMESTAMP).map_err(sys("TCP_TIMESTAMP"))?)
    } else {
        None
    };
    let (snd_seq, outq, unsent) = dump_queue(fd, TCP_SEND_QUEUE, SIOCOUTQ).map_err(sys("send queue"))?;
    let (rcv_seq, inq, _) = dump_queue(fd, TCP_RECV_QUEUE, SIOCINQ).map_err(sys("receive queue"))?;
    // The receive queue stays selected: the selection matters only in repair mode, and
    // what follows (close, or leaving repair mode) does not read a queue.
    let window = get_window(fd).map_err(sys("TCP_REPAIR_WINDOW"))?;
    Ok(TcpState {
        mss,
        wscale: (options & TCPI_OPT_WSCALE != 0).then_some((scales & 0x0f, scales >> 4)),
        sack: options & TCPI_OPT_SACK != 0,
        tsval,
        snd_seq,
        rcv_seq,
        window,
        outq,
        unsent,
        inq,
    })
}

/// One queue: its sequence number, its bytes (peeked: they stay), and for the send queue
/// how many were never sent.
fn dump_queue(fd: BorrowedFd<'_>, queue: u32, len_ioctl: libc::c_ulong) -> io::Result<(u32, Vec<u8>, u32)> {
    set_u32(fd, TCP_REPAIR_QUEUE, queue)?;
    let seq = get_u32(fd, TCP_QUEUE_SEQ)?;
    let len = ioctl_int(fd, len_ioctl)?;
    // Nothing queued: nothing unsent either (one system call less on the common path).
    let unsent = if queue == TCP_SEND_QUEUE && len > 0 { ioctl_int(fd, SIOCOUTQNSD)? } else { 0 };
    let mut bytes = vec![0u8; usize::try_from(len).unwrap_or(0)];
    let mut at = 0;
    while at < bytes.len() {
        match peek(fd, &mut bytes[at..])? {
            0 => break,
            n => at += n,
        }
    }
    bytes.truncate(at);
    Ok((seq, bytes, u32::try_from(unsent).unwrap_or(0)))
}

/// Recreates the connection `local` ↔ `peer` from `state` on a new socket, with
/// `already_read` (bytes the old owner's application had read, e.g. the request head the
/// switch routed on) put back in front of the receive queue, so the new owner reads them as
/// if the client had just sent them. The socket is returned in repair mode: leave it (with
/// a window probe) only once the steering sends the client's packets here (P3).
pub fn restore(
    state: &TcpState,
    already_read: &[u8],
    local: SocketAddr,
    peer: SocketAddr,
) -> Result<Socket, RepairError> {
    let sock =
        Socket::new(Domain::for_address(local), Type::STREAM, Some(Protocol::TCP)).map_err(sys("socket"))?;
    let fd = sock.as_fd();
    // Repair mode also sets SK_FORCE_REUSE: binding the VIP's port never conflicts.
    enter_repair(&sock).map_err(sys("TCP_REPAIR"))?;
    let queued = |q: &[u8]| u32::try_from(q.len()).unwrap_or(u32::MAX);
    let inq_len = queued(already_read).wrapping_add(queued(&state.inq));
    set_queue_seq(fd, TCP_SEND_QUEUE, state.snd_seq.wrapping_sub(queued(&state.outq)))
        .map_err(sys("send seq"))?;
    set_queue_seq(fd, TCP_RECV_QUEUE, state.rcv_seq.wrapping_sub(inq_len)).map_err(sys("receive seq"))?;
    set_u32(fd, TCP_REPAIR_QUEUE, TCP_NO_QUEUE).map_err(sys("TCP_REPAIR_QUEUE"))?;
    // The kernel takes at most 32767 here (MAX_TCP_WINDOW); only loopback's 65483 is larger.
    set_u32(fd, TCP_MAXSEG, state.mss.min(32_767)).map_err(sys("TCP_MAXSEG"))?;
    sock.bind(&SockAddr::from(local)).map_err(sys("bind"))?;
    sock.connect(&SockAddr::from(peer)).map_err(sys("connect"))?;
    set_options(fd, state).map_err(sys("TCP_REPAIR_OPTIONS"))?;
    if let Some(tsval) = state.tsval {
        set_u32(fd, TCP_TIMESTAMP, tsval).map_err(sys("TCP_TIMESTAMP"))?;
    }
    // Unacknowledged bytes go to the retransmit queue; the never-sent tail would be written
    // after repair mode by the new owner (CRIU's way) — the switch never has any.
    if !state.outq.is_empty() {
        fill_queue(&sock, TCP_SEND_QUEUE, &[&state.outq]).map_err(sys("send queue"))?;
    }
    if inq_len > 0 {
        fill_queue(&sock, TCP_RECV_QUEUE, &[already_read, &state.inq]).map_err(sys("receive queue"))?;
    }
    set_u32(fd, TCP_REPAIR_QUEUE, TCP_NO_QUEUE).map_err(sys("TCP_REPAIR_QUEUE"))?;
    set_window(fd, &state.window).map_err(sys("TCP_REPAIR_WINDOW"))?;
    Ok(sock)
}

fn set_queue_seq(fd: BorrowedFd<'_>, queue: u32, seq: u32) -> io::Result<()> {
    set_u32(fd, TCP_REPAIR_QUEUE, queue)?;
    set_u32(fd, TCP_QUEUE_SEQ, seq)
}

/// Writes `parts` into the selected repair queue (a write in repair mode queues, it does
/// not send).
fn fill_queue(sock: &Socket, queue: u32, parts: &[&[u8]]) -> io::Result<()> {
    set_u32(sock.as_fd(), TCP_REPAIR_QUEUE, queue)?;
    for part in parts {
        let mut at = 0;
        while at < part.len() {
            at += sock.send(&part[at..])?;
        }
    }
    Ok(())
}

/// The negotiated options, as `struct tcp_repair_opt` pairs.
fn set_options(fd: BorrowedFd<'_>, state: &TcpState) -> io::Result<()> {
    let mut opts = vec![(TCPOPT_MSS, state.mss)];
    if let Some((snd, rcv)) = state.wscale {
        opts.push((TCPOPT_WINDOW, u32::from(snd) | u32::from(rcv) << 16));
    }
    if state.sack {
        opts.push((TCPOPT_SACK_PERM, 0));
    }
    if state.tsval.is_some() {
        opts.push((TCPOPT_TIMESTAMP, 0));
    }
    let bytes: Vec<u8> =
        opts.iter().flat_map(|(code, val)| [code.to_ne_bytes(), val.to_ne_bytes()]).flatten().collect();
    setsockopt(fd, TCP_REPAIR_OPTIONS, &bytes)
}

fn get_window(fd: BorrowedFd<'_>) -> io::Result<Window> {
    let mut raw = [0u8; 20];
    getsockopt(fd, TCP_REPAIR_WINDOW, &mut raw)?;
    let w = |i: usize| u32::from_ne_bytes([raw[i * 4], raw[i * 4 + 1], raw[i * 4 + 2], raw[i * 4 + 3]]);
    Ok(Window { snd_wl1: w(0), snd_wnd: w(1), max_window: w(2), rcv_wnd: w(3), rcv_wup: w(4) })
}

fn set_window(fd: BorrowedFd<'_>, w: &Window) -> io::Result<()> {
    let words = [w.snd_wl1, w.snd_wnd, w.max_window, w.rcv_wnd, w.rcv_wup];
    let bytes: Vec<u8> = words.iter().flat_map(|v| v.to_ne_bytes()).collect();
    setsockopt(fd, TCP_REPAIR_WINDOW, &bytes)
}

fn get_u32(fd: BorrowedFd<'_>, opt: i32) -> io::Result<u32> {
    let mut raw = [0u8; 4];
    getsockopt(fd, opt, &mut raw)?;
    Ok(u32::from_ne_bytes(raw))
}

fn set_u32(fd: BorrowedFd<'_>, opt: i32, value: u32) -> io::Result<()> {
    setsockopt(fd, opt, &value.to_ne_bytes())
}

fn set_i32(fd: BorrowedFd<'_>, opt: i32, value: i32) -> io::Result<()> {
    setsockopt(fd, opt, &value.to_ne_bytes())
}

/// `getsockopt(fd, IPPROTO_TCP, opt, buf)`; how many bytes the kernel wrote.
fn getsockopt(fd: BorrowedFd<'_>, opt: i32, buf: &mut [u8]) -> io::Result<usize> {
    let mut len =
        libc::socklen_t::try_from(buf.len()).map_err(|_| io::Error::other("option buffer too large"))?;
    // SAFETY: `fd` is an open descriptor borrowed for the call; `buf` is valid for writes of
    // `len` bytes and `len` is a valid, writable socklen_t; the kernel writes at most `len`.
    let rc = unsafe {
        libc::getsockopt(fd.as_raw_fd(), libc::IPPROTO_TCP, opt, buf.as_mut_ptr().cast(), &mut len)
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(len as usize)
}

/// `setsockopt(fd, IPPROTO_TCP, opt, buf)`.
fn setsockopt(fd: BorrowedFd<'_>, opt: i32, buf: &[u8]) -> io::Result<()> {
    let len =
        libc::socklen_t::try_from(buf.len()).map_err(|_| io::Error::other("option buffer too large"))?;
    // SAFETY: `fd` is an open descriptor borrowed for the call; `buf` is valid for reads of
    // `len` bytes; the kernel only reads it.
    let rc = unsafe { libc::setsockopt(fd.as_raw_fd(), libc::IPPROTO_TCP, opt, buf.as_ptr().cast(), len) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// An `ioctl` that reports an int (queue lengths).
fn ioctl_int(fd: BorrowedFd<'_>, request: libc::c_ulong) -> io::Result<i32> {
    let mut value: libc::c_int = 0;
    // SAFETY: `fd` is an open descriptor borrowed for the call; these requests write one
    // c_int through the pointer, which points at a live, writable c_int.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, &mut value as *mut libc::c_int) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(value)
}

/// Copies queued bytes without consuming them (`MSG_PEEK`; in repair mode, from the
/// selected queue).
fn peek(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `fd` is an open descriptor borrowed for the call; `buf` is valid for writes of
    // `buf.len()` bytes and the kernel writes at most that many.
    let n = unsafe {
        libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_PEEK | libc::MSG_DONTWAIT)
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n as usize)
}
