//! One request, phase by phase (DESIGN.md §2):
//! read head → route → pick server → queue for a slot → connect or reuse → exchange → log.
//! Retries live here: a connect failure moves to another server of the group; a request the
//! server never answered is sent again only when that is safe.

use crate::access_log::Record;
use crate::balancing;
use crate::exchange::{self, Exchange};
use crate::health::passive;
use crate::persist;
use crate::respond::{write_redirect, write_refusal, Refusal};
use crate::route::{self, Route};
use crate::session::{read_head, Client, HeadFail, Scratch};
use crate::snapshot::{ListenerRt, Snapshot};
use crate::stats::Counter;
use crate::sticky::Target;
use crate::upstream::{self, ActiveGuard, Tried};
use crate::worker::Worker;
use config::ConnectionPersistence;
use http1::{write_request_head, BodyKind, BodyScanner, RequestRewrite};
use rules::Sticky;
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
                route_and_forward(worker, snap, listener, client, scratch, &mut outcome).await
            }
        }
    };
    record(worker, snap, listener, &outcome, started);
    if log_enabled(snap) {
        log(worker, snap, listener, client, scratch, &outcome, started);
    }
    keep
}

/// Adds the request to its listener's and its server's figures (metrics, admin API).
fn record(worker: &Worker, snap: &Snapshot, listener: usize, o: &Outcome, started: Instant) {
    if let Some(l) = worker.shared.listeners.get(listener) {
        l.record(o.status, o.bytes_in, o.bytes_out);
    }
    if let (Some(g), Some(s)) = (o.group, o.server) {
        let server = &snap.group(g).servers[s];
        server.live.record(o.status, o.bytes_in, o.bytes_out, started.elapsed());
    }
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

/// Where a request is being sent, as the route phase decided.
struct Dispatch {
    listener: usize,
    group: usize,
    prefer: Option<u64>,
    sticky: Sticky,
}

/// Phase "route" (sticky entries, rules, default group), then the action it decided.
async fn route_and_forward(
    worker: &Worker,
    snap: &Snapshot,
    listener: usize,
    client: &mut Client,
    scratch: &mut Scratch,
    outcome: &mut Outcome,
) -> bool {
    let mut body = BodyScanner::new(scratch.req.body, snap.max_body);
    scratch.body_complete = scratch.req.body == BodyKind::None;
    let route = route::decide(worker, snap, listener, client, scratch, &mut body).await;
    outcome.bytes_in += scratch.held.len() as u64;
    match route {
        Route::Forward { group, prefer, sticky } => {
            outcome.group = Some(group);
            take_hash_key(snap, group, client, scratch);
            let prefer = prefer.or_else(|| persistence_lookup(worker, snap, group, client, scratch));
            if snap.listeners[listener].connection_persistence == ConnectionPersistence::Redirect {
                keep_target_for_redirect(client, scratch);
            }
            prepare_forwarded_head(&snap.listeners[listener], client, scratch, outcome);
            let dispatch = Dispatch { listener, group, prefer, sticky };
            forward_with_retries(worker, snap, &dispatch, client, scratch, &body, outcome).await
        }
        Route::Refuse(r) => refuse(worker, client, scratch, r, outcome).await,
        Route::Drop => {
            outcome.error = Some("dropped by rule");
            false
        }
        Route::Redirect(status) => redirect(worker, client, scratch, status, outcome).await,
        Route::Closed => false,
    }
}

/// Answers a rule's redirect. The connection stays open when the request's body has been
/// read whole (there is nothing of it left to skip).
async fn redirect(
    worker: &Worker,
    client: &mut Client,
    scratch: &mut Scratch,
    status: u16,
    outcome: &mut Outcome,
) -> bool {
    worker.shared.stats.inc(Counter::RuleRedirects);
    let keep = scratch.body_complete && scratch.req.keep_alive && !worker.shutting_down();
    if let Some(buf) = client.buf.as_mut() {
        buf.consume(scratch.req.head_len);
    }
    send_redirect(worker, client, scratch, status, keep, outcome).await
}

/// Writes a redirect to `scratch.location`; true when the connection stays open.
async fn send_redirect(
    worker: &Worker,
    client: &mut Client,
    scratch: &mut Scratch,
    status: u16,
    keep: bool,
    outcome: &mut Outcome,
) -> bool {
    scratch.resp_out.clear();
    write_redirect(status, &scratch.location, keep, &mut scratch.resp_out);
    let deadline = Instant::now() + snap_client_io(worker);
    let ok = crate::io::write_all_parts(&mut client.stream, &[&scratch.resp_out], deadline).await.is_ok();
    outcome.status = status;
    outcome.bytes_out += scratch.resp_out.len() as u64;
    ok && keep
}

/// Copies the request's hash key into `scratch.key` when the group's scheduler reads one
/// (before the head's bytes are consumed).
fn take_hash_key(snap: &Snapshot, group: usize, client: &Client, scratch: &mut Scratch) {
    let g = snap.group(group);
    scratch.has_key = false;
    let (Some(buf), true) = (client.buf.as_ref(), g.scheduler.uses_key()) else { return };
    let view = route::HeadView::head_only(buf.filled(), &scratch.req, client);
    let mut key = std::mem::take(&mut scratch.key);
    scratch.has_key = balancing::extract_key(&g.hash_key, &view, &mut key);
    scratch.key = key;
}

/// Phase "persistence lookup": the server the client's session is on, per the group's
/// `persistence` (a rule's stickiness, found before, wins).
fn persistence_lookup(
    worker: &Worker,
    snap: &Snapshot,
    group: usize,
    client: &Client,
    scratch: &mut Scratch,
) -> Option<u64> {
    let g = snap.group(group);
    let p = g.persistence.as_deref()?;
    let buf = client.buf.as_ref()?;
    let found = persist::on_request(
        p,
        g,
        buf.filled(),
        &scratch.req,
        client.peer,
        &mut scratch.persist,
        &mut scratch.set_headers,
    );
    if found.is_some() {
        worker.shared.stats.inc(Counter::PersistenceHits);
    }
    found
}

/// Copies the request-target into `scratch.location`: the URL a change of server under
/// `connection_persistence = "redirect"` sends the client back to.
fn keep_target_for_redirect(client: &Client, scratch: &mut Scratch) {
    let Some(buf) = client.buf.as_ref() else { return };
    scratch.location.clear();
    scratch.location.push_str(&String::from_utf8_lossy(scratch.req.target.slice(buf.filled())));
}

/// Connection persistence (seed 001 Table 1) when this request would go to another server
/// than the previous one on the connection: `None` to go on (under `close`, after marking
/// the connection to close with this response), or the redirect's keep-alive result.
async fn on_server_change(
    worker: &Worker,
    snap: &Snapshot,
    d: &Dispatch,
    client: &mut Client,
    scratch: &mut Scratch,
    server: u64,
    outcome: &mut Outcome,
) -> Option<bool> {
    let changed = client.last_server().is_some_and(|last| last != server);
    if !changed {
        return None;
    }
    match snap.listeners[d.listener].connection_persistence {
        ConnectionPersistence::PerRequest => None,
        ConnectionPersistence::Close => {
            worker.shared.stats.inc(Counter::ServerChangeCloses);
            scratch.close_after = true;
            None
        }
        ConnectionPersistence::Redirect => {
            worker.shared.stats.inc(Counter::ServerChangeRedirects);
            // 302 as the switches of the paper answered; 307 for other methods, so a
            // POST is repeated as a POST with its body.
            let status = if scratch.req.idempotent && scratch.req.body == BodyKind::None { 302 } else { 307 };
            Some(send_redirect(worker, client, scratch, status, false, outcome).await)
        }
    }
}

fn snap_client_io(worker: &Worker) -> Duration {
    worker.shared.snapshot.load().config.timeouts.client_io
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
    // Empty (and not allocated) unless a rule used setHeader.
    let set: Vec<(&str, &str)> = scratch.set_headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let rw = RequestRewrite {
        forwarded_for: listener.x_forwarded_for.then(|| client.peer.ip()),
        forwarded_proto: listener.x_forwarded_proto.then_some(if client.stream.is_tls() {
            "https"
        } else {
            "http"
        }),
        upgrade: scratch.req.upgrade,
        set_headers: &set,
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
    d: &Dispatch,
    client: &mut Client,
    scratch: &mut Scratch,
    body: &BodyScanner,
    outcome: &mut Outcome,
) -> bool {
    let stats = &worker.shared.stats;
    let group = snap.group(d.group);
    let retries = snap.config.limits.retries;
    // Replaying is safe for an idempotent request whose whole body (if any) is still here.
    let replayable = scratch.req.idempotent && scratch.body_complete;
    let mut tried = Tried::default();
    let mut attempts = 0u32;
    let mut last_failure = Refusal::new(503, "no server available");
    loop {
        // A sticky server is used while it may take sticky traffic (not down, not in
        // maintenance, not drained past its timeout).
        let preferred = d
            .prefer
            .and_then(|id| group.servers.iter().position(|s| s.id == id))
            .filter(|&i| group.servers[i].live.sticky_ok.load(std::sync::atomic::Ordering::Relaxed));
        let pick = preferred.filter(|i| !tried.contains(*i));
        let key = scratch.has_key.then_some(scratch.key.as_slice());
        let Some(index) = pick.or_else(|| balancing::pick(worker, snap, d.group, &tried, key)) else {
            if attempts == 0 {
                stats.inc(Counter::NoServer);
            }
            return refuse(worker, client, scratch, last_failure, outcome).await;
        };
        let server = &group.servers[index];
        outcome.server = Some(index);
        if let Some(keep) = on_server_change(worker, snap, d, client, scratch, server.id, outcome).await {
            return keep;
        }
        let _slot = match upstream::acquire_slot(server, snap, stats).await {
            Ok(slot) => slot,
            Err(r) => return refuse(worker, client, scratch, r, outcome).await,
        };
        let _active = ActiveGuard::new(server);
        let (stream, reused) = match upstream::connect(worker, snap, server, client.take_prealloc(server.id))
            .await
        {
            Ok(pair) => pair,
            Err(r) => {
                tracing::warn!(server = %server.name, addr = %server.addr, reason = r.reason, "server connect failed");
                passive::on_failure(group, server, stats, &worker.shared.weights_epoch);
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
        let persistence = group.persistence.as_deref().map(|p| (p, index));
        match exchange::run(worker, snap, client, scratch, body, stream, server, persistence, outcome).await {
            Exchange::Done { keep_client } => {
                if passive::counts_as_failure(group, outcome.status) {
                    passive::on_failure(group, server, stats, &worker.shared.weights_epoch);
                } else {
                    passive::on_success(server);
                }
                let l = &snap.listeners[d.listener];
                if l.connection_persistence != ConnectionPersistence::PerRequest {
                    client.pins_mut().last_server = Some(server.id);
                }
                if l.preallocate {
                    worker.shared.last_server.record(client.peer.ip(), server.id);
                }
                if let Some(p) = group.persistence.as_deref() {
                    persist::remember(p, &scratch.persist, server.id, client.peer);
                }
                let target = Target { group: d.group, server: server.id };
                route::remember(worker, d.listener, client, d.sticky, target);
                return keep_client;
            }
            Exchange::Failed(None) => return false,
            Exchange::Failed(Some(r)) => return refuse(worker, client, scratch, r, outcome).await,
            Exchange::Unanswered { delivered } => {
                let safe = !delivered || replayable;
                // A pooled connection the server had just closed is not the server's fault.
                if !reused {
                    tried.insert(index);
                    passive::on_failure(group, server, stats, &worker.shared.weights_epoch);
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
        rule: if scratch.rule.is_empty() { "-" } else { &scratch.rule },
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
