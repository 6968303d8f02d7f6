//! A socket's receive: what it submits (a multishot receive with a byte limit where the
//! kernel has one, else a single receive; a wait for readiness when no provided buffer is
//! free), and how its completions wait for the reader: the oldest in the slot, later ones
//! in the driver's `later` (ADR 0026).

use super::{Driver, Sending, IGNORED};
use crate::floor::uring::bufs;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::task::Waker;

/// What a receive has for its reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::floor::uring) enum Received {
    /// The oldest unread completion: `res` bytes in the provided buffer `flags` names.
    Bytes(i32, u32),
    /// Nothing yet; the receive (or the wait for readiness) runs.
    Waiting,
    /// The socket is readable (a wait for readiness, [`poll_in`], is over): read it directly.
    Ready,
    /// The receive stopped, with everything it brought read: 0 end of stream, else the
    /// negated errno (`ECANCELED`: stopped by us or by its byte limit, the socket may hold
    /// more; `ENOBUFS`: no provided buffer was free).
    Over(i32),
}

/// `IORING_RECVSEND_POLL_FIRST` (the crate keeps it private): a receive waits for readiness
/// before it tries. A receive is armed when the bytes are not there yet (the answer to what
/// was just sent, the client's next request; bulk reads go by `recv_now`), so the first try
/// would fail: it cost a buffer picked and put back and a socket locked for nothing. Where
/// bytes are there, the poll finds them at once. Keep-alive CPU per request 0.98x paired,
/// new connection per request 1.00x (ADR 0025).
const POLL_FIRST: u16 = 1;
/// `IORING_RECV_MULTISHOT`.
const MULTISHOT: u16 = 2;

/// Unread completions a receive may hold before it is stopped (a client that sends
/// without reading the answers): the provided buffers are the worker's, and one socket must
/// not take them all (ADR 0026).
pub(super) const HELD_MAX: usize = 2;

/// A receive from `fd` into provided buffers. Where the kernel allows it (see
/// [`Driver::multishot`]) a multishot one: one submission serves every arrival of bytes (a
/// keep-alive connection's requests, a server connection's answers), each a completion
/// kept for its reader ([`Driver::front`]), until [`bufs::SIZE`] bytes came (then it ends and is
/// armed again when its reader next waits: a body beyond that is read straight from the
/// socket, see `RingTcp`, not copied through buffers; and one socket holds at most that
/// much of the worker's buffers). Before, each wait for bytes was a submission: the
/// socket's poll armed and torn down once per request (3-5 % of a keep-alive request's CPU,
/// ADR 0026). Elsewhere a single receive, the same to its reader (a completion, then the
/// stop). A socket waiting with nothing received holds no buffer either way.
pub(in crate::floor::uring) fn recv(d: &mut Driver, fd: RawFd) -> u32 {
    let entry = if d.multishot {
        // Not the crate's `RecvMulti`: that builder sets the flags word itself (no
        // POLL_FIRST) and has no byte limit.
        multishot_entry(fd, POLL_FIRST | MULTISHOT)
    } else {
        provided_buffer_entry(fd, bufs::SIZE as u32, POLL_FIRST)
    };
    let slot = d.push(entry, None, Sending::default());
    let s = &mut d.slots[slot as usize];
    (s.receive, s.armed) = (true, true);
    slot
}

/// A receive from `fd` of up to `len` bytes (0 for a multishot one) into a provided buffer,
/// with the `ioprio` flags (POLL_FIRST, MULTISHOT).
fn provided_buffer_entry(fd: RawFd, len: u32, ioprio: u16) -> squeue::Entry {
    opcode::Recv::new(types::Fd(fd), std::ptr::null_mut(), len)
        .buf_group(bufs::GROUP)
        .ioprio(ioprio)
        .build()
        .flags(squeue::Flags::BUFFER_SELECT)
}

/// A multishot receive from `fd` that ends once a buffer's worth of bytes came.
fn multishot_entry(fd: RawFd, ioprio: u16) -> squeue::Entry {
    with_total_limit(provided_buffer_entry(fd, 0, ioprio), bufs::SIZE as u32)
}

/// `entry` with the multishot receive's total byte limit (the SQE's `optlen`, in recent
/// kernels, 6.18 here: the receive ends once `limit` bytes came). The crate has no setter.
fn with_total_limit(entry: squeue::Entry, limit: u32) -> squeue::Entry {
    // SAFETY: `squeue::Entry` is `repr(C)` around the kernel's 64-byte `io_uring_sqe`, plain
    // data with no invariant of its own; `optlen` is its 32-bit field at byte 44 (the union
    // with `file_index`, which a receive does not use).
    let mut raw: [u8; 64] = unsafe { std::mem::transmute::<squeue::Entry, [u8; 64]>(entry) };
    raw[44..48].copy_from_slice(&limit.to_ne_bytes());
    // SAFETY: as above: any bytes are a valid `Entry`.
    unsafe { std::mem::transmute::<[u8; 64], squeue::Entry>(raw) }
}

