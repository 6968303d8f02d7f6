//! One request, phase by phase (DESIGN.md §2):
//! read head → route → pick server → queue for a slot → connect or reuse → exchange → log.
//! Retries live here: a connect failure moves to another server of the group; a request the
//! server never answered is sent again only when that is safe.

use crate::access_log::Record;
use crate::exchange::{self, Exchange};
use crate::respond::{write_refusal, Refusal};
use crate::session::{read_head, Client, HeadFail, Scratch};
use crate::snapshot::{ListenerRt, Snapshot};
use crate::stats::Counter;
use crate::upstream::{self, ActiveGuard, Tried};
use crate::worker::Worker;
use http1::{write_request_head, BodyKind, RequestRewrite};
use std::time::Duration;
use tokio::time::Instant;

/// What the access log needs to know about how a request went.
#[derive(Default)]
pub struct Outcome {
    /// Index of the group that got the request.
    pub group: Option<usize>,
    /// Index of the server (in its group) that got it last.
    pub server: Option<usize>,
    /// Status sent to the client (0 = none).
    pub status: u16,
    /// Request bytes read from the client.
    pub bytes_in: u64,
    /// Response bytes written to the client.
    pub bytes_out: u64,
    /// When the response head was received.
    pub first_byte: Option<Instant>,
    /// Why it failed, if it did.
    pub error: Option<&'static str>,
}

/// Handles one request on `client`; true when the client connection stays open.
pub async fn handle(
    worker: &Worker,
    snap: &Snapshot,
    listener: usize,
    client: &mut Client,
    scratch: &mut Scratch,
) -> bool {
    let started = Instant::now();
    let mut outcome = Outcome::default();
    let keep = match read_head(snap, client, &mut scratch.req, started).await {
        Err(HeadFail::Closed) => return false,
        Err(HeadFail::Refuse(r, counter)) => {
            worker.shared.stats.inc(counter);
            tracing::info!(client = %client.peer, status = r.status, reason = r.reason, "request refused");
            refuse(worker, client, scratch, r, &mut outcome).await;
            capture_start_line(client, scratch, false);
            false
        }
        Ok(()) => {
            worker.shared.stats.inc(Counter::Requests);
            capture_start_line(client, scratch, log_enabled(snap));
            if let Some(r) = admit_request(worker, snap, &scratch.req) {
                refuse(worker, client, scratch, r, &mut outcome).await
            } else {
                let l = &snap.listeners[listener];
                route_and_forward(worker, snap, l, client, scratch, &mut outcome).await
            }
        }
    };
    if log_enabled(snap) {
        log(worker, snap, listener, client, scratch, &outcome, started);
    }
    keep
}

/// Admission of a parsed request: a declared body over the limit is refused before any
/// server is involved (a chunked body is checked as it streams).
fn admit_request(worker: &Worker, snap: &Snapshot, req: &http1::RequestHead) -> Option<Refusal> {
    match req.body {
        BodyKind::Length(n) if n > snap.max_body => {
            worker.shared.stats.inc(Counter::BodyTooLarge);
            tracing::info!(length = n, max = snap.max_body, "request refused: body too large");
            Some(Refusal::new(413, "request body too large"))
        }
        _ => None,
    }
}

/// Phase "route": no rules yet, so the listener's default group (seed 000's NO_CS).
async fn route_and_forward(
    worker: &Worker,
    snap: &Snapshot,
    listener: &ListenerRt,
    client: &mut Client,
    scratch: &mut Scratch,
    outcome: &mut Outcome,
) -> bool {
    let group = listener.default_group;
    outcome.group = Some(group);
    prepare_forwarded_head(listener, client, scratch, outcome);
    forward_with_retries(worker, snap, group, client, scratch, outcome).await
}

/// Writes the head the server gets into `scratch.req_out` (once; retries resend it) and
/// consumes the client's head bytes.
fn prepare_forwarded_head(
    listener: &ListenerRt,
    client: &mut Client,
    scratch: &mut Scratch,
    outcome: &mut Outcome,
) {
    let Some(buf) = client.buf.as_mut() else { return };
    let rw = RequestRewrite {
        forwarded_for: listener.x_forwarded_for.then(|| client.peer.ip()),
        forwarded_proto: listener.x_forwarded_proto.then_some("http"),
        upgrade: scratch.req.upgrade,
        set_headers: &[],
    };
    scratch.req_out.clear();
    write_request_head(buf.filled(), &scratch.req, &rw, &mut scratch.req_out);
    buf.consume(scratch.req.head_len);
    outcome.bytes_in += scratch.req.head_len as u64;
}

