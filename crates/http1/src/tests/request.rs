//! Accepted requests, the fields `parse` sets, and the limits.

use super::{pairs, req};
use crate::{BodyKind, HeadError, HeadLimits, Parse, RequestHead, Version};

#[test]
fn simple_get() {
    let buf = b"GET /a?b=c HTTP/1.1\r\nHost: example.com:8080\r\nX-A:  v  w \t\r\nX-E:\r\n\r\nrest";
    let h = req(buf).unwrap();
    assert_eq!(h.head_len, buf.len() - 4);
    assert_eq!(h.method.slice(buf), b"GET");
    assert_eq!(h.target.slice(buf), b"/a?b=c");
    assert_eq!(h.version, Version::Http11);
    assert_eq!(h.host.unwrap().slice(buf), b"example.com:8080");
    assert_eq!(h.body, BodyKind::None);
    assert!(h.keep_alive && h.idempotent && !h.is_head && !h.upgrade && !h.expect_continue);
    let want = [("Host", "example.com:8080"), ("X-A", "v  w"), ("X-E", "")];
    let want: Vec<_> = want.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect();
    assert_eq!(pairs(buf, &h.headers), want);
    assert_eq!(h.headers[1].line.slice(buf), b"X-A:  v  w \t");
    assert_eq!(h.header(buf, "x-a"), Some(&b"v  w"[..]));
    assert_eq!(h.header(buf, "missing"), None);
}

#[test]
fn forms_of_target() {
    for (line, target) in [
        ("GET http://a.example/x HTTP/1.1", "http://a.example/x"),
        ("OPTIONS * HTTP/1.1", "*"),
        ("GET /%7Euser/{x}|\"q\" HTTP/1.1", "/%7Euser/{x}|\"q\""),
    ] {
        let buf = format!("{line}\r\nHost: a\r\n\r\n").into_bytes();
        assert_eq!(req(&buf).unwrap().target.slice(&buf), target.as_bytes());
    }
}

/// RFC 9112 §3.2: the target's form must fit the method; CONNECT is not tunnelled (501).
#[test]
fn target_forms_that_do_not_fit_are_refused() {
    for (line, err) in [
        ("CONNECT a.example:443 HTTP/1.1", HeadError::Connect),
        ("CONNECT / HTTP/1.1", HeadError::BadTargetForm),
        ("CONNECT http://a/ HTTP/1.1", HeadError::BadTargetForm),
        ("GET * HTTP/1.1", HeadError::BadTargetForm),
        ("OPTIONS */x HTTP/1.1", HeadError::BadTargetForm),
        ("GET admin HTTP/1.1", HeadError::BadTargetForm),
        ("GET host:80 HTTP/1.1", HeadError::BadTargetForm),
        ("GET ftp://a/x HTTP/1.1", HeadError::BadTargetForm),
        ("GET http:///x HTTP/1.1", HeadError::BadTargetForm),
        ("GET /a#frag HTTP/1.1", HeadError::BadTargetForm),
    ] {
        let buf = format!("{line}\r\nHost: a\r\n\r\n").into_bytes();
        assert_eq!(req(&buf).err(), Some(err), "{line}");
    }
    assert_eq!(HeadError::Connect.status(), 501);
    assert_eq!(HeadError::BadTargetForm.status(), 400);
}

/// RFC 9112 §3.2.2: an absolute-form target's authority is the host; RFC 9110 §7.2: a
/// Host port is digits.
#[test]
fn absolute_form_authority_is_the_host() {
    let buf = b"GET http://Shop.example:8080/x?y HTTP/1.1\r\nHost: other\r\n\r\n";
    let h = req(buf).unwrap();
    assert_eq!(h.host.unwrap().slice(buf), b"Shop.example:8080");
    assert_eq!(h.authority.unwrap().slice(buf), b"Shop.example:8080");
    let origin = b"GET /x HTTP/1.1\r\nHost: a:81\r\n\r\n";
    assert_eq!(req(origin).unwrap().host.unwrap().slice(origin), b"a:81");
    assert_eq!(req(origin).unwrap().authority, None);
    for host in ["a:8o", "a:80:1", "[::1]x", "a:-1"] {
        let buf = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n").into_bytes();
        assert_eq!(req(&buf).err(), Some(HeadError::BadHost), "{host}");
    }
    assert!(req(b"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n").is_ok());
}

#[test]
fn empty_lines_before_request_line_are_skipped() {
    let buf = b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
    let h = req(buf).unwrap();
    assert_eq!(h.head_len, buf.len());
    assert_eq!(h.method.slice(buf), b"GET");
    assert_eq!(h.method.start, 4);
}

