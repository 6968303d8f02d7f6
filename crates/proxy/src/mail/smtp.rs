//! The SMTP listener (seed 000 §4.4): the switch speaks the start of the dialogue itself
//! (`mail::smtp::Front`: greeting, EHLO, MAIL, pipelining), lets the rules judge the sender
//! (`smtp.mail_from…`: a `deny` answers 550) and route each recipient (`smtp.rcpt_to…`).
//! The first recipient that routes to a group chooses the transaction's server: the switch
//! connects and replays what precedes the choice (`mail::smtp::Replay`: greeting, EHLO,
//! XCLIENT when offered, MAIL) and that RCPT, and the server's reply is the client's
//! answer. Later recipients for the same group are relayed to that server live and its
//! replies passed back verbatim; recipients for another group get 451 (the client sends them
//! in a separate transaction). DATA goes to the server, and after its 354 the session is a
//! tunnel.
//!
//! One server connection per transaction: when the transaction ends without DATA (RSET,
//! EHLO, a refused DATA) the switch sends the server QUIT and closes, and the next
//! transaction routes afresh. Keeping the connection (with RSET) would only help a next
//! transaction routed to the same group, would hold an idle server connection between
//! transactions, and clients rarely RSET except after a failure.

use crate::floor::io::write_all_parts;
use crate::floor::snapshot::Snapshot;
use crate::floor::stats::Counter;
use crate::floor::stream::ClientStream;
use crate::floor::worker::Worker;
use crate::mail::dialogue::{converse, flush, next_bytes, Ctx};
use crate::observe::record::{self, Entry, Outcome as Traffic};
use crate::upstream::connect::{pick_and_connect, Upstream};
use crate::upstream::decide;
use crate::upstream::tunnel::{
    self,
    moving::{self, Origin},
};
use mail::smtp::{self, Cause, ClientInfo, Event, Front, FrontConfig, Mailbox, Outcome, Replay, Reply};
use rules::ProtoField;
use std::net::SocketAddr;
use std::rc::Rc;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// The transaction being collected: its sender, the group its first routed recipient
/// chose, and the conversation with that group's server.
#[derive(Default)]
struct Txn<'s> {
    from: Option<Mailbox>,
    group: Option<usize>,
    first_rcpt: Option<Mailbox>,
    rcpts: usize,
    server: Server<'s>,
}

/// Where the transaction stands with its server.
#[derive(Default)]
enum Server<'s> {
    /// No recipient was routed yet.
    #[default]
    None,
    /// Connected, the replay idle between commands (boxed: it is large, and one per
    /// session at most).
    Open(Box<Relay<'s>>),
    /// The server could not be used: what every later recipient for it is answered (it is
    /// not tried again within the transaction, so a dead server costs one attempt, not one
    /// per recipient).
    Failed(Reply),
}

struct Relay<'s> {
    up: Upstream<'s>,
    replay: Replay,
}

/// Serves one SMTP connection; with `tls` on the listener, STARTTLS is offered and the
/// dialogue goes on encrypted after it.
pub async fn serve(worker: Rc<Worker>, client: TcpStream, peer: SocketAddr, listener: usize) {
    let snap = worker.shared.snapshot.load_full();
    let l = &snap.listeners[listener];
    let cfg = FrontConfig {
        hostname: l.mail.hostname.clone(),
        starttls: l.tls.is_some(),
        ..FrontConfig::default()
    };
    let front = Front::new(cfg);
    let mut out = Vec::with_capacity(512);
    front.greeting(&mut out);
    let local = client.local_addr().unwrap_or(peer);
    let ctx = Ctx { worker: &worker, snap: &snap, listener, peer, local };
    session(&ctx, ClientStream::Plain(client), front, out).await;
}