/// Whether the kernel takes a multishot receive with a byte limit ([`recv`]): a receive on a
/// socket with nothing to read is submitted, then cancelled. A kernel without the limit
/// or without multishot receives refuses it at once (`EINVAL`); one with it
/// arms it, and the cancellation ends it. Either way two completions, reaped here.
pub(super) fn takes_limited_multishot(ring: &mut IoUring) -> io::Result<bool> {
    let (ours, _theirs) = std::os::unix::net::UnixStream::pair()?;
    const PROBE: u64 = 1;
    let entry = multishot_entry(ours.as_raw_fd(), MULTISHOT).user_data(PROBE);
    let cancel = opcode::AsyncCancel::new(PROBE).build().user_data(PROBE + 1);
    // SAFETY: the entries point at nothing of ours (a provided-buffer receive, a cancel).
    unsafe {
        ring.submission().push(&entry).map_err(io::Error::other)?;
        ring.submission().push(&cancel).map_err(io::Error::other)?;
    }
    ring.submit_and_wait(2)?;
    let mut refused = false;
    for c in ring.completion() {
        if c.user_data() == PROBE {
            refused |= c.result() == -libc::EINVAL;
            if let Some(id) = cqueue::buffer_select(c.flags()) {
                return Err(io::Error::other(format!("probe receive took buffer {id}")));
            }
        }
    }
    Ok(!refused)
}

/// A wait until `fd` is readable, holding no buffer: for a socket whose receive found no
/// provided buffer free (`ENOBUFS`: others hold them all, unread). Its reader then reads the
/// socket directly; a multishot receive armed again at once would find none either, and
/// its socket would wait for the others' readers (ADR 0026).
pub(in crate::floor::uring) fn poll_in(d: &mut Driver, fd: RawFd) -> u32 {
    let entry = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32).build();
    d.push(entry, None, Sending::default())
}

impl Driver {
    /// A receive's completion: its bytes queued for the reader, who is woken. A receive
    /// that holds [`HELD_MAX`] unread completions is stopped: its cancellation queued, its
    /// stop reported after what it brought.
    pub(super) fn took(&mut self, slot: usize, res: i32, flags: u32, woken: &mut Vec<Waker>) {
        let more = cqueue::more(flags);
        if self.slots[slot].orphan {
            self.give_back(flags);
            if !more {
                self.release(slot as u32);
            }
            return;
        }
        let s = &mut self.slots[slot];
        if res > 0 {
            if s.held == 0 {
                s.got = Some((res, flags));
            } else {
                self.later.push((slot as u32, res, flags));
            }
            s.held += 1;
        }
        if !more {
            s.armed = false;
            // Bytes with the last completion: it stopped (the kernel's reasons), not ended.
            s.done = Some((if res > 0 { -libc::ECANCELED } else { res }, 0));
        }
        if let Some(w) = s.waker.take() {
            woken.push(w);
        }
        if s.armed && !s.stopping && usize::from(s.held) >= HELD_MAX {
            s.stopping = true;
            let user = self.user_data(slot as u32);
            self.queue(opcode::AsyncCancel::new(user).build().user_data(IGNORED));
        }
    }

    /// What receive (or wait for readiness) `slot` has for its reader; `waker` is woken
    /// when that changes.
    pub(in crate::floor::uring) fn front(&mut self, slot: u32, waker: Option<&Waker>) -> Received {
        let s = &mut self.slots[slot as usize];
        if let Some((res, flags)) = s.got {
            return Received::Bytes(res, flags);
        }
        if !s.receive && s.done.is_some() {
            return Received::Ready;
        }
        if s.receive && !s.armed {
            return Received::Over(s.done.map_or(-libc::ECANCELED, |(res, _)| res));
        }
        if let Some(waker) = waker {
            if !s.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                s.waker = Some(waker.clone());
            }
        }
        Received::Waiting
    }

    /// The reader is done with receive `slot`'s oldest completion: its buffer goes back, and
    /// the next one (if any) comes up from `later`.
    pub(in crate::floor::uring) fn pop(&mut self, slot: u32) {
        let s = &mut self.slots[slot as usize];
        let Some((_, flags)) = s.got.take() else { return };
        s.held -= 1;
        if s.held > 0 {
            let next = self.later.iter().position(|&(owner, _, _)| owner == slot);
            let (_, res, next_flags) = self.later.remove(next.expect("a held completion is in `later`"));
            self.slots[slot as usize].got = Some((res, next_flags));
        }
        self.give_back(flags);
        self.bufs.publish();
    }

    /// Gives back every buffer receive `slot` holds unread (its owner leaves).
    pub(super) fn give_back_unread(&mut self, slot: u32) {
        for _ in 0..self.slots[slot as usize].held {
            self.pop(slot);
        }
    }

    /// No completion waits in the ring unreaped: a read straight from a socket cannot
    /// overtake bytes a receive took before it.
    pub(in crate::floor::uring) fn all_reaped(&mut self) -> bool {
        self.ring.completion().is_empty()
    }
}
