//! Server → client in a session: each answer is read as HTTP (head, then its body as
//! framed) and passed on — its head edited when the connection closes after it (`close`)
//! or cookie persistence sets or rewrites a cookie — so the request side knows when every
//! answer to the requests it forwarded has reached the client: the moment a redirect may
//! be written without cutting into an answer. Interim answers (1xx) do not count; after a
//! 101, or an answer that is not HTTP, bytes are passed on unread.

use super::head::{self, Field};
use super::{pass_body, read_more, AtEof};
use crate::handoff::cookies::{Cookies, Seen};
use http1::{HeadLimits, Parse, ResponseHead};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How answers are edited.
pub(super) struct Edits {
    /// `Connection: close` on every final answer.
    pub close: bool,
    /// The group's cookie persistence.
    pub cookies: Option<Arc<Cookies>>,
}

/// What the two directions share.
#[derive(Default)]
pub(super) struct Track {
    state: Mutex<State>,
    answered: Condvar,
}

#[derive(Default)]
struct State {
    /// For each request forwarded and not yet answered: was it HEAD, and what it carried
    /// that its answer depends on.
    pending: VecDeque<(bool, Seen)>,
    /// The request side will write to the client itself once `pending` is empty.
    stop: bool,
}

impl Track {
    /// A request (HEAD or not) goes to the server.
    pub(super) fn sent(&self, is_head: bool, seen: Seen) {
        self.lock().pending.push_back((is_head, seen));
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

    /// Answers are passed on again (a migration that did not happen).
    pub(super) fn resume(&self) {
        self.lock().stop = false;
    }

    /// The oldest request waiting for its answer.
    fn front(&self) -> (bool, Seen) {
        self.lock().pending.front().cloned().unwrap_or_default()
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
pub(super) fn run(server: &TcpStream, client: &TcpStream, track: &Track, edits: &Edits) {
    if let Err(e) = answers(server, client, track, edits) {
        tracing::debug!(error = %e, "answers ended");
    }
    if !track.stopping() {
        let _ = client.shutdown(Shutdown::Write);
    }
}

fn answers(mut server: &TcpStream, mut client: &TcpStream, track: &Track, edits: &Edits) -> io::Result<()> {
    let mut buf = Vec::with_capacity(64 * 1024);
    let mut resp = ResponseHead::new();
    let mut out = Vec::with_capacity(1024);
    loop {
        if !read_answer_head(&mut server, &mut buf, &mut resp, track)? {
            return opaque(server, client, &buf);
        }
        if resp.is_interim() || resp.status == 101 {
            client.write_all(&buf[..resp.head_len])?;
            buf.drain(..resp.head_len);
            if resp.status == 101 {
                return opaque(server, client, &buf);
            }
            continue;
        }
        // The request this answers was registered before it was sent, so before any byte
        // of its answer came: read it now, not before the read (a race with the sender).
        let (_, seen) = track.front();
        edited_head(&buf, &resp, edits, &seen, &mut out);
        client.write_all(if out.is_empty() { &buf[..resp.head_len] } else { &out })?;
        buf.drain(..resp.head_len);
        // Until-close bodies end at EOF; a short one is passed on as short.
        pass_body(server, client, &mut buf, resp.body, ("answer body", AtEof::End))?;
        if track.answered() {
            return Ok(());
        }
    }
}

/// The answer's head as the client must get it, in `out` (left empty when it goes as sent).
fn edited_head(buf: &[u8], resp: &ResponseHead, edits: &Edits, seen: &Seen, out: &mut Vec<u8>) {
    out.clear();
    let mut extra = Vec::new();
    if let Some(c) = &edits.cookies {
        let set_cookies = resp
            .headers
            .iter()
            .filter(|h| h.name.slice(buf).eq_ignore_ascii_case(b"set-cookie"))
            .map(|h| h.value.slice(buf));
        c.extra(seen, set_cookies, &mut extra);
    }
    if edits.close {
        extra.extend_from_slice(b"Connection: close\r\n");
    }
    let mut replaced = Vec::new();
    let mut field = |name: &[u8], value: &[u8]| {
        if edits.close && head::is_connection_field(name) {
            return Field::Drop;
        }
        match &edits.cookies {
            Some(c) if name.eq_ignore_ascii_case(b"set-cookie") && c.on_set_cookie(value, &mut replaced) => {
                Field::Value(std::mem::take(&mut replaced))
            }
            _ => Field::Keep,
        }
    };
    let touches = |h: &http1::HeaderSpan| {
        let name = h.name.slice(buf);
        (edits.close && head::is_connection_field(name))
            || (edits.cookies.is_some() && name.eq_ignore_ascii_case(b"set-cookie"))
    };
    if extra.is_empty() && !resp.headers.iter().any(touches) {
        return;
    }
    head::write(buf, 0, &resp.headers, &mut field, &extra, out);
}

/// Reads until `buf` starts with a whole answer head: true; false when the server closed
/// first or sent something that is not HTTP (what came stays in `buf`). Whether it answers
/// a HEAD is the oldest waiting request's, looked up once bytes are here.
fn read_answer_head(
    server: &mut &TcpStream,
    buf: &mut Vec<u8>,
    head: &mut ResponseHead,
    track: &Track,
) -> io::Result<bool> {
    let limits = HeadLimits { max_head_bytes: 64 * 1024, max_headers: 256 };
    loop {
        if !buf.is_empty() {
            let (is_head, _) = track.front();
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

/// Not HTTP (any more): the rest as it comes.
fn opaque(mut server: &TcpStream, mut client: &TcpStream, buf: &[u8]) -> io::Result<()> {
    client.write_all(buf)?;
    io::copy(&mut server, &mut client)?;
    Ok(())
}
