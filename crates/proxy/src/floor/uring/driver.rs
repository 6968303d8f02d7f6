//! The worker's ring: one per worker thread (single issuer, deferred task running), its
//! operations kept in slots until the future that asked for them takes the result. A
//! socket's receive is multishot: a completion per arrival of bytes, kept until the reader
//! takes it (`driver/receive.rs`: `recv`, `Driver::front`/`pop`).
//!
//! Memory safety rests on ownership: a send's buffer moves into its slot and stays there
//! until the kernel's completion is reaped, even if the socket or future that asked for it is
//! gone (the slot is then an orphan, freed by its completion); receives write only into the
//! provided buffers (`bufs`), which the driver owns. A socket's descriptor is closed by the
//! ring ([`close`]), queued after everything the socket queued: the kernel resolves a
//! descriptor number at submission, in queue order, so no operation of the socket can find
//! its number naming another connection.
#![allow(unsafe_code)]

use super::bufs::BufRing;
use crate::floor::spares::Spares;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::cell::RefCell;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::task::Waker;

mod receive;

use receive::takes_limited_multishot;
pub(super) use receive::{poll_in, recv, Received};

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
    /// The oldest completion the receive brought that its owner has not read yet: (bytes,
    /// flags naming the provided buffer). Later ones wait in [`Driver::later`].
    got: Option<(i32, u32)>,
    /// How many unread completions it holds (`got` and those in `later`).
    held: u16,
}

impl Slot {
    /// The kernel still has its operation: a receive still armed, or another operation not
    /// completed.
    fn running(&self) -> bool {
        if self.receive {
            self.armed
        } else {
            self.done.is_none()
        }
    }
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
    /// Send buffers back from completed sends, as many as the last second's load used
    /// (see `floor::spares`).
    spare_sends: Spares<Box<[u8]>>,
    /// The eventfd the ring signals when completions wait (in the worker's epoll).
    eventfd: OwnedFd,
    /// Receives are multishot with a byte limit ([`recv`]); else single.
    multishot: bool,
    /// Unread receive completions behind their slot's oldest (`Slot::got`), in arrival
    /// order: (slot, bytes, flags). A socket's second arrival before its reader read the
    /// first is rare, so a slot carries room for one and no queue of its own (a slot per
    /// idle connection: its size is idle memory).
    later: Vec<(u32, i32, u32)>,
    /// A turn's completions, and the wakers they call: kept from turn to turn, so a turn
    /// allocates nothing (`tests/allocations.rs` counts).
    done: Vec<(u64, i32, u32)>,
    woken: Vec<Waker>,
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
/// `multishot`: receives may be multishot (`[global] uring_multishot`); they are where the
/// kernel also takes their byte limit, else one receive serves one wait for bytes.
pub fn install(multishot: bool) -> io::Result<()> {
    let mut ring = IoUring::builder()
        .setup_cqsize(ENTRIES * 4)
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_taskrun_flag()
        .build(ENTRIES)?;
    let bufs = BufRing::register(&ring)?;
    let multishot = multishot && {
        let taken = takes_limited_multishot(&mut ring)?;
        if !taken {
            tracing::info!(
                "io_uring: the kernel limits no multishot receive, one receive per wait for bytes"
            );
        }
        taken
    };
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
        spare_sends: Spares::new(8),
        eventfd,
        multishot,
        later: Vec::new(),
        done: Vec::new(),
        woken: Vec::new(),
    };
    DRIVER.with(|d| *d.borrow_mut() = Some(driver));
    Ok(())
}

/// Drops the spare send buffers the last second's load did not need (the worker's
/// housekeeping, once a second).
pub fn trim() {
    DRIVER.with(|d| {
        if let Some(d) = d.borrow_mut().as_mut() {
            d.spare_sends.trim();
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
            d.reap_into(&mut woken);
        }
        woken
    });
    wake_all(woken);
}

/// Calls the wakers a turn collected, outside the driver's borrow (a woken future may use
/// it), and gives their emptied vector back for the next turn.
fn wake_all(mut woken: Vec<Waker>) {
    wake(&mut woken);
    try_with(|d| d.woken = woken);
}

/// Calls `woken`'s wakers, leaving it empty (and its room kept).
fn wake(woken: &mut Vec<Waker>) {
    woken.drain(..).for_each(Waker::wake);
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
        wake_all(woken);
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
                got: None,
                held: 0,
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
        let mut woken = std::mem::take(&mut self.woken);
        self.reap_into(&mut woken);
        woken
    }

    /// [`Driver::reap`] into `woken`.
    fn reap_into(&mut self, woken: &mut Vec<Waker>) {
        let mut done = std::mem::take(&mut self.done);
        done.extend(self.ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
        for (user, res, flags) in done.drain(..) {
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
                self.took(slot, res, flags, woken);
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
                    self.spare_sends.push(buf);
                }
            }
        }
        self.done = done;
        self.bufs.publish();
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
            self.spare_sends.push(buf);
        }
        if let Some(fd) = self.slots[slot as usize].close_after.take() {
            let held_back = self.slots[slot as usize].send.more;
            close_after_last(self, fd, held_back);
        }
        self.give_back_unread(slot);
        let s = &mut self.slots[slot as usize];
        s.send = Sending::default();
        s.free = true;
        s.orphan = false;
        s.waker = None;
        s.done = None;
        self.free.push(slot);
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
        buf.unwrap_or_else(|| vec![0u8; SEND_SIZE].into_boxed_slice())
    }

    /// The owner of `slot` leaves: a completed slot is freed now (a receive's unread
    /// buffers given back); one in flight is cancelled when `cancel`, and freed by its
    /// (last) completion.
    pub(super) fn abandon(&mut self, slot: u32, cancel: bool) {
        if !self.slots[slot as usize].running() {
            self.release(slot);
            return;
        }
        self.give_back_unread(slot);
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
        let settled = |s: &Slot| (!s.running()).then(|| s.done.unwrap_or((-libc::ECANCELED, 0)));
        if let Some(done) = settled(&self.slots[slot as usize]) {
            return done;
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
            let mut woken = self.reap();
            wake(&mut woken);
            self.woken = woken;
            if let Some(done) = settled(&self.slots[slot as usize]) {
                return done;
            }
        }
        (-libc::ECANCELED, 0)
    }
}

#[cfg(test)]
mod tests;
