//! A TCP socket served by the worker's ring, as `AsyncRead` / `AsyncWrite` (what the phases
//! are written against).
//!
//! Reads: a multishot receive, armed when someone first waits for bytes and kept armed
//! while the connection lives: each arrival of bytes is a completion queued for the reader,
//! with no submission per request. It picks a provided buffer only when bytes arrive, so a
//! connection waiting for its next request holds none. Bytes are copied into the reader's
//! buffer and the provided buffer goes back at once (a reader with less room takes the rest
//! on its next read). A receive holding unread bytes it should not (see `driver::recv`)
//! is stopped, and armed again when its reader next waits.
//! Writes: a write copies what it is given (up to [`SEND_SIZE`]) into a send buffer that
//! moves into the operation, and returns; the next write or a shutdown waits for that send
//! to complete, so at most one send is in flight and an error is reported to the writer's
//! next call. A flush does not wait: the driver sends the rest of a short send itself, and a
//! socket dropped with its send in flight closes once the send is over.
//! Bulk (a body streaming through): a receive that filled all its room means more is
//! waiting (and ended the receive: its byte limit), so the next reads are `recv`s made at
//! once into the reader's buffer (once nothing the ring took before is left unread), until
//! one finds nothing; a write larger than a send buffer is sent at once from the writer's bytes
//! (no copy), and only what the socket cannot take goes by the ring. The ring's batching
//! pays where operations are many and small; a 16 KiB round trip through the reaper per
//! chunk cost a 64 KiB POST more than epoll's plain calls did (issue 14).
//!
//! Readiness questions the phases ask at request boundaries (`has_bytes`, `peer_closed`) are
//! answered from the receive in flight when there is one, else by a non-blocking peek.

use super::bufs;
use super::driver::{self, with, Received, SEND_SIZE};
use crate::floor::buf::IoBuf;
use std::cell::Cell;
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct ReadSide {
    /// The receive (`NONE`: none): armed, or stopped with bytes or its stop not yet read.
    op: u32,
    /// Bytes of its oldest unread completion already given to readers.
    taken: u32,
    /// 1: open; 0: end of stream read; < 0: the error (negated errno).
    end: i32,
    /// The socket is read directly, at once, not through the ring (see
    /// [`driver::recv_now`]): the last receive filled the whole room it had (bytes are
    /// streaming in, a body), or a wait for readiness ended.
    bulk: bool,
}

#[derive(Clone, Copy)]
struct WriteSide {
    /// The send in flight (`NONE`: none).
    op: u32,
    /// The part of its buffer still to send.
    start: u32,
    end: u32,
    /// A failed send's negated errno (0: none), reported to every later write.
    err: i32,
}

/// A TCP socket whose I/O goes through the worker's ring.
pub struct RingTcp {
    /// `None` only once [`RingTcp::leave`] took it.
    fd: Option<OwnedFd>,
    rd: Cell<ReadSide>,
    wr: Cell<WriteSide>,
    /// Its writes are the connection's last ([`RingTcp::closing`]).
    last_writes: Cell<bool>,
}

impl RingTcp {
    /// Serves `stream` (a connected socket, non-blocking or not) through this worker's ring.
    /// Call only on a worker whose ring is installed (`Worker::ring`).
    pub fn new(stream: TcpStream) -> RingTcp {
        RingTcp {
            fd: Some(OwnedFd::from(stream)),
            rd: Cell::new(ReadSide { op: NONE, taken: 0, end: 1, bulk: false }),
            wr: Cell::new(WriteSide { op: NONE, start: 0, end: 0, err: 0 }),
            last_writes: Cell::new(false),
        }
    }

    /// The connection closes (or shuts its write side) right after the writes that follow:
    /// they go with `MSG_MORE`, so the kernel keeps the last partial segment until the FIN,
    /// which then travels with it; the close shuts the write side first (a plain
    /// `shutdown`), so those bytes leave even when the close resets the connection. One
    /// segment fewer per connection, and the peer's receive work for it (done in this
    /// process's system time on loopback): 13.2 → 12.4 µs of CPU per connection-per-request
    /// (ADR 0024). Only for writes the close surely follows: corked bytes wait for it.
    pub fn closing(&self) {
        self.last_writes.set(true);
    }

