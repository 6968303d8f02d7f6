//! Phases "read head" and "admit": the request head read whole and judged by the strict
//! parser, and the declared body size checked, before any server is involved. The verdicts
//! are pure functions ([`judge`], [`admit`]) so `explain` refuses exactly what the switch
//! refuses, with the same status.

use crate::floor::buf::IoBuf;
use crate::floor::failure::Refusal;
use crate::floor::io::{read_some, IoFail};
use crate::floor::snapshot::Snapshot;
use crate::floor::stats::Counter;
use crate::http::client::Client;
use http1::{BodyKind, HeadError, Parse, RequestHead};
use tokio::time::Instant;

/// How reading a head ended when it did not produce one.
pub enum HeadFail {
    /// The client closed or reset: nothing to answer.
    Closed,
    /// Answer with this refusal, count it, close.
    Refuse(Refusal, Counter),
}

/// What a parse of the bytes so far means: `Ok(true)` a complete valid head, `Ok(false)`
/// more bytes are needed, or the refusal and its counter. `buffer_full`: no more bytes fit.
pub fn judge(parsed: Result<Parse, HeadError>, buffer_full: bool) -> Result<bool, (Refusal, Counter)> {
    match parsed {
        Ok(Parse::Complete) => Ok(true),
        Ok(Parse::Partial) if buffer_full => {
            Err((Refusal::new(431, "request header section too large"), Counter::HeadTooLarge))
        }
        Ok(Parse::Partial) => Ok(false),
        Err(e) => Err((Refusal::new(e.status(), e.reason()), head_counter(e.status()))),
    }
}

/// Admission of a parsed request: a declared body over the limit is refused (a chunked
/// body is checked as it streams).
pub fn admit(snap: &Snapshot, req: &RequestHead) -> Option<(Refusal, Counter)> {
    match req.body {
        BodyKind::Length(n) if n > snap.max_body => {
            Some((Refusal::new(413, "request body too large"), Counter::BodyTooLarge))
        }
        _ => None,
    }
}

/// The buffer a connection reads its heads into holds at least one head over the limit.
pub fn buffer_size(snap: &Snapshot) -> usize {
    let limits = &snap.config.limits;
    limits.buffer_bytes.max(limits.max_head_bytes + 1)
}

/// Reads until `req` holds a complete, valid head, within `client_head` of `started`.
pub async fn read(
    snap: &Snapshot,
    client: &mut Client,
    req: &mut RequestHead,
    started: Instant,
) -> Result<(), HeadFail> {
    let deadline = started + snap.config.timeouts.client_head;
    let buf = client.buf.get_or_insert_with(|| IoBuf::new(snap.config.limits.buffer_bytes));
    loop {
        if !buf.is_empty() {
            match judge(req.parse(buf.filled(), &snap.head_limits), buf.is_full()) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err((r, counter)) => return Err(HeadFail::Refuse(r, counter)),
            }
        }
        match read_some(&mut client.stream, buf, deadline).await {
            Ok(0) | Err(IoFail::Io) => return Err(HeadFail::Closed),
            Ok(_) => {}
            Err(IoFail::Timeout) => {
                let r = Refusal::new(408, "request head not received in time");
                return Err(HeadFail::Refuse(r, Counter::HeadTimeout));
            }
        }
    }
}

fn head_counter(status: u16) -> Counter {
    match status {
        431 => Counter::HeadTooLarge,
        501 => Counter::NotImplemented,
        505 => Counter::BadVersion,
        _ => Counter::BadRequest,
    }
}
