//! The completion floor under tokio: cswitch's workers are tokio current-thread runtimes, so a
//! completion-based data path would live beside tokio's epoll, not replace it. This relay runs
//! the io_uring receives and sends of `relay-uring` as futures on such a runtime: the ring's
//! descriptor sits in tokio's epoll (readable when completions wait), one task reaps the
//! completion queue and wakes the futures, and the submissions the tasks queued during a
//! turn go to the kernel in one `io_uring_enter` when the runtime is about to park (tokio's
//! `on_thread_park` hook) or after a reap. Two tasks per client (one per direction).

use cswitch_floor::{args, connect, listen, nodelay};
use io_uring::{opcode, squeue, types, IoUring};
use std::cell::RefCell;
use std::future::Future;
use std::os::fd::{AsRawFd, IntoRawFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use tokio::io::unix::AsyncFd;

const BUF: usize = 16 * 1024;

enum Slot {
    Free,
    Waiting(Option<Waker>),
    Done(i32),
    /// The future was dropped before its completion: the buffer waits here for it.
    Orphan(#[allow(dead_code)] Box<[u8]>),
}

struct Driver {
    ring: IoUring,
    slots: Vec<Slot>,
    free: Vec<usize>,
    unsubmitted: usize,
}

thread_local! {
    static DRIVER: RefCell<Option<Driver>> = const { RefCell::new(None) };
}

fn with<T>(f: impl FnOnce(&mut Driver) -> T) -> T {
    DRIVER.with(|d| f(d.borrow_mut().as_mut().expect("driver on this thread")))
}

impl Driver {
    fn push(&mut self, entry: squeue::Entry) -> usize {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot::Free);
            self.slots.len() - 1
        });
        self.slots[slot] = Slot::Waiting(None);
        let entry = entry.user_data(slot as u64);
        // SAFETY: the buffer an entry names is owned by its `Op` future, or by the slot
        // (`Orphan`) if the future is dropped, until the completion has been reaped.
        while unsafe { self.ring.submission().push(&entry) }.is_err() {
            self.ring.submit().expect("io_uring_enter");
            self.unsubmitted = 0;
        }
        self.unsubmitted += 1;
        slot
    }

    fn submit(&mut self) {
        if self.unsubmitted > 0 {
            self.ring.submit().expect("io_uring_enter");
            self.unsubmitted = 0;
        }
    }

    fn reap(&mut self) {
        let done: Vec<(u64, i32)> = self.ring.completion().map(|c| (c.user_data(), c.result())).collect();
        for (user, res) in done {
            let slot = user as usize;
            match std::mem::replace(&mut self.slots[slot], Slot::Done(res)) {
                Slot::Waiting(Some(w)) => w.wake(),
                Slot::Orphan(_) => {
                    self.slots[slot] = Slot::Free;
                    self.free.push(slot);
                }
                _ => {}
            }
        }
    }
}

/// One receive or send in flight: resolves to (result, buffer).
struct Op {
    slot: Option<usize>,
    buf: Option<Box<[u8]>>,
}

impl Future for Op {
    type Output = (i32, Box<[u8]>);
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let slot = self.slot.expect("polled after completion");
        let ready = with(|d| match &mut d.slots[slot] {
            Slot::Done(res) => {
                let res = *res;
                d.slots[slot] = Slot::Free;
                d.free.push(slot);
                Some(res)
            }
            Slot::Waiting(w) => {
                *w = Some(cx.waker().clone());
                None
            }
            _ => unreachable!("slot of a live op"),
        });
        match ready {
            Some(res) => {
                self.slot = None;
                Poll::Ready((res, self.buf.take().expect("buffer")))
            }
            None => Poll::Pending,
        }
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        if let (Some(slot), Some(buf)) = (self.slot, self.buf.take()) {
            with(|d| match d.slots[slot] {
                Slot::Done(_) => {
                    d.slots[slot] = Slot::Free;
                    d.free.push(slot);
                }
                _ => d.slots[slot] = Slot::Orphan(buf),
            });
        }
    }
}

