//! Response heads: status line, framing (RFC 9112 §6.3), persistence, refusals.

use super::{pairs, resp};
use crate::{BodyKind, HeadError, HeadLimits, Parse, ResponseHead, Version};

#[test]
fn simple_ok() {
    let buf = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX:  y \r\n\r\nhello";
    let h = resp(buf).unwrap();
    assert_eq!(h.head_len, buf.len() - 5);
    assert_eq!((h.version, h.status), (Version::Http11, 200));
    assert_eq!(h.reason.slice(buf), b"OK");
    assert_eq!(h.body, BodyKind::Length(5));
    assert!(h.keep_alive && !h.is_interim());
    assert_eq!(pairs(buf, &h.headers)[1], ("X".into(), "y".into()));
    assert_eq!(h.header(buf, "content-length"), Some(&b"5"[..]));
}

#[test]
fn status_line_forms() {
    let cases: &[(&[u8], u16, &[u8], u32)] = &[
        (b"HTTP/1.1 200\r\n\r\n", 200, b"", 12),
        (b"HTTP/1.1 200 \r\n\r\n", 200, b"", 13),
        (b"HTTP/1.0 404 Not Found\r\n\r\n", 404, b"Not Found", 22),
        (b"HTTP/1.1 599 x\ty \x80\r\n\r\n", 599, b"x\ty \x80", 18),
        (b"HTTP/1.1 100 Continue\r\n\r\n", 100, b"Continue", 21),
    ];
    for (buf, status, reason, end) in cases {
        let h = resp(buf).unwrap();
        assert_eq!(h.status, *status);
        assert_eq!(h.reason.slice(buf), *reason);
        assert_eq!(h.reason.end, *end);
    }
}

