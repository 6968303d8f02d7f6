//! The field validation (`fields::validate`, ADR 0022) against httparse, which did it before:
//! heads whose field lines hold any byte but CR and LF are refused by one exactly when
//! they are by the other.

use crate::{HeadLimits, Parse, RequestHead, ResponseHead};
use proptest::collection::vec;
use proptest::prelude::*;

const LIMITS: HeadLimits = HeadLimits { max_head_bytes: 1 << 16, max_headers: 256 };

/// Bytes a field line may hold for the pre-scan (no CR or LF), biased toward the edges of
/// the token and text sets.
fn line_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        4 => prop::sample::select(b"aZ09-_.~!#$%&'*+^`|".to_vec()),
        2 => prop::sample::select(b" \t\"(),/:;<=>?@[\\]{}\x00\x01\x08\x0b\x1f\x7f\x80\xff".to_vec()),
        1 => any::<u8>().prop_filter("line end", |b| *b != b'\r' && *b != b'\n'),
    ]
}

/// One field line the pre-scan lets through to validation: a name with no colon, not
/// starting or ending with whitespace, and not one of the fields that decide framing.
fn field_line() -> impl Strategy<Value = Vec<u8>> {
    let name = vec(line_byte(), 1..8).prop_filter("pre-scan", |n| {
        let ws = |b: &u8| *b == b' ' || *b == b'\t';
        let lower = n.to_ascii_lowercase();
        !n.contains(&b':')
            && !n.first().is_some_and(ws)
            && !n.last().is_some_and(ws)
            && ![&b"host"[..], b"content-length", b"transfer-encoding", b"connection", b"upgrade", b"expect"]
                .contains(&lower.as_slice())
    });
    (name, vec(line_byte(), 0..12)).prop_map(|(mut n, v)| {
        n.push(b':');
        n.extend(v);
        n
    })
}

fn head(start: &[u8], lines: &[Vec<u8>]) -> Vec<u8> {
    let mut h = start.to_vec();
    for l in lines {
        h.extend_from_slice(l);
        h.extend_from_slice(b"\r\n");
    }
    h.extend_from_slice(b"\r\n");
    h
}

fn httparse_accepts_response(h: &[u8]) -> bool {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    matches!(httparse::Response::new(&mut fields).parse(h), Ok(httparse::Status::Complete(n)) if n == h.len())
}

fn httparse_accepts_request(h: &[u8]) -> bool {
    let mut fields = [httparse::EMPTY_HEADER; 64];
    matches!(httparse::Request::new(&mut fields).parse(h), Ok(httparse::Status::Complete(n)) if n == h.len())
}

proptest! {
    #[test]
    fn response_fields_are_refused_exactly_when_httparse_refuses_them(lines in vec(field_line(), 0..5)) {
        let h = head(b"HTTP/1.1 200 OK\r\n", &lines);
        let ours = ResponseHead::new().parse(&h, &LIMITS, false);
        prop_assert_eq!(ours.is_ok(), httparse_accepts_response(&h), "{:?}: {:?}", String::from_utf8_lossy(&h), ours);
        if let Ok(p) = ours {
            prop_assert_eq!(p, Parse::Complete);
        }
    }

    #[test]
    fn request_fields_are_refused_exactly_when_httparse_refuses_them(lines in vec(field_line(), 0..5)) {
        let h = head(b"GET /a HTTP/1.1\r\nHost: example.com\r\n", &lines);
        let ours = RequestHead::new().parse(&h, &LIMITS);
        prop_assert_eq!(ours.is_ok(), httparse_accepts_request(&h), "{:?}: {:?}", String::from_utf8_lossy(&h), ours);
    }
}

#[test]
fn each_refused_byte_is_a_bad_header() {
    for bad in [&b"X-A: a\x00b"[..], b"X-A: \x7f", b"X-A: a\x1fb", b"X(A: b", b"X\x80: b", b"X\"A: b"] {
        let h = head(b"HTTP/1.1 200 OK\r\n", &[bad.to_vec()]);
        assert_eq!(
            ResponseHead::new().parse(&h, &LIMITS, false),
            Err(crate::HeadError::BadHeader),
            "{bad:?}"
        );
    }
    let fine = head(b"HTTP/1.1 200 OK\r\n", &[b"X-A: \ta \x80\xff~ \t".to_vec()]);
    assert!(ResponseHead::new().parse(&fine, &LIMITS, false).is_ok());
}
