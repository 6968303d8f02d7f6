//! Every refusal, from hand-made bytes: the stream is not TLS, or its hello breaks the
//! record layer, the handshake framing or an extension's rules.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod common;

use common::*;
use tls::{ClientHelloReader, HelloError, NotTls, Progress, ServerHelloReader};

fn client_verdict(bytes: &[u8]) -> Progress<tls::ClientHello> {
    ClientHelloReader::new(MAX).push(bytes)
}

fn client_error(bytes: &[u8]) -> HelloError {
    match client_verdict(bytes) {
        Progress::Malformed(e) => e,
        other => panic!("expected an error, got {other:?}"),
    }
}

/// Pushes one byte at a time; returns the error and how many bytes it took.
fn trickle_error(bytes: &[u8]) -> (HelloError, usize) {
    let mut reader = ClientHelloReader::new(MAX);
    for (i, b) in bytes.iter().enumerate() {
        match reader.push(&[*b]) {
            Progress::NeedMore => {}
            Progress::Malformed(e) => return (e, i + 1),
            Progress::Done(h) => panic!("parsed {h:?}"),
        }
    }
    panic!("no verdict");
}

#[test]
fn plain_http_is_refused_within_five_bytes() {
    for request in [
        "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
        "POST /x HTTP/1.1\r\n",
        "OPTIONS * HTTP/1.1\r\n",
        "PRI * HTTP/2.0\r\n",
    ] {
        let (e, took) = trickle_error(request.as_bytes());
        assert_eq!(e, HelloError::NotTls(NotTls::PlainHttp), "{request:?}");
        assert!(took <= 5, "{request:?} took {took} bytes");
        assert_eq!(e.to_string(), "not TLS: looks like plain HTTP");
    }
    // A server answering in plain HTTP.
    let e = ServerHelloReader::new(MAX).push(b"HTTP/1.1 400 Bad Request\r\n");
    assert_eq!(e, Progress::Malformed(HelloError::NotTls(NotTls::PlainHttp)));
}

#[test]
fn other_protocols_are_not_tls() {
    assert_eq!(trickle_error(b"SSH-2.0-OpenSSH_9.6\r\n"), (HelloError::NotTls(NotTls::Other(b'S')), 1));
    assert_eq!(trickle_error(b"GEX / HTTP/1.1"), (HelloError::NotTls(NotTls::Other(b'G')), 3));
    assert_eq!(trickle_error(b"get / HTTP/1.1"), (HelloError::NotTls(NotTls::Other(b'g')), 1));
    assert_eq!(client_error(&[0, 0, 0]), HelloError::NotTls(NotTls::Other(0)));
    // TLS records, but not a handshake: application data, change_cipher_spec.
    assert_eq!(client_error(&record(23, b"data")), HelloError::NotTls(NotTls::Record(23)));
    assert_eq!(client_error(&record(20, &[1])), HelloError::NotTls(NotTls::Record(20)));
}

#[test]
fn an_alert_first_is_reported() {
    let alert = [21, 3, 3, 0, 2, 2, 112];
    let e = HelloError::Alert { level: 2, description: 112 };
    assert_eq!(trickle_error(&alert), (e.clone(), 7));
    assert_eq!(ServerHelloReader::new(MAX).push(&alert), Progress::Malformed(e));
    assert_eq!(
        client_error(&[21, 3, 3, 0, 3, 2, 112, 0]),
        HelloError::BadRecord("alert record is not 2 bytes")
    );
}

#[test]
fn sslv2_compatible_hello_is_unsupported() {
    // Record header 0x80 0x2e, CLIENT-HELLO (1), version 3.1, then cipher specs.
    let v2 = [0x80, 0x2e, 0x01, 0x03, 0x01, 0x00, 0x15];
    let (e, took) = trickle_error(&v2);
    assert_eq!(e, HelloError::Unsupported("SSLv2-compatible ClientHello"));
    assert_eq!(took, 3);
    assert_eq!(client_error(&[0x80, 0x2e, 0x02]), HelloError::NotTls(NotTls::Other(0x80)));
}

