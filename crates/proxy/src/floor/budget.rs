//! The memory bound of one HTTP/2 client connection (`limits.h2_connection_bytes`): what
//! its streams make the switch hold — each stream's header block while it runs, and the
//! bytes in its pipes, request DATA on their way to the request phases and answers on
//! their way back — is counted against one budget. A pipe end ([`Metered`]) writes only
//! while the budget has room, and no more than the room left, so the pipes together never
//! hold more than the bound: a full budget holds the connection's DATA back (the client's
//! flow-control window stays shut) and its answers (the servers' sockets fill), never
//! another connection's. A stream that opens while the budget is full is refused
//! (`http2`: RST_STREAM ENHANCE_YOUR_CALM).

use std::cell::{Cell, RefCell};
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// One connection's budget.
pub struct Budget {
    held: Cell<usize>,
    limit: usize,
    /// Writers waiting for room.
    waiting: RefCell<Vec<Waker>>,
}

impl Budget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Rc<Budget> {
        Rc::new(Budget { held: Cell::new(0), limit, waiting: RefCell::new(Vec::new()) })
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.held.get()
    }

    /// Whether nothing more may be held.
    pub fn full(&self) -> bool {
        self.held.get() >= self.limit
    }

    /// Counts `n` bytes held, room or not (a header block already received).
    pub fn charge(&self, n: usize) {
        self.held.set(self.held.get().saturating_add(n));
    }

    /// `n` bytes are no longer held: waiting writers look again.
    pub fn release(&self, n: usize) {
        self.held.set(self.held.get().saturating_sub(n));
        if n > 0 {
            self.waiting.borrow_mut().drain(..).for_each(Waker::wake);
        }
    }

    /// Bytes that may still be written; pending (woken by a release) while none.
    fn poll_room(&self, cx: &mut Context<'_>) -> Poll<usize> {
        let room = self.limit.saturating_sub(self.held.get());
        if room > 0 {
            return Poll::Ready(room);
        }
        let mut waiting = self.waiting.borrow_mut();
        if !waiting.iter().any(|w| w.will_wake(cx.waker())) {
            waiting.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// A header block counted for as long as its stream runs.
pub struct Charge {
    budget: Rc<Budget>,
    bytes: usize,
}

impl Charge {
    /// Counts `bytes` against `budget` until dropped.
    pub fn new(budget: &Rc<Budget>, bytes: usize) -> Charge {
        budget.charge(bytes);
        Charge { budget: Rc::clone(budget), bytes }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.budget.release(self.bytes);
    }
}

/// One end of a stream's pipe, on the connection's budget: bytes written are held until
/// the other end reads them.
pub struct Metered<T> {
    io: T,
    budget: Rc<Budget>,
}

impl<T> Metered<T> {
    /// `io` on `budget`.
    pub fn new(io: T, budget: &Rc<Budget>) -> Metered<T> {
        Metered { io, budget: Rc::clone(budget) }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Metered<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            this.budget.release(buf.filled().len() - before);
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Metered<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let room = std::task::ready!(this.budget.poll_room(cx));
        let part = &buf[..buf.len().min(room)];
        let written = std::task::ready!(Pin::new(&mut this.io).poll_write(cx, part))?;
        this.budget.charge(written);
        Poll::Ready(Ok(written))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_full_budget_holds_writers_until_the_other_end_reads() {
        let budget = Budget::new(10);
        let (a, b) = tokio::io::duplex(1024);
        let (mut a, mut b) = (Metered::new(a, &budget), Metered::new(b, &budget));
        let header = Charge::new(&budget, 4);
        // 6 bytes of room: a write of 8 takes 6.
        assert_eq!(a.write(b"12345678").await.unwrap(), 6);
        assert!(budget.full());
        let blocked = tokio::time::timeout(std::time::Duration::from_millis(50), a.write(b"78")).await;
        assert!(blocked.is_err(), "no room: the writer waits");
        let mut got = [0u8; 6];
        b.read_exact(&mut got).await.unwrap();
        assert_eq!(budget.held(), 4, "read bytes are released");
        drop(header);
        assert_eq!(budget.held(), 0);
        assert_eq!(a.write(b"78").await.unwrap(), 2);
    }
}
