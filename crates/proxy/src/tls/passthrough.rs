//! TLS passthrough (`protocol = "tls"`): read the ClientHello (however it is split), let
//! the rules route on `tls.sni`, `tls.alpn`, `tls.session_id`, `tls.version`, connect, and
//! tunnel the bytes untouched. Session-ID persistence (seed 000 §1): the session ID a
//! server issues in its ServerHello (TLS ≤ 1.2) is remembered, and a client that resumes
//! with it goes back to that server. On a one-way listener the routed connection is
//! handed to the server's agent instead (`super::handoff`), and served two-way when it
//! cannot be.

use crate::floor::buf::IoBuf;
use crate::floor::io::{read_some, IoFail};
use crate::floor::snapshot::Snapshot;
use crate::floor::socket::Socket;
use crate::floor::stats::Counter;
use crate::floor::tables::sticky_ip::Target;
use crate::floor::worker::Worker;
use crate::observe::record::{self, Details, Entry, Outcome};
use crate::tls::handoff::{self, HandOff};
use crate::upstream::connect::pick_and_connect;
use crate::upstream::decide::{self, Decision};
use crate::upstream::pick::push_ip;
use crate::upstream::tunnel::moving::{self, Origin};
use config::HashKey;
use rules::ProtoField;
use std::net::SocketAddr;
use std::rc::Rc;
use tls::{ClientHello, ClientHelloReader, Progress, ServerHelloReader, TlsVersion};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Serves one TLS connection on listener `listener`.
pub async fn serve(worker: Rc<Worker>, mut client: TcpStream, peer: SocketAddr, listener: usize) {
    let started = Instant::now();
    let snap = worker.shared.snapshot.load_full();
    let mut cbuf = worker.bufs.take();
    if let Some(hello) = read_client_hello(&worker, &snap, &mut client, &mut cbuf, peer).await {
        worker.shared.stats.inc(Counter::Requests);
        let local = client.local_addr().unwrap_or(peer);
        let fields = HelloFields::new(&hello, peer, local);
        let mut outcome = Outcome::default();
        let decision = fields.with_request(|req| {
            decide::route_connection(&worker, &snap, listener, req, Some(&hello.session_id))
        });
        let mut version = None;
        match decision {
            Some(d) => {
                let mut sbuf = worker.bufs.take();
                let mut ends = Ends { client: &mut client, cbuf: &mut cbuf, sbuf: &mut sbuf };
                version = forward(&worker, &snap, listener, &d, &fields, &mut ends, &mut outcome).await;
                worker.bufs.give(sbuf);
            }
            None => {
                tracing::info!(client = %fields.src, sni = fields.sni_str(), "TLS connection refused by rule");
                outcome.error = Some("refused by rule");
            }
        }
        let sni = fields.sni.as_deref().unwrap_or("");
        let entry = Entry { client: peer, listener, rule: "", method: "TLS", target: sni, started };
        let version = version.map(|v| v.to_string()).unwrap_or_default();
        let details = Details { sni, tls_version: &version, ..Details::default() };
        record::finish_with(&worker.shared, &snap, &entry, &outcome, &details);
    }
    worker.bufs.give(cbuf);
}

/// Reads until the ClientHello is whole; its bytes stay in `buf`, to be forwarded as they
/// came. `None`: the client left, was too slow, or sent no valid hello (counted, logged).
async fn read_client_hello(
    worker: &Worker,
    snap: &Snapshot,
    client: &mut TcpStream,
    buf: &mut IoBuf,
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

/// The client's socket and the buffers of both directions.
struct Ends<'a> {
    client: &'a mut TcpStream,
    cbuf: &'a mut IoBuf,
    sbuf: &'a mut IoBuf,
}

