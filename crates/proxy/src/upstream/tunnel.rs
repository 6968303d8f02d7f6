//! Upgraded connections (WebSocket and any other `Upgrade` the server accepts with 101)
//! become a byte tunnel: both directions copied until either side closes or the tunnel is
//! idle (no byte either way) for `tunnel_idle`. The copy can be paused at a safe point
//! ([`run_until`]): each direction's buffer then holds exactly the bytes it read and has not
//! written, and nothing else of the tunnel is in this process (bytes written are in the
//! kernel's send queues, bytes not yet read in its receive queues; both go with the
//! sockets). `moving` uses that to pass a tunnel to a binary upgrade's new process.
//!
//! Both directions are one hand-written poll (no split halves, no per-operation timeout):
//! a tunnel carries a few small exchanges per connection for TLS passthrough and mail, and
//! a timer armed and dropped around every read and write was a tenth of such a
//! connection's user-space instructions. One idle timer serves the whole tunnel: it is
//! armed once and, when it fires, re-armed from the last byte moved (ADR 0024).

pub mod moving;

use crate::floor::buf::IoBuf;
use crate::floor::clock;
use crate::floor::socket::Socket;
use std::future::Future;
use std::io;
use std::pin::{pin, Pin};
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::time::{sleep_until, Instant, Sleep};

/// Bytes a tunnel carried, for the access log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Carried {
    /// Client → server.
    pub up: u64,
    /// Server → client.
    pub down: u64,
    /// The tunnel went on in a binary upgrade's new process (these are the bytes carried
    /// here before it left).
    pub moved: bool,
}

/// Copies both ways between `client` and `server`, starting with bytes already buffered
/// on either side, until one side closes or the tunnel idles out; what it carried each way
/// (the buffered bytes included). Paused when `pause` completes: then (`true`) both copies
/// have stopped, `cbuf` holds what was read from the client and not yet written to the
/// server, `sbuf` the same the other way, and the sockets can go on elsewhere (a direction
/// that had ended reads end-of-file again there and ends the same way).
pub async fn run_until<C: AsyncRead + AsyncWrite + Unpin>(
    client: &mut C,
    cbuf: &mut IoBuf,
    server: &mut Socket,
    sbuf: &mut IoBuf,
    idle: Duration,
    pause: impl Future<Output = ()>,
) -> (Carried, bool) {
    let (mut up, mut down) = (Direction::default(), Direction::default());
    let mut idle_clock = IdleClock::new(idle);
    let mut timer = pin!(sleep_until(idle_clock.due()));
    let mut pause = pin!(pause);
    let paused = std::future::poll_fn(|cx| {
        // First: once paused, no copy may take another step.
        if pause.as_mut().poll(cx).is_ready() {
            return Poll::Ready(true);
        }
        let mut moved = false;
        let up_step = up.poll_step(cx, client, server, cbuf, &mut moved);
        let down_step = down.poll_step(cx, server, client, sbuf, &mut moved);
        if matches!(up_step, Poll::Ready(Err(_))) || matches!(down_step, Poll::Ready(Err(_))) {
            return Poll::Ready(false);
        }
        if up.done && down.done {
            return Poll::Ready(false);
        }
        if moved {
            idle_clock.moved();
        }
        match idle_clock.poll_idle(timer.as_mut(), cx) {
            Poll::Ready(()) => Poll::Ready(false),
            Poll::Pending => Poll::Pending,
        }
    })
    .await;
    (Carried { up: up.carried, down: down.carried, moved: false }, paused)
}

/// One direction of the tunnel.
#[derive(Default)]
struct Direction {
    /// Its reader reached end-of-file: half-close the writer once the buffer is out.
    eof: bool,
    /// Over: every byte written and the writer half-closed.
    done: bool,
    /// Bytes written.
    carried: u64,
}

impl Direction {
    /// Moves what it can: writes the buffered bytes out, reads more, and half-closes `w`
    /// after end-of-file. Ready once over (or failed); sets `moved` when a byte moved.
    /// Cancel-safe at every `Pending`: a write counts and drops from `buf` exactly what the
    /// socket took, and a read adds to `buf` only what it read, so `buf` always holds just
    /// the bytes read and not yet written.
    fn poll_step<R, W>(
        &mut self,
        cx: &mut Context<'_>,
        r: &mut R,
        w: &mut W,
        buf: &mut IoBuf,
        moved: &mut bool,
    ) -> Poll<io::Result<()>>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        while !self.done {
            while !buf.is_empty() {
                let n = ready!(Pin::new(&mut *w).poll_write(cx, buf.filled()))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                self.carried += n as u64;
                buf.consume(n);
                *moved = true;
            }
            if self.eof {
                // The half-close's own failure ends nothing: the other direction goes on.
                let _ = ready!(Pin::new(&mut *w).poll_shutdown(cx));
                self.done = true;
                break;
            }
            // Empty here (written out above), so there is room to read into. The read
            // future does nothing until polled and holds nothing when pending.
            let n = ready!(pin!(r.read_buf(buf.for_read())).poll(cx))?;
            if n == 0 {
                self.eof = true;
            } else {
                *moved = true;
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// The tunnel's idle clock over its one timer: armed once, and re-armed from the last byte
/// moved each time it fires before the tunnel has been idle for `idle`.
struct IdleClock {
    idle: Duration,
    /// When a byte last moved (the coarse clock: a tick's error on a deadline of seconds).
    last: Instant,
    armed: bool,
}

impl IdleClock {
    fn new(idle: Duration) -> Self {
        IdleClock { idle, last: clock::now(), armed: false }
    }

    fn due(&self) -> Instant {
        self.last + self.idle
    }

    fn moved(&mut self) {
        self.last = clock::now();
    }

    /// Ready when the tunnel has been idle for `idle`. Touches the timer only when it is
    /// not armed yet or has fired: its waker stays registered in between (the task's
    /// waker, which does not change).
    fn poll_idle(&mut self, mut timer: Pin<&mut Sleep>, cx: &mut Context<'_>) -> Poll<()> {
        if self.armed && !timer.is_elapsed() {
            return Poll::Pending;
        }
        self.armed = true;
        while timer.as_mut().poll(cx).is_ready() {
            let due = self.due();
            // The precise clock: the coarse one may lag the timer by a tick, which would
            // re-arm it for a moment already past, over and over.
            if due <= Instant::now() {
                return Poll::Ready(());
            }
            timer.as_mut().reset(due);
        }
        Poll::Pending
    }
}
