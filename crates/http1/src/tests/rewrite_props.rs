//! Property: a rewritten head re-parses with the same start line, exactly the end-to-end
//! fields of a reference model (RFC 9110 §7.6.1), and the same body framing.

use super::pairs;
use super::props::{field_line, plain_name};
use crate::{
    write_request_head, write_response_head, HeadLimits, Parse, RequestHead, RequestRewrite, ResponseHead,
    ResponseRewrite, Version,
};
use proptest::collection::vec;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr};

const LIMITS: HeadLimits = HeadLimits { max_head_bytes: 1 << 16, max_headers: 256 };

type Fields = Vec<(String, String)>;

/// Fields a forwarded head may carry: ordinary ones, hop-by-hop ones, and fields named by
/// Connection (including framing fields, which must survive).
fn field() -> impl Strategy<Value = (String, String)> {
    let conn_token = prop::sample::select(vec![
        "X-A",
        "x-b",
        "keep-alive",
        "close",
        "upgrade",
        "Host",
        "content-length",
        "x-forwarded-for",
        "Te",
        "X-Plain",
    ]);
    prop_oneof![
        4 => field_line().prop_map(|(n, v, _)| (n, v)),
        2 => vec(conn_token, 0..3).prop_map(|t| ("Connection".to_string(), t.join(", "))),
        1 => Just(("Keep-Alive".to_string(), "timeout=5".to_string())),
        1 => Just(("TE".to_string(), "trailers".to_string())),
        1 => Just(("Trailer".to_string(), "X-A".to_string())),
        1 => Just(("Upgrade".to_string(), "websocket".to_string())),
        1 => Just(("proxy-connection".to_string(), "keep-alive".to_string())),
        1 => prop::sample::select(vec!["", "1.1.1.1", "2.2.2.2, 3.3.3.3"])
            .prop_map(|v| ("X-Forwarded-For".to_string(), v.to_string())),
        1 => Just(("x-forwarded-proto".to_string(), "http".to_string())),
        1 => Just(("X-A".to_string(), "a".to_string())),
        1 => Just(("x-b".to_string(), "b".to_string())),
        1 => plain_name().prop_map(|n| (n, "v".to_string())),
    ]
}

fn render(start: &str, fields: &Fields) -> Vec<u8> {
    let mut s = format!("{start}\r\n");
    for (n, v) in fields {
        s.push_str(&format!("{n}: {v}\r\n"));
    }
    s.push_str("\r\n");
    s.into_bytes()
}

/// The reference model of hop-by-hop removal, written independently of `rewrite.rs`.
fn end_to_end(fields: &Fields, keep_upgrade: bool, also_drop: &[&str]) -> Fields {
    let listed: Vec<String> = fields
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("connection"))
        .flat_map(|(_, v)| v.split(',').map(|t| t.trim().to_ascii_lowercase()))
        .collect();
    let kept = |n: &str| match n.to_ascii_lowercase().as_str() {
        "upgrade" => keep_upgrade,
        "connection" | "keep-alive" | "proxy-connection" | "te" | "trailer" => false,
        l if also_drop.contains(&l) => false,
        "host" | "content-length" | "transfer-encoding" => true,
        l => !listed.iter().any(|t| t == l),
    };
    fields.iter().filter(|(n, _)| kept(n)).cloned().collect()
}

fn expected_request(fields: &Fields, http10: bool, rw: &RequestRewrite) -> Fields {
    let drop_xfp: &[&str] = if rw.forwarded_proto.is_some() { &["x-forwarded-proto"] } else { &[] };
    let mut out = end_to_end(fields, rw.upgrade, drop_xfp);
    if let Some(ip) = rw.forwarded_for {
        let last = out.iter().rposition(|(n, _)| n.eq_ignore_ascii_case("x-forwarded-for"));
        match last {
            Some(i) if out[i].1.is_empty() => out[i].1 = ip.to_string(),
            Some(i) => out[i].1 = format!("{}, {ip}", out[i].1),
            None => out.push(("X-Forwarded-For".into(), ip.to_string())),
        }
    }
    if let Some(p) = rw.forwarded_proto {
        out.push(("X-Forwarded-Proto".into(), p.into()));
    }
    if rw.upgrade {
        out.push(("Connection".into(), "upgrade".into()));
    } else if http10 {
        out.push(("Connection".into(), "keep-alive".into()));
    }
    out
}

