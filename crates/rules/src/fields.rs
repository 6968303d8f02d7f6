//! Reading one field from the request into the per-worker arena. Head fields are always
//! known; `bodylen` and `form(…)` may be "not yet known" while the body is arriving. XML
//! and JSON paths are read by `xml.rs` and `json.rs`, each in one pass for all of them.

use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};

use crate::form;
use crate::ir::Fetch;
use crate::request::Request;

/// A fetched value: where its bytes are, or why there are none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Val {
    /// The field is not in this request.
    Absent,
    /// The body has not arrived far enough to tell.
    Unknown,
    /// `arena[start..start + len]`.
    Arena(u32, u32),
    /// The value of XML path `n` (in the XML scratch).
    Xml(u32),
    /// The value of JSON path `n` (in the JSON scratch).
    Json(u32),
}

fn push(arena: &mut Vec<u8>, bytes: &[u8]) -> Val {
    let start = arena.len();
    arena.extend_from_slice(bytes);
    Val::Arena(start as u32, bytes.len() as u32)
}

fn push_fmt(arena: &mut Vec<u8>, value: impl std::fmt::Display) -> Val {
    let start = arena.len();
    // Writing into a Vec cannot fail.
    let _ = write!(arena, "{value}");
    Val::Arena(start as u32, (arena.len() - start) as u32)
}

fn ip(addr: SocketAddr) -> IpAddr {
    match addr.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// The media type of the body (`type/subtype`, parameters and spaces removed).
fn media_type(req: &impl Request) -> Option<&[u8]> {
    let ct = req.header("content-type")?;
    Some(trim(ct.split(|b| *b == b';').next().unwrap_or_default()))
}

/// Whether the request body is `application/x-www-form-urlencoded`.
pub(crate) fn is_form(req: &impl Request) -> bool {
    media_type(req).is_some_and(|m| m.eq_ignore_ascii_case(b"application/x-www-form-urlencoded"))
}

/// A gRPC call's service and method: a request whose media type is `application/grpc`
/// (or `application/grpc+…`), with a path `/service/method` (gRPC's PROTOCOL-HTTP2:
/// `:path` is `/` service-name `/` method-name). Absent for any other request.
fn grpc_call(req: &impl Request) -> Option<(&[u8], &[u8])> {
    let m = media_type(req)?;
    let grpc = m.len() >= 16 && m[..16].eq_ignore_ascii_case(b"application/grpc");
    if !grpc || !(m.len() == 16 || m[16] == b'+') {
        return None;
    }
    let rest = path(req.target()).strip_prefix(b"/")?;
    let slash = memchr::memchr(b'/', rest)?;
    let (service, method) = (&rest[..slash], &rest[slash + 1..]);
    let valid = !service.is_empty() && !method.is_empty() && !method.contains(&b'/');
    valid.then_some((service, method))
}

/// Whether the request body is JSON: `application/json`, or any type with the `+json`
/// structured-syntax suffix (RFC 6839: `application/vnd.api+json`, `application/problem+json`).
pub(crate) fn is_json(req: &impl Request) -> bool {
    media_type(req).is_some_and(|m| {
        let suffix = m.len() > 5 && m[m.len() - 5..].eq_ignore_ascii_case(b"+json") && m.contains(&b'/');
        m.eq_ignore_ascii_case(b"application/json") || suffix
    })
}

pub(crate) fn trim(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !c.is_ascii_whitespace()).map_or(start, |e| e + 1);
    &b[start..end.max(start)]
}

/// Reads `fetch` (anything but `Xml` and `Json`) into `arena`.
pub(crate) fn read(fetch: &Fetch, req: &impl Request, arena: &mut Vec<u8>) -> Val {
    let opt = |arena: &mut Vec<u8>, v: Option<&[u8]>| v.map_or(Val::Absent, |v| push(arena, v));
    match fetch {
        Fetch::SrcIp => push_fmt(arena, ip(req.src())),
        Fetch::SrcPort => push_fmt(arena, req.src().port()),
        Fetch::DstIp => push_fmt(arena, ip(req.dst())),
        Fetch::DstPort => push_fmt(arena, req.dst().port()),
        Fetch::Method => push(arena, req.method()),
        Fetch::Url => push(arena, req.target()),
        Fetch::Version => push(arena, req.version()),
        Fetch::Path => push(arena, path(req.target())),
        Fetch::Query => opt(arena, query(req.target())),
        Fetch::Ext => opt(arena, ext(path(req.target()))),
        Fetch::Host => host(req, arena),
        Fetch::Header(name) => opt(arena, req.header(name).map(trim)),
        Fetch::Cookie(name) => opt(arena, cookie(req, name)),
        Fetch::Arg(name) => arg(req, name, arena),
        Fetch::Form(name) => form_field(req, name, arena),
        Fetch::BodyLen => body_len(req, arena),
        Fetch::GrpcService => opt(arena, grpc_call(req).map(|(service, _)| service)),
        Fetch::GrpcMethod => opt(arena, grpc_call(req).map(|(_, method)| method)),
        Fetch::Xml(_) | Fetch::Json(_) => Val::Absent,
        Fetch::Proto(field) => opt(arena, req.proto_field(*field)),
    }
}