    /// A socket already lost (its descriptor could not leave tokio): every read ends and
    /// every write fails.
    pub fn closed() -> RingTcp {
        RingTcp {
            fd: None,
            rd: Cell::new(ReadSide { op: NONE, taken: 0, end: -libc::EBADF, bulk: false }),
            wr: Cell::new(WriteSide { op: NONE, start: 0, end: 0, err: -libc::EBADF }),
            last_writes: Cell::new(false),
        }
    }

    /// The socket, leaving a [`RingTcp::closed`] one in its place (to move it out of a
    /// stream enum by reference).
    pub fn take(&mut self) -> RingTcp {
        std::mem::replace(self, RingTcp::closed())
    }

    fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_ref().expect("a ring socket's descriptor until it leaves").as_fd()
    }

    fn raw(&self) -> RawFd {
        self.fd().as_raw_fd()
    }

    /// The address the client connected to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        let fd = self.fd.as_ref().ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
        socket2::SockRef::from(fd).local_addr()?.as_socket().ok_or_else(|| io::Error::other("not inet"))
    }

    /// The socket, for what must act on it directly (a hand-off, a tunnel's move): only
    /// while no receive is in flight and nothing received waits to be read, so no byte is
    /// in the ring that the socket's new owner would miss.
    pub fn idle_fd(&self) -> Option<BorrowedFd<'_>> {
        let fd = self.fd.as_ref()?.as_fd();
        (self.rd.get().op == NONE && self.wr.get().op == NONE).then_some(fd)
    }

    /// Takes the socket out of the ring (to park it, or move it to another process): a
    /// receive in flight is cancelled first. Gives it back unchanged when bytes arrived in
    /// the meantime (they are the next request: serve it) or a send is still in flight.
    pub fn leave(mut self) -> Result<TcpStream, RingTcp> {
        // The answer's send has usually completed long ago; its completion may still wait.
        driver::flush();
        if self.wr.get().op != NONE {
            let waker = std::task::Waker::noop();
            let mut cx = Context::from_waker(waker);
            if !matches!(self.poll_sent(&mut cx), Poll::Ready(Ok(()))) {
                return Err(self);
            }
        }
        let mut rd = self.rd.get();
        if rd.op != NONE {
            with(|d| d.cancel_now(rd.op));
            if matches!(with(|d| d.front(rd.op, None)), Received::Bytes(..) | Received::Over(0)) {
                return Err(self); // bytes, or the end: the task reads them
            }
            with(|d| d.release(rd.op));
            rd.op = NONE;
            self.rd.set(rd);
        }
        let Some(fd) = self.fd.take() else { return Err(self) };
        let stream = TcpStream::from(fd);
        // What takes it next (the parked set, tokio, another process) expects it non-blocking.
        let _ = stream.set_nonblocking(true);
        Ok(stream)
    }

    /// Leaves the ring for good, for tokio's epoll (a paused tunnel that moves to a new
    /// process as a bare socket): the send in flight is cancelled and the bytes it had not
    /// sent go to the front of `unsent` (they come before what that buffer holds for this
    /// socket); the receive is cancelled and the bytes the ring received that nobody read
    /// yet go to the end of `received`. Nothing waits for the peer: a peer that reads nothing
    /// cannot hold the move.
    pub fn into_tokio(
        mut self,
        received: &mut IoBuf,
        unsent: &mut IoBuf,
    ) -> io::Result<tokio::net::TcpStream> {
        unsent.prepend(&self.cancel_send());
        let leftover = received;
        let rd = self.rd.get();
        if rd.op != NONE {
            with(|d| {
                d.cancel_now(rd.op);
                let mut skip = rd.taken as usize;
                while let Received::Bytes(res, flags) = d.front(rd.op, None) {
                    leftover.extend(&d.received(flags, res)[skip..]);
                    d.pop(rd.op);
                    skip = 0;
                }
                d.release(rd.op);
            });
            self.rd.set(ReadSide { op: NONE, taken: 0, end: rd.end, bulk: false });
        }
        let fd = self.fd.take().ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))?;
        let stream = TcpStream::from(fd);
        stream.set_nonblocking(true)?;
        tokio::net::TcpStream::from_std(stream)
    }

    /// Cancels the send in flight; the bytes it had not sent (a send that completed whole
    /// left none).
    fn cancel_send(&self) -> Vec<u8> {
        let wr = self.wr.get();
        if wr.op == NONE {
            return Vec::new();
        }
        let (res, _) = with(|d| d.cancel_now(wr.op));
        let from = (wr.start + res.max(0) as u32) as usize;
        let buf = with(|d| d.take_send(wr.op));
        let unsent =
            buf.map(|b| b.get(from..wr.end as usize).unwrap_or_default().to_vec()).unwrap_or_default();
        let err = if res < 0 && res != -libc::ECANCELED { res } else { 0 };
        self.wr.set(WriteSide { op: NONE, start: 0, end: 0, err });
        unsent
    }

    /// Whether reading now would not wait: bytes or the end of the stream are here.
    pub fn has_bytes(&self) -> bool {
        let rd = self.rd.get();
        if rd.end <= 0 {
            return true;
        }
        match self.received() {
            Received::Bytes(..) => true,
            Received::Waiting => false,
            Received::Over(res) if !stopped(res) => true,
            Received::Over(_) | Received::Ready => self.peek_now().is_some(),
        }
    }

    /// Whether the peer has closed (or reset) the connection and nothing is left to read
    /// before that.
    pub fn peer_closed(&self) -> bool {
        let rd = self.rd.get();
        if rd.end <= 0 {
            return true;
        }
        match self.received() {
            Received::Bytes(..) | Received::Waiting => false,
            Received::Over(res) if !stopped(res) => true,
            Received::Over(_) | Received::Ready => matches!(self.peek_now(), Some(0) | Some(-1)),
        }
    }

    /// What the receive has (a socket without one: stopped, the socket itself knows).
    fn received(&self) -> Received {
        match self.rd.get().op {
            NONE => Received::Over(-libc::ECANCELED),
            op => with(|d| d.front(op, None)),
        }
    }

    /// A non-blocking one-byte peek: `None` would block, `Some(0)` end, `Some(-1)` error.
    fn peek_now(&self) -> Option<i32> {
        // DONTWAIT: an accepted socket the ring serves is in blocking mode.
        let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
        let mut probe = [0u8; 1];
        match rustix::net::recv(self.fd(), &mut probe, flags) {
            Ok((n, _)) => Some(n as i32),
            Err(rustix::io::Errno::AGAIN) => None,
            Err(_) => Some(-1),
        }
    }

    /// Ready when bytes (or the end) are here; the receive is armed to wait for them.
    pub fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut rd = self.rd.get();
        if rd.end <= 0 {
            return Poll::Ready(Ok(()));
        }
        let fd = self.raw();
        let ready = with(|d| loop {
            if rd.op == NONE {
                rd.op = driver::recv(d, fd);
            }
            match d.front(rd.op, Some(cx.waker())) {
                Received::Waiting => break false,
                // Stopped, not ended: wait again (the end or an error is left for the reader).
                Received::Over(res) if stopped(res) => {
                    after_stop(d, &mut rd, fd, res);
                }
                _ => break true,
            }
        });
        self.rd.set(rd);
        if ready {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }

    fn poll_recv(&self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            let mut rd = self.rd.get();
            if rd.end == 0 {
                return Poll::Ready(Ok(()));
            }
            if rd.end < 0 {
                return Poll::Ready(Err(io::Error::from_raw_os_error(-rd.end)));
            }
            let fd = self.fd();
            let step = with(|d| recv_step(d, fd, &mut rd, cx, buf));
            self.rd.set(rd);
            match step {
                Step::Pending => return Poll::Pending,
                Step::Again => continue,
                Step::Wait => {
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
                Step::Read if rd.end < 0 => {
                    return Poll::Ready(Err(io::Error::from_raw_os_error(-rd.end)));
                }
                Step::Read => return Poll::Ready(Ok(())),
            }
        }
    }

    /// Waits until the send in flight (if any) has sent every byte.
    fn poll_sent(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            let mut wr = self.wr.get();
            if wr.err != 0 {
                return Poll::Ready(Err(io::Error::from_raw_os_error(-wr.err)));
            }
            if wr.op == NONE {
                return Poll::Ready(Ok(()));
            }
            let fd = self.raw();
            let done = with(|d| {
                let (res, _) = d.poll(wr.op, cx.waker())?;
                if res > 0 {
                    wr.start += res as u32;
                }
                let retry = res > 0 || res == -libc::EINTR || res == -libc::EAGAIN;
                if retry && wr.start < wr.end {
                    let buf = d.take_send(wr.op).unwrap_or_else(|| d.send_buf());
                    wr.op = driver::send(
                        d,
                        fd,
                        buf,
                        (wr.start as usize, wr.end as usize),
                        self.last_writes.get(),
                    );
                    return Some(false);
                }
                d.release(wr.op);
                wr.op = NONE;
                if !retry || res == 0 {
                    wr.err = if res < 0 { res } else { -libc::EPIPE };
                }
                Some(true)
            });
            self.wr.set(wr);
            match done {
                None => return Poll::Pending,
                Some(false) => continue,
                Some(true) => {}
            }
        }
    }

    fn poll_send_parts(&self, cx: &mut Context<'_>, parts: &[&[u8]]) -> Poll<io::Result<usize>> {
        match self.poll_sent(cx) {
            Poll::Ready(Ok(())) => {}
            other => return other.map(|r| r.map(|()| 0)),
        }
        let total: usize = parts.iter().map(|p| p.len()).sum();
        if total == 0 {
            return Poll::Ready(Ok(0));
        }
        if total > SEND_SIZE {
            // Bulk (a body): more than a send buffer holds. Sent at once from the writer's
            // own bytes, with no copy; what the socket cannot take now goes by the ring.
            if let Some(sent) = self.send_now(parts)? {
                return Poll::Ready(Ok(sent));
            }
        }
        let fd = self.raw();
        let (op, n) = with(|d| {
            let mut buf = d.send_buf();
            let mut n = 0;
            for p in parts {
                let take = p.len().min(SEND_SIZE - n);
                buf[n..n + take].copy_from_slice(&p[..take]);
                n += take;
                if n == SEND_SIZE {
                    break;
                }
            }
            (driver::send(d, fd, buf, (0, n), self.last_writes.get()), n)
        });
        self.wr.set(WriteSide { op, start: 0, end: n as u32, err: 0 });
        Poll::Ready(Ok(n))
    }
}

