//! Binary upgrades (issue 16) move tunnels: a WebSocket echo, a TLS passthrough session
//! (a rustls client through the switch to a rustls origin), POP3 and IMAP sessions after
//! their logins and an SMTP session after DATA each keep talking across two upgrades in a row, on their same client sockets,
//! with no reset; and a tunnel whose both directions are blocked (the switch holds bytes it
//! read and could not write yet) moves with those bytes: every byte arrives once, in order.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;
mod tunnel_mail;

use common::{cswitch, log_lines, tempdir, wait_for};
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection, StreamOwned};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// The switch the test started, and whichever process serves after upgrades.
struct Switch {
    first: Child,
    log: Receiver<String>,
    pids: Vec<u32>,
    admin: SocketAddr,
    listeners: Vec<(String, SocketAddr)>,
}

impl Switch {
    fn start(config: &str, names: &[&str]) -> Switch {
        let dir = tempdir(&format!("upgrade-tunnels-{}", names.join("-")));
        let path = dir.join("cswitch.toml");
        std::fs::write(&path, config).unwrap();
        let mut first =
            cswitch().args(["run", "--config"]).arg(&path).stderr(Stdio::piped()).spawn().unwrap();
        let log = log_lines(first.stderr.take().unwrap());
        let mut listeners = Vec::new();
        while listeners.len() < names.len() {
            let line = wait_for(&log, "listening listener=");
            let name = line.split_whitespace().find_map(|w| w.strip_prefix("listener=")).unwrap().to_string();
            listeners.push((name, addr_in(&line)));
        }
        let admin = addr_in(&wait_for(&log, "admin listener"));
        Switch { pids: vec![first.id()], first, log, admin, listeners }
    }

    fn addr(&self, name: &str) -> SocketAddr {
        self.listeners.iter().find(|(n, _)| n == name).unwrap().1
    }

    /// `cswitch ctl --json upgrade`: the report.
    fn upgrade(&mut self) -> serde_json::Value {
        let out =
            cswitch().args(["ctl", "--addr", &self.admin.to_string(), "--json", "upgrade"]).output().unwrap();
        if !out.status.success() {
            std::thread::sleep(Duration::from_millis(200));
            let log: Vec<String> = self.log.try_iter().collect();
            panic!("upgrade failed: {}\n{}", String::from_utf8_lossy(&out.stderr), log.join("\n"));
        }
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        self.pids.push(u32::try_from(report["new_pid"].as_u64().unwrap()).unwrap());
        eprintln!("upgrade report: {report}");
        report
    }

    /// Waits (at most 10 s) for the process the test started to exit.
    fn first_exits(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.first.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "the old process did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Switch {
    /// Stops the process serving now (the ones between exited after handing over).
    fn drop(&mut self) {
        let _ = self.first.kill();
        if let Some(&pid) = self.pids.last().filter(|_| self.pids.len() > 1) {
            let _ = std::process::Command::new("kill").arg(pid.to_string()).stderr(Stdio::null()).status();
        }
        let _ = self.first.wait();
    }
}

fn addr_in(line: &str) -> SocketAddr {
    let field = line.split_whitespace().find_map(|w| w.strip_prefix("addr=")).unwrap();
    field.parse().unwrap_or_else(|_| panic!("{line}"))
}

pub(crate) fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
}

/// Reads an HTTP head; panics unless it is a 101.
fn read_101(stream: &mut TcpStream) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).unwrap(), 1, "closed before the 101");
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head);
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
}

fn upgrade_request(stream: &mut TcpStream, path: &str) {
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    read_101(stream);
}

// ---- the three sessions ----------------------------------------------------------------

/// A WebSocket echo through `web` (testkit's origin at `/ws`): one text frame out, the
/// same back, per round.
fn websocket(web: SocketAddr) -> impl FnMut(u64) -> std::io::Result<()> {
    let mut stream = connect(web);
    upgrade_request(&mut stream, "/ws");
    move |round| {
        let text = format!("round {round}");
        stream.write_all(&testkit::ws_client_frame(text.as_bytes(), [1, 2, 3, 4]))?;
        let mut head = [0u8; 2];
        stream.read_exact(&mut head)?;
        let mut payload = vec![0u8; usize::from(head[1] & 0x7F)];
        stream.read_exact(&mut payload)?;
        if head[0] & 0x0F != 0x1 || payload != text.as_bytes() {
            return Err(std::io::Error::other(format!(
                "echo {head:?} {:?}",
                String::from_utf8_lossy(&payload)
            )));
        }
        Ok(())
    }
}

