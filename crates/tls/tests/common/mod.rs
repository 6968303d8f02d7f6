//! Test harness: real rustls peers run in memory (no sockets), and builders for hand-made
//! records and hellos.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![allow(dead_code)]

use rustls::client::{Resumption, Tls12Resumption};
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::server::ServerSessionMemoryCache;
use rustls::{ClientConfig, ClientConnection, Connection, RootCertStore, ServerConfig, ServerConnection};
use rustls::{SupportedProtocolVersion, ALL_VERSIONS};
use std::sync::{Arc, OnceLock};
use tls::{ClientHello, ClientHelloReader, Progress, ServerHello, ServerHelloReader};

pub const HOST: &str = "api.example.com";
pub const MAX: usize = tls::DEFAULT_MAX_BYTES;

/// The server's self-signed certificate and key, made once per test binary.
fn pki() -> &'static (CertificateDer<'static>, PrivatePkcs8KeyDer<'static>) {
    static PKI: OnceLock<(CertificateDer<'static>, PrivatePkcs8KeyDer<'static>)> = OnceLock::new();
    PKI.get_or_init(|| {
        let made = rcgen::generate_simple_self_signed(vec![HOST.to_string()]).unwrap();
        (made.cert.der().clone(), PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()))
    })
}

/// ring by name, not the process default: another crate in the workspace may turn on
/// aws-lc-rs too, and with two providers compiled in rustls will not pick one itself.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

pub const TLS12: &[&SupportedProtocolVersion] = &[&rustls::version::TLS12];
pub const TLS13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];
pub const BOTH: &[&SupportedProtocolVersion] = ALL_VERSIONS;

/// A client for `HOST` offering h2 and http/1.1. Its session cache resumes TLS 1.2 by
/// session ID only (no session_ticket extension), so that is the mechanism tested.
pub fn client_config(versions: &[&'static SupportedProtocolVersion]) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(pki().0.clone()).unwrap();
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.resumption = Resumption::in_memory_sessions(16).tls12_resumption(Tls12Resumption::SessionIdOnly);
    Arc::new(config)
}

/// A server for `HOST`. It caches sessions by ID and issues no tickets (rustls' default
/// ticketer never produces one, said here so the test does not depend on it silently),
/// so a TLS 1.2 handshake gives the client a session ID to resume with.
pub fn server_config(versions: &[&'static SupportedProtocolVersion]) -> Arc<ServerConfig> {
    server_config_with(versions, provider())
}

pub fn server_config_with(
    versions: &[&'static SupportedProtocolVersion],
    provider: Arc<CryptoProvider>,
) -> Arc<ServerConfig> {
    let (cert, key) = pki();
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], PrivateKeyDer::Pkcs8(key.clone_key()))
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    config.session_storage = ServerSessionMemoryCache::new(64);
    assert!(!config.ticketer.enabled());
    Arc::new(config)
}

/// A server that supports only P-384 key exchange, so a client that guessed X25519 in its
/// first key share gets a HelloRetryRequest.
pub fn server_config_p384_only() -> Arc<ServerConfig> {
    let provider = CryptoProvider { kx_groups: vec![ring::kx_group::SECP384R1], ..ring::default_provider() };
    server_config_with(TLS13, Arc::new(provider))
}

pub fn client(config: &Arc<ClientConfig>) -> ClientConnection {
    ClientConnection::new(config.clone(), ServerName::try_from(HOST).unwrap()).unwrap()
}

/// The first flight a fresh client sends: the ClientHello records.
pub fn client_hello_bytes(config: &Arc<ClientConfig>) -> Vec<u8> {
    drain(&mut client(config).into())
}

/// What each side sent, flight by flight, in a handshake run to the end in memory.
pub struct Handshake {
    pub client_flights: Vec<Vec<u8>>,
    pub server_flights: Vec<Vec<u8>>,
    pub client: Connection,
    pub server: Connection,
}

/// Runs a whole handshake (and the TLS 1.3 tickets after it) between the two configs.
pub fn handshake(client_config: &Arc<ClientConfig>, server_config: &Arc<ServerConfig>) -> Handshake {
    let mut client: Connection = client(client_config).into();
    let mut server: Connection = ServerConnection::new(server_config.clone()).unwrap().into();
    let (mut client_flights, mut server_flights) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        let to_server = drain(&mut client);
        deliver(&mut server, &to_server);
        let to_client = drain(&mut server);
        deliver(&mut client, &to_client);
        let quiet = to_server.is_empty() && to_client.is_empty();
        if !to_server.is_empty() {
            client_flights.push(to_server);
        }
        if !to_client.is_empty() {
            server_flights.push(to_client);
        }
        if quiet && !client.is_handshaking() && !server.is_handshaking() {
            return Handshake { client_flights, server_flights, client, server };
        }
    }
    panic!("handshake did not finish");
}

fn drain(conn: &mut Connection) -> Vec<u8> {
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out).unwrap();
    }
    out
}

fn deliver(conn: &mut Connection, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        conn.read_tls(&mut bytes).unwrap();
        conn.process_new_packets().unwrap();
    }
}

