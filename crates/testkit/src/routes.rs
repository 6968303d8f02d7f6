//! What an origin answers, by path. Every response names the origin in `X-Origin`.
//!
//! Most paths answer with a fixed-length body built by [`simple`]; the few that test
//! framing or connection handling (`/chunked`, `/close`, `/big/N`, `/malformed`, `/reset`,
//! `/ws`) write their bytes themselves.

use std::io;
use std::time::Duration;

use crate::seen::{Next, SeenRequest};
use crate::wire::Wire;
use crate::ws;

/// A fixed-length response.
struct Reply {
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
}

/// The byte at `offset` of every `/big/N` body: `a` to `z`, repeating.
pub fn big_byte(offset: u64) -> u8 {
    b'a' + (offset % 26) as u8
}

/// A 1×1 transparent GIF, the smallest valid image to serve.
const GIF: &[u8] = &[
    0x47, 0x49, 0x46, 0x38, 0x39, 0x61, 0x01, 0x00, 0x01, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff,
    0xff, 0xff, 0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x00, 0x00, 0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00,
    0x01, 0x00, 0x00, 0x02, 0x02, 0x44, 0x01, 0x00, 0x3b,
];

/// Writes the response to `req` and says what the connection does next.
pub(crate) async fn respond(
    w: &mut Wire<'_>,
    name: &str,
    req: &SeenRequest,
    keep_alive: bool,
) -> io::Result<Next> {
    let path = req.path();
    match path {
        "/chunked" => chunked(w, name, req, keep_alive).await,
        "/close" => close_delimited(w, name, req).await,
        "/malformed" => {
            w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n").await?;
            Ok(Next::Close)
        }
        "/reset" => Ok(Next::Reset),
        "/ws" => ws::serve(w, name, req).await,
        _ if path.starts_with("/big/") => match path["/big/".len()..].parse() {
            Ok(n) => big(w, name, req, keep_alive, n).await,
            Err(_) => send(w, name, req, keep_alive, bad("bad size")).await,
        },
        _ if path.starts_with("/login/") => {
            // A session cookie named by the path, valued after this origin: what an
            // application server sets at login (persistence tests read it back).
            let cookie = format!("Set-Cookie: {}={name}-session; Path=/\r\n", &path["/login/".len()..]);
            send_with(w, name, req, keep_alive, default(name, req), &cookie).await
        }
        _ if path.starts_with("/slow/") => match path["/slow/".len()..].parse() {
            Ok(ms) => {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                send(w, name, req, keep_alive, default(name, req)).await
            }
            Err(_) => send(w, name, req, keep_alive, bad("bad delay")).await,
        },
        _ => send(w, name, req, keep_alive, simple(name, req)).await,
    }
}

/// The fixed-length answer for every path not handled in [`respond`].
fn simple(name: &str, req: &SeenRequest) -> Reply {
    let text = |body: String| Reply { status: 200, content_type: "text/plain", body: body.into() };
    match req.path() {
        "/index.html" => Reply {
            status: 200,
            content_type: "text/html",
            body: format!(
                "<html><head><title>{name}</title></head>\
                 <body><h1>Served by {name}</h1></body></html>\n"
            )
            .into(),
        },
        "/img/a.gif" => Reply { status: 200, content_type: "image/gif", body: GIF.to_vec() },
        "/cgi/xmlprocess.pl" => Reply {
            status: 200,
            content_type: "text/xml",
            body: format!(
                "<?xml version=\"1.0\"?>\n<reply server=\"{name}\" received=\"{}\"/>\n",
                req.body_len
            )
            .into(),
        },
        "/echo" => Reply { body: req.body.clone(), ..text(String::new()) },
        "/headers" => Reply { body: req.raw_head.clone(), ..text(String::new()) },
        "/sink" => text(format!("{}\n", req.body_len)),
        path => match path.strip_prefix("/status/") {
            Some(code) => status(code),
            None => default(name, req),
        },
    }
}

fn default(name: &str, req: &SeenRequest) -> Reply {
    let body = format!("{name} {} {}\n", req.method, req.path());
    Reply { status: 200, content_type: "text/plain", body: body.into() }
}

fn bad(why: &str) -> Reply {
    Reply { status: 400, content_type: "text/plain", body: format!("{why}\n").into() }
}

