//! POP3 and IMAP listeners (seed 000 §4.4): the switch greets, answers the pre-login
//! commands and takes the login itself (`mail::login::Front`, either protocol), routes on
//! the user (`pop.user`, `imap.user` and their domains), connects, replays the login to the
//! server (`mail::login::Replay`) and passes its answer on: a refused login is refused to
//! the client, which may try again; an accepted one becomes a byte tunnel. After STLS /
//! STARTTLS the same dialogue goes on over TLS.

use crate::floor::buf::IoBuf;
use crate::floor::io::write_all_parts;
use crate::floor::stats::Counter;
use crate::floor::stream::ClientStream;
use crate::mail::dialogue::{converse, flush, next_bytes, Ctx};
use crate::observe::record::{self, Entry, Outcome as Traffic};
use crate::upstream::connect::{pick_and_connect, Upstream};
use crate::upstream::decide;
use crate::upstream::pick::push_ip;
use crate::upstream::tunnel::{
    self,
    moving::{self, Origin},
};
use config::{HashKey, Protocol};
use mail::login::{self, Event, Front, Outcome, Replay};
use rules::ProtoField;
use std::net::SocketAddr;
use std::rc::Rc;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Serves one POP3 or IMAP connection on listener `listener`.
pub async fn serve(
    worker: Rc<crate::floor::worker::Worker>,
    client: TcpStream,
    peer: SocketAddr,
    listener: usize,
) {
    let snap = worker.shared.snapshot.load_full();
    let l = &snap.listeners[listener];
    let protocol = if l.protocol == Protocol::Imap { login::Protocol::Imap } else { login::Protocol::Pop3 };
    let front = Front::new(protocol, l.mail.hostname.clone(), l.tls.is_some());
    let mut out = Vec::with_capacity(512);
    front.greeting(&mut out);
    let local = client.local_addr().unwrap_or(peer);
    let ctx = Ctx { worker: &worker, snap: &snap, listener, peer, local };
    let mut cbuf = worker.bufs.take();
    session(&ctx, ClientStream::Plain(client), front, out, &mut cbuf).await;
    worker.bufs.give(cbuf);
}

/// The dialogue until it ends or tunnels.
async fn session(
    ctx: &Ctx<'_>,
    mut client: ClientStream,
    mut front: Front,
    mut out: Vec<u8>,
    cbuf: &mut IoBuf,
) {
    let (worker, snap) = (ctx.worker, ctx.snap);
    loop {
        while let Some(event) = front.poll(&mut out) {
            if !flush(snap, &mut client, &mut out).await {
                return;
            }
            match event {
                Event::Quit | Event::Close { .. } => return,
                Event::StartTls => {
                    let acceptor = snap.listeners[ctx.listener].tls.clone();
                    match client.start_tls(worker, acceptor, ctx.peer).await {
                        Some(tls) => client = tls,
                        None => return,
                    }
                }
                Event::Login { user, replay } => {
                    worker.shared.stats.inc(Counter::Requests);
                    let fields =
                        LoginFields::new(&snap.listeners[ctx.listener].protocol, &user, ctx.peer, ctx.local);
                    match log_in(ctx, &fields, replay).await {
                        LoginEnd::Denied => front.deny_login("login refused by policy", &mut out),
                        LoginEnd::Refused(to_client) => front.login_failed(&to_client, &mut out),
                        LoginEnd::LoggedIn { to_client, group, up } => {
                            let session = Session { group, user: &fields.user, to_client };
                            return tunnel_to(ctx, client, cbuf, front, session, up).await;
                        }
                    }
                }
            }
        }
        if !flush(snap, &mut client, &mut out).await || !next_bytes(worker, snap, &mut client, cbuf).await {
            return;
        }
        front.feed(cbuf.filled());
    }
}

/// How a login ended.
enum LoginEnd<'s> {
    /// A rule refused it.
    Denied,
    /// No server took it: the server's words (or the protocol's "try again later").
    Refused(Vec<u8>),
    /// The server took it.
    LoggedIn { to_client: Vec<u8>, group: usize, up: Upstream<'s> },
}

