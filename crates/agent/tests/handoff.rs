//! The agent's hand-off server with real sockets on loopback: a test "switch" accepts a
//! client, reads its request, dumps the connection with TCP_REPAIR and hands it over the
//! control channel; the agent restores it and relays it to a local web server, which
//! answers the client directly — the request it reads is the one the client sent, and a
//! second request on the same connection is served too; the VIP port chooses the local
//! server; once the client has closed, the agent reports the end (ENDED) on the control
//! connection the hand-off came on, or on another from the same switch when that one has
//! closed. A wrong token is refused; ABORT leaves the client's connection silent (no FIN,
//! no reset). Later requests under each `connection_persistence`: `close` ends the
//! connection after the first answer, `redirect` answers a request the switch's rules send
//! to another group with a redirect. With `--pass-fd` the connection goes to a server that
//! takes descriptors.
//!
//! Needs CAP_NET_ADMIN (TCP_REPAIR): without it the tests say so and pass, unless
//! `CSWITCH_REQUIRE_KERNEL=1` (`.ci/run`) makes them fail.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use cswitch_agent::{HandoffConfig, HandoffServer};
use oneway::{CookieMode, CookieRule, Frame, InsertRule, Persistence, Policy, Reader, Route};
use socket2::{Domain, Socket, Type};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::time::Duration;

const TOKEN: &str = "handoff-test-token-0123";

/// Whether TCP_REPAIR is allowed here (skips, or fails under CSWITCH_REQUIRE_KERNEL).
fn kernel_allows() -> bool {
    let probe = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    match oneway::enter_repair(&probe) {
        Ok(()) => true,
        Err(e) => {
            assert!(std::env::var_os("CSWITCH_REQUIRE_KERNEL").is_none(), "TCP_REPAIR: {e}");
            eprintln!("skipped: TCP_REPAIR needs CAP_NET_ADMIN ({e})");
            false
        }
    }
}

/// A local web server: answers every request on a connection with a body of `size`
/// bytes naming the path, keep-alive, until the client closes.
fn origin(size: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(16) {
            let Ok(mut conn) = conn else { return };
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while let Ok(n) = conn.read(&mut chunk) {
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_string();
                        buf.drain(..end + 4);
                        let path = head.split(' ').nth(1).unwrap_or("?").to_string();
                        let body = format!("{path}:{}", "x".repeat(size));
                        let reply =
                            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                        conn.write_all(reply.as_bytes()).unwrap();
                        if head.to_ascii_lowercase().contains("\r\nconnection: close") {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

fn config(local: SocketAddr) -> HandoffConfig {
    HandoffConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: TOKEN.into(),
        local,
        local_ports: Default::default(),
        go_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(5),
        pass_fd: None,
    }
}

fn agent(local: SocketAddr) -> HandoffServer {
    HandoffServer::start(config(local)).unwrap()
}

/// A client connected to a "switch" socket (MSS 1448, as on Ethernet), the switch side
/// accepted, and the addresses.
fn client_and_switch() -> (TcpStream, TcpStream, SocketAddr, SocketAddr) {
    let listener = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    listener.set_mss(1448).unwrap();
    listener.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
    listener.listen(4).unwrap();
    let vip = listener.local_addr().unwrap().as_socket().unwrap();
    let client = TcpStream::connect(vip).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let (switch, client_addr) = listener.accept().unwrap();
    (client, switch.into(), vip, client_addr.as_socket().unwrap())
}

/// The switch's side of the channel, authenticated.
fn control(agent: &HandoffServer, token: &str) -> (TcpStream, Reader) {
    let mut c = TcpStream::connect(agent.local_addr()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    send(&mut c, &Frame::Hello { token: token.as_bytes().to_vec() });
    (c, Reader::default())
}

/// `control` with the right token, its WELCOME read.
fn welcomed(agent: &HandoffServer) -> (TcpStream, Reader) {
    let (mut c, mut r) = control(agent, TOKEN);
    assert_eq!(recv(&mut c, &mut r), Frame::Welcome);
    (c, r)
}

/// Waits up to `limit` for `counter` to reach `want` (counted just after the act a test sees).
fn count_reaches(counter: &std::sync::atomic::AtomicU64, want: u64, limit: Duration) -> u64 {
    let deadline = std::time::Instant::now() + limit;
    while counter.load(Ordering::Relaxed) < want && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    counter.load(Ordering::Relaxed)
}

fn send(c: &mut TcpStream, f: &Frame) {
    let mut out = Vec::new();
    f.encode(&mut out);
    c.write_all(&out).unwrap();
}

fn recv(c: &mut TcpStream, r: &mut Reader) -> Frame {
    let mut buf = [0u8; 4096];
    loop {
        if let Some(f) = r.next_frame().unwrap() {
            return f;
        }
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "control connection closed");
        r.push(&buf[..n]);
    }
}

/// The switch reads the head, dumps the connection and closes its socket silently (one
/// host: the 4-tuple must be free for the restore), then hands it to the agent.
fn hand_off(
    switch: TcpStream,
    request: &[u8],
    c: &mut TcpStream,
    r: &mut Reader,
    vip: SocketAddr,
    client: SocketAddr,
) -> Frame {
    hand_off_as(switch, request, (c, r), vip, client, route(Persistence::Pin))
}

/// Routed by listener `web` to group `static`.
fn route(persistence: Persistence) -> Route {
    Route { listener: "web".into(), group: "static".into(), persistence, pinned: false, cookie: None }
}

fn hand_off_as(
    switch: TcpStream,
    request: &[u8],
    (c, r): (&mut TcpStream, &mut Reader),
    vip: SocketAddr,
    client: SocketAddr,
    route: Route,
) -> Frame {
    dump_and_send(switch, request, c, (vip, client), route, 1);
    recv(c, r)
}

/// The switch's part: reads the request, dumps the connection, closes its socket silently
/// (one host: the 4-tuple must be free for the restore) and sends HANDOFF `id`.
fn dump_and_send(
    mut switch: TcpStream,
    request: &[u8],
    c: &mut TcpStream,
    (vip, client): (SocketAddr, SocketAddr),
    route: Route,
    id: u64,
) {
    let mut head = vec![0u8; request.len()];
    switch.read_exact(&mut head).unwrap();
    assert_eq!(head, request);
    oneway::enter_repair(&switch).unwrap();
    let state = oneway::dump(&switch).unwrap();
    drop(switch);
    send(c, &Frame::Handoff { id, vip, client, route, state, already_read: head });
}

fn read_response(client: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        let n = client.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).to_string();
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize =
                text.lines().find_map(|l| l.strip_prefix("Content-Length: ")).unwrap().parse().unwrap();
            if got.len() >= end + 4 + len {
                return text;
            }
        }
    }
}

