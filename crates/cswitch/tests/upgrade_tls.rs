//! TLS-terminated connections and a binary upgrade (issue 16): a rustls session cannot be
//! imported into another process (ADR 0016), so they finish in the old process. An idle
//! one is closed at the hand-over with close_notify (the client reads a clean end, not a
//! truncation), one with a request in flight gets its answer and is then closed the same
//! way, and the old process exits once they are gone; both clients connect again (to the
//! new process) and are served. The report counts them as finished in the old process.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::upgrading::{connect, get, Switch};
use common::wait_for;
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

type Tls = StreamOwned<ClientConnection, TcpStream>;

fn client_config(cert: CertificateDer<'static>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(cert).unwrap();
    let provider = Arc::new(ring::default_provider()) as Arc<CryptoProvider>;
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

fn tls_connect(addr: SocketAddr, config: &Arc<ClientConfig>) -> Tls {
    let name = ServerName::try_from("shop.example").unwrap();
    StreamOwned::new(ClientConnection::new(Arc::clone(config), name).unwrap(), connect(addr))
}

/// Reads what is left: Ok(()) if the switch ended the session with close_notify.
fn closed_cleanly(tls: &mut Tls) -> std::io::Result<()> {
    let mut rest = Vec::new();
    tls.read_to_end(&mut rest)?; // an end without close_notify is an UnexpectedEof error
    assert!(rest.is_empty(), "bytes after the last answer: {rest:?}");
    Ok(())
}

#[test]
fn tls_terminated_connections_finish_in_the_old_process_and_close_cleanly() {
    let tag = "upgrade-tls";
    let dir = Switch::dir_for(tag);
    let made = rcgen::generate_simple_self_signed(vec!["shop.example".to_string()]).unwrap();
    std::fs::write(dir.join("tls.pem"), made.cert.pem()).unwrap();
    std::fs::write(dir.join("tls.key"), made.signing_key.serialize_pem()).unwrap();
    let secure = "[[listener]]\nname = \"secure\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
                  tls = { cert = \"tls.pem\", key = \"tls.key\" }\n";
    let mut switch = Switch::start(tag, secure, None);
    let addr = switch.addr("secure");
    let config = client_config(made.cert.der().clone());

    let mut idle = tls_connect(addr, &config);
    assert_eq!(get(&mut idle, "/idle").unwrap(), "/idle");
    let mut busy = tls_connect(addr, &config);
    assert_eq!(get(&mut busy, "/warm").unwrap(), "/warm");
    let slow = std::thread::spawn(move || {
        let body = get(&mut busy, "/slow").unwrap();
        (body, busy)
    });
    std::thread::sleep(Duration::from_millis(100)); // the slow request reached the origin

    let out = switch.upgrade_in_background().join().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("upgrade report: {report}");
    switch.others.push(u32::try_from(report["new_pid"].as_u64().unwrap()).unwrap());

    closed_cleanly(&mut idle).expect("the idle TLS connection was not closed with close_notify");
    let (body, mut busy) = slow.join().unwrap();
    assert_eq!(body, "/slow", "the request in flight is answered");
    closed_cleanly(&mut busy).expect("the busy TLS connection was not closed with close_notify");
    assert_eq!(report["moved"], 0, "{report}");
    assert_eq!(report["finished_in_old_why"]["tls_terminated"], 2, "{report}");
    assert_eq!(report["cut_at_grace_period"], 0, "{report}");
    // Progress in the log while the old process waits for the request in flight.
    let line = wait_for(&switch.log, "upgrade: handing over");
    assert!(line.contains("still_open_here=1"), "{line}");
    switch.first_exits_within(Duration::from_secs(10));
    for path in ["/again1", "/again2"] {
        assert_eq!(get(&mut tls_connect(addr, &config), path).unwrap(), path, "served by the new process");
    }
}
