//! Control connections to agents, per worker (a worker is a thread): opened and
//! authenticated on first use (HELLO → WELCOME), then reused hand-off after hand-off. A
//! connection that timed out or broke is dropped, never reused.
//!
//! Each connection has a reader task for its whole life, idle or not: an agent reports a
//! served connection's end ([`Frame::Ended`]) whenever it closes, on whichever connection
//! from this switch it has, and the report goes to the flow lifecycle (`life`) at once.
//! Every other frame answers the hand-off in progress on the connection.

use oneway::{Frame, Policy, Reader};
use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc::{self, error::TryRecvError, UnboundedReceiver, UnboundedSender};

thread_local! {
    static IDLE: RefCell<HashMap<SocketAddr, Vec<Control>>> = RefCell::new(HashMap::new());
}

/// A hand-off id, unique in the process.
pub(super) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// An authenticated control connection: its writing half, and the answers its reader
/// task passes on.
pub(super) struct Control {
    write: OwnedWriteHalf,
    answers: UnboundedReceiver<Frame>,
}

/// An idle connection to `agent`, or a new one (within `timeout`, authenticated, then
/// given the one-way listeners' `policies`).
pub(super) async fn take(
    agent: SocketAddr,
    token: &str,
    timeout: Duration,
    policies: &[Policy],
) -> Option<Control> {
    while let Some(mut c) = IDLE.with(|idle| idle.borrow_mut().get_mut(&agent).and_then(Vec::pop)) {
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
    let (read, write) = stream.into_split();
    let (tx, answers) = mpsc::unbounded_channel();
    drop(tokio::task::spawn_local(read_frames(read, tx, agent)));
    let mut c = Control { write, answers };
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

/// Reads a connection's frames until it closes, breaks the protocol, or its [`Control`]
/// is dropped: reports of ended connections go to `life`, the rest to `answers`.
async fn read_frames(mut read: OwnedReadHalf, answers: UnboundedSender<Frame>, agent: SocketAddr) {
    let mut reader = Reader::default();
    let mut buf = [0u8; 4096];
    loop {
        loop {
            match reader.next_frame() {
                Ok(Some(Frame::Ended { id, client })) => super::life::reported(id, client),
                Ok(Some(Frame::Learned { group, tag, set_cookie })) => {
                    super::learned::learned(&group, &tag, &set_cookie);
                }
                Ok(Some(Frame::Migrate { id, vip, client, request })) => {
                    super::migrate::requested(super::migrate::Asked { agent, id, vip, client, request });
                }
                Ok(Some(frame)) => {
                    if answers.send(frame).is_err() {
                        return;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(%agent, error = %e, "agent broke the control protocol; connection dropped");
                    return;
                }
            }
        }
        tokio::select! {
            n = read.read(&mut buf) => match n {
                Ok(0) | Err(_) => return,
                Ok(n) => reader.push(&buf[..n]),
            },
            () = answers.closed() => return,
        }
    }
}

impl Control {
    /// Whether an idle connection is still open and in step (an agent that went away has
    /// closed it; an answer nobody asked for means it is out of step).
    fn idle_and_open(&mut self) -> bool {
        matches!(self.answers.try_recv(), Err(TryRecvError::Empty))
    }

    /// Sends a frame.
    pub(super) async fn send(&mut self, frame: &Frame) -> std::io::Result<()> {
        let mut out = Vec::with_capacity(256);
        frame.encode(&mut out);
        self.write.write_all(&out).await
    }

    /// Sends `frame` and waits up to `timeout` for the answer.
    pub(super) async fn exchange(&mut self, frame: &Frame, timeout: Duration) -> Option<Frame> {
        self.send(frame).await.ok()?;
        self.answer_within(timeout).await
    }

    /// The next frame, if it comes within `timeout`.
    pub(super) async fn answer_within(&mut self, timeout: Duration) -> Option<Frame> {
        tokio::time::timeout(timeout, self.answers.recv()).await.ok().flatten()
    }
}