#[test]
fn a_handed_off_connection_is_answered_by_the_local_server() {
    if !kernel_allows() {
        return;
    }
    let local = origin(100_000);
    let agent = agent(local);
    let (mut c, mut r) = welcomed(&agent);
    let (mut client, switch, vip, client_addr) = client_and_switch();
    let request = b"GET /first HTTP/1.1\r\nHost: vip\r\n\r\n";
    client.write_all(request).unwrap();
    assert_eq!(hand_off(switch, request, &mut c, &mut r, vip, client_addr), Frame::Ready { id: 1 });
    send(&mut c, &Frame::Go { id: 1 });
    let first = read_response(&mut client);
    assert!(
        first.starts_with("HTTP/1.1 200 OK\r\n") && first.contains("\r\n\r\n/first:xxx"),
        "{}",
        &first[..80]
    );
    assert_eq!(first.len(), first.find("\r\n\r\n").unwrap() + 4 + "/first:".len() + 100_000);
    // Keep-alive: the next request on the same connection reaches the same local server.
    client.write_all(b"GET /second HTTP/1.1\r\nHost: vip\r\n\r\n").unwrap();
    assert!(read_response(&mut client).contains("\r\n\r\n/second:"));
    assert_eq!(agent.counts().served.load(Ordering::Relaxed), 1);
    // The client closes: the local server closes too, and once both FINs are acknowledged
    // the agent reports the end on this control connection.
    drop(client);
    assert_eq!(recv(&mut c, &mut r), Frame::Ended { id: 1, client: client_addr });
    assert_eq!(count_reaches(&agent.counts().reported, 1, Duration::from_secs(1)), 1);
}

