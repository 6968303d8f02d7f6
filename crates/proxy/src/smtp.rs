//! The SMTP listener (seed 000 §4.4): the switch speaks the start of the dialogue itself
//! (`mail::smtp::Front`: greeting, EHLO, MAIL, RCPT, pipelining), lets the rules judge the
//! sender (`smtp.mail_from…`: a `deny` answers 550) and route each recipient
//! (`smtp.rcpt_to…`), and at DATA connects to the chosen server and replays the envelope
//! (`mail::smtp::Replay`, with XCLIENT when offered). Then it tunnels. A recipient that
//! would go to another server than the transaction's first gets 451 (the client sends it in
//! a separate transaction); recipients the server refused after the switch said 250 are
//! handled by the replay's policy and remembered in the listener's refusal cache.

use crate::dialogue::{converse, flush, next_bytes, Ctx, Dialogue, Ended};
use crate::io::write_all_parts;
use crate::snapshot::{ListenerRt, Snapshot};
use crate::stats::Counter;
use crate::worker::Worker;
use mail::smtp::{self, ClientInfo, Event, Front, FrontConfig, Mailbox, Outcome, RefusalCache, Replay};
use rules::ProtoField;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Mutex;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Recipients servers refused, per process: answered from here on the client's retry.
pub struct Refusals(Mutex<RefusalCache>);

impl Default for Refusals {
    fn default() -> Self {
        // Permanent refusals for an hour; temporary ones not at all (greylisting servers
        // must see the retry themselves).
        Refusals(Mutex::new(RefusalCache::new(10_000, Duration::from_secs(3600), Duration::ZERO)))
    }
}

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
    let acceptor = l.tls.clone();
    let cfg = FrontConfig {
        hostname: l.mail.hostname.clone(),
        starttls: acceptor.is_some(),
        ..FrontConfig::default()
    };
    let front = Front::new(cfg);
    let mut out = Vec::with_capacity(512);
    front.greeting(&mut out);
    let local = client.local_addr().unwrap_or(peer);
    let ctx = Ctx { worker: &worker, snap: &snap, listener, peer, local };
    crate::dialogue::serve::<Smtp>(&ctx, acceptor, client, front, out).await;
}

/// The SMTP dialogue.
struct Smtp;

impl Dialogue for Smtp {
    type Front = Front;
    async fn run<S: AsyncRead + AsyncWrite + Unpin>(
        ctx: &Ctx<'_>,
        client: S,
        front: Front,
        out: Vec<u8>,
    ) -> Ended<S, Front> {
        session(ctx, client, front, out).await
    }
}

/// The dialogue over `client` (plain, or TLS after STARTTLS) until it ends or tunnels.
async fn session<S: AsyncRead + AsyncWrite + Unpin>(
    ctx: &Ctx<'_>,
    mut client: S,
    mut front: Front,
    mut out: Vec<u8>,
) -> Ended<S, Front> {
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
                    match judge(worker, l, &fields) {
                        Verdict::Deny => front.reject_mail(550, &l.mail.deny_text, &mut out),
                        Verdict::Group(_) => front.accept_mail(&mut out),
                    }
                }
                Event::Rcpt { to } => rcpt(worker, l, &mut front, &mut txn, to, peer, local, &mut out),
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
                        Delivery::Tunnel { to_client, mut up } => {
                            let deadline = Instant::now() + snap.config.timeouts.client_io;
                            let rest = front.tunnel();
                            if write_all_parts(&mut client, &[&to_client], deadline).await.is_ok()
                                && write_all_parts(&mut up.stream, &[&rest], deadline).await.is_ok()
                            {
                                cbuf.clear();
                                let mut sbuf = worker.bufs.take();
                                let idle = snap.config.timeouts.tunnel_idle;
                                crate::tunnel::run(&mut client, &mut cbuf, &mut up.stream, &mut sbuf, idle)
                                    .await;
                                worker.bufs.give(sbuf);
                            }
                            if let Some(l) = worker.shared.listeners.get(ctx.listener) {
                                l.record(0, rest.len() as u64, to_client.len() as u64);
                            }
                            worker.bufs.give(cbuf);
                            return Ended::Done;
                        }
                    }
                }
                Event::StartTls => {
                    worker.bufs.give(cbuf);
                    if !flush(snap, &mut client, &mut out).await {
                        return Ended::Done;
                    }
                    return Ended::StartTls(client, Box::new(front));
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
    Ended::Done
}

/// Answers one RCPT: a recipient a server refused before gets that server's answer; a
/// `deny` gets 550; one routed to another group than the transaction's first gets 451.
#[allow(clippy::too_many_arguments)]
fn rcpt(
    worker: &Worker,
    l: &ListenerRt,
    front: &mut Front,
    txn: &mut Txn,
    to: Mailbox,
    peer: SocketAddr,
    local: SocketAddr,
    out: &mut Vec<u8>,
) {
    let known = worker
        .shared
        .smtp_refusals
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .check(&to, std::time::Instant::now());
    if let Some(reply) = known {
        return front.reject_rcpt(reply.code, &reply.text(), out);
    }
    let fields = Fields::new(front, txn, Some(&to), peer, local);
    match judge(worker, l, &fields) {
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

fn judge(worker: &Worker, l: &ListenerRt, fields: &Fields) -> Verdict {
    let list = fields.list();
    let req = rules::ConnectionRequest { src: fields.src, dst: fields.dst, host: None, fields: &list };
    crate::connect::route(worker, l, &req).map_or(Verdict::Deny, Verdict::Group)
}

enum Delivery<'s> {
    Refused(smtp::Reply),
    Tunnel { to_client: Vec<u8>, up: crate::connect::Upstream<'s> },
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
    let up = crate::connect::pick_and_connect(worker, snap, group, None, key.as_deref()).await;
    let Some(mut up) = up else {
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
