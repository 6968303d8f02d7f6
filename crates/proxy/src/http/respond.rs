//! Answers cswitch itself gives: refusals and gateway errors, each with the right status,
//! a short plain-text reason, and `Connection: close`.

use crate::floor::failure::Refusal;
use std::fmt::Write as _;

/// Standard reason phrase for the status codes cswitch generates.
fn phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        403 => "Forbidden",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

/// Appends the full response for `r` to `out`.
pub fn write_refusal(r: Refusal, out: &mut Vec<u8>) {
    let mut s = String::with_capacity(160);
    let body_len = r.reason.len() + 1;
    let _ = write!(
        s,
        "HTTP/1.1 {} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}\n",
        r.status,
        phrase(r.status),
        body_len,
        r.reason
    );
    out.extend_from_slice(s.as_bytes());
}

/// Appends a redirect to `location` (a rule's `redirect(status, "url")`).
pub fn write_redirect(status: u16, location: &str, keep_alive: bool, out: &mut Vec<u8>) {
    let phrase = match status {
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        _ => "Redirect",
    };
    let connection = if keep_alive { "" } else { "Connection: close\r\n" };
    let mut s = String::with_capacity(96 + location.len());
    let _ = write!(
        s,
        "HTTP/1.1 {status} {phrase}\r\nLocation: {location}\r\nContent-Length: 0\r\n{connection}\r\n"
    );
    out.extend_from_slice(s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_is_a_complete_response() {
        let mut out = Vec::new();
        write_refusal(Refusal::new(503, "no server available"), &mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
        assert!(text.contains("Content-Length: 20\r\n"));
        assert!(text.ends_with("\r\n\r\nno server available\n"));
    }
}
