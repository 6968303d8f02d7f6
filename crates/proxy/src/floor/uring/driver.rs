//! The worker's ring: one per worker thread (single issuer, deferred task running), its
//! operations kept in slots until the future that asked for them takes the result.
//!
//! Memory safety rests on ownership: a send's buffer moves into its slot and stays there
//! until the kernel's completion is reaped, even if the socket or future that asked for it is
//! gone (the slot is then an orphan, freed by its completion); receives write only into the
//! provided buffers (`bufs`), which the driver owns. A socket's descriptor is closed by the
//! ring ([`close`]), queued after everything the socket queued: the kernel resolves a
//! descriptor number at submission, in queue order, so no operation of the socket can find
//! its number naming another connection.
#![allow(unsafe_code)]

use super::bufs::{self, BufRing};
use crate::floor::spares::SpareLimit;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::task::Waker;

/// The user data of operations nobody waits for (cancellations).
const IGNORED: u64 = u64::MAX;

/// Submission entries (the completion queue is four times as large: every socket has at most
/// one receive and one send in flight, plus cancellations).
const ENTRIES: u32 = 1024;

/// `IORING_ENTER_GETEVENTS`: run the deferred completions (the crate keeps its constants
/// private).
const GETEVENTS: u32 = 1;

/// Bytes per send buffer: a write copies at most this much and returns.
pub const SEND_SIZE: usize = 16 * 1024;

/// One operation, from submission until its owner takes the result.
struct Slot {
    /// The result and flags once completed.
    done: Option<(i32, u32)>,
    waker: Option<Waker>,
    /// A send's bytes (owned here until the completion).
    buf: Option<Box<[u8]>>,
    /// A send: what it sends (see [`Sending`]). When it completes whole, its buffer goes
    /// back at once (the socket looks at the result only at its next write, maybe never: an
    /// idle connection).
    send: Sending,
    /// The owner left: the completion frees the slot (and gives back what it holds).
    orphan: bool,
    /// An orphan send's socket, closed through the ring once the send is over (its owner
    /// dropped it with the send in flight: the send's bytes are the answer's end, and the
    /// ring finishes a short send only while the descriptor is still this socket's).
    close_after: Option<OwnedFd>,
    /// Not in use.
    free: bool,
    /// Counts the slot's uses: part of the user data, so a cancellation queued for an
    /// operation that completed meanwhile cannot hit the slot's next one.
    gen: u32,
    /// A receive ([`recv`]: its completions queue in `got`).
    receive: bool,
    /// The receive is still running (its last completion said `IORING_CQE_F_MORE`); once
    /// it stopped, `done` holds why.
    armed: bool,
    /// Its cancellation is queued (it holds enough unread bytes, see [`Driver::took`]).
    stopping: bool,
    /// What the receive brought and its owner has not read yet, oldest first: (bytes,
    /// flags naming the provided buffer).
    got: VecDeque<(i32, u32)>,
}

/// What a receive has for its reader.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Received {
    /// The oldest unread completion: `res` bytes in the provided buffer `flags` names.
    Bytes(i32, u32),
    /// Nothing yet; the receive (or the wait for readiness) runs.
    Waiting,
    /// The socket is readable (a wait for readiness, [`poll_in`], is over): read it directly.
    Ready,
    /// The receive stopped, with everything it brought read: 0 end of stream, else the
    /// negated errno (`ECANCELED`: stopped by us, the socket may hold more; `ENOBUFS`: no
    /// provided buffer was free).
    Over(i32),
}

/// A send's place in its buffer. A short send is finished by the driver itself (the rest is
/// sent again, in the same slot) before its owner hears of it: a writer that flushes need not
/// wait for the completion, and an orphan send still delivers its whole answer.
#[derive(Clone, Copy, Default)]
struct Sending {
    fd: RawFd,
    /// Offset of the bytes in the buffer, and their count (0: not a send).
    start: u32,
    len: u32,
    /// Bytes sent so far.
    sent: u32,
    /// `MSG_MORE`: the socket closes after this send (`RingTcp::closing`: its FIN goes
    /// with the last bytes).
    more: bool,
}

