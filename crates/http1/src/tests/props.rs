//! Property tests: prefixes of valid heads are `Partial`, chunked scanning is independent
//! of how the input is cut, nothing panics on arbitrary bytes, and rewritten heads re-parse
//! with the same start line, fields and framing.

use super::body::scan_all;
use super::pairs;
use crate::{
    write_request_head, BodyError, BodyKind, BodyScanner, HeadLimits, Parse, RequestHead, RequestRewrite,
    ResponseHead, Scan, Version,
};
use proptest::collection::vec;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr};

const LIMITS: HeadLimits = HeadLimits { max_head_bytes: 1 << 16, max_headers: 256 };

/// A field name that does not change framing or Host (so the head stays valid).
pub(crate) fn plain_name() -> impl Strategy<Value = String> {
    "[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]{0,12}".prop_filter("framing field", |n| {
        let l = n.to_ascii_lowercase();
        !["host", "content-length", "transfer-encoding"].contains(&l.as_str())
    })
}

/// A field value without surrounding whitespace, and the OWS to put around it.
fn value_with_ows() -> impl Strategy<Value = (String, String, String)> {
    ("[ \t]{0,2}", "([!-~]([ \t!-~]{0,20}[!-~])?)?", "[ \t]{0,2}")
}

#[derive(Clone, Debug)]
struct GenRequest {
    leading_crlf: bool,
    method: String,
    target: String,
    http10: bool,
    host: String,
    /// (name, value, rendered line)
    fields: Vec<(String, String, String)>,
}

impl GenRequest {
    fn render(&self) -> Vec<u8> {
        let mut s = String::new();
        if self.leading_crlf {
            s.push_str("\r\n");
        }
        let v = if self.http10 { "1.0" } else { "1.1" };
        s.push_str(&format!("{} {} HTTP/{v}\r\nHost: {}\r\n", self.method, self.target, self.host));
        for (_, _, line) in &self.fields {
            s.push_str(line);
            s.push_str("\r\n");
        }
        s.push_str("\r\n");
        s.into_bytes()
    }
}

pub(crate) fn field_line() -> impl Strategy<Value = (String, String, String)> {
    (plain_name(), value_with_ows())
        .prop_map(|(n, (pre, v, post))| (n.clone(), v.clone(), format!("{n}:{pre}{v}{post}")))
}

fn gen_request() -> impl Strategy<Value = GenRequest> {
    (
        any::<bool>(),
        prop::sample::select(vec!["GET", "POST", "PUT", "HEAD", "OPTIONS", "X-Y"]),
        "/[A-Za-z0-9._~%/?=&!$'()*+,;:@-]{0,24}",
        any::<bool>(),
        "[a-z0-9.-]{1,12}(:[0-9]{1,5})?",
        vec(field_line(), 0..10),
    )
        .prop_map(|(leading_crlf, method, target, http10, host, fields)| GenRequest {
            leading_crlf,
            method: method.to_string(),
            target,
            http10,
            host,
            fields,
        })
}

fn chunk_ext() -> impl Strategy<Value = String> {
    vec(prop::sample::select(vec![";a", ";a=b", " ; n = \"q\\\"x\"", ";x=\"\"", "\t;k=v1"]), 0..3)
        .prop_map(|v| v.concat())
}

/// A valid chunked body (chunks with extensions, trailers) and its payload.
fn chunked_body() -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
    let chunk = (vec(any::<u8>(), 1..40), chunk_ext(), any::<bool>());
    let trailer = (plain_name(), "[!-~]{0,10}");
    (vec(chunk, 0..6), chunk_ext(), vec(trailer, 0..3)).prop_map(|(chunks, last_ext, trailers)| {
        let (mut body, mut payload) = (Vec::new(), Vec::new());
        for (data, ext, upper) in chunks {
            let size = if upper { format!("{:X}", data.len()) } else { format!("{:x}", data.len()) };
            body.extend_from_slice(format!("{size}{ext}\r\n").as_bytes());
            body.extend_from_slice(&data);
            body.extend_from_slice(b"\r\n");
            payload.extend_from_slice(&data);
        }
        body.extend_from_slice(format!("0{last_ext}\r\n").as_bytes());
        for (n, v) in trailers {
            body.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        body.extend_from_slice(b"\r\n");
        (body, payload)
    })
}

