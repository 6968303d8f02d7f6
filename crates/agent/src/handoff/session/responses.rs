//! Server → client under `redirect`: each answer is read as HTTP (head, then its body as
//! framed) and passed on as it came, so the request side knows when every answer to the
//! requests it forwarded has reached the client — the moment a redirect may be written
//! without cutting into an answer. Interim answers (1xx) do not count; after a 101, or an
//! answer that is not HTTP, bytes are passed on unread.

use super::{read_more, relay, write_closing};
use http1::{BodyKind, BodyScanner, HeadLimits, Parse, ResponseHead};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// What the two directions share.
#[derive(Default)]
pub(super) struct Track {
    state: Mutex<State>,
    answered: Condvar,
}

#[derive(Default)]
struct State {
    /// For each request forwarded and not yet answered: was it HEAD.
    pending: VecDeque<bool>,
    /// The request side will write to the client itself once `pending` is empty.
    stop: bool,
}

impl Track {
    /// A request (HEAD or not) goes to the server.
    pub(super) fn sent(&self, is_head: bool) {
        self.lock().pending.push_back(is_head);
    }

    /// Stops passing answers on once every forwarded request is answered; waits for that
    /// (at most `limit`). True: the client has every answer and nothing more will be
    /// written to it from this side.
    pub(super) fn stop_when_answered(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut st = self.lock();
        st.stop = true;
        while !st.pending.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            st = self.answered.wait_timeout(st, left).map_or_else(|e| e.into_inner().0, |r| r.0);
        }
        true
    }

    fn front_is_head(&self) -> bool {
        self.lock().pending.front().copied().unwrap_or(false)
    }

    /// An answer is complete; whether to stop.
    fn answered(&self) -> bool {
        let mut st = self.lock();
        st.pending.pop_front();
        self.answered.notify_all();
        st.stop && st.pending.is_empty()
    }

    fn stopping(&self) -> bool {
        self.lock().stop
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Passes answers from `server` to `client` until the server closes or the request side
/// stops; half-closes the client unless the request side writes to it.
pub(super) fn run(server: &TcpStream, client: &TcpStream, track: &Track) {
    let result = answers(server, client, track);
    if let Err(e) = &result {
        tracing::debug!(error = %e, "answers ended");
    }
    if !track.stopping() {
        let _ = client.shutdown(Shutdown::Write);
    }
}

/// Under `close`: the answer's head goes to the client with `Connection: close` (interim
/// answers as they are), then the rest is spliced until the server closes.
pub(super) fn pass_closing(mut server: &TcpStream, mut client: &TcpStream, is_head: bool) {
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut head = ResponseHead::new();
    let result = (|| -> io::Result<()> {
        loop {
            if !read_answer_head(&mut server, &mut buf, &mut head, is_head)? {
                return client.write_all(&buf);
            }
            if !head.is_interim() {
                let mut out = Vec::with_capacity(head.head_len + 32);
                write_closing(&buf, 0, &head.headers, &mut out);
                out.extend_from_slice(&buf[head.head_len..]);
                return client.write_all(&out);
            }
            client.write_all(&buf[..head.head_len])?;
            buf.drain(..head.head_len);
        }
    })();
    if let Err(e) = result {
        tracing::debug!(error = %e, "answer ended");
    }
    relay::pump(server, client);
}

/// Reads until `buf` starts with a whole answer head: true; false when the server closed
/// first or sent something that is not HTTP (what came stays in `buf`).
fn read_answer_head(
    server: &mut &TcpStream,
    buf: &mut Vec<u8>,
    head: &mut ResponseHead,
    is_head: bool,
) -> io::Result<bool> {
    let limits = HeadLimits { max_head_bytes: 64 * 1024, max_headers: 256 };
    loop {
        if !buf.is_empty() {
            match head.parse(buf, &limits, is_head) {
                Ok(Parse::Complete) => return Ok(true),
                Ok(Parse::Partial) => {}
                Err(_) => return Ok(false),
            }
        }
        if read_more(server, buf)? == 0 {
            return Ok(false);
        }
    }
}

fn answers(mut server: &TcpStream, mut client: &TcpStream, track: &Track) -> io::Result<()> {
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut head = ResponseHead::new();
    loop {
        if !read_answer_head(&mut server, &mut buf, &mut head, track.front_is_head())? {
            return opaque(server, client, &buf);
        }
        client.write_all(&buf[..head.head_len])?;
        buf.drain(..head.head_len);
        if head.status == 101 {
            return opaque(server, client, &buf);
        }
        if head.is_interim() {
            continue;
        }
        pass_body(server, client, &mut buf, head.body)?;
        if track.answered() {
            return Ok(());
        }
    }
}

/// The body as framed; what follows stays in `buf`.
fn pass_body(
    mut server: &TcpStream,
    mut client: &TcpStream,
    buf: &mut Vec<u8>,
    kind: BodyKind,
) -> io::Result<()> {
    let mut scanner = BodyScanner::new(kind, u64::MAX);
    loop {
        let scan = scanner.scan(buf).map_err(|e| io::Error::other(format!("answer body: {e}")))?;
        client.write_all(&buf[..scan.consumed])?;
        buf.drain(..scan.consumed);
        if scan.done {
            return Ok(());
        }
        if read_more(&mut server, buf)? == 0 {
            // Until-close bodies end here; a short one is passed on as short.
            return Ok(());
        }
    }
}

/// Not HTTP (any more): the rest as it comes.
fn opaque(mut server: &TcpStream, mut client: &TcpStream, buf: &[u8]) -> io::Result<()> {
    client.write_all(buf)?;
    io::copy(&mut server, &mut client)?;
    Ok(())
}