/// The dialogue until it ends or tunnels; after STARTTLS it goes on over TLS with the same
/// front.
async fn session(ctx: &Ctx<'_>, mut client: ClientStream, mut front: Front, mut out: Vec<u8>) {
    let (worker, snap, peer) = (ctx.worker, ctx.snap, ctx.peer);
    let l = &snap.listeners[ctx.listener];
    let mut txn = Txn::default();
    let mut cbuf = worker.bufs.take();
    'session: loop {
        while let Some(event) = front.poll(&mut out) {
            match event {
                Event::Helo { .. } | Event::Reset => end(snap, &mut txn, None).await,
                Event::Mail { from, .. } => {
                    end(snap, &mut txn, from).await;
                    let fields = Fields::new(&front, &txn, None, peer, ctx.local);
                    match judge(ctx, &fields) {
                        Verdict::Deny => front.reject_mail(550, &l.mail.deny_text, &mut out),
                        Verdict::Group(_) => front.accept_mail(&mut out),
                    }
                }
                Event::Rcpt { to } => rcpt(ctx, &mut front, &mut txn, to, &mut out).await,
                Event::Data => {
                    if !flush(snap, &mut client, &mut out).await {
                        break 'session;
                    }
                    match data(worker, snap, &mut txn).await {
                        Err(reply) => {
                            front.data_failed(&reply, &mut out);
                            end(snap, &mut txn, None).await;
                        }
                        Ok((to_client, up)) => {
                            tunnel_to(ctx, &mut client, &mut cbuf, front, &txn, to_client, up).await;
                            break 'session;
                        }
                    }
                }
                Event::StartTls => {
                    if !flush(snap, &mut client, &mut out).await {
                        break 'session;
                    }
                    match client.start_tls(worker, l.tls.clone(), peer).await {
                        Some(tls) => client = tls,
                        None => break 'session,
                    }
                }
                Event::Quit | Event::Close { .. } => {
                    let _ = flush(snap, &mut client, &mut out).await;
                    break 'session;
                }
            }
        }
        if !flush(snap, &mut client, &mut out).await
            || !next_bytes(worker, snap, &mut client, &mut cbuf).await
        {
            break;
        }
        front.feed(cbuf.filled());
    }
    end(snap, &mut txn, None).await;
    worker.bufs.give(cbuf);
}

/// Ends the transaction (a new one starts with `from`): an open server connection is told
/// QUIT and closed.
async fn end(snap: &Snapshot, txn: &mut Txn<'_>, from: Option<Mailbox>) {
    if let Server::Open(mut relay) = std::mem::take(&mut txn.server) {
        let mut quit = Vec::new();
        relay.replay.quit(&mut quit);
        let deadline = Instant::now() + snap.config.timeouts.server_response;
        let _ = write_all_parts(&mut relay.up.stream, &[&quit], deadline).await;
    }
    *txn = Txn { from, ..Txn::default() };
}

/// The server took DATA: its 354 to the client, the client's bytes after DATA to the
/// server, then the tunnel; the session is recorded at its end.
async fn tunnel_to(
    ctx: &Ctx<'_>,
    client: &mut ClientStream,
    cbuf: &mut crate::floor::buf::IoBuf,
    front: Front,
    txn: &Txn<'_>,
    to_client: Vec<u8>,
    mut up: Upstream<'_>,
) {
    let (worker, snap) = (ctx.worker, ctx.snap);
    let started = Instant::now();
    let deadline = started + snap.config.timeouts.client_io;
    let rest = front.tunnel();
    let mut carried = tunnel::Carried::default();
    if write_all_parts(client, &[&to_client], deadline).await.is_ok()
        && write_all_parts(&mut up.stream, &[&rest], deadline).await.is_ok()
    {
        cbuf.clear();
        let mut sbuf = worker.bufs.take();
        let from = Origin { listener: ctx.listener, peer: ctx.peer, kind: "smtp", server: Some(up.server) };
        let idle = snap.config.timeouts.tunnel_idle;
        carried = moving::run(worker, from, client, cbuf, &mut up.stream, &mut sbuf, idle).await;
        worker.bufs.give(sbuf);
    }
    let traffic = Traffic {
        group: txn.group,
        server: Some(up.index),
        bytes_in: rest.len() as u64 + carried.up,
        bytes_out: to_client.len() as u64 + carried.down,
        ..Traffic::default()
    };
    let target = txn.first_rcpt.as_ref().map(|m| format!("{}@{}", m.local(), m.domain())).unwrap_or_default();
    let entry = Entry {
        client: ctx.peer,
        listener: ctx.listener,
        rule: "",
        method: "SMTP",
        target: &target,
        started,
    };
    record::finish(&worker.shared, snap, &entry, &traffic);
}