fn expected_response(fields: &Fields, rw: &ResponseRewrite) -> Fields {
    let drop_te: &[&str] = if rw.dechunk { &["transfer-encoding"] } else { &[] };
    let mut out = end_to_end(fields, rw.upgrade, drop_te);
    let conn = if rw.upgrade {
        Some("upgrade")
    } else if !rw.keep_alive {
        Some("close")
    } else if rw.client_version == Version::Http10 {
        Some("keep-alive")
    } else {
        None
    };
    if let Some(c) = conn {
        out.push(("Connection".into(), c.into()));
    }
    out
}

proptest! {
    #[test]
    fn request_rewrite_reparses(
        mut fields in vec(field(), 0..10),
        http10 in any::<bool>(),
        length in prop::option::of(0u64..1000),
        ip in prop::option::of(any::<u32>()),
        proto in prop::option::of(prop::sample::select(vec!["http", "https"])),
        upgrade in any::<bool>(),
    ) {
        fields.insert(0, ("Host".into(), "h.example".into()));
        if let Some(n) = length {
            fields.push(("Content-Length".into(), n.to_string()));
        }
        let start = if http10 { "POST /p?q HTTP/1.0" } else { "POST /p?q HTTP/1.1" };
        let input = render(start, &fields);
        let mut h = RequestHead::new();
        prop_assert_eq!(h.parse(&input, &LIMITS), Ok(Parse::Complete));
        let rw = RequestRewrite {
            forwarded_for: ip.map(|v| IpAddr::V4(Ipv4Addr::from(v))),
            forwarded_proto: proto,
            upgrade,
            set_headers: &[],
        };
        let mut out = Vec::new();
        write_request_head(&input, &h, &rw, &mut out);
        let mut again = RequestHead::new();
        prop_assert_eq!(again.parse(&out, &LIMITS), Ok(Parse::Complete));
        prop_assert_eq!(again.head_len, out.len());
        let start_line = format!("{start}\r\n");
        prop_assert!(out.starts_with(start_line.as_bytes()));
        prop_assert_eq!(again.body, h.body);
        prop_assert_eq!(pairs(&out, &again.headers), expected_request(&fields, http10, &rw));
    }

    #[test]
    fn response_rewrite_reparses(
        fields in vec(field(), 0..10),
        chunked in any::<bool>(),
        http10_client in any::<bool>(),
        keep_alive in any::<bool>(),
        upgrade in any::<bool>(),
        dechunk in any::<bool>(),
    ) {
        let mut fields = fields;
        let framing = if chunked { ("Transfer-Encoding", "chunked") } else { ("Content-Length", "12") };
        fields.push((framing.0.into(), framing.1.into()));
        let input = render("HTTP/1.1 200 Fine", &fields);
        let mut h = ResponseHead::new();
        prop_assert_eq!(h.parse(&input, &LIMITS, false), Ok(Parse::Complete));
        let client_version = if http10_client { Version::Http10 } else { Version::Http11 };
        let rw = ResponseRewrite { client_version, keep_alive, upgrade, dechunk };
        let mut out = Vec::new();
        write_response_head(&input, &h, &rw, &mut out);
        let mut again = ResponseHead::new();
        prop_assert_eq!(again.parse(&out, &LIMITS, false), Ok(Parse::Complete));
        prop_assert!(out.starts_with(b"HTTP/1.1 200 Fine\r\n"));
        prop_assert_eq!(pairs(&out, &again.headers), expected_response(&fields, &rw));
        if !(dechunk && chunked) {
            prop_assert_eq!(again.body, h.body);
        }
    }
}
