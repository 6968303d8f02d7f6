//! Connection I/O buffers and the worker-local free list they come from.
//!
//! An idle keep-alive connection holds no buffer: it gives its buffer back to the worker's
//! free list when its read side is empty and takes one again when the socket becomes
//! readable. This keeps memory per idle client connection small (the bench measures it).

use crate::floor::spares::Spares;
use std::cell::RefCell;

/// A fixed-capacity byte buffer with a filled window `start..data.len()`.
///
/// The bytes past the window are the `Vec`'s spare capacity, never initialised: reads fill
/// it through tokio's `read_buf` (which writes into uninitialised memory safely), so a new
/// buffer costs one `malloc` and no `memset` — zeroing 16 KiB per buffer was the largest
/// user-space cost per request when buffers are allocated under load.
///
/// A buffer may start smaller than its limit and grow (once, to the limit) when a read
/// finds it full: a connection that has sent only part of a head holds little memory.
pub struct IoBuf {
    data: Vec<u8>,
    start: usize,
    cap: usize,
    max: usize,
}

impl IoBuf {
    /// An empty buffer of `cap` bytes.
    pub fn new(cap: usize) -> Self {
        let data = Vec::with_capacity(cap);
        let cap = data.capacity();
        IoBuf { data, start: 0, cap, max: cap }
    }

    /// An empty buffer of `initial` bytes that grows to `max` when it fills.
    pub fn growable(initial: usize, max: usize) -> Self {
        let data = Vec::with_capacity(initial.min(max));
        let cap = data.capacity();
        IoBuf { data, start: 0, cap, max: max.max(cap) }
    }

    /// The filled bytes.
    pub fn filled(&self) -> &[u8] {
        &self.data[self.start..]
    }

    /// Number of filled bytes.
    pub fn len(&self) -> usize {
        self.data.len() - self.start
    }

    /// True when nothing is filled.
    pub fn is_empty(&self) -> bool {
        self.start == self.data.len()
    }

    /// Most bytes it can hold (after growing, for a growable buffer).
    pub fn capacity(&self) -> usize {
        self.max
    }

    /// Drops `n` bytes from the front of the filled window.
    pub fn consume(&mut self, n: usize) {
        self.start += n.min(self.len());
        if self.start == self.data.len() {
            self.clear();
        }
    }

    /// Makes room at the back (moving the filled bytes to the front when the back is full)
    /// and returns the vector to read into: its spare capacity is the free space. Readers
    /// must not grow it past [`IoBuf::capacity`] (tokio's `read_buf` fills only the spare
    /// capacity, which is never empty here unless the buffer is full).
    pub fn for_read(&mut self) -> &mut Vec<u8> {
        if self.data.len() == self.cap && self.start == 0 && self.cap < self.max {
            self.data.reserve_exact(self.max - self.cap);
            self.cap = self.data.capacity();
            self.max = self.max.max(self.cap);
        }
        if self.data.len() == self.cap && self.start > 0 {
            self.data.copy_within(self.start.., 0);
            self.data.truncate(self.data.len() - self.start);
            self.start = 0;
        }
        &mut self.data
    }

    /// Grows a growable buffer to its limit now (a body is about to stream through it: one
    /// read per buffer's worth, not per first size).
    pub fn grow(&mut self) {
        if self.cap < self.max {
            self.data.reserve_exact(self.max - self.data.len());
            self.cap = self.data.capacity();
            self.max = self.max.max(self.cap);
        }
    }

    /// Makes room for `want` filled bytes, up to `limit`, now (a large body of known length
    /// is about to stream through: one read per piece of up to `limit`, not per buffer
    /// size). The buffer is then no longer its pool's size, so the pool drops it when it is
    /// given back: the extra memory lives only as long as such a body.
    pub fn widen(&mut self, want: usize, limit: usize) {
        let target = want.min(limit);
        if target > self.max {
            // A new allocation holding just the filled bytes: growing the old one would copy
            // all of it (the allocator copies its size, not what is filled), and by now most
            // of what it held was usually sent on (a 16 KiB copy per large body, measured).
            let mut data = Vec::with_capacity(target.max(self.len()));
            data.extend_from_slice(self.filled());
            (self.data, self.start) = (data, 0);
            self.cap = self.data.capacity();
            self.max = self.cap;
        }
    }