/// Answers one RCPT: a `deny` gets 550; one routed to another group than the transaction's
/// first gets 451; the others get their server's own reply.
async fn rcpt<'s>(ctx: &Ctx<'s>, front: &mut Front, txn: &mut Txn<'s>, to: Mailbox, out: &mut Vec<u8>) {
    let l = &ctx.snap.listeners[ctx.listener];
    let fields = Fields::new(front, txn, Some(&to), ctx.peer, ctx.local);
    let group = match judge(ctx, &fields) {
        Verdict::Deny => return front.reject_rcpt(550, &l.mail.deny_text, out),
        Verdict::Group(group) if txn.group.is_some_and(|g| g != group) => return front.defer_rcpt(out),
        Verdict::Group(group) => group,
    };
    txn.group = Some(group);
    let (server, reply) = match std::mem::take(&mut txn.server) {
        Server::None => match front.envelope() {
            Some(env) => open(ctx, group, env, &to).await,
            None => (Server::None, Reply::new(503, "5.5.1 Error: need MAIL command")),
        },
        Server::Open(mut relay) => {
            let mut cmd = Vec::new();
            relay.replay.rcpt(&to, &mut cmd);
            let outcome = ask(ctx.worker, ctx.snap, &mut relay, &cmd).await;
            settle(ctx.worker, Some(*relay), outcome)
        }
        Server::Failed(reply) => (Server::Failed(reply.clone()), reply),
    };
    txn.server = server;
    if (200..300).contains(&reply.code) {
        txn.first_rcpt.get_or_insert(to);
        txn.rcpts += 1;
    }
    front.answer_rcpt(&reply, out);
}

/// The first routed recipient: connects to a server of `group` and replays the envelope
/// and this RCPT.
async fn open<'s>(ctx: &Ctx<'s>, group: usize, env: smtp::Envelope, to: &Mailbox) -> (Server<'s>, Reply) {
    let (worker, snap) = (ctx.worker, ctx.snap);
    worker.shared.stats.inc(Counter::Requests);
    let l = &snap.listeners[ctx.listener];
    let client = Some(ClientInfo { addr: ctx.peer, name: None });
    let cfg = smtp::ReplayConfig { xclient: l.mail.xclient, ..smtp::ReplayConfig::default() };
    let mut replay = Replay::new(cfg, env, to.clone(), client);
    // Keyed schedulers hash the first routed recipient's domain.
    let key = to.domain_lowercase().into_bytes();
    let Ok(up) = pick_and_connect(worker, snap, group, None, Some(&key)).await else {
        // pick_and_connect counted the failure (no_server, connect_failed, connect_timeout).
        let gone = replay.server_gone("no server could be reached", &mut Vec::new());
        return settle(worker, None, gone);
    };
    let mut relay = Relay { up, replay };
    let mut sbuf = worker.bufs.take();
    let outcome = converse(worker, snap, &mut relay.up.stream, &mut sbuf, &mut relay.replay).await;
    worker.bufs.give(sbuf);
    settle(worker, Some(relay), outcome)
}

/// Sends `cmd` (written by the replay) and waits for the server's answer.
async fn ask(worker: &Worker, snap: &Snapshot, relay: &mut Relay<'_>, cmd: &[u8]) -> Outcome {
    let deadline = Instant::now() + snap.config.timeouts.server_response;
    if write_all_parts(&mut relay.up.stream, &[cmd], deadline).await.is_err() {
        worker.shared.stats.inc(Counter::ServerAborted);
        return relay.replay.server_gone("could not write to the server", &mut Vec::new());
    }
    let mut sbuf = worker.bufs.take();
    let outcome = converse(worker, snap, &mut relay.up.stream, &mut sbuf, &mut relay.replay).await;
    worker.bufs.give(sbuf);
    outcome
}