/// The path of the request-target: origin-form up to `?`; for absolute-form, what follows
/// the authority (`/` when nothing does).
pub(crate) fn path(target: &[u8]) -> &[u8] {
    let no_query = &target[..memchr::memchr(b'?', target).unwrap_or(target.len())];
    if no_query.first() == Some(&b'/') || no_query == b"*" {
        return no_query;
    }
    match memchr::memmem::find(no_query, b"://") {
        Some(i) => {
            let after = &no_query[i + 3..];
            memchr::memchr(b'/', after).map_or(b"/", |j| &after[j..])
        }
        None => no_query,
    }
}

fn query(target: &[u8]) -> Option<&[u8]> {
    memchr::memchr(b'?', target).map(|i| &target[i + 1..])
}

/// The file extension of the path's last segment, without the dot.
fn ext(path: &[u8]) -> Option<&[u8]> {
    let last = &path[memchr::memrchr(b'/', path).map_or(0, |i| i + 1)..];
    memchr::memrchr(b'.', last).map(|i| &last[i + 1..])
}

/// Host header (or the authority of an absolute-form target), port removed, lower case.
fn host(req: &impl Request, arena: &mut Vec<u8>) -> Val {
    let target = req.target();
    let from_target = memchr::memmem::find(target, b"://").map(|i| {
        let after = &target[i + 3..];
        let end = memchr::memchr3(b'/', b'?', b'#', after).unwrap_or(after.len());
        let authority = &after[..end];
        &authority[memchr::memrchr(b'@', authority).map_or(0, |a| a + 1)..]
    });
    let Some(h) = from_target.or_else(|| req.header("host")).map(trim) else { return Val::Absent };
    let h = match memchr::memrchr(b':', h) {
        Some(i) if !h.ends_with(b"]") && h[i + 1..].iter().all(u8::is_ascii_digit) => &h[..i],
        _ => h,
    };
    let start = arena.len();
    arena.extend(h.iter().map(u8::to_ascii_lowercase));
    Val::Arena(start as u32, h.len() as u32)
}

/// The value of the first cookie `name` in any Cookie field, as sent.
fn cookie<'a>(req: &'a impl Request, name: &str) -> Option<&'a [u8]> {
    let mut found = None;
    req.header_each("cookie", &mut |v| {
        found = v.split(|b| *b == b';').map(trim).find_map(|pair| {
            let eq = memchr::memchr(b'=', pair)?;
            (trim(&pair[..eq]) == name.as_bytes()).then(|| trim(&pair[eq + 1..]))
        });
        found.is_some()
    });
    found
}

/// The first query argument `name` (names compared decoded), decoded.
fn arg(req: &impl Request, name: &str, arena: &mut Vec<u8>) -> Val {
    let Some(q) = query(req.target()) else { return Val::Absent };
    match form::pairs(q, true).find(|p| form::decoded_eq(p.name, name.as_bytes())) {
        Some(p) => decode(arena, p.value, false),
        None => Val::Absent,
    }
}

fn decode(arena: &mut Vec<u8>, enc: &[u8], truncated: bool) -> Val {
    let start = arena.len();
    form::decode_into(arena, enc, truncated);
    Val::Arena(start as u32, (arena.len() - start) as u32)
}

/// A field of a urlencoded body; unknown while it (or its absence) cannot be told yet.
fn form_field(req: &impl Request, name: &str, arena: &mut Vec<u8>) -> Val {
    if !is_form(req) {
        return Val::Absent;
    }
    let body = req.body();
    for p in form::pairs(body.bytes, body.complete) {
        if !p.whole {
            // The last, unfinished pair: its name may still grow into `name`.
            return Val::Unknown;
        }
        if form::decoded_eq(p.name, name.as_bytes()) {
            return decode(arena, p.value, false);
        }
    }
    if body.complete {
        Val::Absent
    } else {
        Val::Unknown
    }
}

/// Content-Length when sent; otherwise the body's length once it is complete.
fn body_len(req: &impl Request, arena: &mut Vec<u8>) -> Val {
    if let Some(cl) = req.header("content-length") {
        let cl = trim(cl);
        if !cl.is_empty() && cl.iter().all(u8::is_ascii_digit) {
            return push(arena, cl);
        }
    }
    let body = req.body();
    if body.complete {
        push_fmt(arena, body.bytes.len())
    } else {
        Val::Unknown
    }
}