#[test]
fn status_line_refusals() {
    let cases: &[(&[u8], HeadError)] = &[
        (b"HTTP/1.1 99 X\r\n\r\n", HeadError::BadStatus),
        (b"HTTP/1.1 099 X\r\n\r\n", HeadError::BadStatus),
        (b"HTTP/1.1 600 X\r\n\r\n", HeadError::BadStatus),
        (b"HTTP/1.1 2000 X\r\n\r\n", HeadError::BadStatus),
        (b"HTTP/1.1 20a X\r\n\r\n", HeadError::BadStatus),
        (b"HTTP/1.1 20\r\n\r\n", HeadError::BadStatus),
        (b"HTTP/1.1  200 X\r\n\r\n", HeadError::BadStatus),
        (b"HTTP/1.1 200\tX\r\n\r\n", HeadError::BadStatus),
        (b"HTTP/1.1 +20 X\r\n\r\n", HeadError::BadStatus),
        (b"HTTP/2.0 200 OK\r\n\r\n", HeadError::BadVersion),
        (b"HTTP/1.1200 OK\r\n\r\n", HeadError::BadStartLine),
        (b"ICY 200 OK\r\n\r\n", HeadError::BadStartLine),
        (b"HTTP/1.1\r\n\r\n", HeadError::BadStartLine),
        (b"\r\nHTTP/1.1 200 OK\r\n\r\n", HeadError::BadStartLine),
        (b"HTTP/1.1 200 O\x01K\r\n\r\n", HeadError::BadStartLine),
        (b"HTTP/1.1 200 OK\nX: a\r\n\r\n", HeadError::BareLineEnd),
        (b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", HeadError::ObsFold),
        (b"HTTP/1.1 200 OK\r\nX : a\r\n\r\n", HeadError::SpaceBeforeColon),
        (b"HTTP/1.1 200 OK\r\nX: \0\r\n\r\n", HeadError::BadHeader),
    ];
    for (buf, want) in cases {
        assert_eq!(resp(buf).err(), Some(*want), "{:?}", String::from_utf8_lossy(buf));
    }
}

#[test]
fn framing() {
    let cases: &[(&str, &str, BodyKind)] = &[
        ("200", "Content-Length: 3\r\n", BodyKind::Length(3)),
        ("200", "Content-Length: 3, 3\r\n", BodyKind::Length(3)),
        ("200", "Content-Length: 0\r\n", BodyKind::None),
        ("200", "", BodyKind::UntilClose),
        ("200", "Transfer-Encoding: chunked\r\n", BodyKind::Chunked),
        ("200", "Transfer-Encoding: gzip, chunked\r\n", BodyKind::Chunked),
        ("200", "Transfer-Encoding: gzip\r\n", BodyKind::UntilClose),
        ("200", "Transfer-Encoding: chunked, gzip\r\n", BodyKind::UntilClose),
        ("200", "Transfer-Encoding: x-custom\r\n", BodyKind::UntilClose),
        ("200", "Transfer-Encoding: x-custom, chunked\r\n", BodyKind::Chunked),
        ("204", "Content-Length: 3\r\n", BodyKind::None),
        ("304", "Content-Length: 3\r\n", BodyKind::None),
        ("304", "Transfer-Encoding: chunked\r\n", BodyKind::None),
        ("100", "", BodyKind::None),
        ("101", "Upgrade: websocket\r\nConnection: upgrade\r\n", BodyKind::None),
        ("199", "", BodyKind::None),
        ("205", "Content-Length: 0\r\n", BodyKind::None),
    ];
    for (status, fields, want) in cases {
        let buf = format!("HTTP/1.1 {status} X\r\n{fields}\r\n").into_bytes();
        assert_eq!(resp(&buf).unwrap().body, *want, "{status} {fields:?}");
    }
}

#[test]
fn response_to_head_has_no_body() {
    let mut h = ResponseHead::new();
    let limits = HeadLimits::default();
    for fields in ["Content-Length: 10\r\n", "Transfer-Encoding: chunked\r\n", ""] {
        let buf = format!("HTTP/1.1 200 OK\r\n{fields}\r\n").into_bytes();
        assert_eq!(h.parse(&buf, &limits, true), Ok(Parse::Complete));
        assert_eq!(h.body, BodyKind::None);
        assert!(h.keep_alive);
    }
}

#[test]
fn framing_refusals() {
    let cases: &[(&str, HeadError)] = &[
        ("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked", HeadError::LengthAndChunked),
        ("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4", HeadError::BadContentLength),
        ("HTTP/1.1 200 OK\r\nContent-Length: -1", HeadError::BadContentLength),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked", HeadError::ChunkedNotLast),
        ("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked", HeadError::ChunkedInHttp10),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: [x]", HeadError::BadHeader),
    ];
    for (head, want) in cases {
        let buf = format!("{head}\r\n\r\n").into_bytes();
        assert_eq!(resp(&buf).err(), Some(*want), "{head:?}");
    }
}

#[test]
fn persistence() {
    let cases: &[(&str, bool)] = &[
        ("HTTP/1.1 200 OK\r\nContent-Length: 1", true),
        ("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nConnection: close", false),
        ("HTTP/1.1 200 OK", false),
        ("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip", false),
        ("HTTP/1.1 204 No Content", true),
        ("HTTP/1.0 200 OK\r\nContent-Length: 1", false),
        ("HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: keep-alive", true),
        ("HTTP/1.0 200 OK\r\nConnection: keep-alive", false),
    ];
    for (head, want) in cases {
        let buf = format!("{head}\r\n\r\n").into_bytes();
        assert_eq!(resp(&buf).unwrap().keep_alive, *want, "{head:?}");
    }
}

#[test]
fn interim() {
    for (status, interim) in [(100, true), (103, true), (101, false), (200, false)] {
        let buf = format!("HTTP/1.1 {status} X\r\n\r\n").into_bytes();
        assert_eq!(resp(&buf).unwrap().is_interim(), interim);
    }
}

#[test]
fn limits_apply_to_responses() {
    let mut h = ResponseHead::new();
    let limits = HeadLimits { max_head_bytes: 64, max_headers: 2 };
    let many = b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n";
    assert_eq!(h.parse(many, &limits, false), Err(HeadError::TooManyHeaders));
    let long = [&b"HTTP/1.1 200 OK\r\nA: "[..], &[b'x'; 64]].concat();
    assert_eq!(h.parse(&long, &limits, false), Err(HeadError::HeadTooLarge));
    assert_eq!(h.parse(&long[..40], &limits, false), Ok(Parse::Partial));
}