#[test]
fn an_end_is_reported_on_another_connection_when_the_first_has_closed() {
    if !kernel_allows() {
        return;
    }
    let agent = agent(origin(1000));
    let (mut first, mut r1) = control(&agent, TOKEN);
    assert_eq!(recv(&mut first, &mut r1), Frame::Welcome);
    let (mut client, switch, vip, client_addr) = client_and_switch();
    let request = b"GET /x HTTP/1.1\r\nHost: vip\r\n\r\n";
    client.write_all(request).unwrap();
    assert_eq!(hand_off(switch, request, &mut first, &mut r1, vip, client_addr), Frame::Ready { id: 1 });
    send(&mut first, &Frame::Go { id: 1 });
    assert!(read_response(&mut client).contains("/x:"));
    // A second connection from the same switch; the first one closes (the agent notices
    // within its 100 ms tick).
    let (mut second, mut r2) = control(&agent, TOKEN);
    assert_eq!(recv(&mut second, &mut r2), Frame::Welcome);
    drop(first);
    std::thread::sleep(Duration::from_millis(300));
    drop(client);
    assert_eq!(recv(&mut second, &mut r2), Frame::Ended { id: 1, client: client_addr });
}

#[test]
fn a_connection_the_local_server_refuses_is_closed_and_reported() {
    if !kernel_allows() {
        return;
    }
    // A local port nobody listens on.
    let local = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let agent = agent(local);
    let (mut c, mut r) = welcomed(&agent);
    let (mut client, switch, vip, client_addr) = client_and_switch();
    let request = b"GET /x HTTP/1.1\r\nHost: vip\r\n\r\n";
    client.write_all(request).unwrap();
    assert_eq!(hand_off(switch, request, &mut c, &mut r, vip, client_addr), Frame::Ready { id: 1 });
    send(&mut c, &Frame::Go { id: 1 });
    // The client is told at once (the end of the stream), not left waiting.
    let started = std::time::Instant::now();
    let mut buf = [0u8; 64];
    assert_eq!(client.read(&mut buf).unwrap(), 0, "closed");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    drop(client);
    assert_eq!(recv(&mut c, &mut r), Frame::Ended { id: 1, client: client_addr });
}

/// The VIP port the client connected to chooses the local server: one named for that port
/// gets the connection, not the default (`--local-port`, e.g. 443 → the host's TLS server).
#[test]
fn the_vip_port_chooses_the_local_server() {
    if !kernel_allows() {
        return;
    }
    let (mut client, switch, vip, client_addr) = client_and_switch();
    let mut cfg = config(origin(10));
    cfg.local_ports.insert(vip.port(), origin(20));
    let agent = HandoffServer::start(cfg).unwrap();
    let (mut c, mut r) = welcomed(&agent);
    let request = b"GET /port HTTP/1.1\r\nHost: vip\r\n\r\n";
    client.write_all(request).unwrap();
    assert_eq!(hand_off(switch, request, &mut c, &mut r, vip, client_addr), Frame::Ready { id: 1 });
    send(&mut c, &Frame::Go { id: 1 });
    let answer = read_response(&mut client);
    assert!(answer.ends_with(&format!("\r\n\r\n/port:{}", "x".repeat(20))), "{answer}");
}

#[test]
fn a_wrong_token_is_refused() {
    let agent = agent(origin(10));
    let (mut c, mut r) = control(&agent, "not-the-token-at-all");
    assert_eq!(recv(&mut c, &mut r), Frame::Refused { reason: "token refused".into() });
    let mut buf = [0u8; 16];
    assert_eq!(c.read(&mut buf).unwrap(), 0, "closed after the refusal");
    assert_eq!(agent.counts().refused.load(Ordering::Relaxed), 1);
}

#[test]
fn an_aborted_hand_off_sends_the_client_nothing() {
    if !kernel_allows() {
        return;
    }
    let agent = agent(origin(10));
    let (mut c, mut r) = welcomed(&agent);
    let (mut client, switch, vip, client_addr) = client_and_switch();
    let request = b"GET /x HTTP/1.1\r\nHost: vip\r\n\r\n";
    client.write_all(request).unwrap();
    assert_eq!(hand_off(switch, request, &mut c, &mut r, vip, client_addr), Frame::Ready { id: 1 });
    send(&mut c, &Frame::Abort { id: 1 });
    client.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
    let mut buf = [0u8; 16];
    let e = client.read(&mut buf).expect_err("no answer, no FIN");
    assert!(matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut), "{e}");
    assert_eq!(count_reaches(&agent.counts().aborted, 1, Duration::from_secs(2)), 1);
}

#[test]
fn a_restore_that_fails_is_answered_failed() {
    if !kernel_allows() {
        return;
    }
    let agent = agent(origin(10));
    let (mut c, mut r) = welcomed(&agent);
    let (_client, switch, vip, client_addr) = client_and_switch();
    // The switch dumps but keeps its socket: the 4-tuple is live on this host.
    oneway::enter_repair(&switch).unwrap();
    let state = oneway::dump(&switch).unwrap();
    oneway::leave_repair(&switch, false).unwrap();
    let route = route(Persistence::Pin);
    send(&mut c, &Frame::Handoff { id: 9, vip, client: client_addr, route, state, already_read: vec![] });
    match recv(&mut c, &mut r) {
        Frame::Failed { id: 9, reason } => assert!(reason.contains("connect"), "{reason}"),
        other => panic!("{other:?}"),
    }
    drop(switch);
}

