//! POP3 and IMAP listeners (seed 000 §4.4): the switch greets, answers the pre-login
//! commands and takes the login itself (`crates/mail`'s fronts), routes on the user
//! (`pop.user`, `imap.user` and their domains), connects, replays the login to the server
//! (`crates/mail`'s replays) and passes its answer on: a refused login is refused to the
//! client, which may try again; an accepted one becomes a byte tunnel.

use crate::dialogue::{converse, flush, next_bytes, Ctx, Dialogue, Ended as SessionEnd};
use crate::io::write_all_parts;
use crate::snapshot::{ListenerRt, Snapshot};
use crate::stats::Counter;
use crate::worker::Worker;
use config::{HashKey, Protocol};
use mail::{imap, pop3};
use rules::ProtoField;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// A protocol's client side until the login.
enum Front {
    Pop3(pop3::Front),
    Imap(Box<imap::Front>),
}

/// A login to route and replay.
struct Login {
    user: String,
    replay: Replay,
}

enum Replay {
    Pop3(pop3::Replay),
    Imap(Box<imap::Replay>),
}

enum Step {
    Login(Login),
    StartTls,
    Close,
}

/// How a replay ended: the server's words for the client, and whether it logged in.
struct Ended {
    to_client: Vec<u8>,
    logged_in: bool,
    cause: String,
}

impl Front {
    /// A front for `protocol` greeting as `hostname`; `tls` offers STARTTLS / STLS.
    fn new(protocol: Protocol, hostname: String, tls: bool) -> Front {
        match protocol {
            Protocol::Imap => Front::Imap(Box::new(imap::Front::new(imap::FrontConfig {
                hostname,
                starttls: tls,
                ..imap::FrontConfig::default()
            }))),
            _ => Front::Pop3(pop3::Front::new(pop3::FrontConfig {
                hostname,
                stls: tls,
                ..pop3::FrontConfig::default()
            })),
        }
    }

