//! The heads cswitch forwards: the original bytes with minimal edits. The start line and
//! every end-to-end field go through byte for byte; hop-by-hop fields (RFC 9110 §7.6.1:
//! Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Upgrade, and every field named
//! in Connection) are removed; cswitch then adds its own fields. Transfer-Encoding and
//! Content-Length are kept because bodies are forwarded as they came.

use crate::head::{HeaderSpan, Span, Version};
use crate::request::RequestHead;
use crate::response::ResponseHead;
use crate::syntax::{list_elements, list_has};
use std::io::Write;
use std::net::IpAddr;

/// What to change in a request head on its way to a server.
#[derive(Clone, Copy, Debug)]
pub struct RequestRewrite<'a> {
    /// Append this address to `X-Forwarded-For` (adding the field if absent).
    pub forwarded_for: Option<IpAddr>,
    /// Set `X-Forwarded-Proto` to this value (replacing any the client sent).
    pub forwarded_proto: Option<&'a str>,
    /// Keep `Upgrade` and send `Connection: upgrade` (the request is an upgrade).
    pub upgrade: bool,
    /// Fields to set (the rules' `setHeader`): the client's fields of these names are
    /// dropped and these are added, in order; of two with the same name the later wins;
    /// an empty value only removes the field.
    /// Fields that frame the message or are hop-by-hop (`Content-Length`,
    /// `Transfer-Encoding`, `Connection`, …) are never set: changing them would let a rule
    /// make the server read the body differently from us.
    pub set_headers: &'a [(&'a str, &'a str)],
}

/// What to change in a response head on its way to the client.
#[derive(Clone, Copy, Debug)]
pub struct ResponseRewrite {
    /// The version of the client's request: an HTTP/1.0 client that keeps the connection
    /// gets `Connection: keep-alive`.
    pub client_version: Version,
    /// cswitch will keep the client connection open after this response. When false the
    /// head carries `Connection: close`.
    pub keep_alive: bool,
    /// The response is a 101 being tunnelled: keep `Upgrade`, send `Connection: upgrade`.
    pub upgrade: bool,
    /// The body will be sent de-chunked and close-delimited (chunked response to an
    /// HTTP/1.0 client): drop `Transfer-Encoding`.
    pub dechunk: bool,
}

/// Appends to `out` the request head to send to a server: the request line as sent, the
/// end-to-end fields as sent, then X-Forwarded-* and, for HTTP/1.0 requests,
/// `Connection: keep-alive` (so the server connection can be pooled).
///
/// `X-Forwarded-For`: the address is appended to the last X-Forwarded-For field kept
/// (`, ip`), or a field is added when there is none. `X-Forwarded-Proto`: when set, any
/// the client sent are dropped and ours is added. `forwarded_proto` is written as given:
/// pass a token such as `http` or `https`.
pub fn write_request_head(buf: &[u8], head: &RequestHead, rw: &RequestRewrite, out: &mut Vec<u8>) {
    // The request line ends with " HTTP/1.x": 9 bytes after the target.
    let line = Span { start: head.method.start, end: head.target.end.saturating_add(9) };
    out.extend_from_slice(line.slice(buf));
    out.extend_from_slice(b"\r\n");
    write_normalised(buf, head, out);
    let hop = HopByHop::new(buf, &head.headers, rw.upgrade);
    let last_xff = match rw.forwarded_for {
        Some(_) => {
            head.headers.iter().rposition(|h| is(buf, h, b"x-forwarded-for") && !hop.drops(h.name.slice(buf)))
        }
        None => None,
    };
    for (i, h) in head.headers.iter().enumerate() {
        let name = h.name.slice(buf);
        let replaced = (rw.forwarded_proto.is_some() && is(buf, h, b"x-forwarded-proto"))
            || rw.set_headers.iter().any(|(n, _)| settable(n) && name.eq_ignore_ascii_case(n.as_bytes()));
        let normalised = (head.authority.is_some() && is(buf, h, b"host"))
            || (head.collapse_length.is_some() && is(buf, h, b"content-length"));
        if hop.drops(name) || replaced || normalised {
            continue;
        }
        match (rw.forwarded_for, Some(i) == last_xff) {
            (Some(ip), true) => append_xff(buf, h, ip, out),
            _ => out.extend_from_slice(h.line.slice(buf)),
        }
        out.extend_from_slice(b"\r\n");
    }
    if let (Some(ip), None) = (rw.forwarded_for, last_xff) {
        out.extend_from_slice(b"X-Forwarded-For: ");
        push_ip(ip, out);
        out.extend_from_slice(b"\r\n");
    }
    write_request_additions(head.version, rw, out);
}

