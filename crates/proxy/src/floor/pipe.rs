//! The in-memory pipe between one HTTP/2 stream (the `http2` wing's end, [`WingEnd`]) and
//! the HTTP/1.1 request phases serving it (their end, [`PhasesEnd`], inside
//! `stream::Piped`): request body bytes go up, the answer comes down. Both ends live in
//! the stream's one task on one worker thread, so the pipe is a pair of plain buffers
//! behind `RefCell`s (no lock, no atomics, no allocation per split: ADR 0020), each lane
//! holding at most [`LANE_BYTES`] and every byte in it counted against the connection's
//! memory budget (`budget`): a write takes only the room both leave and waits when there
//! is none, so a full budget holds the writer back rather than growing memory.
//!
//! An end going away closes its lanes: a reader then sees the end of the stream, a writer
//! a broken pipe.

use crate::floor::budget::Budget;
use std::cell::RefCell;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes one lane holds: as much as one read of the phases takes.
pub const LANE_BYTES: usize = 64 * 1024;

/// One direction of the pipe.
#[derive(Default)]
struct Lane {
    buf: Vec<u8>,
    start: usize,
    /// The writer is done (or gone): once empty, the reader sees the end.
    closed: bool,
    /// The reader is gone: writes fail.
    deaf: bool,
    reader: Option<Waker>,
    writer: Option<Waker>,
}

