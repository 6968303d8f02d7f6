//! Forwarded heads: hop-by-hop removal, X-Forwarded-*, Connection (RFC 9110 §7.6.1).

use super::{req, resp};
use crate::{write_request_head, write_response_head, RequestRewrite, ResponseRewrite, Version};
use std::net::IpAddr;

const PLAIN: RequestRewrite<'static> =
    RequestRewrite { forwarded_for: None, forwarded_proto: None, upgrade: false, set_headers: &[] };

fn rewrite_req(input: &[u8], rw: &RequestRewrite) -> String {
    let head = req(input).unwrap();
    let mut out = b"prefix|".to_vec();
    write_request_head(input, &head, rw, &mut out);
    let out = String::from_utf8(out).unwrap();
    out.strip_prefix("prefix|").expect("out is appended to, never cleared").to_string()
}

fn rewrite_resp(input: &[u8], rw: &ResponseRewrite) -> String {
    let head = resp(input).unwrap();
    let mut out = Vec::new();
    write_response_head(input, &head, rw, &mut out);
    String::from_utf8(out).unwrap()
}

fn ip(s: &str) -> Option<IpAddr> {
    Some(s.parse().unwrap())
}

#[test]
fn request_passes_through_unchanged() {
    let input = b"POST /x?y HTTP/1.1\r\nHost: a\r\nX-A:  spaced  \r\nContent-Length: 0\r\n\r\n";
    assert_eq!(rewrite_req(input, &PLAIN), String::from_utf8_lossy(input));
}

#[test]
fn hop_by_hop_fields_are_removed() {
    let input = b"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Secret\r\n\
        Keep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nTE: trailers\r\n\
        Trailer: X-T\r\nUpgrade: h2c\r\nX-Secret: s\r\nx-secret: t\r\nX-Kept: k\r\n\r\n";
    let want = "GET / HTTP/1.1\r\nHost: a\r\nX-Kept: k\r\n\r\n";
    assert_eq!(rewrite_req(input, &PLAIN), want);
}