/// Reads until the server closes; what came.
fn read_to_end(client: &mut TcpStream) -> String {
    let mut got = Vec::new();
    client.read_to_end(&mut got).unwrap();
    String::from_utf8_lossy(&got).to_string()
}

#[test]
fn under_close_the_server_ends_the_connection_after_its_answer() {
    if !kernel_allows() {
        return;
    }
    let agent = agent(origin(1000));
    let (mut c, mut r) = welcomed(&agent);
    let (mut client, switch, vip, client_addr) = client_and_switch();
    let request = b"GET /first HTTP/1.1\r\nHost: vip\r\nConnection: keep-alive\r\n\r\n";
    client.write_all(request).unwrap();
    let ready = hand_off_as(switch, request, (&mut c, &mut r), vip, client_addr, route(Persistence::Close));
    assert_eq!(ready, Frame::Ready { id: 1 });
    send(&mut c, &Frame::Go { id: 1 });
    // The client asked to keep the connection; the server got `Connection: close`, answered
    // and closed: the client reads the answer, then the end.
    // The answer tells the client so.
    let all = read_to_end(&mut client);
    assert!(all.starts_with("HTTP/1.1 200 OK\r\n") && all.ends_with(&"x".repeat(1000)), "{all}");
    assert!(all.contains("\r\nConnection: close\r\n\r\n/first:"), "{all}");
}

#[test]
fn under_redirect_a_request_for_another_group_is_redirected_to_itself() {
    if !kernel_allows() {
        return;
    }
    let agent = agent(origin(1000));
    let (mut c, mut r) = welcomed(&agent);
    send(
        &mut c,
        &Frame::Policy(Policy {
            listener: "web".into(),
            switch: 1,
            generation: 0,
            default_group: "static".into(),
            groups: vec!["static".into(), "api".into()],
            rules: "R1: if (match(url, \"^/api\")) { routeTo(api, NONSTICKY); }\n".into(),
        }),
    );
    let (mut client, switch, vip, client_addr) = client_and_switch();
    let request = b"GET /first HTTP/1.1\r\nHost: vip\r\n\r\n";
    client.write_all(request).unwrap();
    let ready =
        hand_off_as(switch, request, (&mut c, &mut r), vip, client_addr, route(Persistence::Redirect));
    assert_eq!(ready, Frame::Ready { id: 1 });
    send(&mut c, &Frame::Go { id: 1 });
    assert!(read_response(&mut client).contains("\r\n\r\n/first:x"));
    // Still group `static`: served on the same connection.
    client.write_all(b"GET /img.png HTTP/1.1\r\nHost: vip\r\n\r\n").unwrap();
    assert!(read_response(&mut client).contains("\r\n\r\n/img.png:x"));
    // Group `api`: a POST is redirected with 307 (repeated as sent), and the connection ends.
    client
        .write_all(b"POST /api/orders?x=1 HTTP/1.1\r\nHost: vip\r\nContent-Length: 5\r\n\r\nhello")
        .unwrap();
    let answer = read_to_end(&mut client);
    assert_eq!(
        answer,
        "HTTP/1.1 307 Temporary Redirect\r\nLocation: /api/orders?x=1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    assert_eq!(agent.counts().redirected.load(Ordering::Relaxed), 1);
}

/// A web server that takes descriptors (the testkit origin) on a fresh Unix socket path,
/// on a runtime of its own (kept alive by the returned handle).
fn passed_origin(tag: &str) -> (tokio::runtime::Runtime, testkit::Origin, std::path::PathBuf) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let path = std::env::temp_dir().join(format!("cswitch-passfd-{tag}-{}.sock", std::process::id()));
    let origin = rt.block_on(testkit::Origin::start_passed("fd-origin", &path)).unwrap();
    (rt, origin, path)
}

fn agent_passing(local: SocketAddr, path: &std::path::Path) -> HandoffServer {
    HandoffServer::start(HandoffConfig { pass_fd: Some(path.to_path_buf()), ..config(local) }).unwrap()
}