/// Feeds `input` cut at `cuts` (in any order) to one scanner, the way a proxy would:
/// each piece after the previous, stopping at `done` or at the first error.
pub(crate) fn scan_pieces(
    kind: BodyKind,
    max: u64,
    input: &[u8],
    cuts: &[usize],
) -> (Result<Scan, BodyError>, Vec<u8>) {
    let mut s = BodyScanner::new(kind, max);
    let mut data = Vec::new();
    let mut points: Vec<usize> = cuts.iter().map(|&c| c.min(input.len())).collect();
    points.sort_unstable();
    points.push(input.len());
    let (mut from, mut total) = (0, 0);
    for to in points {
        let piece = &input[from..to];
        from = to;
        match s.scan_data(piece, |d| data.extend_from_slice(d)) {
            Err(e) => return (Err(e), data),
            Ok(r) if r.done => return (Ok(Scan { consumed: total + r.consumed, done: true }), data),
            Ok(r) => {
                assert_eq!(r.consumed, piece.len(), "a scan that is not done takes all its input");
                total += r.consumed;
            }
        }
    }
    (Ok(Scan { consumed: total, done: false }), data)
}

proptest! {
    #[test]
    fn request_prefixes_are_partial(g in gen_request()) {
        let buf = g.render();
        let mut h = RequestHead::new();
        for n in 0..buf.len() {
            prop_assert_eq!(h.parse(&buf[..n], &LIMITS), Ok(Parse::Partial), "prefix {}", n);
        }
        prop_assert_eq!(h.parse(&buf, &LIMITS), Ok(Parse::Complete));
        prop_assert_eq!(h.head_len, buf.len());
        prop_assert_eq!(h.method.slice(&buf), g.method.as_bytes());
        prop_assert_eq!(h.target.slice(&buf), g.target.as_bytes());
        prop_assert_eq!(h.version == Version::Http10, g.http10);
        let mut want = vec![("Host".to_string(), g.host.clone())];
        want.extend(g.fields.iter().map(|(n, v, _)| (n.clone(), v.clone())));
        prop_assert_eq!(pairs(&buf, &h.headers), want);
    }

    #[test]
    fn response_prefixes_are_partial(
        status in 100u16..600,
        reason in "[ -~]{0,20}",
        fields in vec(field_line(), 0..10),
    ) {
        let mut buf = format!("HTTP/1.1 {status} {reason}\r\n").into_bytes();
        for (_, _, line) in &fields {
            buf.extend_from_slice(format!("{line}\r\n").as_bytes());
        }
        buf.extend_from_slice(b"\r\n");
        let mut h = ResponseHead::new();
        for n in 0..buf.len() {
            prop_assert_eq!(h.parse(&buf[..n], &LIMITS, false), Ok(Parse::Partial), "prefix {}", n);
        }
        prop_assert_eq!(h.parse(&buf, &LIMITS, false), Ok(Parse::Complete));
        prop_assert_eq!(h.status, status);
        prop_assert_eq!(h.reason.slice(&buf), reason.as_bytes());
        prop_assert_eq!(h.headers.len(), fields.len());
    }

    #[test]
    fn chunked_whole_and_split_agree((body, payload) in chunked_body(), tail in vec(any::<u8>(), 0..8)) {
        let input = [&body[..], &tail].concat();
        let whole = scan_all(BodyKind::Chunked, u64::MAX, &input);
        prop_assert_eq!(&whole, &(Ok(Scan { consumed: body.len(), done: true }), payload));
        for cut in 0..=input.len() {
            prop_assert_eq!(&scan_pieces(BodyKind::Chunked, u64::MAX, &input, &[cut]), &whole, "cut {}", cut);
        }
    }

    #[test]
    fn chunked_multi_splits_agree(
        (body, _) in chunked_body(),
        cuts in vec(0usize..400, 0..12),
        flips in vec((0usize..400, any::<u8>()), 0..2),
        max in prop_oneof![Just(u64::MAX), 0u64..200],
    ) {
        // Valid bodies, and bodies with a byte or two changed: errors must not depend on
        // the cuts either.
        let mut input = body;
        for (at, b) in flips {
            if let Some(x) = input.get_mut(at) {
                *x = b;
            }
        }
        let whole = scan_all(BodyKind::Chunked, max, &input);
        prop_assert_eq!(scan_pieces(BodyKind::Chunked, max, &input, &cuts), whole);
    }

    #[test]
    fn other_kinds_split_agree(n in 0u64..100, input in vec(any::<u8>(), 0..120), cuts in vec(0usize..120, 0..6)) {
        for kind in [BodyKind::None, BodyKind::Length(n), BodyKind::UntilClose] {
            let whole = scan_all(kind, 80, &input);
            prop_assert_eq!(scan_pieces(kind, 80, &input, &cuts), whole);
        }
    }

    #[test]
    fn no_panic_on_arbitrary_bytes(input in vec(any::<u8>(), 0..600), max in any::<u64>()) {
        let limits = HeadLimits { max_head_bytes: 512, max_headers: 8 };
        let _ = RequestHead::new().parse(&input, &limits);
        let _ = ResponseHead::new().parse(&input, &limits, false);
        let _ = ResponseHead::new().parse(&input, &limits, true);
        for kind in [BodyKind::Chunked, BodyKind::Length(max), BodyKind::UntilClose, BodyKind::None] {
            let _ = scan_all(kind, max, &input);
        }
    }

    #[test]
    fn no_panic_on_head_like_bytes(
        req_line in prop::sample::select(vec!["GET / HTTP/1.1\r\n", "GET / HTTP/1.0\r\n", "HTTP/1.1 200 OK\r\n", ""]),
        rest in vec(prop::sample::select(b"\r\n\r\n:: \t,;aH0\x00\x80=\"".to_vec()), 0..200),
        known in vec(prop::sample::select(vec![
            "Host: a\r\n", "Content-Length: 3\r\n", "Transfer-Encoding: chunked\r\n",
            "Connection: close, upgrade\r\n", "Upgrade: x\r\n", "\r\n",
        ]), 0..6),
    ) {
        let mut input = req_line.as_bytes().to_vec();
        for k in known {
            input.extend_from_slice(k.as_bytes());
        }
        input.extend_from_slice(&rest);
        check_parsed_request_rewrites(&input)?;
        let _ = ResponseHead::new().parse(&input, &LIMITS, false);
    }
}

/// Whatever parses, when rewritten, parses again with the same start line and framing.
fn check_parsed_request_rewrites(input: &[u8]) -> Result<(), TestCaseError> {
    let mut h = RequestHead::new();
    if h.parse(input, &LIMITS) != Ok(Parse::Complete) {
        return Ok(());
    }
    let rw = RequestRewrite {
        forwarded_for: Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        forwarded_proto: Some("https"),
        upgrade: h.upgrade,
        set_headers: &[],
    };
    let mut out = Vec::new();
    write_request_head(input, &h, &rw, &mut out);
    let mut again = RequestHead::new();
    prop_assert_eq!(again.parse(&out, &LIMITS), Ok(Parse::Complete));
    prop_assert_eq!(again.head_len, out.len());
    prop_assert_eq!(again.body, h.body);
    prop_assert_eq!(again.method.slice(&out), h.method.slice(input));
    prop_assert_eq!(again.target.slice(&out), h.target.slice(input));
    prop_assert_eq!(again.host.map(|s| s.slice(&out)), h.host.map(|s| s.slice(input)));
    Ok(())
}