fn pki() -> (CertificateDer<'static>, PrivatePkcs8KeyDer<'static>) {
    let made = rcgen::generate_simple_self_signed(vec!["shop.example".to_string()]).unwrap();
    (made.cert.der().clone(), PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()))
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// A TLS origin echoing lines (one session per connection, each on a thread).
fn tls_origin(cert: CertificateDer<'static>, key: PrivatePkcs8KeyDer<'static>) -> SocketAddr {
    let config = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert], PrivateKeyDer::Pkcs8(key))
        .unwrap();
    let config = Arc::new(config);
    serve_each(move |stream| {
        let tls = StreamOwned::new(ServerConnection::new(Arc::clone(&config)).unwrap(), stream);
        let mut tls = BufReader::new(tls);
        let mut line = String::new();
        while tls.read_line(&mut line).is_ok_and(|n| n > 0) {
            let echoed = format!("echo {line}");
            if tls.get_mut().write_all(echoed.as_bytes()).and_then(|()| tls.get_mut().flush()).is_err() {
                return;
            }
            line.clear();
        }
    })
}

/// A TLS session through the passthrough listener `tls`: a line out, its echo back.
fn tls_session(tls: SocketAddr, cert: CertificateDer<'static>) -> impl FnMut(u64) -> std::io::Result<()> {
    let mut roots = RootCertStore::empty();
    roots.add(cert).unwrap();
    let config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("shop.example").unwrap();
    let conn = ClientConnection::new(Arc::new(config), name).unwrap();
    let mut session = BufReader::new(StreamOwned::new(conn, connect(tls)));
    move |round| {
        session.get_mut().write_all(format!("round {round}\n").as_bytes())?;
        session.get_mut().flush()?;
        let mut answer = String::new();
        session.read_line(&mut answer)?;
        if answer != format!("echo round {round}\n") {
            return Err(std::io::Error::other(format!("answered {answer:?}")));
        }
        Ok(())
    }
}

/// Accepts on 127.0.0.1:0 for the rest of the test; each connection on a thread.
pub(crate) fn serve_each(session: impl Fn(TcpStream) + Send + Sync + 'static) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let session = Arc::new(session);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let session = Arc::clone(&session);
            std::thread::spawn(move || session(stream));
        }
    });
    addr
}

/// Runs `round` every few ms until `stop` (at most 5,000 rounds or 60 s); the rounds done,
/// or the first failure.
fn keep_talking(
    name: &'static str,
    mut round: impl FnMut(u64) -> std::io::Result<()> + Send + 'static,
    stop: &Arc<AtomicBool>,
) -> std::thread::JoinHandle<Result<u64, String>> {
    let stop = Arc::clone(stop);
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        for n in 0..5_000 {
            if stop.load(Ordering::Relaxed) || Instant::now() > deadline {
                return Ok(n);
            }
            round(n).map_err(|e| format!("{name}: round {n}: {e}"))?;
            std::thread::sleep(Duration::from_millis(3));
        }
        Ok(5_000)
    })
}

fn config(ws: SocketAddr, tls: SocketAddr, pop: SocketAddr, imap: SocketAddr, smtp: SocketAddr) -> String {
    format!(
        "[global]\nworkers = 2\ngrace_period = \"5s\"\n[access_log]\nenabled = false\n\
         [admin]\nbind = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"ws\"\n\
         [[listener]]\nname = \"tls\"\nprotocol = \"tls\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"tls\"\n\
         [[listener]]\nname = \"pop\"\nprotocol = \"pop3\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"pop\"\n\
         [[listener]]\nname = \"imap\"\nprotocol = \"imap\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"imap\"\n\
         [[listener]]\nname = \"smtp\"\nprotocol = \"smtp\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"smtp\"\n\
         [[group]]\nname = \"ws\"\nservers = [ {{ name = \"w1\", addr = \"{ws}\" }} ]\n\
         [[group]]\nname = \"tls\"\nservers = [ {{ name = \"t1\", addr = \"{tls}\" }} ]\n\
         [[group]]\nname = \"pop\"\nservers = [ {{ name = \"p1\", addr = \"{pop}\" }} ]\n\
         [[group]]\nname = \"imap\"\nservers = [ {{ name = \"i1\", addr = \"{imap}\" }} ]\n\
         [[group]]\nname = \"smtp\"\nservers = [ {{ name = \"m1\", addr = \"{smtp}\" }} ]\n"
    )
}