impl RingTcp {
    /// A send made now, not through the ring (`MSG_DONTWAIT`), of as much of `parts` as the
    /// socket takes; `None` when it takes nothing now. Only with no send in flight (order).
    fn send_now(&self, parts: &[&[u8]]) -> io::Result<Option<usize>> {
        let mut slices = [io::IoSlice::new(&[]); 4];
        for (slice, part) in slices.iter_mut().zip(parts) {
            *slice = io::IoSlice::new(part);
        }
        let mut flags = rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL;
        if self.last_writes.get() {
            flags |= rustix::net::SendFlags::MORE;
        }
        let slices = &slices[..parts.len().min(4)];
        let msg = rustix::net::sendmsg(self.fd(), slices, &mut Default::default(), flags);
        match msg {
            Ok(0) | Err(rustix::io::Errno::AGAIN) => Ok(None),
            Ok(n) => Ok(Some(n)),
            Err(e) => {
                let mut wr = self.wr.get();
                wr.err = -e.raw_os_error();
                self.wr.set(wr);
                Err(e.into())
            }
        }
    }
}

/// What one look at a socket's receive gave its reader.
enum Step {
    /// Bytes, the end or an error: the read is over.
    Read,
    /// Nothing yet; the waker is registered.
    Pending,
    /// Look again now.
    Again,
    /// Look again next turn.
    Wait,
}

