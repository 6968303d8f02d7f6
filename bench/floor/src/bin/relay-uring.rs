//! The completion floor: one thread, one io_uring (single issuer, deferred task running), a
//! multishot accept, and per socket one receive in flight whose completion submits the send to
//! the other socket; the send's completion re-arms the receive. Submissions and reaping are
//! batched into one `io_uring_enter` per loop turn.
//!
//! `--multishot` (optional, first argument) uses multishot receives into a provided-buffer
//! ring instead: one receive submission per socket for its whole life.

use cswitch_floor::{connect, nodelay};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::os::fd::{AsRawFd, RawFd};

const BUF: usize = 16 * 1024;
const ACCEPT: u64 = u64::MAX;
const RING_BUFS: u16 = 1024;
const GROUP: u16 = 7;

/// What a completion is for: the socket's slot and the operation.
#[derive(Clone, Copy)]
enum Op {
    Recv = 0,
    Send = 1,
}

struct Side {
    fd: RawFd,
    peer: usize,
    buf: Box<[u8]>,
    /// Bytes of `buf` still to send to the peer (start, end).
    pending: (usize, usize),
    /// Operations in flight that name this slot (it is freed when the pair is closed and
    /// this is 0).
    inflight: u32,
    closing: bool,
}

fn token(slot: usize, op: Op) -> u64 {
    ((slot as u64) << 1) | op as u64
}

fn main() {
    let multishot = std::env::args().any(|a| a == "--multishot");
    let args = cswitch_floor::args();
    let listener = cswitch_floor::listen(args.listen, false);
    let mut ring: IoUring = IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_cqsize(16384)
        .build(4096)
        .expect("io_uring");
    let mut relay = Relay { sides: Vec::new(), free: Vec::new(), accepted: 0, multishot, bufs: None };
    if multishot {
        relay.bufs = Some(BufRing::register(&ring));
    }
    push(&mut ring, opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd())).build().user_data(ACCEPT));
    let mut done: Vec<(u64, i32, u32)> = Vec::with_capacity(1024);
    loop {
        ring.submit_and_wait(1).expect("io_uring_enter");
        done.clear();
        done.extend(ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
        for &(user, res, flags) in &done {
            relay.complete(&mut ring, &args.upstreams, user, res, flags);
        }
        if let Some(b) = relay.bufs.as_mut() {
            b.publish();
        }
    }
}

struct Relay {
    sides: Vec<Side>,
    free: Vec<usize>,
    accepted: usize,
    multishot: bool,
    bufs: Option<BufRing>,
}

impl Relay {
    fn complete(
        &mut self,
        ring: &mut IoUring,
        upstreams: &[std::net::SocketAddr],
        user: u64,
        res: i32,
        flags: u32,
    ) {
        if user == ACCEPT {
            if res >= 0 {
                self.pair(ring, upstreams, res);
            }
            if !cqueue::more(flags) {
                eprintln!("multishot accept ended: {res}");
            }
            return;
        }
        let slot = (user >> 1) as usize;
        let op = if user & 1 == 0 { Op::Recv } else { Op::Send };
        let side = &mut self.sides[slot];
        let last = !self.multishot || matches!(op, Op::Send) || !cqueue::more(flags);
        if last {
            side.inflight -= 1;
        }
        if side.closing || res <= 0 {
            if let (Op::Recv, Some(b)) = (op, self.bufs.as_mut()) {
                if let Some(id) = cqueue::buffer_select(flags) {
                    b.give_back(id);
                }
            }
            self.close(slot);
            return;
        }
        match op {
            Op::Recv => {
                let n = res as usize;
                let side = &mut self.sides[slot];
                let end = side.pending.1;
                assert!(end + n <= BUF, "the benchmark's messages fit one buffer");
                match (self.multishot, cqueue::buffer_select(flags)) {
                    (true, Some(id)) => {
                        // Copy out of the ring's buffer so it goes back at once (a send
                        // straight from it would hold it until the send completes).
                        let b = self.bufs.as_mut().expect("ring");
                        side.buf[end..end + n].copy_from_slice(&b.slice(id)[..n]);
                        b.give_back(id);
                    }
                    _ => {}
                }
                side.pending.1 = end + n;
                if !self.multishot || side.pending.0 == end {
                    // Nothing being sent from this side: send what just came.
                    self.send(ring, slot);
                }
            }
            Op::Send => {
                let side = &mut self.sides[slot];
                side.pending.0 += res as usize;
                if side.pending.0 < side.pending.1 {
                    self.send(ring, slot);
                } else {
                    side.pending = (0, 0);
                    if !self.multishot {
                        self.arm(ring, slot);
                    }
                }
            }
        }
    }