#[test]
fn websocket_tls_passthrough_and_mail_sessions_keep_talking_across_two_upgrades() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let ws = rt.block_on(testkit::Origin::start("w1"));
    let (cert, key) = pki();
    let tls = tls_origin(cert.clone(), key);
    let (pop, imap, smtp) =
        (tunnel_mail::pop3_origin(), tunnel_mail::imap_origin(), tunnel_mail::smtp_origin());
    let config = config(ws.addr(), tls, pop, imap, smtp);
    let mut switch = Switch::start(&config, &["web", "tls", "pop", "imap", "smtp"]);

    let stop = Arc::new(AtomicBool::new(false));
    let talkers = [
        keep_talking("websocket", websocket(switch.addr("web")), &stop),
        keep_talking("tls passthrough", tls_session(switch.addr("tls"), cert), &stop),
        keep_talking("pop3", tunnel_mail::pop3_session(switch.addr("pop")), &stop),
        keep_talking("imap", tunnel_mail::imap_session(switch.addr("imap")), &stop),
        keep_talking("smtp", tunnel_mail::smtp_session(switch.addr("smtp")), &stop),
    ];
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..2 {
        let report = switch.upgrade();
        assert_eq!(report["tunnels_moved"], 5, "{report}");
        assert_eq!(report["failed_to_move"], 0, "{report}");
        assert_eq!(report["cut_at_grace_period"], 0, "{report}");
        std::thread::sleep(Duration::from_millis(300));
    }
    switch.first_exits();
    // Each tunnel is in flight on its server in the process that carries it now.
    let out =
        cswitch().args(["ctl", "--addr", &switch.admin.to_string(), "--json", "servers"]).output().unwrap();
    let servers: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for name in ["w1", "t1", "p1", "i1", "m1"] {
        let server = servers.as_array().unwrap().iter().find(|s| s["name"] == name).unwrap();
        assert_eq!(server["active"], 1, "{name}: {server}");
    }
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    for talker in talkers {
        let rounds = talker.join().unwrap().unwrap_or_else(|e| panic!("{e}"));
        eprintln!("{rounds} rounds");
        assert!(rounds > 10, "only {rounds} rounds");
    }
}

// ---- buffered bytes -------------------------------------------------------------------

/// A direction's bytes: byte `offset` is `PATTERN[offset % PATTERN.len()] ^ salt`, whose
/// period (251 × 256 bytes) is no multiple of any buffer's size, so a lost, repeated or
/// swapped piece shows.
fn pattern() -> &'static [u8] {
    static PATTERN: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| (0..251 * 256u32).map(|o| (o % 251) as u8 ^ (o / 251) as u8).collect())
}

/// Bytes each way: more than every queue on the way holds, so both directions stall.
const BULK: u64 = 64 << 20;

/// Sends `BULK` bytes of the pattern, counting them in `sent`.
fn send_bulk(mut w: TcpStream, salt: u8, sent: &AtomicU64) -> std::io::Result<()> {
    let mut chunk = vec![0u8; 32 << 10];
    let mut at = 0u64;
    while at < BULK {
        let n = chunk.len().min((BULK - at) as usize);
        for (i, b) in chunk[..n].iter_mut().enumerate() {
            *b = pattern()[((at + i as u64) % pattern().len() as u64) as usize] ^ salt;
        }
        w.write_all(&chunk[..n])?;
        at += n as u64;
        sent.store(at, Ordering::SeqCst);
    }
    Ok(())
}