#[test]
fn body_framing() {
    let cases: &[(&str, BodyKind)] = &[
        ("", BodyKind::None),
        ("Content-Length: 0\r\n", BodyKind::None),
        ("Content-Length: 42\r\n", BodyKind::Length(42)),
        ("Content-Length: 007\r\n", BodyKind::Length(7)),
        ("Content-Length: 5, 5\r\n", BodyKind::Length(5)),
        ("Content-Length: 5\r\ncontent-length:5\r\n", BodyKind::Length(5)),
        ("Content-Length: 18446744073709551615\r\n", BodyKind::Length(u64::MAX)),
        ("Transfer-Encoding: chunked\r\n", BodyKind::Chunked),
        ("transfer-encoding: CHUNKED \r\n", BodyKind::Chunked),
    ];
    for (fields, want) in cases {
        let buf = format!("POST / HTTP/1.1\r\nHost: a\r\n{fields}\r\n").into_bytes();
        assert_eq!(req(&buf).unwrap().body, *want, "{fields:?}");
    }
}

#[test]
fn persistence() {
    let cases: &[(&str, &str, bool)] = &[
        ("1.1", "", true),
        ("1.1", "Connection: close\r\n", false),
        ("1.1", "Connection: Keep-Alive, CLOSE\r\n", false),
        ("1.1", "Connection: foo\r\nConnection: close\r\n", false),
        ("1.1", "Connection: closed\r\n", true),
        ("1.0", "", false),
        ("1.0", "Connection: keep-alive\r\n", true),
        ("1.0", "Connection: x, Keep-Alive\r\n", true),
        ("1.0", "Connection: keep-alive, close\r\n", false),
    ];
    for (v, fields, want) in cases {
        let buf = format!("GET / HTTP/{v}\r\nHost: a\r\n{fields}\r\n").into_bytes();
        assert_eq!(req(&buf).unwrap().keep_alive, *want, "{v} {fields:?}");
    }
}