/// Routes the login, connects, and replays it; a server that cannot be reached, or that
/// answers nothing in time, gives the replay's own "unavailable" answer.
async fn log_in<'s>(ctx: &Ctx<'s>, fields: &LoginFields, mut replay: Replay) -> LoginEnd<'s> {
    let (worker, snap) = (ctx.worker, ctx.snap);
    let decision = fields.with_request(|req| decide::route_connection(worker, snap, ctx.listener, req, None));
    let Some(d) = decision else {
        tracing::info!(user = %fields.user, "login refused by rule");
        return LoginEnd::Denied;
    };
    let g = snap.group(d.group);
    let mut key = Vec::new();
    let has_key = g.scheduler.uses_key() && hash_key(&g.hash_key, fields, &mut key);
    let prefer = d.server.map(|(id, _)| id);
    let Ok(mut up) = pick_and_connect(worker, snap, d.group, prefer, has_key.then_some(key.as_slice())).await
    else {
        let gone = replay.server_gone("no server could be reached", &mut Vec::new());
        return LoginEnd::Refused(to_client(gone));
    };
    let mut sbuf = worker.bufs.take();
    let outcome = converse(worker, snap, &mut up.stream, &mut sbuf, &mut replay).await;
    worker.bufs.give(sbuf);
    match outcome {
        Outcome::LoggedIn { to_client } => LoginEnd::LoggedIn { to_client, group: d.group, up },
        Outcome::Refused { to_client, cause } => {
            tracing::info!(user = %fields.user, server = %up.server.name, ?cause, "login not accepted");
            LoginEnd::Refused(to_client)
        }
    }
}

fn to_client(outcome: Outcome) -> Vec<u8> {
    match outcome {
        Outcome::LoggedIn { to_client } | Outcome::Refused { to_client, .. } => to_client,
    }
}

/// A logged-in session, for the tunnel and its record.
struct Session<'a> {
    group: usize,
    user: &'a str,
    to_client: Vec<u8>,
}

/// After the server took the login: its answer to the client, the client's bytes after the
/// login to the server, then the tunnel; the session is recorded at its end.
async fn tunnel_to(
    ctx: &Ctx<'_>,
    mut client: ClientStream,
    cbuf: &mut IoBuf,
    front: Front,
    session: Session<'_>,
    mut up: Upstream<'_>,
) {
    let (worker, snap) = (ctx.worker, ctx.snap);
    let started = Instant::now();
    let deadline = started + snap.config.timeouts.client_io;
    let after_login = front.tunnel();
    let mut carried = tunnel::Carried::default();
    if write_all_parts(&mut client, &[&session.to_client], deadline).await.is_ok()
        && write_all_parts(&mut up.stream, &[&after_login], deadline).await.is_ok()
    {
        cbuf.clear();
        let mut sbuf = worker.bufs.take();
        let kind = if snap.listeners[ctx.listener].protocol == Protocol::Imap { "imap" } else { "pop3" };
        let from = Origin { listener: ctx.listener, peer: ctx.peer, kind, server: Some(up.server) };
        let idle = snap.config.timeouts.tunnel_idle;
        carried = moving::run(worker, from, &mut client, cbuf, &mut up.stream, &mut sbuf, idle).await;
        worker.bufs.give(sbuf);
    }
    let traffic = Traffic {
        group: Some(session.group),
        server: Some(up.index),
        bytes_in: after_login.len() as u64 + carried.up,
        bytes_out: session.to_client.len() as u64 + carried.down,
        ..Traffic::default()
    };
    let method = if snap.listeners[ctx.listener].protocol == Protocol::Imap { "IMAP" } else { "POP3" };
    let entry =
        Entry { client: ctx.peer, listener: ctx.listener, rule: "", method, target: session.user, started };
    record::finish(&worker.shared, snap, &entry, &traffic);
}

/// The scheduler key of a login: the client address for `srcip`, else the user.
fn hash_key(key: &HashKey, fields: &LoginFields, out: &mut Vec<u8>) -> bool {
    out.clear();
    match key {
        HashKey::SrcIp => push_ip(fields.src.ip(), out),
        _ => out.extend_from_slice(fields.user.as_bytes()),
    }
    true
}

/// What the rules and the scheduler read from a login.
struct LoginFields {
    imap: bool,
    src: SocketAddr,
    dst: SocketAddr,
    user: String,
    domain: String,
}

impl LoginFields {
    fn new(protocol: &Protocol, user: &str, src: SocketAddr, dst: SocketAddr) -> Self {
        let imap = *protocol == Protocol::Imap;
        LoginFields { imap, src, dst, user: user.to_string(), domain: mail::domain_of(user) }
    }

    /// The rules' view: the protocol's user fields and the addresses.
    fn with_request<T>(&self, f: impl FnOnce(&rules::ConnectionRequest<'_>) -> T) -> T {
        let (user, domain) = if self.imap {
            (ProtoField::ImapUser, ProtoField::ImapUserDomain)
        } else {
            (ProtoField::PopUser, ProtoField::PopUserDomain)
        };
        let fields = [(user, self.user.as_bytes()), (domain, self.domain.as_bytes())];
        f(&rules::ConnectionRequest { src: self.src, dst: self.dst, host: None, fields: &fields })
    }
}
