//! Hellos from real rustls clients and servers, run in memory: what the switch would see on
//! a passthrough listener, including session-ID persistence end to end.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::*;
use rustls::HandshakeKind;
use tls::{Progress, ServerHelloReader, TlsVersion};

#[test]
fn tls13_client_hello() {
    let hello = parse_client(&client_hello_bytes(&client_config(BOTH)));
    assert_eq!(hello.version, TlsVersion::Tls13);
    assert_eq!(hello.legacy_version, 0x0303);
    assert_eq!(hello.sni.as_deref(), Some(HOST));
    assert_eq!(hello.alpn, [b"h2".to_vec(), b"http/1.1".to_vec()]);
    assert_eq!(hello.alpn_joined(), "h2,http/1.1");
    // Middlebox compatibility: a TLS 1.3 client sends 32 random bytes as its session ID.
    assert_eq!(hello.session_id.len(), 32);
    assert!(hello.cipher_suites.contains(&0x1301)); // TLS_AES_128_GCM_SHA256
    assert!(!hello.psk && !hello.has_session_ticket);
}

#[test]
fn tls12_client_hello() {
    let hello = parse_client(&client_hello_bytes(&client_config(TLS12)));
    assert_eq!(hello.version, TlsVersion::Tls12);
    assert_eq!(hello.version.to_string(), "TLSv1.2");
    assert_eq!(hello.sni.as_deref(), Some(HOST));
    assert_eq!(hello.alpn_joined(), "h2,http/1.1");
    assert!(hello.session_id.is_empty(), "a fresh TLS 1.2-only client resumes nothing");
}

#[test]
fn tls13_server_hello_echoes_the_client_session_id() {
    let client_config = client_config(BOTH);
    let run = handshake(&client_config, &server_config(BOTH));
    let client_hello = parse_client(&run.client_flights[0]);
    let flight = &run.server_flights[0];
    let mut reader = ServerHelloReader::new(MAX);
    let Progress::Done(hello) = reader.push(flight) else { panic!("no ServerHello") };
    assert_eq!(hello.version, TlsVersion::Tls13);
    assert_eq!(hello.legacy_version, 0x0303);
    assert_eq!(hello.session_id, client_hello.session_id);
    assert!(!hello.is_hello_retry);
    assert!(!hello.resumption_via_session_id(), "TLS 1.3 resumes by PSK, not by session ID");
    // The reader stops at the end of the ServerHello; the encrypted rest is not its business.
    assert!(reader.consumed() < flight.len());
}

#[test]
fn hello_retry_request_is_reported() {
    let run = handshake(&client_config(BOTH), &server_config_p384_only());
    let retry = parse_server(&run.server_flights[0]);
    assert!(retry.is_hello_retry);
    assert_eq!(retry.version, TlsVersion::Tls13);
    assert!(!retry.resumption_via_session_id());
    // The second ServerHello is the real one.
    assert!(!parse_server(&run.server_flights[1]).is_hello_retry);
    // The client's second ClientHello reads like the first, SNI and all, once past the
    // change_cipher_spec record rustls sends first for middlebox compatibility.
    let second = &run.client_flights[1];
    assert_eq!(second[..6], [20, 3, 3, 0, 1, 1]);
    assert_eq!(parse_client(&second[6..]).sni.as_deref(), Some(HOST));
}

/// Seed 000 §1: the switch learns the session ID from the ServerHello of a full TLS 1.2
/// handshake; the client's next ClientHello carries it, and the server resumes it.
#[test]
fn tls12_session_id_persistence_end_to_end() {
    let (client_config, server_config) = (client_config(TLS12), server_config(TLS12));
    let first = handshake(&client_config, &server_config);
    assert_eq!(first.client.handshake_kind(), Some(HandshakeKind::Full));
    let issued = parse_server(&first.server_flights[0]);
    assert_eq!(issued.version, TlsVersion::Tls12);
    assert_eq!(issued.session_id.len(), 32);
    assert!(issued.resumption_via_session_id());

    let second = handshake(&client_config, &server_config);
    let resuming = parse_client(&second.client_flights[0]);
    assert_eq!(resuming.session_id, issued.session_id, "the switch would route this to the same server");
    assert_eq!(resuming.session_id_hex(), issued.session_id_hex());
    assert!(!resuming.has_session_ticket);
    let accepted = parse_server(&second.server_flights[0]);
    assert_eq!(accepted.session_id, issued.session_id);
    assert_eq!(second.client.handshake_kind(), Some(HandshakeKind::Resumed));
}

#[test]
fn tls13_resumption_offers_a_psk() {
    let (client_config, server_config) = (client_config(BOTH), server_config(BOTH));
    handshake(&client_config, &server_config);
    let second = handshake(&client_config, &server_config);
    let resuming = parse_client(&second.client_flights[0]);
    assert!(resuming.psk);
    assert_eq!(resuming.version, TlsVersion::Tls13);
    assert_eq!(second.client.handshake_kind(), Some(HandshakeKind::Resumed));
}

#[test]
fn server_hello_one_byte_at_a_time() {
    for flight in &samples().server_flights {
        let whole = parse_server(flight);
        let mut reader = ServerHelloReader::new(MAX);
        let mut verdict = Progress::NeedMore;
        for b in flight {
            verdict = reader.push(&[*b]);
            if verdict != Progress::NeedMore {
                break;
            }
        }
        assert_eq!(verdict, Progress::Done(whole));
    }
}