#[test]
fn connection_naming_only_close_or_keep_alive_drops_just_the_fixed_fields() {
    // The common heads: Connection lists nothing beyond the two options (no field search);
    // a field named Close still goes when Connection lists close (the option is its name).
    let input = b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Keep-Alive\r\nKeep-Alive: 5\r\n\
        X-Close: k\r\nClose: c\r\nTE: x\r\n\r\n";
    assert_eq!(rewrite_req(input, &PLAIN), "GET / HTTP/1.1\r\nHost: a\r\nX-Close: k\r\nClose: c\r\n\r\n");
    let input = b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nClose: c\r\nX-A: a\r\n\r\n";
    assert_eq!(rewrite_req(input, &PLAIN), "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\r\n\r\n");
    // Listed beside them, another field goes too, in any case and in a later Connection field.
    let input = b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nX-A: a\r\nConnection: , x-a\r\n\r\n";
    assert_eq!(rewrite_req(input, &PLAIN), "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
}

#[test]
fn framing_fields_survive_connection() {
    let input = b"POST / HTTP/1.1\r\nHost: a\r\nConnection: Host, Content-Length, close\r\n\
        Content-Length: 3\r\n\r\n";
    let want = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n";
    assert_eq!(rewrite_req(input, &PLAIN), want);
    let input = b"POST / HTTP/1.1\r\nHost: a\r\nConnection: transfer-encoding\r\n\
        Transfer-Encoding: chunked\r\n\r\n";
    let want = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(rewrite_req(input, &PLAIN), want);
}

#[test]
fn x_forwarded_for() {
    let rw = RequestRewrite { forwarded_for: ip("10.0.0.9"), ..PLAIN };
    let none = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_eq!(rewrite_req(none, &rw), "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 10.0.0.9\r\n\r\n");
    let two =
        b"GET / HTTP/1.1\r\nX-Forwarded-For: 1.1.1.1\r\nHost: a\r\nx-forwarded-for: 2.2.2.2 \r\nX: y\r\n\r\n";
    let want = "GET / HTTP/1.1\r\nX-Forwarded-For: 1.1.1.1\r\nHost: a\r\n\
        x-forwarded-for: 2.2.2.2, 10.0.0.9\r\nX: y\r\n\r\n";
    assert_eq!(rewrite_req(two, &rw), want);
    let empty = b"GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For:  \r\n\r\n";
    assert_eq!(rewrite_req(empty, &rw), "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 10.0.0.9\r\n\r\n");
    // A client can't strip the field by naming it in Connection: ours is added anyway.
    let hidden =
        b"GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 6.6.6.6\r\nConnection: x-forwarded-for\r\n\r\n";
    assert_eq!(rewrite_req(hidden, &rw), "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 10.0.0.9\r\n\r\n");
    let v6 = RequestRewrite { forwarded_for: ip("2001:db8::1"), ..PLAIN };
    assert!(rewrite_req(none, &v6).contains("X-Forwarded-For: 2001:db8::1\r\n"));
}

#[test]
fn x_forwarded_proto() {
    let input = b"GET / HTTP/1.1\r\nX-Forwarded-Proto: https\r\nHost: a\r\nx-forwarded-proto: x\r\n\r\n";
    let rw = RequestRewrite { forwarded_proto: Some("http"), ..PLAIN };
    assert_eq!(rewrite_req(input, &rw), "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-Proto: http\r\n\r\n");
    // Without a value to set, the client's are forwarded.
    assert_eq!(rewrite_req(input, &PLAIN), String::from_utf8_lossy(input));
    let both = RequestRewrite { forwarded_for: ip("1.2.3.4"), forwarded_proto: Some("https"), ..PLAIN };
    let want = "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 1.2.3.4\r\nX-Forwarded-Proto: https\r\n\r\n";
    assert_eq!(rewrite_req(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", &both), want);
}

#[test]
fn set_headers_replace_the_clients_and_never_touch_framing() {
    let input = b"POST / HTTP/1.1\r\nHost: a\r\nX-Tier: free\r\nContent-Length: 2\r\nx-tier: again\r\n\r\n";
    let set = [("X-Tier", "gold"), ("Content-Length", "99"), ("X-Rule", "R1"), ("x-tier", "platinum")];
    let rw = RequestRewrite { set_headers: &set, ..PLAIN };
    let want = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nX-Rule: R1\r\nx-tier: platinum\r\n\r\n";
    assert_eq!(rewrite_req(input, &rw), want);
}

#[test]
fn a_set_header_with_an_empty_value_removes_the_field() {
    let input = b"GET / HTTP/1.1\r\nHost: a\r\nCookie: SRV=s1\r\nX-Keep: 1\r\n\r\n";
    let rw = RequestRewrite { set_headers: &[("Cookie", "")], ..PLAIN };
    assert_eq!(rewrite_req(input, &rw), "GET / HTTP/1.1\r\nHost: a\r\nX-Keep: 1\r\n\r\n");
}

#[test]
fn connection_added_for_upgrade_and_http10() {
    let ws = b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n";
    let rw = RequestRewrite { upgrade: true, ..PLAIN };
    let want = "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n";
    assert_eq!(rewrite_req(ws, &rw), want);
    let old = b"GET / HTTP/1.0\r\nConnection: close\r\n\r\n";
    assert_eq!(rewrite_req(old, &PLAIN), "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
}

#[test]
fn leading_empty_lines_are_not_forwarded() {
    let input = b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
    assert_eq!(rewrite_req(input, &PLAIN), "GET / HTTP/1.1\r\nHost: a\r\n\r\n");
}

const KEEP: ResponseRewrite =
    ResponseRewrite { client_version: Version::Http11, keep_alive: true, upgrade: false, dechunk: false };

#[test]
fn response_rewrites() {
    let input = b"HTTP/1.1 200 OK\r\nConnection: keep-alive, X-H\r\nKeep-Alive: timeout=5\r\n\
        X-H: 1\r\nTransfer-Encoding: chunked\r\nX-E: 2\r\n\r\n";
    let base = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-E: 2\r\n";
    assert_eq!(rewrite_resp(input, &KEEP), format!("{base}\r\n"));
    let close = ResponseRewrite { keep_alive: false, ..KEEP };
    assert_eq!(rewrite_resp(input, &close), format!("{base}Connection: close\r\n\r\n"));
    let old = ResponseRewrite { client_version: Version::Http10, ..KEEP };
    assert_eq!(rewrite_resp(input, &old), format!("{base}Connection: keep-alive\r\n\r\n"));
    let dechunk =
        ResponseRewrite { client_version: Version::Http10, keep_alive: false, upgrade: false, dechunk: true };
    assert_eq!(rewrite_resp(input, &dechunk), "HTTP/1.1 200 OK\r\nX-E: 2\r\nConnection: close\r\n\r\n");
}

#[test]
fn response_upgrade_and_bare_status_line() {
    let input = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
        Sec-WebSocket-Accept: x\r\n\r\n";
    let rw = ResponseRewrite { upgrade: true, ..KEEP };
    let want = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: x\r\n\
        Connection: upgrade\r\n\r\n";
    assert_eq!(rewrite_resp(input, &rw), want);
    assert_eq!(rewrite_resp(b"HTTP/1.1 204\r\nUpgrade: x\r\n\r\n", &KEEP), "HTTP/1.1 204\r\n\r\n");
    assert_eq!(rewrite_resp(b"HTTP/1.1 204 \r\n\r\n", &KEEP), "HTTP/1.1 204 \r\n\r\n");
}

/// RFC 9112 §3.2.2: the absolute form's authority is the Host the server gets; §6.3: a
/// repeated or listed Content-Length leaves as one field.
#[test]
fn host_and_content_length_are_settled_before_forwarding() {
    let input = b"POST http://shop/x HTTP/1.1\r\nHost: other\r\nContent-Length: 5, 5\r\nContent-Length: 5\r\nX: y\r\n\r\n";
    let want = "POST http://shop/x HTTP/1.1\r\nHost: shop\r\nContent-Length: 5\r\nX: y\r\n\r\n";
    assert_eq!(rewrite_req(input, &PLAIN), want);
    let single = b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n";
    assert_eq!(rewrite_req(single, &PLAIN), String::from_utf8_lossy(single), "one value passes as sent");
}