    /// Free space at the back after [`IoBuf::for_read`]'s compaction (and growth).
    pub fn free(&self) -> usize {
        self.max - self.len()
    }

    /// True when no more bytes fit even after compaction and growth.
    pub fn is_full(&self) -> bool {
        self.len() >= self.max
    }

    /// Removes filled bytes `from..to` (offsets into `filled()`), closing the gap.
    pub fn remove_range(&mut self, from: usize, to: usize) {
        let (from, to) = (from.min(self.len()), to.min(self.len()));
        if from >= to {
            return;
        }
        self.data.copy_within(self.start + to.., self.start + from);
        self.data.truncate(self.data.len() - (to - from));
    }

    /// Empties the buffer.
    pub fn clear(&mut self) {
        self.data.clear();
        self.start = 0;
    }

    /// Appends bytes that did not come from a read (an HTTP/2 request's head, translated),
    /// growing the buffer when they do not fit: to its limit, or past it (the pool then
    /// takes it back no more).
    pub fn put(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.data.len() {
            self.clear();
        }
        if self.data.len() + bytes.len() > self.cap {
            self.grow();
        }
        if self.data.len() + bytes.len() > self.cap {
            self.widen(self.data.len() + bytes.len(), usize::MAX);
        }
        self.data.extend_from_slice(bytes);
    }

    /// Puts bytes in front of the filled ones, growing past the capacity if it must (bytes a
    /// tunnel's cancelled send had not sent, `uring::RingTcp::into_tokio`).
    pub fn prepend(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let after = self.filled().to_vec();
        self.clear();
        self.put(bytes);
        self.put(&after);
    }

    /// Appends bytes, growing past the capacity if it must (tests fill buffers this way;
    /// a tunnel takes the bytes the ring received for it, `uring::RingTcp::into_tokio`).
    pub fn extend(&mut self, bytes: &[u8]) {
        self.for_read().extend_from_slice(bytes);
    }
}

/// The first size of a buffer a new request head is read into.
const HEAD_START: usize = 1024;

/// Worker-local free lists of buffers of one size: whole ones, and head buffers that never
/// grew (kept apart, so a request whose head fits in [`HEAD_START`] bytes allocates
/// nothing either).
pub struct BufPool {
    size: usize,
    whole: RefCell<Spares<IoBuf>>,
    heads: RefCell<Spares<IoBuf>>,
}

impl BufPool {
    /// A pool handing out buffers of `size` bytes and keeping the spare ones the load of the
    /// last second needed, at least `keep` (see [`Spares`]).
    pub fn new(size: usize, keep: usize) -> Self {
        BufPool { size, whole: RefCell::new(Spares::new(keep)), heads: RefCell::new(Spares::new(keep)) }
    }

    /// Drops the spares the last period's load did not need (the worker's housekeeping, once
    /// a second).
    pub fn trim(&self) {
        self.whole.borrow_mut().trim();
        self.heads.borrow_mut().trim();
    }

    /// A buffer to read a request head into: a recycled one when one is free (a whole one
    /// first), else a small one that grows to the pool's size if the head needs it.
    pub fn take_for_head(&self) -> IoBuf {
        let recycled = self.whole.borrow_mut().pop().or_else(|| self.heads.borrow_mut().pop());
        recycled.unwrap_or_else(|| IoBuf::growable(HEAD_START, self.size))
    }

    /// The size of its buffers.
    pub fn size(&self) -> usize {
        self.size
    }

    /// A buffer, recycled when one is free.
    pub fn take(&self) -> IoBuf {
        let recycled = self.whole.borrow_mut().pop();
        recycled.unwrap_or_else(|| IoBuf::new(self.size))
    }

