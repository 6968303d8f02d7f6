use super::*;

fn req(method: &str, uri: &str, fields: &[(&str, &str)]) -> Request<()> {
    let mut b = Request::builder().method(method).uri(uri);
    for (n, v) in fields {
        b = b.header(*n, HeaderValue::from_bytes(v.as_bytes()).unwrap());
    }
    b.body(()).unwrap()
}

fn head(t: &Translated) -> String {
    String::from_utf8(t.head.clone()).unwrap()
}

#[test]
fn pseudo_headers_become_the_request_line_and_host() {
    let t = translate(&req("GET", "https://shop.example/cart?x=1", &[("accept", "*/*")]), true).unwrap();
    assert_eq!(head(&t), "GET /cart?x=1 HTTP/1.1\r\nhost: shop.example\r\naccept: */*\r\n\r\n");
    assert_eq!(t.framing, Framing::None);
}

#[test]
fn a_body_without_length_goes_chunked_and_with_length_as_is() {
    let t = translate(&req("POST", "http://a/p", &[]), false).unwrap();
    assert!(head(&t).ends_with("transfer-encoding: chunked\r\n\r\n"), "{}", head(&t));
    let t = translate(&req("POST", "http://a/p", &[("content-length", "5")]), false).unwrap();
    assert_eq!(t.framing, Framing::Length(5));
    assert!(!head(&t).contains("transfer-encoding"));
}

#[test]
fn cookies_are_joined_into_one_field() {
    let t = translate(&req("GET", "http://a/", &[("cookie", "a=1"), ("cookie", "b=2")]), true).unwrap();
    assert!(head(&t).contains("\r\ncookie: a=1; b=2\r\n"), "{}", head(&t));
}

/// A request (target, fields, ends with its headers) and the words its refusal says.
type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], bool, &'a str);

#[test]
fn smuggling_shapes_are_refused() {
    let cases: &[Case] = &[
        ("http://a/", &[("transfer-encoding", "chunked")], false, "connection-specific"),
        ("http://a/", &[("connection", "close")], true, "connection-specific"),
        ("http://a/", &[("upgrade", "websocket")], true, "connection-specific"),
        ("http://a/", &[("te", "gzip")], true, "te other"),
        ("http://a/", &[("host", "b")], true, "disagree"),
        ("/", &[], true, "no :authority"),
        ("http://a/", &[("host", "a"), ("host", "a")], true, "more than one host"),
        ("http://a/", &[("content-length", "5")], true, "disagrees"),
        ("http://a/", &[("content-length", "5"), ("content-length", "5")], false, "more than one"),
        ("http://a/", &[("content-length", "-1")], false, "invalid content-length"),
    ];
    for (uri, fields, end, why) in cases {
        let err = translate(&req("POST", uri, fields), *end).unwrap_err();
        assert_eq!(err.status, 400, "{fields:?}");
        assert!(err.reason.contains(why), "{fields:?}: {}", err.reason);
    }
    assert_eq!(translate(&req("CONNECT", "a:443", &[]), true).unwrap_err().status, 501);
}

#[test]
fn values_with_cr_lf_or_nul_cannot_even_be_built() {
    // The `h2` crate decodes field values into this type, so a stream carrying them is
    // reset before the translation (tests/http2.rs sends one on the wire); the check in
    // `check_fields` stays as the second line.
    for bad in ["1\r\nx-injected: 1", "a\nb", "a\0b"] {
        assert!(HeaderValue::from_bytes(bad.as_bytes()).is_err(), "{bad:?}");
    }
}

#[test]
fn matching_host_and_authority_pass() {
    let t = translate(&req("GET", "http://A.example/", &[("host", "a.example")]), true).unwrap();
    assert!(head(&t).starts_with("GET / HTTP/1.1\r\nhost: A.example\r\n"));
}
