//! A resumed TLS session keeps its server whichever `[cluster]` node it reaches: through
//! running binaries on 127.0.0.x, four clients start TLS 1.2 sessions through node a's
//! passthrough listener (round robin over four servers, each with its own session cache)
//! and resume them through node b, which learnt the session IDs from a by gossip.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod cluster_bed;
mod common;

use cluster_bed::*;
use common::tempdir;
use rustls::client::{Resumption, Tls12Resumption};
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::server::ServerSessionMemoryCache;
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection, StreamOwned};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

fn pki() -> &'static (CertificateDer<'static>, PrivatePkcs8KeyDer<'static>) {
    static PKI: OnceLock<(CertificateDer<'static>, PrivatePkcs8KeyDer<'static>)> = OnceLock::new();
    PKI.get_or_init(|| {
        let made = rcgen::generate_simple_self_signed(vec!["shop.example".to_string()]).unwrap();
        (made.cert.der().clone(), PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()))
    })
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// TLS 1.2, its own session-ID cache, no tickets: a session resumes only on its server.
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

/// One client's config (its own session cache).
fn client_config() -> Arc<ClientConfig> {
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
fn tls_server(name: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let config = server_config();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let config = Arc::clone(&config);
            std::thread::spawn(move || {
                let mut tls = StreamOwned::new(ServerConnection::new(config).unwrap(), stream);
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

/// One TLS session through `node`: which server answered, and whether it was resumed.
fn talk(node: &Node, config: &Arc<ClientConfig>) -> (String, bool) {
    let tcp = TcpStream::connect(node.web).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let name = ServerName::try_from("shop.example").unwrap();
    let mut tls = StreamOwned::new(ClientConnection::new(Arc::clone(config), name).unwrap(), tcp);
    tls.write_all(b"hi\n").unwrap();
    let mut answer = String::new();
    BufReader::new(&mut tls).read_line(&mut answer).unwrap();
    (answer.trim().to_string(), tls.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed))
}

#[test]
fn a_resumed_tls_session_keeps_its_server_on_another_node() {
    let names = ["t1", "t2", "t3", "t4"];
    let servers: Vec<String> =
        names.iter().map(|&n| format!("{{ name = \"{n}\", addr = \"{}\" }}", tls_server(n))).collect();
    // The listener's protocol, then the group (see `config`: both follow default_group).
    let group = format!(
        "protocol = \"tls\"\n[[group]]\nname = \"web\"\nscheduler = \"rr\"\nservers = [ {} ]\n",
        servers.join(", ")
    );
    let dir = tempdir("cluster-tls");
    let (ga, gb) = (free_udp("127.0.0.57"), free_udp("127.0.0.58"));
    let a = start_with(&dir, "a", ga, &[], KEY, &group);
    let b = start_with(&dir, "b", gb, &[ga], KEY, &group);
    until(&b, &["cluster"], Duration::from_secs(5), "a live at b", |v| node_live(v, "a") == Some(true));
    let clients: Vec<Arc<ClientConfig>> = (0..4).map(|_| client_config()).collect();
    let first: Vec<String> = clients
        .iter()
        .map(|c| {
            let (server, resumed) = talk(&a, c);
            assert!(!resumed, "a first session is a full handshake");
            server
        })
        .collect();
    let distinct: std::collections::BTreeSet<&String> = first.iter().collect();
    assert_eq!(distinct.len(), 4, "round robin at a gave each client its own server: {first:?}");
    let shared = until(&b, &["cluster"], Duration::from_secs(1), "a's four sessions at b", |v| {
        v["nodes"].as_array().unwrap().iter().any(|n| n["name"] == "a" && n["tls_sessions"] == 4)
    });
    eprintln!("a's TLS session IDs visible at b after {shared:?}");
    for (client, server) in clients.iter().zip(&first).rev() {
        let (again, resumed) = talk(&b, client);
        assert_eq!(&again, server, "the resumed session moved to another server through b");
        assert!(resumed, "the session resumed on its server");
    }
    let _ = std::fs::remove_dir_all(dir);
}
