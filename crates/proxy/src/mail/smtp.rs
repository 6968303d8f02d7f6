//! The SMTP listener (seed 000 §4.4): the switch speaks the start of the dialogue itself
//! (`mail::smtp::Front`: greeting, EHLO, MAIL, RCPT, pipelining), lets the rules judge the
//! sender (`smtp.mail_from…`: a `deny` answers 550) and route each recipient
//! (`smtp.rcpt_to…`), and at DATA connects to the chosen server and replays the envelope
//! (`mail::smtp::Replay`, with XCLIENT when offered). Then it tunnels. A recipient that
//! would go to another server than the transaction's first gets 451 (the client sends it in
//! a separate transaction); recipients the server refused after the switch said 250 are
//! handled by the replay's policy and remembered in the listener's refusal cache.

use crate::floor::io::write_all_parts;
use crate::floor::snapshot::{ListenerRt, Snapshot};
use crate::floor::stats::Counter;
use crate::floor::stream::ClientStream;
use crate::floor::worker::Worker;
use crate::mail::dialogue::{converse, flush, next_bytes, Ctx};
use crate::observe::record::{self, Entry, Outcome as Traffic};
use crate::upstream::connect::{pick_and_connect, Upstream};
use crate::upstream::decide;
use crate::upstream::tunnel;
use mail::smtp::{self, ClientInfo, Event, Front, FrontConfig, Mailbox, Outcome, Replay};
use rules::ProtoField;
use std::net::SocketAddr;
use std::rc::Rc;
use tokio::net::TcpStream;