/// The fields whose values the switch settles itself (RFC 9112): `Host` from an
/// absolute-form target's authority (§3.2.2: the authority wins over the Host field),
/// and a repeated or listed Content-Length as one value (§6.3: never forwarded as sent).
fn write_normalised(buf: &[u8], head: &RequestHead, out: &mut Vec<u8>) {
    if let Some(authority) = head.authority {
        out.extend_from_slice(b"Host: ");
        out.extend_from_slice(authority.slice(buf));
        out.extend_from_slice(b"\r\n");
    }
    if let Some(n) = head.collapse_length {
        let _ = write!(out, "Content-Length: {n}\r\n");
    }
}

/// Whether a rule may set a field of this name (see `RequestRewrite::set_headers`).
fn settable(name: &str) -> bool {
    const NEVER: [&str; 8] = [
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
    ];
    !name.is_empty() && !NEVER.iter().any(|n| name.eq_ignore_ascii_case(n))
}

/// The rules' fields, each name once (the last value given wins).
fn write_set_headers(set: &[(&str, &str)], out: &mut Vec<u8>) {
    for (i, (name, value)) in set.iter().enumerate() {
        let overridden = set[i + 1..].iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
        // An empty value removes the field (as nginx's proxy_set_header does).
        if settable(name) && !overridden && !value.is_empty() {
            let _ = write!(out, "{name}: {value}\r\n");
        }
    }
}

/// The fields cswitch adds to a request after the client's, and the end of the head.
fn write_request_additions(version: Version, rw: &RequestRewrite, out: &mut Vec<u8>) {
    write_set_headers(rw.set_headers, out);
    if let Some(proto) = rw.forwarded_proto {
        out.extend_from_slice(b"X-Forwarded-Proto: ");
        out.extend_from_slice(proto.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if rw.upgrade {
        out.extend_from_slice(b"Connection: upgrade\r\n");
    } else if version == Version::Http10 {
        // HTTP/1.0 persists only when asked (RFC 9112 Appendix C.2.2); we ask so the
        // server connection can go back to the pool.
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// `X-Forwarded-For: <client's list>, ip`, without the trailing whitespace of the line.
fn append_xff(buf: &[u8], h: &HeaderSpan, ip: IpAddr, out: &mut Vec<u8>) {
    if h.value.start == h.value.end {
        out.extend_from_slice(h.name.slice(buf));
        out.extend_from_slice(b": ");
    } else {
        out.extend_from_slice(Span { start: h.line.start, end: h.value.end }.slice(buf));
        out.extend_from_slice(b", ");
    }
    push_ip(ip, out);
}

/// An address as text, as `Display` writes it; IPv4 by hand (every forwarded request
/// carries one, and the formatting machinery costs more than the rest of the field).
fn push_ip(ip: IpAddr, out: &mut Vec<u8>) {
    match ip {
        IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                if octet >= 100 {
                    out.push(b'0' + octet / 100);
                }
                if octet >= 10 {
                    out.push(b'0' + octet / 10 % 10);
                }
                out.push(b'0' + octet % 10);
            }
        }
        // io::Write on a Vec cannot fail.
        IpAddr::V6(_) => drop(write!(out, "{ip}")),
    }
}

/// Rewrites one `Set-Cookie` value: true when the replacement was written into the buffer.
pub type SetCookieEdit<'a> = &'a dyn Fn(&[u8], &mut Vec<u8>) -> bool;

/// Edits to a response head beyond the hop-by-hop rules: what session persistence needs.
#[derive(Clone, Copy, Default)]
pub struct ResponseEdits<'a> {
    /// Called with the value of each `Set-Cookie` field; when it returns true, the field
    /// is sent as `Set-Cookie: ` followed by what it wrote into the buffer (cleared before
    /// each call) instead of as received.
    pub set_cookie: Option<SetCookieEdit<'a>>,
    /// Complete field lines (`Name: value\r\n` each) added after the server's fields.
    pub extra: &'a [u8],
}

impl std::fmt::Debug for ResponseEdits<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseEdits")
            .field("set_cookie", &self.set_cookie.is_some())
            .field("extra", &String::from_utf8_lossy(self.extra))
            .finish()
    }
}

