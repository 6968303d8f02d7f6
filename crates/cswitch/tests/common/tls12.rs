//! TLS 1.2 peers whose sessions resume by session ID only (no tickets), for the tests of
//! passthrough's session persistence: servers with their own session caches that answer a
//! line with their name, and clients with their own session caches.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use rustls::client::{Resumption, Tls12Resumption};
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::server::ServerSessionMemoryCache;
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection, StreamOwned};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

pub fn pki() -> &'static (CertificateDer<'static>, PrivatePkcs8KeyDer<'static>) {
    static PKI: OnceLock<(CertificateDer<'static>, PrivatePkcs8KeyDer<'static>)> = OnceLock::new();
    PKI.get_or_init(|| {
        let made = rcgen::generate_simple_self_signed(vec!["shop.example".to_string()]).unwrap();
        (made.cert.der().clone(), PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()))
    })
}

pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// TLS 1.2, its own session-ID cache, no tickets: a session resumes only on its server.
pub fn server_config() -> Arc<ServerConfig> {
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

/// One client's config (its own session cache).
pub fn client_config() -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(pki().0.clone()).unwrap();
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.resumption = Resumption::in_memory_sessions(4).tls12_resumption(Tls12Resumption::SessionIdOnly);
    Arc::new(config)
}

/// A TLS server on 127.0.0.1:0 answering a line with its name (runs until the test ends).
pub fn tls_server(name: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let config = server_config();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let config = Arc::clone(&config);
            std::thread::spawn(move || answer_with_name(stream, config, name));
        }
    });
    addr
}

/// Serves one connection: the handshake, then a line read and the server's name written.
pub fn answer_with_name(stream: TcpStream, config: Arc<ServerConfig>, name: &str) {
    let mut tls = StreamOwned::new(ServerConnection::new(config).unwrap(), stream);
    let mut line = String::new();
    if BufReader::new(&mut tls).read_line(&mut line).is_ok() && !line.is_empty() {
        let _ = tls.write_all(format!("{name}\n").as_bytes());
        let _ = tls.flush();
    }
}

/// One TLS session through `addr`: which server answered, and whether it was resumed.
pub fn talk(addr: SocketAddr, config: &Arc<ClientConfig>) -> (String, bool) {
    talk_on(TcpStream::connect(addr).unwrap(), config)
}

/// One TLS session over `tcp`, connected already: which server answered, and whether the
/// session was resumed.
pub fn talk_on(tcp: TcpStream, config: &Arc<ClientConfig>) -> (String, bool) {
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let name = ServerName::try_from("shop.example").unwrap();
    let mut tls = StreamOwned::new(ClientConnection::new(Arc::clone(config), name).unwrap(), tcp);
    tls.write_all(b"hi\n").unwrap();
    let mut answer = String::new();
    BufReader::new(&mut tls).read_line(&mut answer).unwrap();
    (answer.trim().to_string(), tls.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed))
}
