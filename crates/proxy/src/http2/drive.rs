//! When to poll the `h2` connection. A poll of it is the costliest thing the connection's
//! task does (it reads through TLS until the socket has nothing, then writes and flushes:
//! ~1.7k instructions even when there is nothing to do), so it is polled only when
//! something of its own happened: its socket or one of its streams woke it (the `h2`
//! waker), a stream was just accepted (more may be queued), or the connection was told to
//! shut down. The other wake-up it used to get for each answer — the socket's send
//! completing, as a flush on the worker's ring waits for that — is taken here: a flush
//! whose bytes are all with the socket (none left in the TLS session) is reported done to
//! the crate, and the send's completion (the flush waker) finishes it on the socket alone,
//! resending the rest of a short send, without polling the crate (ADR 0022).

use crate::floor::stream::ClientStream;
use crate::http2::rewind::Rewind;
use bytes::Bytes;
use h2::server::{Connection, SendResponse};
use h2::RecvStream;
use std::cell::{Cell, RefCell};
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A socket that can tell whether every byte written to it is with the socket itself (TLS
/// holds none back for a send still in flight).
pub trait HandedOver {
    fn handed_over(&self) -> bool;
}

impl HandedOver for ClientStream {
    fn handed_over(&self) -> bool {
        match self {
            ClientStream::Tls(tls) => !tls.get_ref().1.wants_write(),
            _ => true,
        }
    }
}

impl HandedOver for Rewind<ClientStream> {
    fn handed_over(&self) -> bool {
        self.get_ref().handed_over()
    }
}

/// What woke the connection's task, and the task to wake.
#[derive(Default)]
struct Causes {
    h2: AtomicBool,
    flush: AtomicBool,
    task: Mutex<Option<Waker>>,
}

impl Causes {
    fn wake_task(&self) {
        if let Ok(task) = self.task.lock() {
            if let Some(task) = task.as_ref() {
                task.wake_by_ref();
            }
        }
    }

    /// The task polling now is the one to wake.
    fn set_task(&self, waker: &Waker) {
        if let Ok(mut task) = self.task.lock() {
            if !task.as_ref().is_some_and(|t| t.will_wake(waker)) {
                *task = Some(waker.clone());
            }
        }
    }
}

/// The waker the `h2` crate gets: its socket, its streams, its timers.
struct H2Cause(Arc<Causes>);

impl Wake for H2Cause {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.h2.store(true, Ordering::Release);
        self.0.wake_task();
    }
}

/// The waker of a flush on the socket under the crate.
struct FlushCause(Arc<Causes>);

impl Wake for FlushCause {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.flush.store(true, Ordering::Release);
        self.0.wake_task();
    }
}

/// How the last flush the crate asked for stands.
#[derive(Default)]
struct Flush {
    /// Reported done to the crate while the socket's send was still in flight: the flush
    /// waker finishes it.
    in_flight: Cell<bool>,
    /// Pending for the crate (TLS still held bytes): the flush waker polls the crate.
    waiting: Cell<bool>,
}

/// The connection's socket as the `h2` crate sees it (shared with its [`Driver`]).
pub struct Gate<T> {
    io: Rc<RefCell<T>>,
    flush: Rc<Flush>,
    flush_waker: Waker,
}

/// Polls the `h2` connection when it has something to do (module header).
pub struct Driver<T> {
    io: Rc<RefCell<T>>,
    flush: Rc<Flush>,
    causes: Arc<Causes>,
    h2_waker: Waker,
    flush_waker: Waker,
    /// Poll the crate at the next turn whatever woke the task.
    due: bool,
}

/// The socket for the crate, and the driver that polls the crate.
pub fn gate<T>(io: T) -> (Gate<T>, Driver<T>) {
    let io = Rc::new(RefCell::new(io));
    let flush = Rc::new(Flush::default());
    let causes = Arc::new(Causes::default());
    let flush_waker = Waker::from(Arc::new(FlushCause(Arc::clone(&causes))));
    let h2_waker = Waker::from(Arc::new(H2Cause(Arc::clone(&causes))));
    let gate = Gate { io: Rc::clone(&io), flush: Rc::clone(&flush), flush_waker: flush_waker.clone() };
    (gate, Driver { io, flush, causes, h2_waker, flush_waker, due: true })
}

type Accepted = Option<Result<(http::Request<RecvStream>, SendResponse<Bytes>), h2::Error>>;

impl<T: AsyncRead + AsyncWrite + HandedOver + Unpin> Driver<T> {
    /// The connection's next stream, as `Connection::poll_accept`, polling the crate only
    /// when something of its own happened.
    pub fn poll_accept(
        &mut self,
        h2: &mut Connection<Gate<T>, Bytes>,
        cx: &mut Context<'_>,
    ) -> Poll<Accepted> {
        self.causes.set_task(cx.waker());
        if self.causes.flush.swap(false, Ordering::AcqRel) {
            self.flushed();
        }
        if self.causes.h2.swap(false, Ordering::AcqRel) {
            self.due = true;
        }
        if !self.due {
            return Poll::Pending;
        }
        self.due = false;
        let accepted = h2.poll_accept(&mut Context::from_waker(&self.h2_waker));
        // A stream: more may be queued from the same read, which only another poll gives.
        self.due = accepted.is_ready();
        accepted
    }

    /// The connection was told something (GOAWAY to send, a stream reset): poll it next.
    pub fn poke(&mut self) {
        self.due = true;
    }

    /// The socket's send completed: finish a flush reported done, or let the crate on.
    fn flushed(&mut self) {
        if self.flush.waiting.replace(false) {
            self.due = true;
        }
        if !self.flush.in_flight.get() {
            return;
        }
        let mut io = self.io.borrow_mut();
        match Pin::new(&mut *io).poll_flush(&mut Context::from_waker(&self.flush_waker)) {
            Poll::Ready(Ok(())) => self.flush.in_flight.set(false),
            // The crate meets the error at its next write.
            Poll::Ready(Err(_)) => {
                self.flush.in_flight.set(false);
                self.due = true;
            }
            Poll::Pending => {} // the rest of a short send, sent again
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Gate<T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.io.borrow_mut()).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + HandedOver + Unpin> AsyncWrite for Gate<T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.io.borrow_mut()).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.io.borrow_mut()).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.borrow().is_write_vectored()
    }
    /// Done once every byte is with the socket; its send's completion is the driver's.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut io = self.io.borrow_mut();
        match Pin::new(&mut *io).poll_flush(&mut Context::from_waker(&self.flush_waker)) {
            Poll::Ready(done) => {
                self.flush.in_flight.set(false);
                Poll::Ready(done)
            }
            Poll::Pending if io.handed_over() => {
                self.flush.in_flight.set(true);
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                self.flush.waiting.set(true);
                Poll::Pending
            }
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.io.borrow_mut()).poll_shutdown(cx)
    }
}
