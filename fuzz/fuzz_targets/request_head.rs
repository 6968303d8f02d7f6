//! Request heads: no panic on any input; a head that parses has every strict prefix
//! `Partial`, and its rewrite parses again with the same start line and body framing.
#![no_main]

use cswitch_http1::{write_request_head, HeadLimits, Parse, RequestHead, RequestRewrite};
use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv6Addr};

fuzz_target!(|data: &[u8]| {
    let limits = HeadLimits { max_head_bytes: 8 * 1024, max_headers: 64 };
    let mut head = RequestHead::new();
    if head.parse(data, &limits) != Ok(Parse::Complete) {
        return;
    }
    let mut prefix = RequestHead::new();
    assert_eq!(prefix.parse(&data[..head.head_len - 1], &limits), Ok(Parse::Partial));

    let rw = RequestRewrite {
        forwarded_for: Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        forwarded_proto: Some("https"),
        upgrade: head.upgrade,
    };
    let mut out = Vec::new();
    write_request_head(data, &head, &rw, &mut out);
    // The rewrite adds at most three fields and some bytes.
    let roomy = HeadLimits { max_head_bytes: out.len(), max_headers: 64 + 3 };
    let mut again = RequestHead::new();
    assert_eq!(again.parse(&out, &roomy), Ok(Parse::Complete));
    assert_eq!(again.head_len, out.len());
    assert_eq!(again.body, head.body);
    assert_eq!(again.version, head.version);
    assert_eq!(again.method.slice(&out), head.method.slice(data));
    assert_eq!(again.target.slice(&out), head.target.slice(data));
    assert_eq!(again.host.map(|h| h.slice(&out)), head.host.map(|h| h.slice(data)));
});
