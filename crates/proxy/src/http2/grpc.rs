//! gRPC over the HTTP/2 wing: a request is a gRPC call when its `content-type` is
//! `application/grpc` or `application/grpc+…`. A gRPC client reads a call's outcome
//! from `grpc-status`, not from the HTTP status, so an answer that is not a `200` (the
//! switch's refusals: a rule's deny, no server, 502, 503, 504, 413, 431, a translation's
//! 400; or a server's non-`200`) goes out as a gRPC status in the trailers-only form
//! (one HEADERS frame ending the stream: `:status 200`, `grpc-status`, `grpc-message`),
//! the code mapped as gRPC's HTTP-to-gRPC table does (doc/http-grpc-status-mapping.md), with
//! a few the table leaves at UNKNOWN made precise.

use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};

/// Whether the request is a gRPC call.
pub fn is_grpc(headers: &HeaderMap) -> bool {
    headers.get(CONTENT_TYPE).is_some_and(|v| {
        let v = v.as_bytes();
        v.len() >= 16
            && v[..16].eq_ignore_ascii_case(b"application/grpc")
            && matches!(v.get(16), None | Some(b'+' | b';'))
    })
}

/// The gRPC status code for an HTTP status the call was answered with.
pub fn code_for(status: u16) -> u32 {
    match status {
        400 => 13,                   // INTERNAL (the table's)
        401 => 16,                   // UNAUTHENTICATED
        403 => 7,                    // PERMISSION_DENIED
        404 => 12,                   // UNIMPLEMENTED
        408 => 4,                    // DEADLINE_EXCEEDED: the client's own request ran out of time
        413 | 431 => 8,              // RESOURCE_EXHAUSTED: over the switch's limits
        429 | 502 | 503 | 504 => 14, // UNAVAILABLE (the table's)
        501 => 12,                   // UNIMPLEMENTED
        _ => 2,                      // UNKNOWN
    }
}

/// The trailers-only answer for a call answered with `status`: `message` says why.
pub fn trailers_only(status: u16, message: &str) -> http::Response<()> {
    let mut response = http::Response::new(());
    let fields = response.headers_mut();
    fields.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    fields.insert("grpc-status", HeaderValue::from(code_for(status)));
    let message = percent_encode(&format!("cswitch: {status} {message}"));
    if let Ok(v) = HeaderValue::from_str(&message) {
        fields.insert("grpc-message", v);
    }
    response
}

/// `grpc-message` is percent-encoded (gRPC's PROTOCOL-HTTP2: every byte outside
/// printable ASCII, and `%`).
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_content_types() {
        let with = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(CONTENT_TYPE, HeaderValue::from_static(v));
            is_grpc(&h)
        };
        assert!(with("application/grpc"));
        assert!(with("application/grpc+proto"));
        assert!(with("Application/GRPC;charset=x"));
        assert!(!with("application/grpc-web"));
        assert!(!with("application/json"));
        assert!(!is_grpc(&HeaderMap::new()));
    }

    #[test]
    fn refusals_become_statuses() {
        let r = trailers_only(403, "denied by rule");
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["grpc-status"], "7");
        assert_eq!(r.headers()["grpc-message"], "cswitch: 403 denied by rule");
        assert_eq!(trailers_only(503, "x").headers()["grpc-status"], "14");
        assert_eq!(trailers_only(504, "x").headers()["grpc-status"], "14");
        assert_eq!(percent_encode("50% é"), "50%25 %C3%A9");
    }
}