/// Real hellos, made once per test binary: ClientHellos of TLS 1.2-only and 1.3 clients,
/// and the first server flights of a TLS 1.2 and a TLS 1.3 handshake.
pub struct Samples {
    pub client_hellos: Vec<Vec<u8>>,
    pub server_flights: Vec<Vec<u8>>,
}

pub fn samples() -> &'static Samples {
    static SAMPLES: OnceLock<Samples> = OnceLock::new();
    SAMPLES.get_or_init(|| {
        let client_hellos =
            vec![client_hello_bytes(&client_config(TLS12)), client_hello_bytes(&client_config(BOTH))];
        let server_flights = [TLS12, TLS13]
            .into_iter()
            .map(|v| handshake(&client_config(v), &server_config(v)).server_flights.swap_remove(0))
            .collect();
        Samples { client_hellos, server_flights }
    })
}

/// Parses a ClientHello from one buffer; panics unless it is `Done`.
pub fn parse_client(bytes: &[u8]) -> ClientHello {
    match ClientHelloReader::new(MAX).push(bytes) {
        Progress::Done(hello) => hello,
        other => panic!("expected a ClientHello, got {other:?}"),
    }
}

/// Parses a ServerHello from one buffer; panics unless it is `Done`.
pub fn parse_server(bytes: &[u8]) -> ServerHello {
    match ServerHelloReader::new(MAX).push(bytes) {
        Progress::Done(hello) => hello,
        other => panic!("expected a ServerHello, got {other:?}"),
    }
}

/// Feeds a ClientHello reader the pieces in turn; returns the first answer that is not
/// `NeedMore` (or `NeedMore` if none).
pub fn feed_client(
    reader: &mut ClientHelloReader,
    pieces: impl IntoIterator<Item = impl AsRef<[u8]>>,
) -> Progress<ClientHello> {
    for piece in pieces {
        match reader.push(piece.as_ref()) {
            Progress::NeedMore => {}
            verdict => return verdict,
        }
    }
    Progress::NeedMore
}

/// The handshake message (header included) inside a stream of handshake records.
pub fn unframe(records: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = records;
    while rest.len() >= 5 {
        let len = usize::from(u16::from_be_bytes([rest[3], rest[4]]));
        out.extend_from_slice(&rest[5..5 + len]);
        rest = &rest[5 + len..];
    }
    out
}

/// One record of content type `kind`.
pub fn record(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![kind, 3, 1];
    out.extend_from_slice(&u16::try_from(payload.len()).unwrap().to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// `msg` cut into handshake records at `cuts` (offsets into `msg`, ascending).
pub fn reframe(msg: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut start = 0;
    for &end in cuts.iter().chain([&msg.len()]) {
        out.extend(record(22, &msg[start..end]));
        start = end;
    }
    out
}

/// A handshake message of type `kind`.
pub fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let len = u32::try_from(body.len()).unwrap().to_be_bytes();
    let mut out = vec![kind, len[1], len[2], len[3]];
    out.extend_from_slice(body);
    out
}

/// A ClientHello body with the given session ID and extensions (type, data).
pub fn client_hello_body(session_id: &[u8], extensions: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut out = vec![3, 3];
    out.extend([7; 32]);
    out.push(u8::try_from(session_id.len()).unwrap());
    out.extend_from_slice(session_id);
    out.extend([0, 4, 0x13, 0x01, 0xc0, 0x2f]); // two cipher suites
    out.extend([1, 0]); // null compression
    out.extend(extension_block(extensions));
    out
}

/// A ServerHello body with the given random, session ID and extensions.
pub fn server_hello_body(random: [u8; 32], session_id: &[u8], extensions: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut out = vec![3, 3];
    out.extend(random);
    out.push(u8::try_from(session_id.len()).unwrap());
    out.extend_from_slice(session_id);
    out.extend([0x13, 0x01, 0]); // cipher suite, null compression
    out.extend(extension_block(extensions));
    out
}

pub fn extension_block(extensions: &[(u16, Vec<u8>)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (kind, data) in extensions {
        block.extend(kind.to_be_bytes());
        block.extend(u16::try_from(data.len()).unwrap().to_be_bytes());
        block.extend_from_slice(data);
    }
    let mut out = u16::try_from(block.len()).unwrap().to_be_bytes().to_vec();
    out.extend(block);
    out
}

/// server_name extension data naming `host`.
pub fn sni_ext(host: &[u8]) -> Vec<u8> {
    let entry_len = u16::try_from(host.len()).unwrap().to_be_bytes();
    let list_len = u16::try_from(host.len() + 3).unwrap().to_be_bytes();
    let mut out = vec![list_len[0], list_len[1], 0, entry_len[0], entry_len[1]];
    out.extend_from_slice(host);
    out
}

/// A whole hand-made ClientHello in one record.
pub fn client_hello(session_id: &[u8], extensions: &[(u16, Vec<u8>)]) -> Vec<u8> {
    record(22, &message(1, &client_hello_body(session_id, extensions)))
}
