//! The refusal table: every `HeadError` with the inputs that must produce it, most of them
//! request-smuggling vectors (RFC 9112 §2.2, §3, §5, §6, §11.2).

use super::req;
use crate::HeadError::{self, *};

/// A request line and Host, then `fields`, then the empty line.
fn with_fields(fields: &str) -> Vec<u8> {
    format!("POST / HTTP/1.1\r\nHost: a\r\n{fields}\r\n").into_bytes()
}

#[test]
fn framing_smuggling_table() {
    let cases: &[(&str, HeadError)] = &[
        ("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", LengthAndChunked),
        ("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", LengthAndChunked),
        ("Content-Length: 0\r\nTransfer-Encoding: chunked\r\n", LengthAndChunked),
        ("Content-Length: 1, 2\r\n", BadContentLength),
        ("Content-Length: 1\r\nContent-Length: 2\r\n", BadContentLength),
        ("Content-Length: +5\r\n", BadContentLength),
        ("Content-Length: -5\r\n", BadContentLength),
        ("Content-Length: 0x10\r\n", BadContentLength),
        ("Content-Length: 1e3\r\n", BadContentLength),
        ("Content-Length: 1 2\r\n", BadContentLength),
        ("Content-Length: 5,\r\n", BadContentLength),
        ("Content-Length: \r\n", BadContentLength),
        ("Content-Length: 18446744073709551616\r\n", BadContentLength),
        ("Content-Length: \"5\"\r\n", BadContentLength),
        ("Transfer-Encoding: chunked, gzip\r\n", ChunkedNotLast),
        ("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n", ChunkedNotLast),
        ("Transfer-Encoding: chunked, chunked\r\n", ChunkedNotLast),
        ("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", ChunkedNotLast),
        ("Transfer-Encoding: gzip\r\n", ChunkedNotLast),
        ("Transfer-Encoding: identity\r\n", ChunkedNotLast),
        ("Transfer-Encoding: \r\n", BadHeader),
        ("Transfer-Encoding: , chunked,\r\n", BadHeader),
        ("Transfer-Encoding: ,chunked\r\n", BadHeader),
        ("Transfer-Encoding: xchunked\r\n", UnknownCoding),
        ("Transfer-Encoding: chunked-false\r\n", UnknownCoding),
        ("Transfer-Encoding: chunked, xchunked\r\n", UnknownCoding),
        ("Transfer-Encoding: gzip, chunked\r\n", UnknownCoding),
        ("Transfer-Encoding: chunked;q=1\r\n", UnknownCoding),
        ("Transfer-Encoding: \"chunked\"\r\n", BadHeader),
        ("Transfer-Encoding : chunked\r\n", SpaceBeforeColon),
        ("Transfer-Encoding\t: chunked\r\n", SpaceBeforeColon),
        ("Content-Length : 5\r\n", SpaceBeforeColon),
        ("X: a\r\n Transfer-Encoding: chunked\r\n", ObsFold),
        ("X: a\r\n\tb\r\n", ObsFold),
        ("Transfer-Encoding: chunked\rX: a\r\n", BareLineEnd),
        ("Transfer-Encoding: chunked\nX: a\r\n", BareLineEnd),
        ("X: a\0b\r\n", BadHeader),
        ("X: a\x7fb\r\n", BadHeader),
        ("X: a\x01\r\n", BadHeader),
        ("X@Y: a\r\n", BadHeader),
        ("X Y: a\r\n", BadHeader),
        ("NoColon\r\n", BadHeader),
        (": empty name\r\n", BadHeader),
        ("\"X\": a\r\n", BadHeader),
        ("Host: b\r\n", BadHost),
    ];
    for (fields, want) in cases {
        assert_eq!(req(&with_fields(fields)).err(), Some(*want), "{fields:?}");
    }
}