fn recv(fd: RawFd, mut buf: Box<[u8]>) -> Op {
    let entry = opcode::Recv::new(types::Fd(fd), buf.as_mut_ptr(), buf.len() as u32).build();
    Op { slot: Some(with(|d| d.push(entry))), buf: Some(buf) }
}

fn send(fd: RawFd, buf: Box<[u8]>, start: usize, end: usize) -> Op {
    let entry = opcode::Send::new(types::Fd(fd), buf[start..].as_ptr(), (end - start) as u32).build();
    Op { slot: Some(with(|d| d.push(entry))), buf: Some(buf) }
}

/// Copies one direction until either side ends.
async fn pump(from: RawFd, to: RawFd) {
    let mut buf = vec![0u8; BUF].into_boxed_slice();
    loop {
        let (n, b) = recv(from, buf).await;
        buf = b;
        if n <= 0 {
            break;
        }
        let (mut sent, n) = (0usize, n as usize);
        while sent < n {
            let (res, b) = send(to, buf, sent, n).await;
            buf = b;
            if res <= 0 {
                unsafe { libc::shutdown(from, libc::SHUT_RDWR) };
                return;
            }
            sent += res as usize;
        }
    }
    unsafe { libc::shutdown(to, libc::SHUT_RDWR) };
}

struct RingFd(RawFd);
impl AsRawFd for RingFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Waits on `fd` (the ring, or with `--defer` the eventfd the ring signals when deferred
/// completion work is queued) and reaps.
async fn reaper(fd: RawFd, defer: bool) {
    let afd = AsyncFd::with_interest(RingFd(fd), tokio::io::Interest::READABLE).expect("fd in epoll");
    loop {
        let mut guard = afd.readable().await.expect("readable");
        guard.clear_ready();
        with(|d| {
            if defer {
                // Deferred task work runs only inside an enter with GETEVENTS (this one also
                // submits what is queued).
                let len = d.unsubmitted as u32;
                // SAFETY: no extra argument; the queued entries' buffers are owned (see push).
                unsafe { d.ring.submitter().enter::<libc::sigset_t>(len, 0, 1, None) }.expect("enter");
                d.unsubmitted = 0;
            }
            d.reap();
            d.submit();
        });
    }
}

fn main() {
    let args = args();
    let defer = std::env::args().any(|a| a == "--defer");
    let mut builder = IoUring::builder();
    builder.setup_cqsize(16384);
    if defer {
        builder.setup_single_issuer().setup_defer_taskrun().setup_taskrun_flag();
    }
    let ring = builder.build(4096).expect("io_uring");
    let mut wait_fd = ring.as_raw_fd();
    if defer {
        // SAFETY: a new descriptor this process owns.
        wait_fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        ring.submitter().register_eventfd(wait_fd).expect("register eventfd");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .on_thread_park(|| DRIVER.with(|d| d.borrow_mut().as_mut().map(Driver::submit).unwrap_or(())))
        .build()
        .expect("runtime");
    DRIVER.with(|d| *d.borrow_mut() = Some(Driver { ring, slots: Vec::new(), free: Vec::new(), unsubmitted: 0 }));
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, async move {
        tokio::task::spawn_local(reaper(wait_fd, defer));
        let listener = tokio::net::TcpListener::from_std(listen(args.listen, true)).expect("listener");
        let mut accepted = 0usize;
        loop {
            let Ok((client, _)) = listener.accept().await else { continue };
            let client = client.into_std().expect("std").into_raw_fd();
            nodelay(client);
            // The ring does the I/O: blocking descriptors (io_uring polls them itself).
            unsafe { libc::fcntl(client, libc::F_SETFL, 0) };
            let up = connect(&args.upstreams, accepted, false);
            accepted += 1;
            let done = Rc::new(std::cell::Cell::new(0u8));
            for (from, to) in [(client, up), (up, client)] {
                let done = Rc::clone(&done);
                tokio::task::spawn_local(async move {
                    pump(from, to).await;
                    done.set(done.get() + 1);
                    if done.get() == 2 {
                        unsafe {
                            libc::close(from);
                            libc::close(to);
                        }
                    }
                });
            }
        }
    });
}
