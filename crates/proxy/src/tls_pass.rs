//! TLS passthrough (`protocol = "tls"`): read the ClientHello (however it is split), let
//! the rules route on `tls.sni`, `tls.alpn`, `tls.session_id`, `tls.version`, connect, and
//! tunnel the bytes untouched. Session-ID persistence (seed 000 §1): the session ID a
//! server issues in its ServerHello (TLS ≤ 1.2) is remembered, and a client that resumes
//! with it goes back to that server.

use crate::io::{read_some, IoFail};
use crate::snapshot::{ListenerRt, Snapshot};
use crate::stats::Counter;
use crate::worker::Worker;
use config::HashKey;
use rules::ProtoField;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tls::{ClientHello, ClientHelloReader, Progress, ServerHelloReader};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Serves one TLS connection on listener `listener`.
pub async fn serve(worker: Rc<Worker>, mut client: TcpStream, peer: SocketAddr, listener: usize) {
    let started = Instant::now();
    let snap = worker.shared.snapshot.load_full();
    let mut cbuf = worker.bufs.take();
    let Some(hello) = read_client_hello(&worker, &snap, &mut client, &mut cbuf, peer).await else {
        worker.bufs.give(cbuf);
        return;
    };
    worker.shared.stats.inc(Counter::Requests);
    let local = client.local_addr().unwrap_or(peer);
    let fields = HelloFields::new(&hello, peer, local);
    let l = &snap.listeners[listener];
    let Some(group) = route(&worker, l, &fields) else {
        worker.bufs.give(cbuf);
        return;
    };
    let prefer = session_server(&worker, &snap, group, &hello);
    let mut sbuf = worker.bufs.take();
    let mut outcome = Forwarded::default();
    forward(&worker, &snap, group, prefer, &fields, &mut client, &mut cbuf, &mut sbuf, &mut outcome).await;
    if let Some(l) = worker.shared.listeners.get(listener) {
        l.record(0, outcome.bytes_in, outcome.bytes_out);
    }
    if let Some(server) = outcome.server.and_then(|i| snap.group(group).servers.get(i)) {
        server.live.record(0, outcome.bytes_in, outcome.bytes_out, started.elapsed());
    }
    worker.bufs.give(cbuf);
    worker.bufs.give(sbuf);
}

/// Reads until the ClientHello is whole; its bytes stay in `buf`, to be forwarded as they
/// came. `None`: the client left, was too slow, or sent no valid hello (counted, logged).
async fn read_client_hello(
    worker: &Worker,
    snap: &Snapshot,
    client: &mut TcpStream,
    buf: &mut crate::buf::IoBuf,
    peer: SocketAddr,
) -> Option<ClientHello> {
    let mut reader = ClientHelloReader::new(tls::DEFAULT_MAX_BYTES.min(buf.capacity()));
    let deadline = Instant::now() + snap.config.timeouts.client_head;
    loop {
        let before = buf.len();
        match read_some(client, buf, deadline).await {
            Ok(0) | Err(IoFail::Io) => return None,
            Ok(_) => {}
            Err(IoFail::Timeout) => {
                worker.shared.stats.inc(Counter::HeadTimeout);
                tracing::info!(client = %peer, "TLS connection closed: no ClientHello in time");
                return None;
            }
        }
        match reader.push(&buf.filled()[before..]) {
            Progress::NeedMore if buf.is_full() => {
                worker.shared.stats.inc(Counter::TlsMalformed);
                tracing::info!(client = %peer, "TLS connection closed: ClientHello larger than the buffer");
                return None;
            }
            Progress::NeedMore => {}
            Progress::Done(hello) => return Some(hello),
            Progress::Malformed(e) => {
                worker.shared.stats.inc(Counter::TlsMalformed);
                tracing::info!(client = %peer, reason = %e, "TLS connection closed: malformed ClientHello");
                return None;
            }
        }
    }
}

/// The group the rules pick (or the default group); `None` when a rule denies or drops
/// (on a TLS stream there is no way to answer, so the connection is closed).
fn route(worker: &Worker, l: &ListenerRt, fields: &HelloFields) -> Option<usize> {
    let group = fields.with_request(|req| crate::connect::route(worker, l, req));
    if group.is_none() {
        tracing::info!(client = %fields.src, sni = fields.sni_str(), "TLS connection refused by rule");
    }
    group
}

/// The server a resuming client's session lives on, if the switch learnt it and the
/// server is still in `group` and may take sticky traffic.
fn session_server(worker: &Worker, snap: &Snapshot, group: usize, hello: &ClientHello) -> Option<u64> {
    if hello.session_id.is_empty() {
        return None;
    }
    let id = worker.shared.tls_sessions.get(&hello.session_id)?;
    let g = snap.group(group);
    let usable = g.servers.iter().any(|s| s.id == id && s.live.sticky_ok.load(Ordering::Relaxed));
    if usable {
        worker.shared.stats.inc(Counter::PersistenceHits);
    }
    usable.then_some(id)
}

#[derive(Default)]
struct Forwarded {
    server: Option<usize>,
    bytes_in: u64,
    bytes_out: u64,
}