/// Appends to `out` the response head to send to the client (status line as sent).
///
/// Then the end-to-end fields as sent (Transfer-Encoding too, unless `dechunk`), then:
/// `Connection: upgrade` for an upgrade, else `Connection: close` when the client
/// connection will close, else `Connection: keep-alive` for an HTTP/1.0 client.
pub fn write_response_head(buf: &[u8], head: &ResponseHead, rw: &ResponseRewrite, out: &mut Vec<u8>) {
    write_response_head_with(buf, head, rw, &ResponseEdits::default(), out);
}

/// [`write_response_head`] with persistence edits: `Set-Cookie` fields rewritten and
/// extra fields added before cswitch's own `Connection` field.
pub fn write_response_head_with(
    buf: &[u8],
    head: &ResponseHead,
    rw: &ResponseRewrite,
    edits: &ResponseEdits,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(Span { start: 0, end: head.reason.end }.slice(buf));
    out.extend_from_slice(b"\r\n");
    let hop = HopByHop::new(buf, &head.headers, rw.upgrade);
    let mut edited = Vec::new();
    for h in &head.headers {
        let name = h.name.slice(buf);
        if hop.drops(name) || (rw.dechunk && is(buf, h, b"transfer-encoding")) {
            continue;
        }
        if let Some(edit) = edits.set_cookie.filter(|_| is(buf, h, b"set-cookie")) {
            edited.clear();
            if edit(h.value.slice(buf), &mut edited) {
                out.extend_from_slice(b"Set-Cookie: ");
                out.extend_from_slice(&edited);
                out.extend_from_slice(b"\r\n");
                continue;
            }
        }
        out.extend_from_slice(h.line.slice(buf));
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(edits.extra);
    if rw.upgrade {
        out.extend_from_slice(b"Connection: upgrade\r\n");
    } else if !rw.keep_alive {
        out.extend_from_slice(b"Connection: close\r\n");
    } else if rw.client_version == Version::Http10 {
        out.extend_from_slice(b"Connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Whether field `h` is named `lower` (given in lower case).
fn is(buf: &[u8], h: &HeaderSpan, lower: &[u8]) -> bool {
    h.name.slice(buf).eq_ignore_ascii_case(lower)
}

// Hop-by-hop fields always removed (RFC 9110 §7.6.1; Proxy-Connection and Keep-Alive are
// the legacy ones it names; Trailer as RFC 7230 listed it): Connection, Keep-Alive,
// Proxy-Connection, TE, Trailer — matched by length in `HopByHop::drops`. Upgrade is handled
// apart.

/// Fields kept even when Connection names them: the body is forwarded as received, so the
/// fields that frame it (Content-Length, Transfer-Encoding, RFC 9112 §6) must reach the
/// next hop unchanged, or it would delimit the body differently than we did (request
/// smuggling); Host is required in HTTP/1.1 (RFC 9112 §3.2) and is what we routed on.
const NEVER_DROPPED: [&[u8]; 3] = [b"host", b"content-length", b"transfer-encoding"];

/// Decides which fields of one head are hop-by-hop. Called for every field of every head
/// forwarded, so the common cases are cut short: a name is compared only with the fixed
/// names of its length, and the Connection fields are searched only when they name a field
/// beyond `close` and `keep-alive` (which they almost always are).
struct HopByHop<'a> {
    buf: &'a [u8],
    /// The Connection fields (a sub-slice of the head's fields, from the first to the last
    /// Connection field), or none when they name nothing beyond `close` / `keep-alive`.
    connection: &'a [HeaderSpan],
    /// A Connection field lists `close` (which makes a field named Close hop-by-hop too).
    close_listed: bool,
    keep_upgrade: bool,
}

impl<'a> HopByHop<'a> {
    fn new(buf: &'a [u8], headers: &'a [HeaderSpan], keep_upgrade: bool) -> Self {
        let (mut first, mut last) = (usize::MAX, 0);
        let (mut close_listed, mut names_others) = (false, false);
        for (i, h) in headers.iter().enumerate() {
            if h.name.end - h.name.start != 10 || !is(buf, h, b"connection") {
                continue;
            }
            (first, last) = (first.min(i), i);
            for e in list_elements(h.value.slice(buf)) {
                let close = e.eq_ignore_ascii_case(b"close");
                close_listed |= close;
                names_others |= !e.is_empty() && !close && !e.eq_ignore_ascii_case(b"keep-alive");
            }
        }
        let connection = match names_others {
            true => headers.get(first..=last).unwrap_or_default(),
            false => &[],
        };
        HopByHop { buf, connection, close_listed, keep_upgrade }
    }

    /// Whether the field named `name` is removed on this hop.
    fn drops(&self, name: &[u8]) -> bool {
        let fixed = match name.len() {
            2 => Some(name.eq_ignore_ascii_case(b"te")),
            7 if name.eq_ignore_ascii_case(b"upgrade") => return !self.keep_upgrade,
            7 => Some(name.eq_ignore_ascii_case(b"trailer")),
            10 => Some(name.eq_ignore_ascii_case(b"connection") || name.eq_ignore_ascii_case(b"keep-alive")),
            16 => Some(name.eq_ignore_ascii_case(b"proxy-connection")),
            5 if self.close_listed && name.eq_ignore_ascii_case(b"close") => return true,
            // Never dropped, whatever Connection says (see NEVER_DROPPED).
            4 | 14 | 17 if NEVER_DROPPED.iter().any(|n| name.eq_ignore_ascii_case(n)) => return false,
            _ => None,
        };
        if fixed == Some(true) {
            return true;
        }
        self.connection
            .iter()
            .filter(|h| is(self.buf, h, b"connection"))
            .any(|h| list_has(h.value.slice(self.buf), name))
    }
}

#[cfg(test)]
mod ip_tests {
    use super::push_ip;
    use std::net::IpAddr;

    #[test]
    fn addresses_are_written_as_display_writes_them() {
        let mut octets = vec![0u8, 1, 9, 10, 42, 99, 100, 101, 199, 200, 255];
        octets.extend((0..=255).step_by(7).map(|n| n as u8));
        for (a, b) in octets.iter().zip(octets.iter().rev()) {
            for ip in [IpAddr::from([*a, *b, 0, 255]), IpAddr::from([*b, 7, *a, 100])] {
                let mut out = Vec::new();
                push_ip(ip, &mut out);
                assert_eq!(String::from_utf8(out).unwrap_or_default(), ip.to_string());
            }
        }
        let v6: IpAddr = "2001:db8::1".parse().unwrap_or(IpAddr::from([0u8; 16]));
        let mut out = Vec::new();
        push_ip(v6, &mut out);
        assert_eq!(out, b"2001:db8::1");
    }
}
