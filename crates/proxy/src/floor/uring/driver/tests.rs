//! The driver's tests: the eventfd wakes the worker for completions it has not seen, and
//! only for those; one receive serves every arrival, within its bounds (each test runs on
//! its own thread, so each has its own ring).
use super::receive::HELD_MAX;
use super::*;
use crate::floor::uring::bufs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

/// A connected loopback pair: (ours, the peer's).
fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let ours = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (theirs, _) = l.accept().unwrap();
    (ours, theirs)
}

/// Whether the ring's eventfd was signalled (reads and so resets its counter).
fn signalled() -> bool {
    let fd = with(|d| d.eventfd.as_raw_fd());
    let mut count = [0u8; 8];
    // SAFETY: reads 8 bytes into a local array from the driver's eventfd (non-blocking).
    unsafe { libc::read(fd, count.as_mut_ptr().cast(), 8) == 8 }
}

/// Waits up to a second for the eventfd (what the worker's epoll_wait would do).
fn signalled_within_a_second() -> bool {
    let fd = with(|d| d.eventfd.as_raw_fd());
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd that lives across the call.
    unsafe { libc::poll(&mut p, 1, 1000) == 1 }
}

#[test]
fn a_send_the_flush_completed_does_not_wake_the_worker() {
    install(true).unwrap();
    let (ours, mut theirs) = pair();
    let mut buf = with(|d| d.send_buf());
    buf[..5].copy_from_slice(b"hello");
    let op = with(|d| send(d, ours.as_raw_fd(), buf, (0, 5), false));
    flush();
    let mut got = [0u8; 5];
    theirs.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"hello");
    assert!(with(|d| d.peek(op)).is_some_and(|(res, _)| res == 5), "the flush reaped the send");
    // Before: the send's completion signalled the eventfd, and the worker's next
    // epoll_wait returned at once to an empty ring.
    assert!(!signalled(), "a completion the flush reaped signalled the eventfd");
    with(|d| d.release(op));
}

#[test]
fn bytes_for_a_waiting_receive_wake_the_worker() {
    install(true).unwrap();
    let (ours, mut theirs) = pair();
    let op = with(|d| recv(d, ours.as_raw_fd()));
    flush(); // submitted: nothing to read yet, so it waits in the kernel
    assert!(!signalled());
    theirs.write_all(b"ping").unwrap();
    assert!(signalled_within_a_second(), "bytes arrived and the worker was not woken");
    flush();
    assert!(matches!(with(|d| d.front(op, None)), Received::Bytes(4, _)));
    with(|d| d.abandon(op, true));
}

/// This thread's ring, a connected pair, and a receive armed on ours (submitted: nothing to
/// read yet, so it waits in the kernel).
fn armed() -> (TcpStream, TcpStream, u32) {
    install(true).unwrap();
    let (ours, theirs) = pair();
    let op = with(|d| recv(d, ours.as_raw_fd()));
    flush();
    (ours, theirs, op)
}

/// Reads every completion `op` holds, in order, giving their buffers back.
fn read_all(op: u32) -> Vec<u8> {
    let mut out = Vec::new();
    while let Received::Bytes(res, flags) = with(|d| d.front(op, None)) {
        with(|d| {
            out.extend_from_slice(d.received(flags, res));
            d.pop(op);
        });
    }
    out
}

#[test]
fn one_receive_serves_every_arrival() {
    let (_ours, mut theirs, op) = armed();
    for message in [&b"first"[..], b"second", b"third"] {
        theirs.write_all(message).unwrap();
        assert!(signalled_within_a_second(), "bytes arrived and the worker was not woken");
        flush();
        assert_eq!(read_all(op), message);
        // Still armed, with nothing to submit: the next request needs no submission.
        assert_eq!(with(|d| d.front(op, None)), Received::Waiting);
        assert_eq!(with(|d| d.queued), 0, "a receive was submitted again");
    }
    with(|d| d.abandon(op, true));
}

#[test]
fn a_receive_holding_unread_bytes_stops_and_loses_nothing() {
    let (ours, mut theirs, op) = armed();
    let mut sent = Vec::new();
    for i in 0..6u8 {
        // Each its own arrival (a client sending requests without reading answers).
        let message = [b'a' + i; 3];
        theirs.write_all(&message).unwrap();
        sent.extend_from_slice(&message);
        signalled_within_a_second();
        flush();
    }
    let held = usize::from(with(|d| d.slots[op as usize].held));
    assert!(held <= HELD_MAX + 1, "one socket held {held} provided buffers");
    let mut got = read_all(op);
    assert_eq!(with(|d| d.front(op, None)), Received::Over(-libc::ECANCELED), "it was stopped");
    with(|d| d.release(op));
    // The rest waited in the socket, in order: a new receive takes it.
    let op = with(|d| recv(d, ours.as_raw_fd()));
    flush();
    got.extend(read_all(op));
    assert_eq!(got, sent);
    with(|d| d.abandon(op, true));
}

#[test]
fn a_receive_ends_once_a_buffer_of_bytes_came() {
    let (_ours, mut theirs, op) = armed();
    // A body arriving at once: the receive takes one buffer's worth, not all of it into
    // the worker's buffers (the reader takes the rest straight from the socket).
    theirs.write_all(&vec![7u8; 4 * bufs::SIZE]).unwrap();
    assert!(signalled_within_a_second());
    flush();
    assert_eq!(read_all(op).len(), bufs::SIZE);
    assert_eq!(with(|d| d.front(op, None)), Received::Over(-libc::ECANCELED), "it ended");
    with(|d| d.release(op));
}

#[test]
fn where_the_kernel_has_no_limited_multishot_a_single_receive_reads_the_same() {
    install(false).unwrap(); // what `[global] uring_multishot = false` and such a kernel give
    let (ours, mut theirs) = pair();
    let mut got = Vec::new();
    for message in [&b"first"[..], b"second"] {
        let op = with(|d| recv(d, ours.as_raw_fd()));
        flush();
        theirs.write_all(message).unwrap();
        assert!(signalled_within_a_second());
        flush();
        got.extend(read_all(op));
        // One completion, then the stop: its reader arms the next receive.
        assert_eq!(with(|d| d.front(op, None)), Received::Over(-libc::ECANCELED));
        with(|d| d.release(op));
    }
    assert_eq!(got, b"firstsecond");
}