#[test]
fn start_line_table() {
    let cases: &[(&[u8], HeadError)] = &[
        (b"GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        (b"GET /a\x80 HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        (b"GET /\xff HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        (b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        (b"GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        (b"GET /a\0b HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        (b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        (b"GET /\x1b HTTP/1.1\r\nHost: a\r\n\r\n", BadTarget),
        // The target runs to the last SP, so a trailing SP puts the version in the target.
        (b"GET / HTTP/1.1 \r\nHost: a\r\n\r\n", BadTarget),
        (b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", BadVersion),
        (b"GET / HTTP/1.2\r\nHost: a\r\n\r\n", BadVersion),
        (b"GET / HTTP/0.9\r\nHost: a\r\n\r\n", BadVersion),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", BadVersion),
        (b"GET / HTTX/1.1\r\nHost: a\r\n\r\n", BadStartLine),
        (b"GET / http/1.1\r\nHost: a\r\n\r\n", BadStartLine),
        (b"GET / HTTP/1.1x\r\nHost: a\r\n\r\n", BadStartLine),
        (b"GET / HTTP/1\r\nHost: a\r\n\r\n", BadStartLine),
        (b"GET /\r\nHost: a\r\n\r\n", BadStartLine),
        (b"GET\r\nHost: a\r\n\r\n", BadStartLine),
        (b"GET  HTTP/1.1\r\nHost: a\r\n\r\n", BadStartLine),
        (b" GET / HTTP/1.1\r\nHost: a\r\n\r\n", BadStartLine),
        (b"G@T / HTTP/1.1\r\nHost: a\r\n\r\n", BadStartLine),
        (b"GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", BadStartLine),
        (b"GET / HTTP/1.1\nHost: a\n\n", BareLineEnd),
        (b"GET / HTTP/1.1\r\nHost: a\n\r\n", BareLineEnd),
        (b"GET / HTTP/1.1\rHost: a\r\n\r\n", BareLineEnd),
        (b"GET / HTTP/1.1\r\nHost: a\r\n\n", BareLineEnd),
        (b"\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", BareLineEnd),
        (b"GET / HTTP/1.1\r\n Host: a\r\n\r\n", ObsFold),
    ];
    for (input, want) in cases {
        assert_eq!(req(input).err(), Some(*want), "{:?}", String::from_utf8_lossy(input));
    }
}

#[test]
fn host_table() {
    let cases: &[(&[u8], HeadError)] = &[
        (b"GET / HTTP/1.1\r\n\r\n", BadHost),
        (b"GET / HTTP/1.1\r\nX: a\r\n\r\n", BadHost),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", BadHost),
        (b"GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", BadHost),
        (b"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", BadHost),
        (b"GET / HTTP/1.1\r\nHost : a\r\n\r\n", SpaceBeforeColon),
        (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", BadHost),
        (b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", BadHost),
        (b"GET / HTTP/1.1\r\nHost: a@b\r\n\r\n", BadHost),
        (b"GET / HTTP/1.1\r\nHost: a\"b\r\n\r\n", BadHost),
    ];
    for (input, want) in cases {
        assert_eq!(req(input).err(), Some(*want), "{:?}", String::from_utf8_lossy(input));
    }
}

#[test]
fn transfer_encoding_in_http10() {
    let r = req(b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n");
    assert_eq!(r.err(), Some(ChunkedInHttp10));
    let r = req(b"POST / HTTP/1.0\r\nTransfer-Encoding: gzip\r\n\r\n");
    assert_eq!(r.err(), Some(ChunkedInHttp10));
}

#[test]
fn statuses_of_refusals() {
    assert_eq!(HeadTooLarge.status(), 431);
    assert_eq!(TooManyHeaders.status(), 431);
    assert_eq!(BadVersion.status(), 505);
    assert_eq!(UnknownCoding.status(), 501);
    for e in [BadStartLine, BadHeader, BareLineEnd, ObsFold, SpaceBeforeColon, BadTarget] {
        assert_eq!(e.status(), 400);
        assert_eq!(e.reason(), e.to_string());
    }
    for e in [BadHost, LengthAndChunked, BadContentLength, ChunkedInHttp10, ChunkedNotLast] {
        assert_eq!(e.status(), 400);
        assert_eq!(e.reason(), e.to_string());
    }
}
