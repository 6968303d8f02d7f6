//! The provided buffers (IORING_REGISTER_PBUF_RING) every receive of the worker picks from
//! when its bytes arrive: a connection waiting for its next request holds no buffer, and a
//! buffer goes back to the ring as soon as its bytes are copied out.
#![allow(unsafe_code)]

use io_uring::types::BufRingEntry;
use io_uring::IoUring;
use std::alloc::Layout;
use std::io;

/// Buffers in the ring (a power of two). A buffer is held only from its bytes' arrival until
/// its reader copies them out, in the same turn of the worker: what one batch of completions
/// holds at once (tens at 256 keep-alive clients), not one per connection. The kernel takes
/// them in ring order, so every one of them is touched soon after start: they are resident
/// memory of the worker (1 MiB), which is why there are not more. With all of them holding
/// unread bytes, a receive ends with `ENOBUFS` and is made again (its bytes wait in the
/// socket).
pub const COUNT: u16 = 64;
/// Bytes per buffer: as large as the phases' own buffers, so one receive fills one read.
pub const SIZE: usize = 16 * 1024;
/// The buffer group id receives name.
pub const GROUP: u16 = 0;

/// The ring of buffer descriptors shared with the kernel, and the memory they point into.
pub struct BufRing {
    entries: *mut BufRingEntry,
    layout: Layout,
    mem: Box<[u8]>,
    tail: u16,
    unpublished: u16,
}

impl BufRing {
    /// Registers a ring of [`COUNT`] buffers with `ring`, all given to the kernel.
    pub fn register(ring: &IoUring) -> io::Result<BufRing> {
        let layout = Layout::from_size_align(usize::from(COUNT) * std::mem::size_of::<BufRingEntry>(), 4096)
            .map_err(io::Error::other)?;
        // SAFETY: a non-zero-sized layout; the memory is zeroed, as the kernel expects.
        let entries = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<BufRingEntry>();
        if entries.is_null() {
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        }
        // SAFETY: `entries` is page-aligned and COUNT entries long; it lives as long as the
        // ring does (freed in Drop, after the ring's unregistration by its own drop order:
        // the driver drops the ring first).
        let registered =
            unsafe { ring.submitter().register_buf_ring_with_flags(entries as u64, COUNT, GROUP, 0) };
        if let Err(e) = registered {
            // SAFETY: allocated above with `layout`, never shared.
            unsafe { std::alloc::dealloc(entries.cast(), layout) };
            return Err(e);
        }
        let mem = vec![0u8; usize::from(COUNT) * SIZE].into_boxed_slice();
        let mut b = BufRing { entries, layout, mem, tail: 0, unpublished: 0 };
        for id in 0..COUNT {
            b.give_back(id);
        }
        b.publish();
        Ok(b)
    }

    /// The bytes of buffer `id`.
    pub fn slice(&self, id: u16) -> &[u8] {
        let start = usize::from(id) * SIZE;
        &self.mem[start..start + SIZE]
    }

    /// Returns buffer `id` to the kernel (visible after [`BufRing::publish`]).
    pub fn give_back(&mut self, id: u16) {
        let idx = usize::from(self.tail.wrapping_add(self.unpublished) & (COUNT - 1));
        // SAFETY: idx < COUNT: inside the registered region, which only this thread writes.
        let entry = unsafe { &mut *self.entries.add(idx) };
        entry.set_addr(self.mem[usize::from(id) * SIZE..].as_ptr() as u64);
        entry.set_len(SIZE as u32);
        entry.set_bid(id);
        self.unpublished += 1;
    }

    /// Makes the buffers given back visible to the kernel.
    pub fn publish(&mut self) {
        if self.unpublished == 0 {
            return;
        }
        self.tail = self.tail.wrapping_add(self.unpublished);
        self.unpublished = 0;
        // SAFETY: the tail is the first entry's `resv` field, inside the region; the kernel
        // reads it, so the entries' writes must be visible first (the fence).
        let tail = unsafe { BufRingEntry::tail(self.entries) }.cast_mut();
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        // SAFETY: as above.
        unsafe { tail.write_volatile(self.tail) };
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: allocated in `register` with this layout; the ring that shared it is gone.
        unsafe { std::alloc::dealloc(self.entries.cast(), self.layout) };
    }
}