    /// Sends the side's pending bytes to its peer.
    fn send(&mut self, ring: &mut IoUring, slot: usize) {
        let peer_fd = self.sides[self.sides[slot].peer].fd;
        let side = &mut self.sides[slot];
        let (start, end) = side.pending;
        side.inflight += 1;
        let ptr = side.buf[start..].as_ptr();
        push(
            ring,
            opcode::Send::new(types::Fd(peer_fd), ptr, (end - start) as u32)
                .build()
                .user_data(token(slot, Op::Send)),
        );
    }

    fn pair(&mut self, ring: &mut IoUring, upstreams: &[std::net::SocketAddr], client: RawFd) {
        nodelay(client);
        let up = connect(upstreams, self.accepted, false);
        self.accepted += 1;
        let a = self.slot(client);
        let b = self.slot(up);
        self.sides[a].peer = b;
        self.sides[b].peer = a;
        for s in [a, b] {
            self.arm(ring, s);
        }
    }

    fn arm(&mut self, ring: &mut IoUring, slot: usize) {
        let side = &mut self.sides[slot];
        side.inflight += 1;
        let entry = if self.multishot {
            opcode::RecvMulti::new(types::Fd(side.fd), GROUP).build()
        } else {
            opcode::Recv::new(types::Fd(side.fd), side.buf.as_mut_ptr(), BUF as u32).build()
        };
        push(ring, entry.user_data(token(slot, Op::Recv)));
    }

    fn slot(&mut self, fd: RawFd) -> usize {
        let side = Side {
            fd,
            peer: 0,
            buf: vec![0u8; BUF].into_boxed_slice(),
            pending: (0, 0),
            inflight: 0,
            closing: false,
        };
        match self.free.pop() {
            Some(i) => {
                self.sides[i] = side;
                i
            }
            None => {
                self.sides.push(side);
                self.sides.len() - 1
            }
        }
    }

    /// Shuts both sockets (their receives then complete) and frees the slots once nothing in
    /// flight names them.
    fn close(&mut self, slot: usize) {
        let peer = self.sides[slot].peer;
        for s in [slot, peer] {
            let side = &mut self.sides[s];
            if !side.closing {
                side.closing = true;
                unsafe { libc::shutdown(side.fd, libc::SHUT_RDWR) };
            }
        }
        if self.sides[slot].inflight == 0 && self.sides[peer].inflight == 0 && self.sides[slot].fd >= 0 {
            for s in [slot, peer] {
                unsafe { libc::close(self.sides[s].fd) };
                self.sides[s].fd = -1;
                self.free.push(s);
            }
        }
    }
}

fn push(ring: &mut IoUring, entry: squeue::Entry) {
    loop {
        // SAFETY: every buffer an entry names lives in a boxed slice (or the buffer ring) that
        // stays in place until the operation's completion has been reaped.
        if unsafe { ring.submission().push(&entry) }.is_ok() {
            return;
        }
        ring.submit().expect("io_uring_enter");
    }
}

/// A provided-buffer ring (IORING_REGISTER_PBUF_RING) for multishot receives.
struct BufRing {
    ring: *mut io_uring::types::BufRingEntry,
    mem: Box<[u8]>,
    tail: u16,
    unpublished: u16,
}

impl BufRing {
    fn register(ring: &IoUring) -> Self {
        let entries = RING_BUFS as usize;
        let layout = std::alloc::Layout::from_size_align(entries * 16, 4096).expect("layout");
        // SAFETY: a zeroed, page-aligned region the kernel shares for the process's life.
        let base = unsafe { std::alloc::alloc_zeroed(layout) } as *mut io_uring::types::BufRingEntry;
        // SAFETY: the region is `entries` entries long and never freed.
        unsafe { ring.submitter().register_buf_ring_with_flags(base as u64, RING_BUFS, GROUP, 0) }
            .expect("register_buf_ring");
        let mut b =
            BufRing { ring: base, mem: vec![0u8; entries * BUF].into_boxed_slice(), tail: 0, unpublished: 0 };
        for id in 0..RING_BUFS {
            b.give_back(id);
        }
        b.publish();
        b
    }

    fn slice(&self, id: u16) -> &[u8] {
        &self.mem[id as usize * BUF..(id as usize + 1) * BUF]
    }

    fn give_back(&mut self, id: u16) {
        let idx = (self.tail.wrapping_add(self.unpublished) & (RING_BUFS - 1)) as usize;
        // SAFETY: idx < RING_BUFS, inside the registered region.
        let entry = unsafe { &mut *self.ring.add(idx) };
        entry.set_addr(self.mem[id as usize * BUF..].as_ptr() as u64);
        entry.set_len(BUF as u32);
        entry.set_bid(id);
        self.unpublished += 1;
    }

    fn publish(&mut self) {
        if self.unpublished == 0 {
            return;
        }
        self.tail = self.tail.wrapping_add(self.unpublished);
        self.unpublished = 0;
        // SAFETY: the tail lives in the first entry's `resv` field; the kernel reads it.
        let tail = unsafe { io_uring::types::BufRingEntry::tail(self.ring) } as *const u16 as *mut u16;
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        unsafe { tail.write_volatile(self.tail) };
    }
}
