//! Response heads: no panic on any input; a head that parses has every strict prefix
//! `Partial`, and its rewrite parses again with the same status line.
//! The first input byte chooses the flags (HEAD request, rewrite options).
#![no_main]

use cswitch_http1::{
    write_response_head, BodyKind, HeadLimits, Parse, ResponseHead, ResponseRewrite, Version,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    let Some((&flags, data)) = input.split_first() else { return };
    let limits = HeadLimits { max_head_bytes: 8 * 1024, max_headers: 64 };
    let was_head = flags & 1 != 0;
    let mut head = ResponseHead::new();
    if head.parse(data, &limits, was_head) != Ok(Parse::Complete) {
        return;
    }
    let mut prefix = ResponseHead::new();
    assert_eq!(prefix.parse(&data[..head.head_len - 1], &limits, was_head), Ok(Parse::Partial));

    let rw = ResponseRewrite {
        client_version: if flags & 2 != 0 { Version::Http10 } else { Version::Http11 },
        keep_alive: flags & 4 != 0,
        upgrade: flags & 8 != 0,
        dechunk: flags & 16 != 0,
    };
    let mut out = Vec::new();
    write_response_head(data, &head, &rw, &mut out);
    let roomy = HeadLimits { max_head_bytes: out.len(), max_headers: 64 + 1 };
    let mut again = ResponseHead::new();
    assert_eq!(again.parse(&out, &roomy, was_head), Ok(Parse::Complete));
    assert_eq!(again.head_len, out.len());
    assert_eq!((again.version, again.status), (head.version, head.status));
    assert_eq!(again.reason.slice(&out), head.reason.slice(data));
    if !(rw.dechunk && head.body == BodyKind::Chunked) {
        assert_eq!(again.body, head.body);
    }
});