#[test]
fn too_large() {
    let host = format!("{}b", "a.".repeat(100));
    let hello = client_hello(&[], &[(0, sni_ext(host.as_bytes()))]);
    // The handshake header alone shows the message cannot fit: refused before the body.
    let mut reader = ClientHelloReader::new(100);
    assert_eq!(reader.push(&hello[..9]), Progress::Malformed(HelloError::TooLarge { limit: 100 }));
    // A message cut into one-byte records grows by 5 bytes of header per byte of hello.
    let msg = unframe(&hello);
    let cuts: Vec<usize> = (1..msg.len()).collect();
    let tiny = reframe(&msg, &cuts);
    let limit = hello.len() + 10;
    assert_eq!(
        ClientHelloReader::new(limit).push(&tiny),
        Progress::Malformed(HelloError::TooLarge { limit })
    );
    // Exactly at the limit is fine.
    assert!(matches!(ClientHelloReader::new(tiny.len()).push(&tiny), Progress::Done(_)));
    assert_eq!(HelloError::TooLarge { limit }.reason(), "hello too large");
}

#[test]
fn bad_records() {
    let hello = client_hello(&[], &[]);
    let mut wrong_version = hello.clone();
    wrong_version[2] = 4;
    assert_eq!(client_error(&wrong_version), HelloError::BadRecord("record version is not 3.0 to 3.3"));
    assert_eq!(client_error(&[22, 3, 1, 0, 0]), HelloError::BadRecord("empty record"));
    assert_eq!(client_error(&[22, 3, 1, 0x40, 0x01]), HelloError::BadRecord("record longer than 2^14 bytes"));
    // Half the hello, then an application-data record.
    let msg = unframe(&hello);
    let mut interrupted = record(22, &msg[..20]);
    interrupted.extend(record(23, b"x"));
    assert_eq!(
        client_error(&interrupted),
        HelloError::BadRecord("a non-handshake record interrupts the hello")
    );
}

#[test]
fn wrong_handshake_message() {
    let server_hello = record(22, &message(2, &server_hello_body([1; 32], &[], &[])));
    assert_eq!(client_error(&server_hello), HelloError::WrongHandshake { expected: 1, got: 2 });
    let client_hello = client_hello(&[], &[]);
    assert_eq!(
        ServerHelloReader::new(MAX).push(&client_hello),
        Progress::Malformed(HelloError::WrongHandshake { expected: 2, got: 1 })
    );
}

#[test]
fn lengths_that_overrun() {
    // A session ID that claims 20 bytes where the message holds 10.
    let body = [&[3, 3][..], &[0; 32], &[20], &[9; 10]].concat();
    assert_eq!(client_error(&record(22, &message(1, &body))), HelloError::Overrun("session_id"));
    // An extension whose data runs past the extension block.
    let mut body = client_hello_body(&[], &[]);
    body.truncate(body.len() - 2);
    body.extend([0, 6, 0, 16, 0, 9, 0, 1]);
    assert_eq!(client_error(&record(22, &message(1, &body))), HelloError::Overrun("extension data"));
    // An extension block longer than the rest of the hello.
    let mut body = client_hello_body(&[], &[(0, sni_ext(b"a.b"))]);
    let n = body.len();
    body[n - 14] += 1;
    assert_eq!(client_error(&record(22, &message(1, &body))), HelloError::Overrun("extensions"));
    // A truncated extension: the block ends inside an extension header.
    let mut body = client_hello_body(&[], &[]);
    body.truncate(body.len() - 2);
    body.extend([0, 3, 0, 16, 0]);
    assert_eq!(client_error(&record(22, &message(1, &body))), HelloError::Overrun("extension data"));
    // ALPN list that claims more than the extension holds.
    let e = client_error(&client_hello(&[], &[(16, vec![0, 9, 2, b'h', b'2'])]));
    assert_eq!(e, HelloError::Overrun("ALPN list"));
}

