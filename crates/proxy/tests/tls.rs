//! TLS passthrough (`protocol = "tls"`) with real rustls clients and servers on loopback:
//! SNI routing, session-ID persistence (a resumed TLS 1.2 session lands on the server that
//! issued it), a ClientHello sent in pieces, and a malformed hello closed and counted.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use proxy::{Counter, Switch};
use rustls::client::{Resumption, Tls12Resumption};
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::server::ServerSessionMemoryCache;
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection, StreamOwned};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const NAMES: [&str; 2] = ["a.example", "b.example"];

fn pki() -> &'static (CertificateDer<'static>, PrivatePkcs8KeyDer<'static>) {
    static PKI: OnceLock<(CertificateDer<'static>, PrivatePkcs8KeyDer<'static>)> = OnceLock::new();
    PKI.get_or_init(|| {
        let made = rcgen::generate_simple_self_signed(NAMES.map(String::from).to_vec()).unwrap();
        (made.cert.der().clone(), PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()))
    })
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// A TLS 1.2 server config with its own session-ID cache and no tickets: a client can
/// resume only on the server that issued its session.
fn server_config() -> Arc<ServerConfig> {
    let (cert, key) = pki();
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], PrivateKeyDer::Pkcs8(key.clone_key()))
        .unwrap();
    config.session_storage = ServerSessionMemoryCache::new(64);
    Arc::new(config)
}

/// A client config; clients made from one config share its session cache.
fn client_config() -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(pki().0.clone()).unwrap();
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    config.resumption = Resumption::in_memory_sessions(16).tls12_resumption(Tls12Resumption::SessionIdOnly);
    Arc::new(config)
}

/// A TLS server on 127.0.0.1:0 that answers every line with its name (thread per
/// connection; runs until the test process ends).
fn tls_server(name: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let config = server_config();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let config = Arc::clone(&config);
            std::thread::spawn(move || {
                let conn = ServerConnection::new(config).unwrap();
                let mut tls = StreamOwned::new(conn, stream);
                let mut line = String::new();
                if BufReader::new(&mut tls).read_line(&mut line).is_ok() && !line.is_empty() {
                    let _ = tls.write_all(format!("{name}\n").as_bytes());
                    let _ = tls.flush();
                }
            });
        }
    });
    addr
}

/// A TCP stream that writes its first `slow` bytes a few at a time, pausing between
/// writes, so the switch receives the ClientHello in many pieces.
struct Trickle {
    inner: TcpStream,
    slow: usize,
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.inner.read(buf)
    }
}

impl Write for Trickle {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.slow == 0 {
            return self.inner.write(buf);
        }
        let n = buf.len().min(7).min(self.slow);
        self.inner.write_all(&buf[..n])?;
        self.slow -= n;
        std::thread::sleep(Duration::from_millis(2));
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One TLS session through the switch: which server answered, and whether the session
/// was resumed.
fn talk(switch: SocketAddr, sni: &str, config: &Arc<ClientConfig>, trickle: bool) -> (String, bool) {
    let tcp = TcpStream::connect(switch).unwrap();
    tcp.set_nodelay(true).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let conn =
        ClientConnection::new(Arc::clone(config), ServerName::try_from(sni.to_string()).unwrap()).unwrap();
    let mut tls = StreamOwned::new(conn, Trickle { inner: tcp, slow: if trickle { 200 } else { 0 } });
    tls.write_all(b"hi\n").unwrap();
    let mut answer = String::new();
    BufReader::new(&mut tls).read_line(&mut answer).unwrap();
    let resumed = tls.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
    (answer.trim().to_string(), resumed)
}

fn start(text: &str, rules: Option<&str>) -> (Switch, SocketAddr) {
    let dir = std::env::temp_dir().join(format!("cswitch-tls-{}-{}", std::process::id(), text.len()));
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(rules) = rules {
        std::fs::write(dir.join("tls.rules"), rules).unwrap();
    }
    let cfg = config::parse(text, &dir.join("c.toml")).unwrap_or_else(|d| panic!("{d}"));
    let switch = Switch::start(cfg).unwrap();
    let addr = switch.local_addr("tls").unwrap();
    (switch, addr)
}

fn listener(rules: bool) -> String {
    let rules = if rules { "rules = \"tls.rules\"\n" } else { "" };
    format!(
        "[global]\nworkers = 2\n[access_log]\nenabled = false\n\
         [[listener]]\nname = \"tls\"\nprotocol = \"tls\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"gb\"\n{rules}"
    )
}

#[test]
fn sni_routes_connections_to_groups_and_a_hello_in_pieces_is_read_whole() {
    let (sa, sb) = (tls_server("sa"), tls_server("sb"));
    let text = format!(
        "{}[[group]]\nname = \"ga\"\nservers = [ {{ name = \"sa\", addr = \"{sa}\" }} ]\n\
         [[group]]\nname = \"gb\"\nservers = [ {{ name = \"sb\", addr = \"{sb}\" }} ]\n",
        listener(true)
    );
    let rules = "A: if (tls.sni == \"a.example\" && tls.alpn == \"h2\" && tls.version == \"TLSv1.2\") { routeTo(ga); }\n";
    let (switch, addr) = start(&text, Some(rules));
    let client = client_config();
    assert_eq!(talk(addr, "a.example", &client, false).0, "sa");
    assert_eq!(talk(addr, "b.example", &client, false).0, "sb");
    assert_eq!(talk(addr, "a.example", &client_config(), true).0, "sa", "hello sent 7 bytes at a time");
    assert_eq!(switch.rules()[0].rules[0].hits, 2);
}

#[test]
fn a_resumed_session_goes_back_to_the_server_that_issued_it() {
    let servers = [tls_server("s1"), tls_server("s2")];
    let text = format!(
        "{}[[group]]\nname = \"gb\"\nscheduler = \"rr\"\nservers = [ {{ name = \"s1\", addr = \"{}\" }}, {{ name = \"s2\", addr = \"{}\" }} ]\n",
        listener(false),
        servers[0],
        servers[1]
    );
    let (switch, addr) = start(&text, None);
    let client = client_config();
    let (first, resumed) = talk(addr, "a.example", &client, false);
    assert!(!resumed);
    // Round robin would alternate; the learnt session ID keeps every resumption on `first`
    // (and a resumption on the other server would not be one: each has its own cache).
    for _ in 0..4 {
        let (server, resumed) = talk(addr, "a.example", &client, false);
        assert_eq!((server.as_str(), resumed), (first.as_str(), true));
    }
    // A new client (no session) is balanced as usual.
    let others: Vec<String> = (0..4).map(|_| talk(addr, "a.example", &client_config(), false).0).collect();
    assert!(others.iter().any(|s| *s != first), "{others:?}");
    assert!(switch.stats().get(Counter::PersistenceHits) >= 4);
    let sessions = switch.stick_tables().into_iter().find(|t| t.name == "tls_sessions").unwrap();
    assert!(sessions.entries.unwrap() >= 1);
}

#[test]
fn a_malformed_hello_closes_the_connection_and_is_counted() {
    let sb = tls_server("sb");
    let text = format!(
        "{}[[group]]\nname = \"gb\"\nservers = [ {{ name = \"sb\", addr = \"{sb}\" }} ]\n",
        listener(false)
    );
    let (switch, addr) = start(&text, None);
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n").unwrap();
    let mut rest = Vec::new();
    let n = tcp.read_to_end(&mut rest).unwrap_or(0);
    assert_eq!(n, 0, "closed without an answer");
    assert_eq!(switch.stats().get(Counter::TlsMalformed), 1);
}