impl Lane {
    fn held(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The bytes the lane holds, once there are some (`None`: the writer is done and every
    /// byte was read); the reader waits for them otherwise.
    fn poll_held(&mut self, cx: &mut Context<'_>) -> Poll<Option<usize>> {
        match self.held() {
            0 if self.closed => Poll::Ready(None),
            0 => {
                self.reader = Some(cx.waker().clone());
                Poll::Pending
            }
            held => Poll::Ready(Some(held)),
        }
    }

    fn close(&mut self) {
        self.closed = true;
        if let Some(w) = self.reader.take() {
            w.wake();
        }
    }

    fn go_deaf(&mut self) {
        self.deaf = true;
        if let Some(w) = self.writer.take() {
            w.wake();
        }
    }
}

/// The pipe both ends share.
struct Pipe {
    /// Toward the phases: the request body.
    up: RefCell<Lane>,
    /// Toward the wing: the answer.
    down: RefCell<Lane>,
    budget: Rc<Budget>,
}

/// Which lane an end's half uses.
#[derive(Clone, Copy)]
enum Dir {
    Up,
    Down,
}

impl Pipe {
    fn lane(&self, dir: Dir) -> &RefCell<Lane> {
        match dir {
            Dir::Up => &self.up,
            Dir::Down => &self.down,
        }
    }

    fn poll_write(&self, dir: Dir, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let mut lane = self.lane(dir).borrow_mut();
        if lane.deaf || lane.closed {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
        let want: usize = bufs.iter().map(|b| b.len()).sum();
        if want == 0 {
            return Poll::Ready(Ok(0));
        }
        let room = LANE_BYTES.saturating_sub(lane.held());
        if room == 0 {
            lane.writer = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let room = std::task::ready!(self.budget.poll_room(cx)).min(room);
        if lane.start > 0 && lane.start == lane.buf.len() {
            lane.buf.clear();
            lane.start = 0;
        }
        let mut left = room.min(want);
        // Room for every part at once (a head and its body: one growth, not one each).
        lane.buf.reserve(left);
        for b in bufs {
            let part = &b[..b.len().min(left)];
            lane.buf.extend_from_slice(part);
            left -= part.len();
            if left == 0 {
                break;
            }
        }
        let written = room.min(want);
        self.budget.charge(written);
        if let Some(w) = lane.reader.take() {
            w.wake();
        }
        Poll::Ready(Ok(written))
    }

    fn poll_read(&self, dir: Dir, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let mut lane = self.lane(dir).borrow_mut();
        let Some(held) = std::task::ready!(lane.poll_held(cx)) else { return Poll::Ready(Ok(())) };
        let n = held.min(buf.remaining());
        let start = lane.start;
        buf.put_slice(&lane.buf[start..start + n]);
        lane.start += n;
        self.taken(&mut lane, n);
        Poll::Ready(Ok(()))
    }

    /// Moves what the lane holds to the end of `out` (the whole buffer when `out` is
    /// empty: no copy); 0 at the end of the stream.
    fn poll_take(&self, dir: Dir, cx: &mut Context<'_>, out: &mut Vec<u8>) -> Poll<usize> {
        let mut lane = self.lane(dir).borrow_mut();
        let Some(held) = std::task::ready!(lane.poll_held(cx)) else { return Poll::Ready(0) };
        if out.is_empty() && lane.start == 0 {
            std::mem::swap(out, &mut lane.buf);
        } else {
            out.extend_from_slice(&lane.buf[lane.start..]);
            lane.buf.clear();
        }
        lane.start = 0;
        self.taken(&mut lane, held);
        Poll::Ready(held)
    }

    /// `n` bytes left the lane: the budget and the waiting writer hear of it.
    fn taken(&self, lane: &mut Lane, n: usize) {
        if lane.start == lane.buf.len() {
            lane.buf.clear();
            lane.start = 0;
        }
        if let Some(w) = lane.writer.take() {
            w.wake();
        }
        self.budget.release(n);
    }

    /// An end went away: what it would have read is no longer held.
    fn drop_unread(&self, dir: Dir) {
        let mut lane = self.lane(dir).borrow_mut();
        let held = lane.held();
        lane.buf = Vec::new();
        lane.start = 0;
        lane.go_deaf();
        self.budget.release(held);
    }
}

/// A new pipe on `budget`: the wing's end and the phases' end.
pub fn pipe(budget: &Rc<Budget>) -> (WingEnd, PhasesEnd) {
    let pipe = Rc::new(Pipe {
        up: RefCell::new(Lane::default()),
        down: RefCell::new(Lane::default()),
        budget: Rc::clone(budget),
    });
    (WingEnd(Rc::clone(&pipe)), PhasesEnd(pipe))
}

/// The `http2` wing's end: writes the request body up, reads the answer down.
pub struct WingEnd(Rc<Pipe>);

impl WingEnd {
    /// The writing half (the request body).
    pub fn writer(&self) -> Writer<'_> {
        Writer { pipe: &self.0, dir: Dir::Up }
    }

    /// The reading half (the answer).
    pub fn reader(&self) -> Reader<'_> {
        Reader { pipe: &self.0, dir: Dir::Down }
    }

    /// No more request bytes: the phases see the end of the stream once they read the
    /// rest.
    pub fn close_up(&self) {
        self.0.up.borrow_mut().close();
    }
}

impl Drop for WingEnd {
    fn drop(&mut self) {
        self.0.up.borrow_mut().close();
        self.0.drop_unread(Dir::Down);
    }
}

/// The request phases' end: reads the request body, writes the answer.
pub struct PhasesEnd(Rc<Pipe>);

impl PhasesEnd {
    /// Independent halves (both borrow the pipe; nothing is allocated).
    pub fn split(&mut self) -> (Reader<'_>, Writer<'_>) {
        (Reader { pipe: &self.0, dir: Dir::Up }, Writer { pipe: &self.0, dir: Dir::Down })
    }
}

impl Drop for PhasesEnd {
    fn drop(&mut self) {
        self.0.down.borrow_mut().close();
        self.0.drop_unread(Dir::Up);
    }
}

/// The reading half of an end.
pub struct Reader<'a> {
    pipe: &'a Pipe,
    dir: Dir,
}

impl Reader<'_> {
    /// Moves what the pipe holds to the end of `out`; 0 at the end of the stream.
    pub async fn take_into(&mut self, out: &mut Vec<u8>) -> usize {
        std::future::poll_fn(|cx| self.pipe.poll_take(self.dir, cx, out)).await
    }
}

/// The writing half of an end.
pub struct Writer<'a> {
    pipe: &'a Pipe,
    dir: Dir,
}

impl AsyncRead for Reader<'_> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.pipe.poll_read(self.dir, cx, buf)
    }
}

impl AsyncWrite for Writer<'_> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.pipe.poll_write(self.dir, cx, &[IoSlice::new(buf)])
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.pipe.poll_write(self.dir, cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.pipe.lane(self.dir).borrow_mut().close();
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for PhasesEnd {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.0.poll_read(Dir::Up, cx, buf)
    }
}

impl AsyncWrite for PhasesEnd {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.0.poll_write(Dir::Down, cx, &[IoSlice::new(buf)])
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.0.poll_write(Dir::Down, cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.down.borrow_mut().close();
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests;