#[test]
fn trailing_bytes() {
    let mut body = client_hello_body(&[], &[]);
    body.push(0);
    assert_eq!(client_error(&record(22, &message(1, &body))), HelloError::Trailing("ClientHello"));
    let e = client_error(&client_hello(&[], &[(16, vec![0, 3, 2, b'h', b'2', 0])]));
    assert_eq!(e, HelloError::Trailing("ALPN list"));
}

#[test]
fn duplicate_extensions() {
    let twice =
        client_hello(&[], &[(0, sni_ext(b"a.com")), (16, vec![0, 3, 2, b'h', b'2']), (0, sni_ext(b"b.com"))]);
    assert_eq!(client_error(&twice), HelloError::DuplicateExtension(0));
    let server =
        record(22, &message(2, &server_hello_body([1; 32], &[], &[(43, vec![3, 4]), (43, vec![3, 4])])));
    assert_eq!(
        ServerHelloReader::new(MAX).push(&server),
        Progress::Malformed(HelloError::DuplicateExtension(43))
    );
}

#[test]
fn bad_server_names() {
    let e = client_error(&client_hello(&[], &[(0, sni_ext("bücher.de".as_bytes()))]));
    assert_eq!(e, HelloError::BadSni("non-ASCII byte (IDNs are sent as A-labels)"));
    let e = client_error(&client_hello(&[], &[(0, sni_ext(b"10.0.0"))]));
    assert_eq!(e, HelloError::BadSni("numeric name that is not an IPv4 address"));
    let e = client_error(&client_hello(&[], &[(0, sni_ext(b"a..b"))]));
    assert_eq!(e, HelloError::BadSni("empty label"));
    // Upper case and a trailing dot name the same host.
    let Progress::Done(hello) = client_verdict(&client_hello(&[], &[(0, sni_ext(b"API.Example.com."))]))
    else {
        panic!()
    };
    assert_eq!(hello.sni.as_deref(), Some("api.example.com"));
    // Address literals (RFC 6066 forbids them; OpenSSL-based clients send them) are kept,
    // in canonical form, for the rules to route on as HAProxy and nginx do.
    for (sent, seen) in [(&b"10.0.0.1"[..], "10.0.0.1"), (b"::1", "::1"), (b"FE80:0:0:0:0:0:0:1", "fe80::1")]
    {
        let Progress::Done(hello) = client_verdict(&client_hello(&[], &[(0, sni_ext(sent))])) else {
            panic!("{sent:?} refused")
        };
        assert_eq!(hello.sni.as_deref(), Some(seen));
    }
}

#[test]
fn bad_values() {
    let e = client_error(&client_hello(&[1; 33], &[]));
    assert_eq!(e, HelloError::BadValue("session_id longer than 32 bytes"));
    let psk_first = client_hello(&[], &[(41, vec![0; 4]), (0, sni_ext(b"a.com"))]);
    assert_eq!(client_error(&psk_first), HelloError::BadValue("pre_shared_key is not the last extension"));
    assert_eq!(
        client_error(&client_hello(&[], &[(16, vec![0, 0])])),
        HelloError::BadValue("empty ALPN list")
    );
    let e = client_error(&client_hello(&[], &[(43, vec![3, 3, 4, 3])]));
    assert_eq!(e, HelloError::BadValue("supported_versions is empty or of odd length"));
    let no_suites = [&[3, 3][..], &[0; 32], &[0], &[0, 0], &[1, 0]].concat();
    let e = client_error(&record(22, &message(1, &no_suites)));
    assert_eq!(e, HelloError::BadValue("cipher_suites is empty or of odd length"));
}

#[test]
fn a_finished_reader_keeps_its_verdict() {
    let mut reader = ClientHelloReader::new(MAX);
    let first = reader.push(b"GET / HTTP/1.1\r\n");
    assert_eq!(first, Progress::Malformed(HelloError::NotTls(NotTls::PlainHttp)));
    assert_eq!(reader.push(&client_hello(&[], &[])), first);
    assert_eq!(reader.consumed(), 4);
}