/// A receive's stop that says nothing about the socket (ours, or the kernel's for want of
/// a buffer, or a signal): the socket may hold more bytes.
fn stopped(res: i32) -> bool {
    matches!(-res, libc::ECANCELED | libc::ENOBUFS | libc::EINTR | libc::EAGAIN)
}

/// A receive stopped with everything it brought read: its slot goes, and what follows is
/// set. No provided buffer was free (`ENOBUFS`: others hold them, unread): a wait for the
/// socket's readiness, after which it is read directly. A stop that says nothing about the
/// socket: nothing (a receive is armed when the reader next waits). Else the end or the
/// error, kept in `rd.end`: returns true.
fn after_stop(d: &mut driver::Driver, rd: &mut ReadSide, fd: RawFd, res: i32) -> bool {
    d.release(rd.op);
    rd.op = NONE;
    if res == -libc::ENOBUFS {
        rd.op = driver::poll_in(d, fd);
        return false;
    }
    if stopped(res) {
        return false;
    }
    rd.end = res;
    true
}

/// One look at what `rd`'s receive (or, in bulk, the socket) has for the reader: what the
/// ring took comes first; in bulk the socket is read at once (once nothing the ring took
/// waits unreaped: it would be overtaken); else the receive is armed and waited for.
fn recv_step(
    d: &mut driver::Driver,
    fd: BorrowedFd<'_>,
    rd: &mut ReadSide,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Step {
    if rd.op != NONE {
        match d.front(rd.op, Some(cx.waker())) {
            Received::Bytes(res, flags) => {
                let bytes = &d.received(flags, res)[rd.taken as usize..];
                let n = bytes.len().min(buf.remaining());
                buf.put_slice(&bytes[..n]);
                rd.taken += n as u32;
                rd.bulk = res as usize == bufs::SIZE;
                if rd.taken as i32 >= res {
                    d.pop(rd.op);
                    rd.taken = 0;
                }
                return Step::Read;
            }
            Received::Over(res) => {
                if after_stop(d, rd, fd.as_raw_fd(), res) {
                    return Step::Read;
                }
                if rd.op != NONE {
                    return Step::Again; // waiting for readiness
                }
            }
            Received::Ready => {
                d.release(rd.op);
                rd.op = NONE;
                rd.bulk = true; // read at once, below
            }
            Received::Waiting if !rd.bulk => return Step::Pending,
            Received::Waiting => {} // stopping: the socket is read at once (below)
        }
    }
    if rd.bulk {
        if !d.all_reaped() {
            return Step::Wait; // the flush reaps them before the next turn
        }
        let room = buf.remaining();
        match driver::recv_now(fd, buf) {
            Ok(Some(n)) => {
                rd.bulk = n == room;
                if n == 0 {
                    rd.end = 0;
                }
                return Step::Read;
            }
            Ok(None) => rd.bulk = false,
            Err(e) => {
                rd.end = -e.raw_os_error().unwrap_or(libc::EIO);
                return Step::Read;
            }
        }
    }
    if rd.op == NONE {
        rd.op = driver::recv(d, fd.as_raw_fd());
    }
    Step::Again
}

impl Drop for RingTcp {
    fn drop(&mut self) {
        let (rd, wr) = (self.rd.get(), self.wr.get());
        let mut fd = self.fd.take();
        // A receive in flight is cancelled; a send finishes on its own (its bytes are the
        // answer's end: a flush does not wait for them) and the socket closes after it. The
        // descriptor is closed by the ring too, after the socket's operations in its queue:
        // they reached the kernel first, so its number cannot name another connection by
        // then, and the close costs no system call of its own.
        driver::try_with(|d| {
            if rd.op != NONE {
                d.abandon(rd.op, true);
            }
            match (wr.op != NONE, fd.take()) {
                (true, Some(fd)) => d.abandon_send(wr.op, fd),
                (true, None) => d.abandon(wr.op, false),
                (false, Some(fd)) => driver::close_after_last(d, fd, self.last_writes.get()),
                (false, None) => {}
            }
        });
        // No driver (the thread is ending, the ring went first): `fd` closes here.
        drop(fd);
    }
}

impl AsyncRead for &RingTcp {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        self.poll_recv(cx, buf)
    }
}