/// The ring and what it owns.
pub struct Driver {
    ring: IoUring,
    bufs: BufRing,
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Entries queued and not yet given to the kernel.
    queued: u32,
    spare_sends: Vec<Box<[u8]>>,
    /// How many of them to keep (what the last second's load used; see `floor::spares`).
    spare_limit: SpareLimit,
    /// The eventfd the ring signals when completions wait (in the worker's epoll).
    eventfd: OwnedFd,
    /// Receives are multishot with a byte limit ([`recv`]); else single.
    multishot: bool,
}

thread_local! {
    static DRIVER: RefCell<Option<Driver>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's driver. Panics when none is installed: only sockets made
/// after [`install`] succeeded call it.
pub(super) fn with<T>(f: impl FnOnce(&mut Driver) -> T) -> T {
    DRIVER.with(|d| f(d.borrow_mut().as_mut().expect("io_uring driver installed on this worker")))
}

/// Runs `f` on this thread's driver if it is still there (a socket dropped while the thread
/// ends finds it gone: the ring, and every operation with it, went first).
pub(super) fn try_with(f: impl FnOnce(&mut Driver)) {
    let _ = DRIVER.try_with(|d| {
        if let Ok(mut d) = d.try_borrow_mut() {
            if let Some(d) = d.as_mut() {
                f(d);
            }
        }
    });
}

/// Creates this worker thread's ring (call on the thread, before its runtime runs). Fails
/// where io_uring is unavailable or refused (old kernel, `io_uring_disabled`, seccomp).
pub fn install() -> io::Result<()> {
    let mut ring = IoUring::builder()
        .setup_cqsize(ENTRIES * 4)
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_taskrun_flag()
        .build(ENTRIES)?;
    let bufs = BufRing::register(&ring)?;
    let multishot = takes_limited_multishot(&mut ring)?;
    // SAFETY: eventfd returns a new descriptor (checked) that this driver owns from here on.
    let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor nobody else owns.
    let eventfd = unsafe { OwnedFd::from_raw_fd(raw) };
    ring.submitter().register_eventfd(eventfd.as_raw_fd())?;
    let driver = Driver {
        ring,
        bufs,
        slots: Vec::new(),
        free: Vec::new(),
        queued: 0,
        spare_sends: Vec::new(),
        spare_limit: SpareLimit::new(8),
        eventfd,
        multishot,
    };
    DRIVER.with(|d| *d.borrow_mut() = Some(driver));
    Ok(())
}

/// Drops the spare send buffers the last second's load did not need (the worker's
/// housekeeping, once a second).
pub fn trim() {
    DRIVER.with(|d| {
        if let Some(d) = d.borrow_mut().as_mut() {
            let keep = d.spare_limit.trim(d.spare_sends.len());
            d.spare_sends.truncate(keep);
        }
    });
}

/// Gives the kernel what was queued during this turn, and takes the completions that are
/// already there: the worker runtime's `on_thread_park` (tokio runs a task this wakes before
/// it sleeps). Completions the submission itself produced (a send that went at once) do not
/// signal the eventfd (a quiet `enter`), nor does work that arrived during that call: when
/// the flag says some did and nothing was woken, one more call runs it with the eventfd on.
pub fn flush() {
    let woken = DRIVER.with(|d| {
        let mut d = d.borrow_mut();
        let Some(d) = d.as_mut() else { return Vec::new() };
        if d.idle() {
            return Vec::new();
        }
        d.enter(0, true);
        let mut woken = d.reap();
        d.submit(); // the rest of short sends
        if woken.is_empty() && !d.idle() {
            // Work came during the quiet call (it set TASKRUN but signalled nothing): run it
            // with the eventfd on, so what comes after wakes the worker. Once, not until
            // idle: the flag can stay set with nothing left to run, and a loop on it spun.
            d.enter(0, false);
            woken = d.reap();
        }
        woken
    });
    woken.into_iter().for_each(Waker::wake);
}

/// The task that runs completions: waits on the ring's eventfd in tokio's epoll, then runs
/// the deferred completions in one `io_uring_enter` and wakes their futures.
pub async fn reaper() {
    let fd = match with(|d| d.eventfd.try_clone()) {
        Ok(fd) => fd,
        Err(e) => {
            tracing::error!(error = %e, "io_uring: the ring's eventfd cannot be shared");
            return;
        }
    };
    // An `OwnedFd` moved into the `AsyncFd` stays open and the same while registered, which
    // is what tokio's deprecation of the safe constructor is about (as in `floor::parked`).
    #[allow(deprecated)]
    let afd = match tokio::io::unix::AsyncFd::with_interest(fd, tokio::io::Interest::READABLE) {
        Ok(afd) => afd,
        Err(e) => {
            tracing::error!(error = %e, "io_uring: the ring's eventfd cannot join the reactor");
            return;
        }
    };
    loop {
        let Ok(mut guard) = afd.readable().await else { return };
        guard.clear_ready();
        // The counter is never read: every signal of an eventfd wakes its epoll waiters,
        // so edge-triggered epoll (tokio's) reports each one, read or not; a read per wake-up
        // was a system call in four of every cycle (the counter saturates, it cannot wrap).
        let woken = with(|d| {
            if d.idle() {
                return Vec::new(); // what signalled was reaped already (by a flush)
            }
            d.enter(0, true); // the flush before the worker sleeps comes after
            d.reap()
        });
        woken.into_iter().for_each(Waker::wake);
        with(Driver::submit);
    }
}

impl Drop for Driver {
    /// What was queued last (above all the closes of the sockets the worker's end dropped)
    /// goes to the kernel before the ring does: an unsubmitted close would leave its
    /// connection open for as long as the process lives.
    fn drop(&mut self) {
        self.submit();
    }
}

/// A receive made now, not through the ring (`MSG_DONTWAIT`): straight into the reader's
/// buffer, for a socket whose last receive filled its buffer (bulk: more is surely waiting,
/// and one system call that returns it beats a round trip through the ring per 16 KiB).
/// `Ok(None)`: nothing waiting.
pub(super) fn recv_now(fd: BorrowedFd<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> io::Result<Option<usize>> {
    // SAFETY: `recv` only writes initialised bytes into the unfilled part; `assume_init`
    // below covers exactly what it wrote.
    let room = unsafe { buf.unfilled_mut() };
    match rustix::net::recv(fd, room, rustix::net::RecvFlags::DONTWAIT) {
        Ok(((got, _), _)) => {
            let n = got.len();
            // SAFETY: `recv` initialised these `n` bytes.
            unsafe { buf.assume_init(n) };
            buf.advance(n);
            Ok(Some(n))
        }
        Err(rustix::io::Errno::AGAIN) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Closes `fd` through the ring, after everything queued before it (nobody waits for it).
pub(super) fn close(d: &mut Driver, fd: OwnedFd) {
    let raw = fd.into_raw_fd();
    d.queue(opcode::Close::new(types::Fd(raw)).build().user_data(IGNORED));
}

/// [`close`], its write side shut first when its last sends went with `MSG_MORE`
/// (`RingTcp::closing`; call only once those sends completed): the bytes the kernel holds
/// back then leave with the FIN even when the close itself would reset the connection (the
/// client sent bytes nobody read: a reset drops what is still in the send queue). A plain
/// `shutdown` call: the ring's `IORING_OP_SHUTDOWN` always runs in an io-wq worker, which
/// looks the descriptor up after the close queued behind it has removed it (`EBADF`).
pub(super) fn close_after_last(d: &mut Driver, fd: OwnedFd, held_back: bool) {
    if held_back {
        // Its failure (the peer reset already) leaves nothing to do but the close.
        let _ = rustix::net::shutdown(&fd, rustix::net::Shutdown::Write);
    }
    close(d, fd);
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
const HELD_MAX: usize = 2;

/// A receive from `fd` into provided buffers. Where the kernel allows it (see
/// [`Driver::multishot`]) a multishot one: one submission serves every arrival of bytes (a
/// keep-alive connection's requests, a server connection's answers), each a completion
/// queued in the slot for its reader, until [`bufs::SIZE`] bytes came (then it ends and is
/// armed again when its reader next waits: a body beyond that is read straight from the
/// socket, see `RingTcp`, not copied through buffers; and one socket holds at most that
/// much of the worker's buffers). Before, each wait for bytes was a submission: the
/// socket's poll armed and torn down once per request, 8 % of a keep-alive request's CPU
/// (ADR 0026). Elsewhere a single receive, the same to its reader (a completion, then the
/// stop). A socket waiting with nothing received holds no buffer either way.
pub(super) fn recv(d: &mut Driver, fd: RawFd) -> u32 {
    let entry = if d.multishot {
        // The crate's `RecvMulti` with POLL_FIRST (its builder sets that flags word itself)
        // and the byte limit (it has no setter for it).
        let entry = opcode::Recv::new(types::Fd(fd), std::ptr::null_mut(), 0)
            .buf_group(bufs::GROUP)
            .ioprio(POLL_FIRST | MULTISHOT)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT);
        with_total_limit(entry, bufs::SIZE as u32)
    } else {
        opcode::Recv::new(types::Fd(fd), std::ptr::null_mut(), bufs::SIZE as u32)
            .buf_group(bufs::GROUP)
            .ioprio(POLL_FIRST)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT)
    };
    let slot = d.push(entry, None, Sending::default());
    let s = &mut d.slots[slot as usize];
    (s.receive, s.armed) = (true, true);
    slot
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
fn takes_limited_multishot(ring: &mut IoUring) -> io::Result<bool> {
    let (ours, _theirs) = std::os::unix::net::UnixStream::pair()?;
    const PROBE: u64 = 1;
    let entry = opcode::Recv::new(types::Fd(ours.as_raw_fd()), std::ptr::null_mut(), 0)
        .buf_group(bufs::GROUP)
        .ioprio(MULTISHOT)
        .build()
        .flags(squeue::Flags::BUFFER_SELECT);
    let cancel = opcode::AsyncCancel::new(PROBE).build().user_data(PROBE + 1);
    // SAFETY: the entries point at nothing of ours (a provided-buffer receive, a cancel).
    unsafe {
        ring.submission()
            .push(&with_total_limit(entry, bufs::SIZE as u32).user_data(PROBE))
            .map_err(io::Error::other)?;
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
pub(super) fn poll_in(d: &mut Driver, fd: RawFd) -> u32 {
    let entry = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32).build();
    d.push(entry, None, Sending::default())
}

/// A send of `buf[start..end]` to `fd` (the buffer stays in the slot until completion; a
/// short send is sent on by the driver, and the completion reports every byte sent).
pub(super) fn send(
    d: &mut Driver,
    fd: RawFd,
    buf: Box<[u8]>,
    (start, end): (usize, usize),
    more: bool,
) -> u32 {
    let send = Sending { fd, start: start as u32, len: (end - start) as u32, sent: 0, more };
    let entry = send_entry(&buf, send);
    d.push(entry, Some(buf), send)
}

/// The entry sending what `send` has not sent yet of `buf`.
fn send_entry(buf: &[u8], send: Sending) -> squeue::Entry {
    let from = (send.start + send.sent) as usize;
    let to = (send.start + send.len) as usize;
    let ptr = buf[from..to].as_ptr();
    let flags = if send.more { libc::MSG_NOSIGNAL | libc::MSG_MORE } else { libc::MSG_NOSIGNAL };
    opcode::Send::new(types::Fd(send.fd), ptr, (to - from) as u32).flags(flags).build()
}

impl Driver {
    fn push(&mut self, entry: squeue::Entry, buf: Option<Box<[u8]>>, send: Sending) -> u32 {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot {
                done: None,
                waker: None,
                buf: None,
                send: Sending::default(),
                orphan: false,
                close_after: None,
                free: true,
                gen: 0,
                receive: false,
                armed: false,
                stopping: false,
                got: VecDeque::new(),
            });
            (self.slots.len() - 1) as u32
        });
        let s = &mut self.slots[slot as usize];
        s.gen = s.gen.wrapping_add(1);
        (s.done, s.waker, s.buf, s.send, s.orphan, s.close_after, s.free) =
            (None, None, buf, send, false, None, false);
        (s.receive, s.armed, s.stopping) = (false, false, false);
        self.queue(entry.user_data(self.user_data(slot)));
        slot
    }

    /// The user data naming `slot`'s current operation.
    fn user_data(&self, slot: u32) -> u64 {
        u64::from(self.slots[slot as usize].gen) << 32 | u64::from(slot)
    }

    fn queue(&mut self, entry: squeue::Entry) {
        // SAFETY: what the entry points at outlives the operation: a send's buffer is in its
        // slot until the completion is reaped; receives use the driver's provided buffers.
        while unsafe { self.ring.submission().push(&entry) }.is_err() {
            self.submit();
        }
        self.queued += 1;
    }

    /// Nothing queued, no deferred completion work (the kernel's TASKRUN flag), no completion
    /// waiting: a flush would make a system call for nothing.
    fn idle(&mut self) -> bool {
        self.queued == 0 && !self.ring.submission().taskrun() && self.ring.completion().is_empty()
    }

    /// Gives the queued entries to the kernel.
    fn submit(&mut self) {
        if self.queued > 0 {
            self.enter(self.queued, false);
        }
    }

    /// `io_uring_enter`: submits `to_submit` entries and runs deferred completions.
    /// `quiet`: the completions this call posts (sends that went at once, the deferred ones
    /// it runs) are reaped by the caller right after, so they do not signal the eventfd (a
    /// signal would only make the worker's next epoll_wait return at once to an empty ring:
    /// a wasted turn, two system calls). What arrives meanwhile sets the TASKRUN flag and
    /// signals nothing: only the flush, and callers the flush follows before the worker
    /// sleeps (the reaper), may be quiet; the flush looks at the flag after its own call.
    fn enter(&mut self, to_submit: u32, quiet: bool) {
        let to_submit = to_submit.max(self.queued);
        if quiet {
            self.ring.completion().disable_eventfd();
        }
        // SAFETY: no extra argument; queued entries' memory is owned (see `queue`).
        let entered = unsafe { self.ring.submitter().enter::<libc::sigset_t>(to_submit, 0, GETEVENTS, None) };
        if quiet {
            self.ring.completion().enable_eventfd();
        }
        match entered {
            Ok(_) => {
                self.queued = 0;
            }
            Err(e) if e.raw_os_error() == Some(libc::EINTR) || e.raw_os_error() == Some(libc::EBUSY) => {}
            Err(e) => tracing::error!(error = %e, "io_uring_enter failed"),
        }
    }

    /// Takes the completions off the queue; returns the wakers to call (after the driver is
    /// released: a woken future may use it).
    fn reap(&mut self) -> Vec<Waker> {
        let mut woken = Vec::new();
        let done: Vec<(u64, i32, u32)> =
            self.ring.completion().map(|c| (c.user_data(), c.result(), c.flags())).collect();
        for (user, res, flags) in done {
            if user == IGNORED {
                continue;
            }
            let slot = (user & 0xffff_ffff) as usize;
            let s = &mut self.slots[slot];
            if s.free || u64::from(s.gen) != user >> 32 {
                // Cannot happen: a slot is freed only after its (last) completion. Were it
                // to, the buffer still goes back.
                self.give_back(flags);
                continue;
            }
            if s.receive {
                self.took(slot, res, flags, &mut woken);
                continue;
            }
            let res = if s.send.len > 0 {
                match self.send_on(slot, res) {
                    Some(total) => total,
                    None => continue, // the rest is on its way
                }
            } else {
                res
            };
            let s = &mut self.slots[slot];
            if s.orphan {
                self.give_back(flags);
                self.release(slot as u32); // and closes the socket an orphan send held
                continue;
            }
            s.done = Some((res, flags));
            if let Some(w) = s.waker.take() {
                woken.push(w);
            }
            if s.send.len > 0 && res == s.send.len as i32 {
                if let Some(buf) = s.buf.take() {
                    self.keep_send_buf(buf);
                }
            }
        }
        self.bufs.publish();
        woken
    }

    /// A receive's completion: its bytes queued for the reader, who is woken. A receive
    /// that holds [`HELD_MAX`] unread completions is stopped: its cancellation queued, its
    /// stop reported after what it brought.
    fn took(&mut self, slot: usize, res: i32, flags: u32, woken: &mut Vec<Waker>) {
        let more = cqueue::more(flags);
        let s = &mut self.slots[slot];
        if s.orphan {
            self.give_back(flags);
            if !more {
                self.release(slot as u32);
            }
            return;
        }
        if res > 0 {
            s.got.push_back((res, flags));
        }
        if !more {
            s.armed = false;
            // Bytes with the last completion: it stopped (the kernel's reasons), not ended.
            s.done = Some((if res > 0 { -libc::ECANCELED } else { res }, 0));
        }
        if let Some(w) = s.waker.take() {
            woken.push(w);
        }
        if s.armed && !s.stopping && s.got.len() >= HELD_MAX {
            s.stopping = true;
            let user = self.user_data(slot as u32);
            self.queue(opcode::AsyncCancel::new(user).build().user_data(IGNORED));
        }
    }

    /// What receive (or wait for readiness) `slot` has for its reader; `waker` is woken
    /// when that changes.
    pub(super) fn front(&mut self, slot: u32, waker: Option<&Waker>) -> Received {
        let s = &mut self.slots[slot as usize];
        if let Some(&(res, flags)) = s.got.front() {
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

    /// The reader is done with receive `slot`'s oldest completion: its buffer goes back.
    pub(super) fn pop(&mut self, slot: u32) {
        if let Some((_, flags)) = self.slots[slot as usize].got.pop_front() {
            self.give_back(flags);
            self.bufs.publish();
        }
    }

    /// No completion waits in the ring unreaped: a read straight from a socket cannot
    /// overtake bytes a receive took before it.
    pub(super) fn all_reaped(&mut self) -> bool {
        self.ring.completion().is_empty()
    }

    /// A send's completion (`res`): `None` when it was short and the rest was queued again
    /// (only while the descriptor is surely the socket's: its owner holds it, or the slot
    /// does until the send is over); else the result to report: every byte sent, or the
    /// error when none was.
    fn send_on(&mut self, slot: usize, res: i32) -> Option<i32> {
        let s = &mut self.slots[slot];
        let fd_held = !s.orphan || s.close_after.is_some();
        if res > 0 && s.send.sent + (res as u32) < s.send.len && fd_held {
            s.send.sent += res as u32;
            let send = s.send;
            let entry = send_entry(s.buf.as_deref().unwrap_or_default(), send);
            let user = self.user_data(slot as u32);
            self.queue(entry.user_data(user));
            return None;
        }
        let sent = s.send.sent as i32;
        Some(match res {
            r if r >= 0 => sent + r,
            _ if sent > 0 => sent,
            err => err,
        })
    }

    /// Gives back the provided buffer a receive's completion names, if any.
    fn give_back(&mut self, flags: u32) {
        if let Some(id) = cqueue::buffer_select(flags) {
            self.bufs.give_back(id);
        }
    }

    /// Frees a slot (its send buffer kept as a spare).
    pub(super) fn release(&mut self, slot: u32) {
        if let Some(buf) = self.slots[slot as usize].buf.take() {
            self.keep_send_buf(buf);
        }
        if let Some(fd) = self.slots[slot as usize].close_after.take() {
            let held_back = self.slots[slot as usize].send.more;
            close_after_last(self, fd, held_back);
        }
        let held = self.slots[slot as usize].got.len();
        for _ in 0..held {
            self.pop(slot);
        }
        let s = &mut self.slots[slot as usize];
        (s.receive, s.armed, s.stopping) = (false, false, false);
        s.send = Sending::default();
        s.free = true;
        s.orphan = false;
        s.waker = None;
        s.done = None;
        self.free.push(slot);
    }

    /// A send buffer back to the spares (or freed, past the bound).
    fn keep_send_buf(&mut self, buf: Box<[u8]>) {
        if self.spare_limit.keeps(self.spare_sends.len()) {
            self.spare_sends.push(buf);
        }
    }

    /// The result of `slot` if completed, else registers `waker`.
    pub(super) fn poll(&mut self, slot: u32, waker: &Waker) -> Option<(i32, u32)> {
        let s = &mut self.slots[slot as usize];
        match s.done {
            Some(done) => Some(done),
            None => {
                if !s.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                    s.waker = Some(waker.clone());
                }
                None
            }
        }
    }

    /// The result of `slot` if completed (no waker).
    pub(super) fn peek(&self, slot: u32) -> Option<(i32, u32)> {
        self.slots[slot as usize].done
    }

    /// The received bytes of a completed receive: `res` bytes in the provided buffer its
    /// flags name.
    pub(super) fn received(&self, flags: u32, res: i32) -> &[u8] {
        match cqueue::buffer_select(flags) {
            Some(id) => &self.bufs.slice(id)[..res.max(0) as usize],
            None => &[],
        }
    }

    /// The send buffer of a completed send, taken out of its slot (the slot is freed).
    pub(super) fn take_send(&mut self, slot: u32) -> Option<Box<[u8]>> {
        let buf = self.slots[slot as usize].buf.take();
        self.release(slot);
        buf
    }

    /// An empty send buffer.
    pub(super) fn send_buf(&mut self) -> Box<[u8]> {
        let buf = self.spare_sends.pop();
        self.spare_limit.took(self.spare_sends.len());
        buf.unwrap_or_else(|| vec![0u8; SEND_SIZE].into_boxed_slice())
    }

    /// The owner of `slot` leaves: a completed slot is freed now (a receive's unread
    /// buffers given back); one in flight is cancelled when `cancel`, and freed by its
    /// (last) completion.
    pub(super) fn abandon(&mut self, slot: u32, cancel: bool) {
        let s = &self.slots[slot as usize];
        let running = if s.receive { s.armed } else { s.done.is_none() };
        if !running {
            self.release(slot);
            return;
        }
        let held = s.got.len();
        for _ in 0..held {
            self.pop(slot);
        }
        let s = &mut self.slots[slot as usize];
        s.orphan = true;
        s.waker = None;
        if cancel && !s.stopping {
            self.queue(opcode::AsyncCancel::new(self.user_data(slot)).build().user_data(IGNORED));
        }
    }

    /// The owner of send `slot` leaves with `fd`, its socket: the send goes on (its bytes
    /// are the answer's end) and the socket closes once it is over.
    pub(super) fn abandon_send(&mut self, slot: u32, fd: OwnedFd) {
        let s = &mut self.slots[slot as usize];
        s.close_after = Some(fd);
        if s.done.is_some() {
            self.release(slot); // over already: closes it now
            return;
        }
        s.orphan = true;
        s.waker = None;
    }

    /// Cancels an operation in flight and waits (in the kernel, briefly) until its (last)
    /// completion is here: the socket can then leave the ring. Returns the completion (a
    /// send's bytes sent or error; a receive's stop, after which its unread bytes are in
    /// [`Driver::front`]).
    pub(super) fn cancel_now(&mut self, slot: u32) -> (i32, u32) {
        let settled = |s: &Slot| if s.receive { !s.armed } else { s.done.is_some() };
        if settled(&self.slots[slot as usize]) {
            return self.slots[slot as usize].done.unwrap_or((-libc::ECANCELED, 0));
        }
        for _ in 0..100 {
            // Queued again each turn: a short send's rest, queued by `reap` after the last
            // cancellation found nothing, is cancelled too (and the wait below always ends:
            // the cancellation's own completion is one).
            self.queue(opcode::AsyncCancel::new(self.user_data(slot)).build().user_data(IGNORED));
            let to_submit = self.queued;
            // SAFETY: as in `enter`; waits for one completion at most.
            let _ = unsafe { self.ring.submitter().enter::<libc::sigset_t>(to_submit, 1, GETEVENTS, None) };
            self.queued = 0;
            // Others' completions came too: their futures are only scheduled by the wake.
            self.reap().into_iter().for_each(Waker::wake);
            if settled(&self.slots[slot as usize]) {
                return self.slots[slot as usize].done.unwrap_or((-libc::ECANCELED, 0));
            }
        }
        (-libc::ECANCELED, 0)
    }
}

#[cfg(test)]
mod tests {
    //! The eventfd wakes the worker for completions it has not seen, and only for those
    //! (each test runs on its own thread, so each has its own ring).
    use super::*;
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
        install().unwrap();
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
        install().unwrap();
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
        install().unwrap();
        let (ours, mut theirs) = pair();
        let op = with(|d| recv(d, ours.as_raw_fd()));
        flush();
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
        install().unwrap();
        let (ours, mut theirs) = pair();
        let op = with(|d| recv(d, ours.as_raw_fd()));
        flush();
        let mut sent = Vec::new();
        for i in 0..6u8 {
            // Each its own arrival (a client sending requests without reading answers).
            let message = [b'a' + i; 3];
            theirs.write_all(&message).unwrap();
            sent.extend_from_slice(&message);
            signalled_within_a_second();
            flush();
        }
        let held = with(|d| d.slots[op as usize].got.len());
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
        install().unwrap();
        let (ours, mut theirs) = pair();
        let op = with(|d| recv(d, ours.as_raw_fd()));
        flush();
        // A body arriving at once: the receive takes one buffer's worth, not all of it into
        // the worker's buffers (the reader takes the rest straight from the socket).
        theirs.write_all(&vec![7u8; 4 * bufs::SIZE]).unwrap();
        assert!(signalled_within_a_second());
        flush();
        assert_eq!(read_all(op).len(), bufs::SIZE);
        assert_eq!(with(|d| d.front(op, None)), Received::Over(-libc::ECANCELED), "it ended");
        with(|d| d.release(op));
    }
}