#[test]
fn a_connection_passed_as_a_descriptor_is_served_by_the_server_that_took_it() {
    if !kernel_allows() {
        return;
    }
    let (_rt, origin, path) = passed_origin("ok");
    let agent = agent_passing(origin_unused(), &path);
    let (mut c, mut r) = welcomed(&agent);
    let (mut client, switch, vip, client_addr) = client_and_switch();
    let request = b"GET /first HTTP/1.1\r\nHost: vip\r\n\r\n";
    client.write_all(request).unwrap();
    assert_eq!(hand_off(switch, request, &mut c, &mut r, vip, client_addr), Frame::Ready { id: 1 });
    send(&mut c, &Frame::Go { id: 1 });
    // The origin read the request from the descriptor (the re-injected bytes first) and
    // answers on it; later requests too, with no relay in between.
    let first = read_response(&mut client);
    assert!(first.contains("X-Origin: fd-origin") && first.contains("fd-origin GET /first"), "{first}");
    client.write_all(b"GET /second HTTP/1.1\r\nHost: vip\r\n\r\n").unwrap();
    assert!(read_response(&mut client).contains("fd-origin GET /second"));
    assert_eq!(agent.counts().passed.load(Ordering::Relaxed), 1);
    assert_eq!(origin.connections(), 1);
    let _ = std::fs::remove_file(path);
}

#[test]
fn without_a_server_taking_descriptors_the_connection_is_relayed() {
    if !kernel_allows() {
        return;
    }
    let missing = std::env::temp_dir().join(format!("cswitch-passfd-none-{}.sock", std::process::id()));
    let agent = agent_passing(origin(10), &missing);
    let (mut c, mut r) = welcomed(&agent);
    let (mut client, switch, vip, client_addr) = client_and_switch();
    let request = b"GET /relayed HTTP/1.1\r\nHost: vip\r\n\r\n";
    client.write_all(request).unwrap();
    assert_eq!(hand_off(switch, request, &mut c, &mut r, vip, client_addr), Frame::Ready { id: 1 });
    send(&mut c, &Frame::Go { id: 1 });
    assert!(read_response(&mut client).contains("\r\n\r\n/relayed:"));
    assert_eq!(agent.counts().passed.load(Ordering::Relaxed), 0);
}

/// A local address nothing listens on (a passed connection must not be relayed).
fn origin_unused() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// The insert rule for server tag `b1`, our cookie `SRV`, hidden from the server.
fn insert_route() -> Route {
    let rule = CookieRule {
        mode: CookieMode::Insert(InsertRule { indirect: true, ..InsertRule::default() }),
        name: "SRV".into(),
        tag: "b1".into(),
        index: 0,
    };
    Route { cookie: Some(rule), ..route(Persistence::Pin) }
}

#[test]
fn insert_sets_the_cookie_only_for_clients_without_it() {
    if !kernel_allows() {
        return;
    }
    let agent = agent(origin(100));
    let (mut c, mut r) = welcomed(&agent);
    // Many connections: what the answer depends on must be the request's own (the answer
    // side reads it once the answer is there, never before the request was sent).
    for (i, cookie) in
        ["SRV=b1", "", "SRV=b1", "SRV=b1", "SRV=other", "SRV=b1"].iter().cycle().take(12).enumerate()
    {
        let (mut client, switch, vip, client_addr) = client_and_switch();
        let field = if cookie.is_empty() { String::new() } else { format!("Cookie: {cookie}\r\n") };
        let request = format!("GET /{i} HTTP/1.1\r\nHost: vip\r\n{field}\r\n");
        client.write_all(request.as_bytes()).unwrap();
        let id = i as u64 + 1;
        send_handoff(switch, request.as_bytes(), (&mut c, &mut r), vip, client_addr, insert_route(), id);
        send(&mut c, &Frame::Go { id });
        let answer = read_response(&mut client);
        let set = answer.contains("\r\nSet-Cookie: SRV=b1");
        assert_eq!(set, *cookie != "SRV=b1", "request {i} with {cookie:?}: {answer}");
    }
}

/// `hand_off_as` with the hand-off id `id`; expects READY.
fn send_handoff(
    switch: TcpStream,
    request: &[u8],
    (c, r): (&mut TcpStream, &mut Reader),
    vip: SocketAddr,
    client: SocketAddr,
    route: Route,
    id: u64,
) {
    dump_and_send(switch, request, c, (vip, client), route, id);
    // Earlier connections' end reports may come first.
    let answer = std::iter::repeat_with(|| recv(c, r)).find(|f| !matches!(f, Frame::Ended { .. }));
    assert_eq!(answer, Some(Frame::Ready { id }));
}