impl AsyncWrite for &RingTcp {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_send_parts(cx, &[buf])
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut parts: [&[u8]; 4] = [&[]; 4];
        for (part, slice) in parts.iter_mut().zip(bufs) {
            *part = slice;
        }
        self.poll_send_parts(cx, &parts[..bufs.len().min(4)])
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    /// Does not wait for the send in flight: the ring sends all of it (the driver sends the
    /// rest of a short send itself), and an error is reported to the next write. Waiting
    /// cost every answer a second wake-up of its task, and an HTTP/2 connection a second poll.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let wr = self.wr.get();
        if wr.err != 0 {
            return Poll::Ready(Err(io::Error::from_raw_os_error(-wr.err)));
        }
        if wr.op != NONE && with(|d| d.peek(wr.op)).is_some() {
            return self.poll_sent(cx); // over: its buffer back, its error known
        }
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.poll_sent(cx) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        Poll::Ready(rustix::net::shutdown(self.fd(), rustix::net::Shutdown::Write).map_err(io::Error::from))
    }
}

/// The owned socket reads and writes as its shared reference does (the one place the I/O is
/// written; `ClientStream`/`Socket` hold it owned, their split halves by reference).
impl AsyncRead for RingTcp {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut &*self.get_mut()).poll_read(cx, buf)
    }
}