/// The transaction being collected: its sender and the group its first recipient chose.
#[derive(Default)]
struct Txn {
    from: Option<Mailbox>,
    group: Option<usize>,
    first_rcpt: Option<Mailbox>,
    rcpts: usize,
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
    let (worker, snap, peer, local) = (ctx.worker, ctx.snap, ctx.peer, ctx.local);
    let l = &snap.listeners[ctx.listener];
    let mut txn = Txn::default();
    let mut cbuf = worker.bufs.take();
    'session: loop {
        while let Some(event) = front.poll(&mut out) {
            match event {
                Event::Helo { .. } | Event::Reset => txn = Txn::default(),
                Event::Mail { from, .. } => {
                    txn = Txn { from, ..Txn::default() };
                    let fields = Fields::new(&front, &txn, None, peer, local);
                    match judge(ctx, &fields) {
                        Verdict::Deny => front.reject_mail(550, &l.mail.deny_text, &mut out),
                        Verdict::Group(_) => front.accept_mail(&mut out),
                    }
                }
                Event::Rcpt { to } => rcpt(ctx, &mut front, &mut txn, to, &mut out),
                Event::Data => {
                    if !flush(snap, &mut client, &mut out).await {
                        break 'session;
                    }
                    let group = txn.group.unwrap_or(l.default_group);
                    match deliver(worker, snap, l, group, &front, &txn, peer).await {
                        Delivery::Refused(reply) => {
                            front.data_failed(&reply, &mut out);
                            txn = Txn::default();
                        }
                        Delivery::Tunnel { to_client, up } => {
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
                        None => {
                            worker.bufs.give(cbuf);
                            return;
                        }
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
    worker.bufs.give(cbuf);
}

/// The server took the envelope: its answer to the client, the client's bytes after DATA to
/// the server, then the tunnel; the session is recorded at its end.
async fn tunnel_to(
    ctx: &Ctx<'_>,
    client: &mut ClientStream,
    cbuf: &mut crate::floor::buf::IoBuf,
    front: Front,
    txn: &Txn,
    to_client: Vec<u8>,
    mut up: Upstream<'_>,
) {
    let (worker, snap) = (ctx.worker, ctx.snap);
    let started = tokio::time::Instant::now();
    let deadline = started + snap.config.timeouts.client_io;
    let rest = front.tunnel();
    if write_all_parts(client, &[&to_client], deadline).await.is_ok()
        && write_all_parts(&mut up.stream, &[&rest], deadline).await.is_ok()
    {
        cbuf.clear();
        let mut sbuf = worker.bufs.take();
        tunnel::run(client, cbuf, &mut up.stream, &mut sbuf, snap.config.timeouts.tunnel_idle).await;
        worker.bufs.give(sbuf);
    }
    let traffic = Traffic {
        group: txn.group,
        server: Some(up.index),
        bytes_in: rest.len() as u64,
        bytes_out: to_client.len() as u64,
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

/// Answers one RCPT: a recipient a server refused before gets that server's answer; a
/// `deny` gets 550; one routed to another group than the transaction's first gets 451.
fn rcpt(ctx: &Ctx<'_>, front: &mut Front, txn: &mut Txn, to: Mailbox, out: &mut Vec<u8>) {
    let l = &ctx.snap.listeners[ctx.listener];
    let known = ctx
        .worker
        .shared
        .smtp_refusals
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .check(&to, std::time::Instant::now());
    if let Some(reply) = known {
        return front.reject_rcpt(reply.code, &reply.text(), out);
    }
    let fields = Fields::new(front, txn, Some(&to), ctx.peer, ctx.local);
    match judge(ctx, &fields) {
        Verdict::Deny => front.reject_rcpt(550, &l.mail.deny_text, out),
        Verdict::Group(group) if txn.group.is_some_and(|g| g != group) => front.defer_rcpt(out),
        Verdict::Group(group) => {
            txn.group = Some(group);
            txn.first_rcpt.get_or_insert(to);
            txn.rcpts += 1;
            front.accept_rcpt(out);
        }
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

enum Delivery<'s> {
    Refused(smtp::Reply),
    Tunnel { to_client: Vec<u8>, up: Upstream<'s> },
}

/// Connects to a server of `group` and replays the envelope up to DATA.
async fn deliver<'s>(
    worker: &Worker,
    snap: &'s Snapshot,
    l: &ListenerRt,
    group: usize,
    front: &Front,
    txn: &Txn,
    peer: SocketAddr,
) -> Delivery<'s> {
    worker.shared.stats.inc(Counter::Requests);
    let mut ignored = Vec::new();
    let Some(envelope) = front.envelope() else {
        return Delivery::Refused(smtp::Reply::new(503, "5.5.1 no valid recipients"));
    };
    let client = Some(ClientInfo { addr: peer, name: None });
    let cfg = smtp::ReplayConfig { xclient: l.mail.xclient, ..smtp::ReplayConfig::default() };
    let mut replay = Replay::new(cfg, envelope, client);
    let key = txn.first_rcpt.as_ref().map(|r| r.domain_lowercase().into_bytes());
    let up = pick_and_connect(worker, snap, group, None, key.as_deref()).await;
    let Ok(mut up) = up else {
        return refused(worker, replay.server_gone("no server could be reached", &mut ignored));
    };
    let mut sbuf = worker.bufs.take();
    let outcome = converse(snap, &mut up.stream, &mut sbuf, &mut replay).await;
    worker.bufs.give(sbuf);
    match outcome {
        Outcome::Tunnel { to_client } => Delivery::Tunnel { to_client, up },
        // The replay has already told the server QUIT.
        other => refused(worker, other),
    }
}

fn refused<'s>(worker: &Worker, outcome: Outcome) -> Delivery<'s> {
    match outcome {
        Outcome::Refused { reply, refused, cause } => {
            tracing::info!(?cause, code = reply.code, "mail not handed to the server");
            if !refused.is_empty() {
                let mut cache = worker.shared.smtp_refusals.0.lock().unwrap_or_else(|e| e.into_inner());
                cache.remember(&refused, std::time::Instant::now());
            }
            Delivery::Refused(reply)
        }
        Outcome::Tunnel { .. } => Delivery::Refused(smtp::Reply::new(451, "4.3.0 try again later")),
    }
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
