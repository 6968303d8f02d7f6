//! Connection I/O buffers and the worker-local free list they come from.
//!
//! An idle keep-alive connection holds no buffer: it gives its buffer back to the worker's
//! free list when its read side is empty and takes one again when the socket becomes
//! readable. This keeps memory per idle client connection small (the bench measures it).

use std::cell::RefCell;

/// A fixed-capacity byte buffer with a filled window `start..end`.
pub struct IoBuf {
    data: Box<[u8]>,
    start: usize,
    end: usize,
}

impl IoBuf {
    /// A zeroed buffer of `cap` bytes.
    pub fn new(cap: usize) -> Self {
        IoBuf { data: vec![0; cap].into_boxed_slice(), start: 0, end: 0 }
    }

    /// The filled bytes.
    pub fn filled(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }

    /// Number of filled bytes.
    pub fn len(&self) -> usize {
        self.end - self.start
    }

    /// True when nothing is filled.
    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// Total capacity.
    pub fn capacity(&self) -> usize {
        self.data.len()
    }

    /// Drops `n` bytes from the front of the filled window.
    pub fn consume(&mut self, n: usize) {
        self.start += n.min(self.len());
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    /// Free space at the back, moving filled bytes to the front first if that makes room.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.end == self.data.len() && self.start > 0 {
            self.data.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.data[self.end..]
    }

    /// Marks `n` bytes of `spare()` as filled.
    pub fn advance(&mut self, n: usize) {
        self.end = (self.end + n).min(self.data.len());
    }

    /// True when no more bytes fit even after compaction.
    pub fn is_full(&self) -> bool {
        self.len() == self.data.len()
    }

    /// Removes filled bytes `from..to` (offsets into `filled()`), closing the gap.
    pub fn remove_range(&mut self, from: usize, to: usize) {
        let (from, to) = (from.min(self.len()), to.min(self.len()));
        if from >= to {
            return;
        }
        self.data.copy_within(self.start + to..self.end, self.start + from);
        self.end -= to - from;
    }

    /// Empties the buffer.
    pub fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }
}

/// Worker-local free list of buffers of one size.
pub struct BufPool {
    size: usize,
    free: RefCell<Vec<IoBuf>>,
    keep: usize,
}

impl BufPool {
    /// A pool handing out buffers of `size` bytes and keeping at most `keep` spare ones.
    pub fn new(size: usize, keep: usize) -> Self {
        BufPool { size, free: RefCell::new(Vec::new()), keep }
    }

    /// A buffer, recycled when one is free.
    pub fn take(&self) -> IoBuf {
        let recycled = self.free.borrow_mut().pop();
        recycled.unwrap_or_else(|| IoBuf::new(self.size))
    }

    /// Gives a buffer back (dropped when the pool is full or its size is stale).
    pub fn give(&self, mut buf: IoBuf) {
        buf.clear();
        let mut free = self.free.borrow_mut();
        if free.len() < self.keep && buf.capacity() == self.size {
            free.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_makes_room_and_keeps_bytes() {
        let mut b = IoBuf::new(8);
        b.spare()[..8].copy_from_slice(b"abcdefgh");
        b.advance(8);
        b.consume(5);
        assert_eq!(b.filled(), b"fgh");
        assert_eq!(b.spare().len(), 5);
        assert_eq!(b.filled(), b"fgh");
    }

    #[test]
    fn remove_range_closes_the_gap() {
        let mut b = IoBuf::new(8);
        b.spare()[..6].copy_from_slice(b"headXY");
        b.advance(6);
        b.remove_range(4, 5);
        assert_eq!(b.filled(), b"headY");
    }

    #[test]
    fn pool_recycles_up_to_keep() {
        let pool = BufPool::new(16, 1);
        let (a, b) = (pool.take(), pool.take());
        pool.give(a);
        pool.give(b);
        assert_eq!(pool.free.borrow().len(), 1);
    }
}
