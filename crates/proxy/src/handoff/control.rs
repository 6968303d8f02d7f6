//! Control connections to agents, per worker (a worker is a thread): opened and
//! authenticated on first use (HELLO → WELCOME), then reused hand-off after hand-off. A
//! connection that timed out or broke is dropped, never reused.

use oneway::{Frame, Policy, Reader};
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

thread_local! {
    static IDLE: RefCell<HashMap<SocketAddr, Vec<Control>>> = RefCell::new(HashMap::new());
}

/// A hand-off id, unique in the process.
pub(super) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// An authenticated control connection.
pub(super) struct Control {
    stream: TcpStream,
    reader: Reader,
}

/// An idle connection to `agent`, or a new one (within `timeout`, authenticated, then
/// given the one-way listeners' `policies`).
pub(super) async fn take(
    agent: SocketAddr,
    token: &str,
    timeout: Duration,
    policies: &[Policy],
) -> Option<Control> {
    while let Some(c) = IDLE.with(|idle| idle.borrow_mut().get_mut(&agent).and_then(Vec::pop)) {
        if c.idle_and_open() {
            return Some(c);
        }
    }
    let stream = match tokio::time::timeout(timeout, TcpStream::connect(agent)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::warn!(%agent, error = %e, "agent unreachable; served two-way");
            return None;
        }
        Err(_) => {
            tracing::warn!(%agent, "agent did not accept in time; served two-way");
            return None;
        }
    };
    let _ = stream.set_nodelay(true);
    let mut c = Control { stream, reader: Reader::default() };
    match c.exchange(&Frame::Hello { token: token.as_bytes().to_vec() }, timeout).await {
        Some(Frame::Welcome) => {
            for p in policies {
                c.send(&Frame::Policy(p.clone())).await.ok()?;
            }
            Some(c)
        }
        other => {
            tracing::warn!(%agent, answer = ?other, "agent refused the control connection; served two-way");
            None
        }
    }
}

/// Keeps `c` for the next hand-off to `agent`.
pub(super) fn give(agent: SocketAddr, c: Control) {
    IDLE.with(|idle| idle.borrow_mut().entry(agent).or_default().push(c));
}

impl Control {
    /// Whether an idle connection is still open and silent (an agent that went away has
    /// closed it; bytes nobody asked for mean it is out of step).
    fn idle_and_open(&self) -> bool {
        let mut probe = [0u8; 1];
        matches!(self.stream.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
    }

    /// Sends a frame.
    pub(super) async fn send(&mut self, frame: &Frame) -> std::io::Result<()> {
        let mut out = Vec::with_capacity(256);
        frame.encode(&mut out);
        self.stream.write_all(&out).await
    }

    /// Sends `frame` and waits up to `timeout` for the answer.
    pub(super) async fn exchange(&mut self, frame: &Frame, timeout: Duration) -> Option<Frame> {
        self.send(frame).await.ok()?;
        self.answer_within(timeout).await
    }

    /// The next frame, if it comes within `timeout`.
    pub(super) async fn answer_within(&mut self, timeout: Duration) -> Option<Frame> {
        tokio::time::timeout(timeout, self.answer()).await.ok().flatten()
    }

    async fn answer(&mut self) -> Option<Frame> {
        let mut buf = [0u8; 4096];
        loop {
            if let Some(frame) = self.reader.next_frame().ok()? {
                return Some(frame);
            }
            let n = self.stream.read(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            self.reader.push(&buf[..n]);
        }
    }
}