/// Reads `BULK` bytes and checks each; the first wrong offset, if any.
fn check_bulk(mut r: TcpStream, salt: u8) -> Result<(), String> {
    let mut chunk = vec![0u8; 32 << 10];
    let mut got = 0u64;
    while got < BULK {
        let n = r.read(&mut chunk).map_err(|e| format!("after {got} bytes: {e}"))?;
        if n == 0 {
            return Err(format!("closed after {got} of {BULK} bytes"));
        }
        let wrong = (0..n)
            .find(|&i| chunk[i] != pattern()[((got + i as u64) % pattern().len() as u64) as usize] ^ salt);
        if let Some(i) = wrong {
            return Err(format!("wrong byte at offset {}", got + i as u64));
        }
        got += n as u64;
    }
    Ok(())
}

/// Waits (at most 20 s) until neither count has moved for 300 ms: every queue between the
/// two ends is full, and the switch holds bytes it read and cannot write.
fn wait_until_stalled(counts: &[&AtomicU64]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let now = || counts.iter().map(|c| c.load(Ordering::SeqCst)).collect::<Vec<_>>();
    let mut last = now();
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let seen = now();
        if seen == last {
            eprintln!("stalled after {seen:?} bytes sent");
            return;
        }
        assert!(Instant::now() < deadline, "the directions never stalled: {seen:?}");
        last = seen;
    }
}

/// An origin answering any upgrade with 101, then sending `BULK` bytes at once (counted in
/// `sent`) and reading the client's `BULK` only once `gate` opens (so both directions back
/// up in the switch).
fn blocked_origin(gate: Arc<Barrier>, sent: Arc<AtomicU64>, checked: Arc<AtomicU64>) -> SocketAddr {
    serve_each(move |mut stream| {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if stream.read(&mut byte).unwrap_or(0) == 0 {
                return;
            }
            head.push(byte[0]);
        }
        stream
            .write_all(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: bulk\r\nConnection: Upgrade\r\n\r\n")
            .unwrap();
        let w = stream.try_clone().unwrap();
        let sent = Arc::clone(&sent);
        let sender = std::thread::spawn(move || send_bulk(w, 0x5A, &sent));
        gate.wait();
        check_bulk(stream, 0xA5).unwrap();
        sender.join().unwrap().unwrap();
        checked.fetch_add(1, Ordering::SeqCst);
    })
}

#[test]
fn a_tunnel_moves_with_the_bytes_the_switch_had_read_and_not_written() {
    let gate = Arc::new(Barrier::new(3)); // the origin, the client's reader, the test
    let checked = Arc::new(AtomicU64::new(0));
    let (up, down) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let origin = blocked_origin(Arc::clone(&gate), Arc::clone(&down), Arc::clone(&checked));
    let config = format!(
        "[global]\nworkers = 1\ngrace_period = \"5s\"\n[access_log]\nenabled = false\n\
         [admin]\nbind = \"127.0.0.1:0\"\n\
         [[listener]]\nname = \"bulk\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"bulk\"\n\
         [[group]]\nname = \"bulk\"\nservers = [ {{ name = \"b1\", addr = \"{origin}\" }} ]\n"
    );
    let mut switch = Switch::start(&config, &["bulk"]);
    let mut client = connect(switch.addr("bulk"));
    upgrade_request(&mut client, "/bulk");
    let sender = {
        let w = client.try_clone().unwrap();
        let up = Arc::clone(&up);
        std::thread::spawn(move || send_bulk(w, 0xA5, &up))
    };
    let reader = {
        let gate = Arc::clone(&gate);
        std::thread::spawn(move || {
            gate.wait();
            check_bulk(client, 0x5A)
        })
    };
    wait_until_stalled(&[&up, &down]);
    let report = switch.upgrade();
    assert_eq!(report["tunnels_moved"], 1, "{report}");
    let buffered = report["tunnel_bytes_buffered"].as_u64().unwrap();
    assert!(buffered > 0, "no buffered bytes moved: {report}");
    gate.wait();
    reader.join().unwrap().unwrap();
    sender.join().unwrap().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while checked.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the origin did not get every byte");
        std::thread::sleep(Duration::from_millis(20));
    }
    switch.first_exits();
}
