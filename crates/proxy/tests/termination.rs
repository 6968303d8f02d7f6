//! TLS termination on an HTTP listener (`tls = [ { cert, key }, … ]`): certificates
//! chosen by SNI, the normal HTTP routing behind it (keep-alive, X-Forwarded-Proto:
//! https), a failed handshake counted, and a key that does not match its certificate
//! refused on reload.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use proxy::{Counter, Switch};
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A self-signed certificate for `name`, written as `<name>.pem` / `<name>.key` in `dir`.
fn cert_files(dir: &Path, name: &str) -> CertificateDer<'static> {
    let made = rcgen::generate_simple_self_signed(vec![name.to_string()]).unwrap();
    std::fs::write(dir.join(format!("{name}.pem")), made.cert.pem()).unwrap();
    std::fs::write(dir.join(format!("{name}.key")), made.signing_key.serialize_pem()).unwrap();
    made.cert.der().clone()
}

fn client_config(roots: &[CertificateDer<'static>]) -> Arc<ClientConfig> {
    let mut store = RootCertStore::empty();
    for r in roots {
        store.add(r.clone()).unwrap();
    }
    let provider = Arc::new(CryptoProvider { ..ring::default_provider() });
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store)
        .with_no_client_auth();
    Arc::new(config)
}

/// Two requests on one TLS connection with SNI `sni`: the responses' text, and the
/// certificate the switch presented.
fn two_requests(
    addr: SocketAddr,
    sni: &str,
    config: &Arc<ClientConfig>,
) -> (String, CertificateDer<'static>) {
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let conn =
        ClientConnection::new(Arc::clone(config), ServerName::try_from(sni.to_string()).unwrap()).unwrap();
    let mut tls = StreamOwned::new(conn, tcp);
    let req = format!("GET /headers HTTP/1.1\r\nHost: {sni}\r\n\r\nGET /headers HTTP/1.1\r\nHost: {sni}\r\nConnection: close\r\n\r\n");
    tls.write_all(req.as_bytes()).unwrap();
    let mut text = String::new();
    // The switch ends the session with close_notify: a clean end, not a truncation.
    tls.read_to_string(&mut text).unwrap();
    let cert = tls.conn.peer_certificates().unwrap()[0].clone().into_owned();
    (text, cert)
}

fn tempdir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cswitch-term-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn config_text(origin: SocketAddr, certs: &str) -> String {
    format!(
        "[global]\nworkers = 1\n[access_log]\nenabled = false\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\ntls = {certs}\n\
         [[group]]\nname = \"web\"\nservers = [ {{ name = \"o1\", addr = \"{origin}\" }} ]\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminates_tls_with_the_certificate_the_sni_names() {
    let origin = testkit::Origin::start("o1").await;
    let dir = tempdir("sni");
    let (a, b) = (cert_files(&dir, "a.example"), cert_files(&dir, "b.example"));
    let certs = "[ { cert = \"a.example.pem\", key = \"a.example.key\" }, { cert = \"b.example.pem\", key = \"b.example.key\" } ]";
    let cfg = config::parse(&config_text(origin.addr(), certs), &dir.join("c.toml"))
        .unwrap_or_else(|d| panic!("{d}"));
    let switch = Switch::start(cfg).unwrap();
    let addr = switch.local_addr("web").unwrap();
    let client = client_config(&[a.clone(), b.clone()]);
    let (text, cert) = tokio::task::spawn_blocking({
        let client = Arc::clone(&client);
        move || two_requests(addr, "b.example", &client)
    })
    .await
    .unwrap();
    assert_eq!(cert, b, "the certificate for b.example");
    assert_eq!(text.matches("HTTP/1.1 200").count(), 2, "two requests on one TLS connection:\n{text}");
    assert!(text.to_ascii_lowercase().contains("x-forwarded-proto: https"), "{text}");
    let (_, cert) =
        tokio::task::spawn_blocking(move || two_requests(addr, "a.example", &client)).await.unwrap();
    assert_eq!(cert, a, "the certificate for a.example (the first: also the default)");
    assert_eq!(origin.requests().len(), 4);

    // Plain HTTP on the TLS port: the handshake fails, is counted, nothing is forwarded.
    let mut plain = TcpStream::connect(addr).unwrap();
    plain.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    plain.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    let mut rest = Vec::new();
    let _ = plain.read_to_end(&mut rest);
    assert!(!String::from_utf8_lossy(&rest).contains("HTTP/1.1 200"));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(switch.stats().get(Counter::TlsHandshakeFailed), 1);
    assert_eq!(origin.requests().len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_that_does_not_match_its_certificate_is_refused() {
    let origin = testkit::Origin::start("o1").await;
    let dir = tempdir("mismatch");
    cert_files(&dir, "a.example");
    cert_files(&dir, "b.example");
    let good = "{ cert = \"a.example.pem\", key = \"a.example.key\" }";
    let cfg = config::parse(&config_text(origin.addr(), good), &dir.join("c.toml")).unwrap();
    let switch = Switch::start(cfg).unwrap();
    let crossed = "{ cert = \"a.example.pem\", key = \"b.example.key\" }";
    let cfg = config::parse(&config_text(origin.addr(), crossed), &dir.join("c.toml")).unwrap();
    let err = switch.reload(cfg).unwrap_err().to_string();
    assert!(err.contains("b.example.key does not match") && err.contains("a.example.pem"), "{err}");
    // A missing file is a config error with its position.
    let missing = "{ cert = \"nope.pem\", key = \"a.example.key\" }";
    let diags =
        config::parse(&config_text(origin.addr(), missing), &dir.join("c.toml")).unwrap_err().to_string();
    assert!(diags.contains("c.toml:9:16: error: cannot read cert file"), "{diags}");
}