/// Pick and connect (see [`crate::connect`]), send the hello, learn the server's session
/// ID from its ServerHello, then tunnel.
#[allow(clippy::too_many_arguments)]
async fn forward(
    worker: &Worker,
    snap: &Snapshot,
    group: usize,
    prefer: Option<u64>,
    fields: &HelloFields,
    client: &mut TcpStream,
    cbuf: &mut crate::buf::IoBuf,
    sbuf: &mut crate::buf::IoBuf,
    out: &mut Forwarded,
) {
    let g = snap.group(group);
    let mut key = Vec::new();
    let has_key = g.scheduler.uses_key() && hash_key(&g.hash_key, fields, &mut key);
    let key = has_key.then_some(key.as_slice());
    let Some(mut up) = crate::connect::pick_and_connect(worker, snap, group, prefer, key).await else {
        return;
    };
    out.server = Some(up.index);
    out.bytes_in = cbuf.len() as u64;
    if up.stream.write_all(cbuf.filled()).await.is_err() {
        return;
    }
    cbuf.clear();
    learn_session(worker, snap, &mut up.stream, sbuf, up.server.id).await;
    out.bytes_out = sbuf.len() as u64;
    crate::tunnel::run(client, cbuf, &mut up.stream, sbuf, snap.config.timeouts.tunnel_idle).await;
}

/// Reads the server's first bytes until its ServerHello is whole (they stay in `sbuf`, to
/// be forwarded) and remembers the session ID it issued, when it is one a client can
/// resume with (TLS ≤ 1.2). Anything else is left to the tunnel as it is.
async fn learn_session(
    worker: &Worker,
    snap: &Snapshot,
    upstream: &mut TcpStream,
    sbuf: &mut crate::buf::IoBuf,
    server: u64,
) {
    let mut reader = ServerHelloReader::new(tls::DEFAULT_MAX_BYTES.min(sbuf.capacity()));
    let deadline = Instant::now() + snap.config.timeouts.server_response;
    loop {
        let before = sbuf.len();
        match read_some(upstream, sbuf, deadline).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        match reader.push(&sbuf.filled()[before..]) {
            Progress::NeedMore if !sbuf.is_full() => {}
            Progress::Done(hello) if hello.resumption_via_session_id() => {
                worker.shared.tls_sessions.put(hello.session_id.into_boxed_slice(), server);
                return;
            }
            _ => return,
        }
    }
}

/// The scheduler key of a TLS connection: the client address for `srcip`, else the SNI
/// (a hello has no URL, path or headers).
fn hash_key(key: &HashKey, fields: &HelloFields, out: &mut Vec<u8>) -> bool {
    out.clear();
    match key {
        HashKey::SrcIp => match fields.src.ip() {
            IpAddr::V4(v4) => out.extend_from_slice(&v4.octets()),
            IpAddr::V6(v6) => out.extend_from_slice(&v6.octets()),
        },
        _ => match &fields.sni {
            Some(sni) => out.extend_from_slice(sni.as_bytes()),
            None => return false,
        },
    }
    true
}

/// What the rules and the scheduler read from a ClientHello.
struct HelloFields {
    src: SocketAddr,
    dst: SocketAddr,
    sni: Option<String>,
    alpn: String,
    session_id: String,
    version: String,
}

impl HelloFields {
    fn new(hello: &ClientHello, src: SocketAddr, dst: SocketAddr) -> Self {
        HelloFields {
            src,
            dst,
            sni: hello.sni.clone(),
            alpn: hello.alpn_joined(),
            session_id: hello.session_id_hex(),
            version: hello.version.to_string(),
        }
    }

    fn sni_str(&self) -> &str {
        self.sni.as_deref().unwrap_or("-")
    }

    /// The rules' view: `tls.*` fields, the addresses, and `host` = the SNI.
    fn with_request<T>(&self, f: impl FnOnce(&rules::ConnectionRequest<'_>) -> T) -> T {
        let sni = self.sni.as_deref().map(str::as_bytes);
        let mut fields: Vec<(ProtoField, &[u8])> = vec![
            (ProtoField::TlsAlpn, self.alpn.as_bytes()),
            (ProtoField::TlsSessionId, self.session_id.as_bytes()),
            (ProtoField::TlsVersion, self.version.as_bytes()),
        ];
        if let Some(sni) = sni {
            fields.push((ProtoField::TlsSni, sni));
        }
        f(&rules::ConnectionRequest { src: self.src, dst: self.dst, host: sni, fields: &fields })
    }
}

/// Most session IDs remembered (least recently used go first).
pub const TLS_SESSIONS_CAPACITY: usize = 100_000;

/// Session IDs learnt from ServerHellos → server id, with an idle lifetime
/// (`timeouts.tls_session`); a new lifetime on reload starts a new table.
pub struct TlsSessions {
    table: arc_swap::ArcSwap<(Duration, balance::persist::StickTable<Box<[u8]>>)>,
}

impl TlsSessions {
    /// An empty table whose entries live `lifetime` after their last use.
    pub fn new(lifetime: Duration) -> Self {
        TlsSessions { table: arc_swap::ArcSwap::from_pointee((lifetime, Self::table(lifetime))) }
    }

    fn table(lifetime: Duration) -> balance::persist::StickTable<Box<[u8]>> {
        balance::persist::StickTable::new(TLS_SESSIONS_CAPACITY, lifetime, None)
    }

    /// The server that issued `session_id`, if known and not expired.
    pub fn get(&self, session_id: &[u8]) -> Option<u64> {
        self.table.load().1.get(session_id, std::time::Instant::now())
    }

    /// Remembers that `server` issued `session_id`.
    pub fn put(&self, session_id: Box<[u8]>, server: u64) {
        self.table.load().1.put(session_id, server, std::time::Instant::now());
    }

    /// After a reload: a new lifetime empties the table; entries of servers that are gone
    /// are dropped.
    pub fn reconfigure(&self, lifetime: Duration, keep: impl Fn(u64) -> bool) {
        if self.table.load().0 != lifetime {
            self.table.store(std::sync::Arc::new((lifetime, Self::table(lifetime))));
        }
        self.table.load().1.retain_servers(keep);
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.table.load().1.len()
    }
}