#[test]
fn expect_and_upgrade() {
    let h = req(b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\n\r\n").unwrap();
    assert!(h.expect_continue);
    // RFC 9110 §10.1.1: ignored in HTTP/1.0.
    let h = req(b"PUT / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").unwrap();
    assert!(!h.expect_continue);
    let ws = b"GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    assert!(req(ws).unwrap().upgrade);
    // RFC 6455 §4.1: a WebSocket upgrade without its key is not tunnelled.
    let keyless = b"GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
    assert!(!req(keyless).unwrap().upgrade);
    let other = b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: foo/2\r\nConnection: Upgrade\r\n\r\n";
    assert!(req(other).unwrap().upgrade, "other protocols have no key");
    assert!(!req(b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n").unwrap().upgrade);
    assert!(!req(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\n\r\n").unwrap().upgrade);
    // RFC 9110 §7.8: ignored in HTTP/1.0.
    let ws10 = b"GET / HTTP/1.0\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n";
    assert!(!req(ws10).unwrap().upgrade);
}

#[test]
fn methods() {
    for (m, idem) in [
        ("GET", true),
        ("HEAD", true),
        ("PUT", true),
        ("DELETE", true),
        ("OPTIONS", true),
        ("TRACE", true),
        ("POST", false),
        ("PATCH", false),
        ("get", false),
        ("X-CUSTOM", false),
    ] {
        let buf = format!("{m} / HTTP/1.1\r\nHost: a\r\n\r\n").into_bytes();
        let h = req(&buf).unwrap();
        assert_eq!(h.idempotent, idem, "{m}");
        assert_eq!(h.is_head, m == "HEAD", "{m}");
    }
}

#[test]
fn http10_without_host() {
    let h = req(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!(h.version, Version::Http10);
    assert_eq!(h.host, None);
    assert!(h.headers.is_empty());
    // An empty Host is valid (RFC 9112 §3.2).
    let buf = b"GET / HTTP/1.1\r\nHost:\r\n\r\n";
    assert_eq!(req(buf).unwrap().host.unwrap().slice(buf), b"");
    let buf = b"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n";
    assert_eq!(req(buf).unwrap().host.unwrap().slice(buf), b"[::1]:80");
}

#[test]
fn obs_text_in_values_is_accepted() {
    let buf = b"GET / HTTP/1.1\r\nHost: a\r\nX: caf\xc3\xa9\r\n\r\n";
    assert_eq!(req(buf).unwrap().header(buf, "x"), Some(&b"caf\xc3\xa9"[..]));
}

#[test]
fn partial_then_complete() {
    let full = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    let mut h = RequestHead::new();
    let limits = HeadLimits::default();
    for n in 0..full.len() {
        assert_eq!(h.parse(&full[..n], &limits), Ok(Parse::Partial), "{n}");
    }
    assert_eq!(h.parse(full, &limits), Ok(Parse::Complete));
}

#[test]
fn errors_come_before_the_head_is_complete() {
    let mut h = RequestHead::new();
    let limits = HeadLimits::default();
    assert_eq!(h.parse(b"GET / HTTP/1.1\nHo", &limits), Err(HeadError::BareLineEnd));
    let folded = b"GET / HTTP/1.1\r\nHost: a\r\n b\r\n";
    assert_eq!(h.parse(folded, &limits), Err(HeadError::ObsFold));
    let spaced = b"GET / HTTP/1.1\r\nHost : a\r\n";
    assert_eq!(h.parse(spaced, &limits), Err(HeadError::SpaceBeforeColon));
}

#[test]
fn head_size_limit() {
    let full = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    let mut h = RequestHead::new();
    let exact = HeadLimits { max_head_bytes: full.len(), max_headers: 10 };
    assert_eq!(h.parse(full, &exact), Ok(Parse::Complete));
    let short = HeadLimits { max_head_bytes: full.len() - 1, max_headers: 10 };
    assert_eq!(h.parse(full, &short), Err(HeadError::HeadTooLarge));
    // Without a complete head: partial below the limit, refused once it is reached.
    let partial = &full[..full.len() - 2];
    let at = HeadLimits { max_head_bytes: partial.len(), max_headers: 10 };
    assert_eq!(h.parse(partial, &at), Err(HeadError::HeadTooLarge));
    let above = HeadLimits { max_head_bytes: partial.len() + 1, max_headers: 10 };
    assert_eq!(h.parse(partial, &above), Ok(Parse::Partial));
    // Slowloris: a head that never ends is refused at the limit.
    let mut slow = b"GET / HTTP/1.1\r\nHost: a\r\nX: ".to_vec();
    slow.resize(16 * 1024, b'a');
    assert_eq!(h.parse(&slow, &HeadLimits::default()), Err(HeadError::HeadTooLarge));
    assert_eq!(h.parse(&slow[..16 * 1024 - 1], &HeadLimits::default()), Ok(Parse::Partial));
    // Endless empty lines before the request line, likewise.
    let crlfs = b"\r\n".repeat(8 * 1024);
    assert_eq!(h.parse(&crlfs, &HeadLimits::default()), Err(HeadError::HeadTooLarge));
}

fn with_n_fields(n: usize) -> Vec<u8> {
    let mut buf = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
    for i in 1..n {
        buf.extend_from_slice(format!("X-{i}: {i}\r\n").as_bytes());
    }
    buf.extend_from_slice(b"\r\n");
    buf
}

#[test]
fn field_count_limit() {
    let limits = HeadLimits { max_head_bytes: 1 << 20, max_headers: 10 };
    let mut h = RequestHead::new();
    assert_eq!(h.parse(&with_n_fields(10), &limits), Ok(Parse::Complete));
    assert_eq!(h.headers.len(), 10);
    assert_eq!(h.parse(&with_n_fields(11), &limits), Err(HeadError::TooManyHeaders));
    // Refused before the head is complete.
    let partial = with_n_fields(20);
    assert_eq!(h.parse(&partial[..150], &limits), Err(HeadError::TooManyHeaders));
}

#[test]
fn more_fields_than_the_stack_holds() {
    let limits = HeadLimits { max_head_bytes: 1 << 20, max_headers: 1000 };
    let mut h = RequestHead::new();
    for n in [127, 128, 129, 1000] {
        let buf = with_n_fields(n);
        assert_eq!(h.parse(&buf, &limits), Ok(Parse::Complete), "{n}");
        assert_eq!(h.headers.len(), n);
        let last = (n - 1).to_string();
        assert_eq!(h.headers[n - 1].value.slice(&buf), last.as_bytes());
    }
    assert_eq!(h.parse(&with_n_fields(1001), &limits), Err(HeadError::TooManyHeaders));
}

#[test]
fn reuse_keeps_capacity_and_clears() {
    let mut h = RequestHead::new();
    let limits = HeadLimits::default();
    let a = b"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nX: 1\r\n\r\n";
    assert_eq!(h.parse(a, &limits), Ok(Parse::Complete));
    let cap = h.headers.capacity();
    let ptr = h.headers.as_ptr();
    let b = b"GET /b HTTP/1.0\r\n\r\n";
    assert_eq!(h.parse(b, &limits), Ok(Parse::Complete));
    assert!(h.headers.is_empty());
    assert_eq!((h.headers.capacity(), h.headers.as_ptr()), (cap, ptr));
    assert_eq!((h.body, h.host, h.keep_alive), (BodyKind::None, None, false));
    assert_eq!(h.target.slice(b), b"/b");
}

/// A byte that cannot start a request line is refused at once, not after a line end that
/// may never come (a NUL after a complete message).
#[test]
fn noise_instead_of_a_request_line_is_refused_at_once() {
    for noise in [&b"\0"[..], b"GET\0", b"\x16\x03\x01", b"G\xffT"] {
        assert_eq!(req(noise).err(), Some(HeadError::BadStartLine), "{noise:?}");
    }
    for partial in [&b"GE"[..], b"GET /x HT", b"\r\nGET"] {
        let parsed = RequestHead::new().parse(partial, &HeadLimits::default());
        assert!(matches!(parsed, Ok(Parse::Partial)), "{partial:?}: {parsed:?}");
    }
}