/// One-way: hand the connection off (`super::handoff`). Else, or when that fails: pick and
/// connect (`upstream::connect`), send the hello, learn the server's session ID from its
/// ServerHello, then tunnel. Returns the version the server chose (`None` when handed off:
/// the ServerHello goes to the client directly).
async fn forward(
    worker: &Worker,
    snap: &Snapshot,
    listener: usize,
    d: &Decision,
    fields: &HelloFields,
    ends: &mut Ends<'_>,
    out: &mut Outcome,
) -> Option<TlsVersion> {
    let g = snap.group(d.group);
    out.group = Some(d.group);
    let mut key = Vec::new();
    let has_key = g.scheduler.uses_key() && hash_key(&g.hash_key, fields, &mut key);
    let key = has_key.then_some(key.as_slice());
    let read = ends.cbuf.filled();
    let prefer = match handoff::try_hand_off(worker, snap, listener, d, key, ends.client, read).await {
        HandOff::Done(index) => {
            note_server(worker, listener, d, fields, out, index, g.servers[index].id);
            out.bytes_in = ends.cbuf.len() as u64;
            return None;
        }
        HandOff::TwoWay(prefer) => prefer,
    };
    let mut up = match pick_and_connect(worker, snap, d.group, prefer, key).await {
        Ok(up) => up,
        Err(f) => {
            out.error = f.answer.map(|r| r.reason);
            return None;
        }
    };
    note_server(worker, listener, d, fields, out, up.index, up.server.id);
    out.bytes_in = ends.cbuf.len() as u64;
    if up.stream.write_all(ends.cbuf.filled()).await.is_err() {
        return None;
    }
    ends.cbuf.clear();
    let version = learn_session(worker, snap, &mut up.stream, ends.sbuf, up.server.id).await;
    // The ServerHello read to learn the session is still in `sbuf`: the tunnel counts it.
    let idle = snap.config.timeouts.tunnel_idle;
    let from = Origin { listener, peer: fields.src, kind: "tls-passthrough", server: Some(up.server) };
    let carried = moving::run(worker, from, ends.client, ends.cbuf, &mut up.stream, ends.sbuf, idle).await;
    out.bytes_in += carried.up;
    out.bytes_out = carried.down;
    version
}

/// The connection went to server `index` (id `id`) of the decided group: for the log, and
/// for sticky-IP persistence.
fn note_server(
    worker: &Worker,
    listener: usize,
    d: &Decision,
    fields: &HelloFields,
    out: &mut Outcome,
    index: usize,
    id: u64,
) {
    out.server = Some(index);
    out.chosen_by = match d.server {
        Some((wanted, by)) if wanted == id => by.name(),
        _ => "scheduler",
    };
    let target = Target { group: d.group, server: id };
    decide::remember_sticky_ip(&worker.shared, listener, fields.src.ip(), d.sticky, target);
}

/// Reads the server's first bytes until its ServerHello is whole (they stay in `sbuf`, to
/// be forwarded) and remembers the session ID it issued, when it is one a client can
/// resume with (TLS ≤ 1.2). Anything else is left to the tunnel as it is. Returns the
/// version the server chose, when its hello was read.
async fn learn_session(
    worker: &Worker,
    snap: &Snapshot,
    upstream: &mut Socket,
    sbuf: &mut IoBuf,
    server: u64,
) -> Option<TlsVersion> {
    let mut reader = ServerHelloReader::new(tls::DEFAULT_MAX_BYTES.min(sbuf.capacity()));
    let deadline = Instant::now() + snap.config.timeouts.server_response;
    loop {
        let before = sbuf.len();
        match read_some(upstream, sbuf, deadline).await {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        match reader.push(&sbuf.filled()[before..]) {
            Progress::NeedMore if !sbuf.is_full() => {}
            Progress::Done(hello) => {
                if hello.resumption_via_session_id() {
                    let (shared, id) = (&worker.shared, hello.session_id.into_boxed_slice());
                    // A resumption echoes a known ID: only a new one is shared.
                    if shared.tls_sessions.get(&id) != Some(server) {
                        shared.share_tls_session(&id, server);
                    }
                    shared.tls_sessions.put(id, server);
                }
                return Some(hello.version);
            }
            _ => return None,
        }
    }
}

/// The scheduler key of a TLS connection: the client address for `srcip`, else the SNI
/// (a hello has no URL, path or headers).
fn hash_key(key: &HashKey, fields: &HelloFields, out: &mut Vec<u8>) -> bool {
    out.clear();
    match key {
        HashKey::SrcIp => push_ip(fields.src.ip(), out),
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
        let fields = [
            (ProtoField::TlsAlpn, self.alpn.as_bytes()),
            (ProtoField::TlsSessionId, self.session_id.as_bytes()),
            (ProtoField::TlsVersion, self.version.as_bytes()),
            (ProtoField::TlsSni, sni.unwrap_or_default()),
        ];
        // On the stack: no allocation per connection; the SNI only when the hello had one.
        let present = if sni.is_some() { &fields[..] } else { &fields[..3] };
        f(&rules::ConnectionRequest { src: self.src, dst: self.dst, host: sni, fields: present })
    }
}