    fn greeting(&self, out: &mut Vec<u8>) {
        match self {
            Front::Pop3(f) => f.greeting(out),
            Front::Imap(f) => f.greeting(out),
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        match self {
            Front::Pop3(f) => f.feed(bytes),
            Front::Imap(f) => f.feed(bytes),
        }
    }

    /// The next thing to act on; `None` when more client bytes are needed.
    fn poll(&mut self, out: &mut Vec<u8>) -> Option<Step> {
        match self {
            Front::Pop3(f) => match f.poll(out)? {
                pop3::Event::Login { user, pass } => {
                    let replay = Replay::Pop3(pop3::Replay::new(pop3::ReplayConfig::default(), &user, &pass));
                    Some(Step::Login(Login { user, replay }))
                }
                pop3::Event::StartTls => Some(Step::StartTls),
                pop3::Event::Quit | pop3::Event::Close { .. } => Some(Step::Close),
            },
            Front::Imap(f) => match f.poll(out)? {
                imap::Event::Login { tag, creds } => {
                    let replay = imap::Replay::new(imap::ReplayConfig::default(), &tag, &creds);
                    Some(Step::Login(Login {
                        user: creds.user.clone(),
                        replay: Replay::Imap(Box::new(replay)),
                    }))
                }
                imap::Event::StartTls => Some(Step::StartTls),
                imap::Event::Quit | imap::Event::Close { .. } => Some(Step::Close),
            },
        }
    }

    fn login_failed(&mut self, to_client: &[u8], out: &mut Vec<u8>) {
        match self {
            Front::Pop3(f) => f.login_failed(to_client, out),
            Front::Imap(f) => f.login_failed(to_client, out),
        }
    }

    fn deny_login(&mut self, text: &str, out: &mut Vec<u8>) {
        match self {
            Front::Pop3(f) => f.deny_login(text, out),
            Front::Imap(f) => f.deny_login(text, out),
        }
    }

    /// The client bytes that followed the login, for the server.
    fn tunnel(self) -> Vec<u8> {
        match self {
            Front::Pop3(f) => f.tunnel(),
            Front::Imap(f) => f.tunnel(),
        }
    }
}

impl Replay {
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Option<Ended> {
        match self {
            Replay::Pop3(r) => r.feed(bytes, out).map(pop3_ended),
            Replay::Imap(r) => r.feed(bytes, out).map(imap_ended),
        }
    }
}

impl crate::dialogue::Replay for Replay {
    type Outcome = Ended;
    fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Option<Ended> {
        Replay::feed(self, bytes, out)
    }
    /// No server, or it closed or went silent: the protocol's "try again later".
    fn server_gone(&mut self, why: &str, out: &mut Vec<u8>) -> Ended {
        match self {
            Replay::Pop3(r) => pop3_ended(r.server_gone(why, out)),
            Replay::Imap(r) => imap_ended(r.server_gone(why, out)),
        }
    }
}

fn pop3_ended(o: pop3::Outcome) -> Ended {
    match o {
        pop3::Outcome::LoggedIn { to_client } => Ended { to_client, logged_in: true, cause: String::new() },
        pop3::Outcome::Refused { to_client, cause } => {
            Ended { to_client, logged_in: false, cause: format!("{cause:?}") }
        }
    }
}

fn imap_ended(o: imap::Outcome) -> Ended {
    match o {
        imap::Outcome::LoggedIn { to_client } => Ended { to_client, logged_in: true, cause: String::new() },
        imap::Outcome::Refused { to_client, cause } => {
            Ended { to_client, logged_in: false, cause: format!("{cause:?}") }
        }
    }
}

/// Serves one POP3 or IMAP connection; with `tls` on the listener, STLS / STARTTLS is
/// offered and the dialogue goes on encrypted after it.
pub async fn serve(worker: Rc<Worker>, client: TcpStream, peer: SocketAddr, listener: usize) {
    let snap = worker.shared.snapshot.load_full();
    let l = &snap.listeners[listener];
    let acceptor = l.tls.clone();
    let front = Front::new(l.protocol, l.mail.hostname.clone(), acceptor.is_some());
    let mut out = Vec::with_capacity(512);
    front.greeting(&mut out);
    let local = client.local_addr().unwrap_or(peer);
    let ctx = Ctx { worker: &worker, snap: &snap, listener, peer, local };
    crate::dialogue::serve::<LoginDialogue>(&ctx, acceptor, client, front, out).await;
}

/// The POP3 / IMAP dialogue.
struct LoginDialogue;

impl Dialogue for LoginDialogue {
    type Front = Front;
    async fn run<S: AsyncRead + AsyncWrite + Unpin>(
        ctx: &Ctx<'_>,
        client: S,
        front: Front,
        out: Vec<u8>,
    ) -> SessionEnd<S, Front> {
        session(ctx, client, front, out).await
    }
}

/// The dialogue over `client` (plain, or TLS after STARTTLS) until it ends or tunnels.
async fn session<S: AsyncRead + AsyncWrite + Unpin>(
    ctx: &Ctx<'_>,
    mut client: S,
    mut front: Front,
    mut out: Vec<u8>,
) -> SessionEnd<S, Front> {
    let (worker, snap, peer, local) = (ctx.worker, ctx.snap, ctx.peer, ctx.local);
    let l = &snap.listeners[ctx.listener];
    let mut cbuf = worker.bufs.take();
    loop {
        while let Some(step) = front.poll(&mut out) {
            match step {
                Step::Close => {
                    let _ = flush(snap, &mut client, &mut out).await;
                    worker.bufs.give(cbuf);
                    return SessionEnd::Done;
                }
                Step::StartTls => {
                    worker.bufs.give(cbuf);
                    if !flush(snap, &mut client, &mut out).await {
                        return SessionEnd::Done;
                    }
                    return SessionEnd::StartTls(client, Box::new(front));
                }
                Step::Login(login) => {
                    if !flush(snap, &mut client, &mut out).await {
                        worker.bufs.give(cbuf);
                        return SessionEnd::Done;
                    }
                    let fields = LoginFields::new(l.protocol, &login.user, peer, local);
                    worker.shared.stats.inc(Counter::Requests);
                    match decide(worker, l, &fields) {
                        None => front.deny_login("login refused by policy", &mut out),
                        Some(group) => match replay_login(worker, snap, group, &fields, login.replay).await {
                            Session::Refused(to_client) => front.login_failed(&to_client, &mut out),
                            Session::LoggedIn { to_client, mut up } => {
                                finish(
                                    worker,
                                    snap,
                                    ctx.listener,
                                    group,
                                    client,
                                    cbuf,
                                    front,
                                    to_client,
                                    &mut up,
                                )
                                .await;
                                return SessionEnd::Done;
                            }
                        },
                    }
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
    SessionEnd::Done
}

/// After the server took the login: its answer to the client, the client's bytes after the
/// login to the server, then the tunnel.
#[allow(clippy::too_many_arguments)]
async fn finish<S: AsyncRead + AsyncWrite + Unpin>(
    worker: &Worker,
    snap: &Snapshot,
    listener: usize,
    group: usize,
    mut client: S,
    mut cbuf: crate::buf::IoBuf,
    front: Front,
    to_client: Vec<u8>,
    up: &mut crate::connect::Upstream<'_>,
) {
    let started = Instant::now();
    let deadline = Instant::now() + snap.config.timeouts.client_io;
    let after_login = front.tunnel();
    if write_all_parts(&mut client, &[&to_client], deadline).await.is_err()
        || write_all_parts(&mut up.stream, &[&after_login], deadline).await.is_err()
    {
        worker.bufs.give(cbuf);
        return;
    }
    cbuf.clear();
    let mut sbuf = worker.bufs.take();
    crate::tunnel::run(&mut client, &mut cbuf, &mut up.stream, &mut sbuf, snap.config.timeouts.tunnel_idle)
        .await;
    if let Some(l) = worker.shared.listeners.get(listener) {
        l.record(0, after_login.len() as u64, to_client.len() as u64);
    }
    if let Some(server) = snap.group(group).servers.get(up.index) {
        server.live.record(0, after_login.len() as u64, to_client.len() as u64, started.elapsed());
    }
    worker.bufs.give(cbuf);
    worker.bufs.give(sbuf);
}

enum Session<'s> {
    Refused(Vec<u8>),
    LoggedIn { to_client: Vec<u8>, up: crate::connect::Upstream<'s> },
}

/// Connects to a server of `group` and replays the login; a server that cannot be
/// reached, or that answers nothing in time, gives the replay's own "unavailable" answer.
async fn replay_login<'s>(
    worker: &Worker,
    snap: &'s Snapshot,
    group: usize,
    fields: &LoginFields,
    mut replay: Replay,
) -> Session<'s> {
    let g = snap.group(group);
    let mut key = Vec::new();
    let has_key = g.scheduler.uses_key() && hash_key(&g.hash_key, fields, &mut key);
    let up =
        crate::connect::pick_and_connect(worker, snap, group, None, has_key.then_some(key.as_slice())).await;
    let Some(mut up) = up else {
        let gone =
            crate::dialogue::Replay::server_gone(&mut replay, "no server could be reached", &mut Vec::new());
        return Session::Refused(gone.to_client);
    };
    let mut sbuf = worker.bufs.take();
    let ended = converse(snap, &mut up.stream, &mut sbuf, &mut replay).await;
    worker.bufs.give(sbuf);
    if ended.logged_in {
        return Session::LoggedIn { to_client: ended.to_client, up };
    }
    tracing::info!(user = %fields.user, server = %up.server.name, cause = %ended.cause, "login not accepted");
    Session::Refused(ended.to_client)
}

/// The group for this login; `None` when a rule refuses it.
fn decide(worker: &Worker, l: &ListenerRt, fields: &LoginFields) -> Option<usize> {
    let group = fields.with_request(|req| crate::connect::route(worker, l, req));
    if group.is_none() {
        tracing::info!(user = %fields.user, "login refused by rule");
    }
    group
}

/// The scheduler key of a login: the client address for `srcip`, else the user.
fn hash_key(key: &HashKey, fields: &LoginFields, out: &mut Vec<u8>) -> bool {
    out.clear();
    match key {
        HashKey::SrcIp => match fields.src.ip() {
            IpAddr::V4(v4) => out.extend_from_slice(&v4.octets()),
            IpAddr::V6(v6) => out.extend_from_slice(&v6.octets()),
        },
        _ => out.extend_from_slice(fields.user.as_bytes()),
    }
    true
}

/// What the rules and the scheduler read from a login.
struct LoginFields {
    protocol: Protocol,
    src: SocketAddr,
    dst: SocketAddr,
    user: String,
    domain: String,
}

impl LoginFields {
    fn new(protocol: Protocol, user: &str, src: SocketAddr, dst: SocketAddr) -> Self {
        LoginFields { protocol, src, dst, user: user.to_string(), domain: mail::domain_of(user) }
    }

    /// The rules' view: the protocol's user fields and the addresses.
    fn with_request<T>(&self, f: impl FnOnce(&rules::ConnectionRequest<'_>) -> T) -> T {
        let (user, domain) = match self.protocol {
            Protocol::Imap => (ProtoField::ImapUser, ProtoField::ImapUserDomain),
            _ => (ProtoField::PopUser, ProtoField::PopUserDomain),
        };
        let fields = [(user, self.user.as_bytes()), (domain, self.domain.as_bytes())];
        f(&rules::ConnectionRequest { src: self.src, dst: self.dst, host: None, fields: &fields })
    }
}