/// Where an outcome leaves the transaction, and the client's answer to its RCPT (or DATA).
/// `relay` is the connection, if there is one.
fn settle<'s>(worker: &Worker, relay: Option<Relay<'s>>, outcome: Outcome) -> (Server<'s>, Reply) {
    let (reply, cause) = match (outcome, relay) {
        (Outcome::Rcpt(reply), Some(relay)) => return (Server::Open(Box::new(relay)), reply),
        // The replay wrote QUIT and converse sent it: dropping the relay closes the connection.
        (Outcome::Refused { reply, cause }, _) => (reply, cause),
        // Neither happens: a RCPT is only answered on a connection, and 354 only after DATA.
        (Outcome::Rcpt(_) | Outcome::Tunnel { .. }, _) => {
            let e = mail::ServerError::Malformed("an answer out of turn".to_string());
            (Reply::new(451, "4.3.0 try again later"), Cause::Protocol(e))
        }
    };
    if matches!(cause, Cause::Protocol(_)) {
        worker.shared.stats.inc(Counter::BadResponse);
    }
    tracing::info!(?cause, code = reply.code, "mail server not usable for this transaction");
    (Server::Failed(reply.clone()), reply)
}

/// DATA: sent to the transaction's server. Its 354 and the connection, to tunnel; or the
/// client's answer, the transaction over.
async fn data<'s>(
    worker: &Worker,
    snap: &'s Snapshot,
    txn: &mut Txn<'s>,
) -> Result<(Vec<u8>, Upstream<'s>), Reply> {
    match std::mem::take(&mut txn.server) {
        Server::Open(mut relay) => {
            let mut cmd = Vec::new();
            relay.replay.data(&mut cmd);
            match ask(worker, snap, &mut relay, &cmd).await {
                Outcome::Tunnel { to_client } => Ok((to_client, relay.up)),
                outcome => Err(settle(worker, None, outcome).1),
            }
        }
        // The server accepted recipients and was lost since (451): the client retries.
        Server::Failed(reply) => Err(reply),
        // The front only asks with a recipient the server accepted.
        Server::None => Err(Reply::new(451, "4.3.0 try again later")),
    }
}

enum Verdict {
    Deny,
    Group(usize),
}

fn judge(ctx: &Ctx<'_>, fields: &Fields) -> Verdict {
    let list = fields.list();
    let req = rules::ConnectionRequest { src: fields.src, dst: fields.dst, host: None, fields: &list };
    let decision = decide::route_connection(ctx.worker, ctx.snap, ctx.listener, &req, None);
    decision.map_or(Verdict::Deny, |d| Verdict::Group(d.group))
}

/// The envelope as the rules see it.
struct Fields {
    src: SocketAddr,
    dst: SocketAddr,
    helo: String,
    from: String,
    from_domain: String,
    rcpt: Option<String>,
    rcpt_domain: Option<String>,
    count: String,
}

impl Fields {
    fn new(front: &Front, txn: &Txn, rcpt: Option<&Mailbox>, src: SocketAddr, dst: SocketAddr) -> Self {
        // The first recipient of the transaction, or this one when it is the first.
        let first = txn.first_rcpt.as_ref().or(rcpt);
        Fields {
            src,
            dst,
            helo: front.helo().unwrap_or("").to_string(),
            from: txn.from.as_ref().map_or_else(String::new, |m| format!("{}@{}", m.local(), m.domain())),
            from_domain: txn.from.as_ref().map_or_else(String::new, Mailbox::domain_lowercase),
            rcpt: rcpt.map(|m| format!("{}@{}", m.local(), m.domain())),
            rcpt_domain: rcpt.map(Mailbox::domain_lowercase),
            count: (txn.rcpts + usize::from(rcpt.is_some() && first.is_some())).to_string(),
        }
    }

    fn list(&self) -> Vec<(ProtoField, &[u8])> {
        let mut fields = vec![
            (ProtoField::SmtpHelo, self.helo.as_bytes()),
            (ProtoField::SmtpMailFrom, self.from.as_bytes()),
            (ProtoField::SmtpMailFromDomain, self.from_domain.as_bytes()),
            (ProtoField::SmtpRcptCount, self.count.as_bytes()),
        ];
        if let (Some(r), Some(d)) = (&self.rcpt, &self.rcpt_domain) {
            fields.push((ProtoField::SmtpRcptTo, r.as_bytes()));
            fields.push((ProtoField::SmtpRcptToDomain, d.as_bytes()));
        }
        fields
    }
}