/// Phases "pick", "queue", "connect", "exchange", with bounded retries.
async fn forward_with_retries(
    worker: &Worker,
    snap: &Snapshot,
    group_index: usize,
    client: &mut Client,
    scratch: &mut Scratch,
    outcome: &mut Outcome,
) -> bool {
    let stats = &worker.shared.stats;
    let group = snap.group(group_index);
    let retries = snap.config.limits.retries;
    let replayable = scratch.req.idempotent && scratch.req.body == BodyKind::None;
    let mut tried = Tried::default();
    let mut attempts = 0u32;
    let mut last_failure = Refusal::new(503, "no server available");
    loop {
        let Some(index) = upstream::pick(worker, snap, group_index, &tried) else {
            if attempts == 0 {
                stats.inc(Counter::NoServer);
            }
            return refuse(worker, client, scratch, last_failure, outcome).await;
        };
        let server = &group.servers[index];
        outcome.server = Some(index);
        let _slot = match upstream::acquire_slot(server, snap, stats).await {
            Ok(slot) => slot,
            Err(r) => return refuse(worker, client, scratch, r, outcome).await,
        };
        let _active = ActiveGuard::new(server);
        let (stream, reused) = match upstream::connect(worker, snap, server).await {
            Ok(pair) => pair,
            Err(r) => {
                tracing::warn!(server = %server.name, addr = %server.addr, reason = r.reason, "server connect failed");
                tried.insert(index);
                last_failure = r;
                if attempts >= retries {
                    return refuse(worker, client, scratch, r, outcome).await;
                }
                attempts += 1;
                stats.inc(Counter::Retries);
                continue;
            }
        };
        match exchange::run(worker, snap, client, scratch, stream, server, outcome).await {
            Exchange::Done { keep_client } => return keep_client,
            Exchange::Failed(None) => return false,
            Exchange::Failed(Some(r)) => return refuse(worker, client, scratch, r, outcome).await,
            Exchange::Unanswered { delivered } => {
                let safe = !delivered || replayable;
                // A pooled connection the server had just closed is not the server's fault.
                if !reused {
                    tried.insert(index);
                }
                let r = Refusal::new(502, "server closed the connection without answering");
                if !safe || attempts >= retries {
                    stats.inc(Counter::ServerAborted);
                    return refuse(worker, client, scratch, r, outcome).await;
                }
                attempts += 1;
                stats.inc(Counter::Retries);
                last_failure = r;
            }
        }
    }
}

/// Sends a refusal and marks the connection for closing.
pub async fn refuse(
    worker: &Worker,
    client: &mut Client,
    scratch: &mut Scratch,
    r: Refusal,
    outcome: &mut Outcome,
) -> bool {
    let _ = worker;
    scratch.resp_out.clear();
    write_refusal(r, &mut scratch.resp_out);
    let deadline = Instant::now() + Duration::from_secs(5);
    let _ = crate::io::write_all_parts(&mut client.stream, &[&scratch.resp_out], deadline).await;
    outcome.status = r.status;
    outcome.bytes_out += scratch.resp_out.len() as u64;
    outcome.error = Some(r.reason);
    false
}

fn log_enabled(snap: &Snapshot) -> bool {
    snap.config.access_log.enabled
}

/// Copies method and target for the log before the head's bytes are consumed.
fn capture_start_line(client: &Client, scratch: &mut Scratch, enabled: bool) {
    scratch.method.clear();
    scratch.target.clear();
    let (Some(buf), true) = (client.buf.as_ref(), enabled) else { return };
    let bytes = buf.filled();
    let req = &scratch.req;
    if req.target.end as usize <= bytes.len() {
        scratch.method.push_str(&String::from_utf8_lossy(req.method.slice(bytes)));
        scratch.target.push_str(&String::from_utf8_lossy(req.target.slice(bytes)));
    }
}

fn log(
    worker: &Worker,
    snap: &Snapshot,
    listener: usize,
    client: &Client,
    scratch: &Scratch,
    o: &Outcome,
    started: Instant,
) {
    let group = o.group.map(|g| snap.group(g));
    let server = group.zip(o.server).map(|(g, s)| g.servers[s].name.as_str());
    let record = Record {
        client: client.peer,
        listener: &snap.listeners[listener].name,
        rule: "-",
        group: group.map_or("-", |g| g.name.as_str()),
        server: server.unwrap_or("-"),
        method: if scratch.method.is_empty() { "-" } else { &scratch.method },
        target: if scratch.target.is_empty() { "-" } else { &scratch.target },
        status: o.status,
        bytes_in: o.bytes_in,
        bytes_out: o.bytes_out,
        ttfb: o.first_byte.map(|t| t.duration_since(started)),
        total: started.elapsed(),
        error: o.error,
    };
    worker.log.write(snap.config.access_log.format, &record);
}