impl AsyncWrite for RingTcp {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut &*self.get_mut()).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut &*self.get_mut()).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut &*self.get_mut()).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut &*self.get_mut()).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;
    use std::task::Waker;

    /// What `op`'s receive has, after up to a second of flushes for it to change from
    /// waiting.
    fn settled(op: u32) -> Received {
        for _ in 0..100 {
            driver::flush();
            match with(|d| d.front(op, None)) {
                Received::Waiting => std::thread::sleep(std::time::Duration::from_millis(10)),
                other => return other,
            }
        }
        Received::Waiting
    }

    #[test]
    fn a_socket_that_finds_no_provided_buffer_free_is_still_read() {
        driver::install(true).unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        let (mut peers, mut socks) = (Vec::new(), Vec::new());
        for _ in 0..=bufs::COUNT {
            peers.push(TcpStream::connect(l.local_addr().unwrap()).unwrap());
            let sock = RingTcp::new(l.accept().unwrap().0);
            assert!(sock.poll_read_ready(&mut cx).is_pending());
            socks.push(sock);
        }
        driver::flush();
        for peer in &mut peers {
            peer.write_all(b"x").unwrap();
        }
        // Every provided buffer now holds a byte nobody has read; one socket found none.
        let states: Vec<Received> = socks.iter().map(|s| settled(s.rd.get().op)).collect();
        let starved = states.iter().position(|r| *r == Received::Over(-libc::ENOBUFS));
        let starved = starved.expect("one receive found no provided buffer free");
        // Its byte is read while the others still hold theirs (before: its receive was made
        // again every turn, finding no buffer until another reader read).
        let mut got = Vec::new();
        for _ in 0..100 {
            let mut room = [0u8; 8];
            let mut buf = ReadBuf::new(&mut room);
            if let Poll::Ready(r) = Pin::new(&mut &socks[starved]).poll_read(&mut cx, &mut buf) {
                r.unwrap();
                got = buf.filled().to_vec();
                break;
            }
            driver::flush();
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(got, b"x");
        let held = states.iter().filter(|r| matches!(r, Received::Bytes(1, _))).count();
        assert_eq!(held, usize::from(bufs::COUNT), "the others still hold their bytes");
    }
}