    /// Gives a buffer back (dropped when the pool is full or its size is stale).
    pub fn give(&self, mut buf: IoBuf) {
        buf.clear();
        if buf.max != self.size {
            return;
        }
        if buf.cap == self.size {
            self.whole.borrow_mut().push(buf);
        } else {
            self.heads.borrow_mut().push(buf); // a head buffer that never grew
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_makes_room_and_keeps_bytes() {
        let mut b = IoBuf::new(8);
        let cap = b.capacity();
        b.extend(&vec![b'a'; cap - 3]);
        b.extend(b"fgh");
        b.consume(cap - 3);
        assert_eq!(b.filled(), b"fgh");
        assert_eq!(b.free(), cap - 3);
        let v = b.for_read();
        assert_eq!((v.len(), v.capacity()), (3, cap), "compacted, never grown");
        assert_eq!(b.filled(), b"fgh");
    }

    #[test]
    fn widening_takes_a_large_body_in_one_read_and_leaves_the_pool() {
        let pool = BufPool::new(16, 1);
        let mut b = pool.take();
        b.widen(10, 64);
        assert_eq!(b.capacity(), 16, "never narrower than it was");
        b.extend(b"head");
        b.widen(100, 64);
        assert!(b.capacity() >= 64 && b.free() >= 60, "room for the limit at once");
        assert_eq!(b.filled(), b"head");
        pool.give(b);
        assert_eq!(pool.whole.borrow().held(), 0, "a widened buffer is not kept");
    }

    #[test]
    fn widening_keeps_only_the_unsent_bytes() {
        let mut b = IoBuf::new(16);
        b.extend(b"headers+body");
        b.consume(8);
        b.widen(b.len() + 60, 64);
        assert_eq!(b.filled(), b"body");
        assert!(b.capacity() >= 64 && b.free() >= 60, "the sent bytes take no room");
    }

    #[test]
    fn remove_range_closes_the_gap() {
        let mut b = IoBuf::new(8);
        b.extend(b"headXY");
        b.remove_range(4, 5);
        assert_eq!(b.filled(), b"headY");
    }

    #[test]
    fn a_growable_buffer_grows_once_when_full() {
        let mut b = IoBuf::growable(4, 64);
        b.extend(b"abcd");
        assert_eq!((b.free(), b.is_full()), (60, false));
        assert!(b.for_read().capacity() >= 64, "grew to the limit");
        b.extend(&[b'x'; 60]);
        assert!(b.is_full());
        assert_eq!(&b.filled()[..4], b"abcd");
    }

    #[test]
    fn pool_keeps_what_the_load_used_then_trims_to_keep() {
        let pool = BufPool::new(16, 1);
        let (a, b) = (pool.take(), pool.take());
        pool.give(a);
        pool.give(b);
        assert_eq!(pool.whole.borrow().held(), 2, "both were in use at once: both kept");
        pool.trim();
        let c = pool.take();
        pool.give(c);
        pool.trim();
        assert_eq!(pool.whole.borrow().held(), 1, "one was never taken during the second: dropped");
        pool.trim();
        assert_eq!(pool.whole.borrow().held(), 1, "never below keep");
    }

    #[test]
    fn a_head_buffer_that_never_grew_is_taken_again() {
        let pool = BufPool::new(4 * HEAD_START, 1);
        pool.give(pool.take_for_head());
        assert_eq!(pool.heads.borrow().held(), 1, "kept");
        let again = pool.take_for_head();
        assert!(pool.heads.borrow().held() == 0, "taken again, not made");
        assert_eq!(again.data.capacity(), HEAD_START);
        let mut grown = again;
        grown.extend(&[b'x'; HEAD_START]);
        grown.for_read(); // a read finds it full: it grows to the pool's size
        pool.give(grown);
        assert_eq!(pool.take().data.capacity(), 4 * HEAD_START, "a head that grew is a whole buffer");
        assert!(pool.heads.borrow().held() == 0);
    }
}