/// `/status/NNN`: any final status; 204 and 304 carry no body.
fn status(code: &str) -> Reply {
    match code.parse::<u16>() {
        Ok(n @ (204 | 304)) => Reply { status: n, content_type: "text/plain", body: Vec::new() },
        Ok(n @ 200..=599) => {
            Reply { status: n, content_type: "text/plain", body: format!("status {n}\n").into() }
        }
        _ => bad("status must be 200 to 599"),
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// Status line plus the headers every response carries, without the final blank line.
fn head(status: u16, name: &str, req: &SeenRequest, keep_alive: bool) -> String {
    let connection = match (keep_alive, req.version.as_str()) {
        (false, _) => "Connection: close\r\n",
        (true, "HTTP/1.0") => "Connection: keep-alive\r\n",
        (true, _) => "",
    };
    format!("HTTP/1.1 {status} {}\r\nX-Origin: {name}\r\n{connection}", reason(status))
}

async fn send(
    w: &mut Wire<'_>,
    name: &str,
    req: &SeenRequest,
    keep_alive: bool,
    reply: Reply,
) -> io::Result<Next> {
    send_with(w, name, req, keep_alive, reply, "").await
}

/// [`send`] with extra header lines (each ending in CRLF).
async fn send_with(
    w: &mut Wire<'_>,
    name: &str,
    req: &SeenRequest,
    keep_alive: bool,
    reply: Reply,
    extra_headers: &str,
) -> io::Result<Next> {
    let mut out = head(reply.status, name, req, keep_alive);
    out.push_str(extra_headers);
    let bodiless = matches!(reply.status, 204 | 304);
    if !bodiless {
        out.push_str(&format!(
            "Content-Type: {}\r\nContent-Length: {}\r\n",
            reply.content_type,
            reply.body.len()
        ));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    if !bodiless && req.method != "HEAD" {
        bytes.extend_from_slice(&reply.body);
    }
    w.write_all(&bytes).await?;
    Ok(Next::KeepAlive)
}

/// `/chunked`: three chunks, one with an extension, then a trailer. Each piece is its
/// own write so a proxy sees the body arrive in parts.
async fn chunked(w: &mut Wire<'_>, name: &str, req: &SeenRequest, keep_alive: bool) -> io::Result<Next> {
    let mut out = head(200, name, req, keep_alive);
    out.push_str("Content-Type: text/plain\r\nTransfer-Encoding: chunked\r\n");
    out.push_str("Trailer: X-Trailer\r\n\r\n");
    w.write_all(out.as_bytes()).await?;
    if req.method == "HEAD" {
        return Ok(Next::KeepAlive);
    }
    for (i, ext) in [(1, ""), (2, ";foo=bar"), (3, "")] {
        let data = format!("{name}-{i}\n");
        let chunk = format!("{:x}{ext}\r\n{data}\r\n", data.len());
        w.write_all(chunk.as_bytes()).await?;
    }
    w.write_all(b"0\r\nX-Trailer: done\r\n\r\n").await?;
    Ok(Next::KeepAlive)
}

/// `/close`: no length, no chunking; the end of the body is the end of the connection.
async fn close_delimited(w: &mut Wire<'_>, name: &str, req: &SeenRequest) -> io::Result<Next> {
    let mut out = head(200, name, req, false);
    out.push_str("Content-Type: text/plain\r\n\r\n");
    if req.method != "HEAD" {
        out.push_str(&format!("{name} {} {}\n", req.method, req.path()));
    }
    w.write_all(out.as_bytes()).await?;
    Ok(Next::Close)
}

/// `/big/N`: N pattern bytes ([`big_byte`]), written one piece at a time so that only
/// one piece is ever in memory and a slow reader holds the origin back.
async fn big(w: &mut Wire<'_>, name: &str, req: &SeenRequest, keep_alive: bool, n: u64) -> io::Result<Next> {
    let mut out = head(200, name, req, keep_alive);
    out.push_str(&format!("Content-Type: application/octet-stream\r\nContent-Length: {n}\r\n\r\n"));
    w.write_all(out.as_bytes()).await?;
    if req.method == "HEAD" {
        return Ok(Next::KeepAlive);
    }
    // A whole number of 26-byte periods, so every piece starts at offset 0 of the pattern.
    let piece: Vec<u8> = (0..26 * 2048).map(big_byte).collect();
    let mut left = n;
    while left > 0 {
        let len = piece.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        w.write_all(&piece[..len]).await?;
        left -= len as u64;
    }
    Ok(Next::KeepAlive)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_paths() {
        assert_eq!(status("503").status, 503);
        assert_eq!(status("503").body, b"status 503\n");
        assert!(status("204").body.is_empty());
        assert_eq!(status("304").status, 304);
        assert_eq!(status("101").status, 400);
        assert_eq!(status("abc").status, 400);
    }

    #[test]
    fn gif_is_a_gif() {
        assert!(GIF.starts_with(b"GIF89a"));
        assert_eq!(GIF.last(), Some(&0x3b));
    }
}
