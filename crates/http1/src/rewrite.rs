//! The heads cswitch forwards: the original bytes with minimal edits. The start line and
//! every end-to-end field go through byte for byte; hop-by-hop fields (RFC 9110 §7.6.1:
//! Connection, Keep-Alive, Proxy-Connection, TE, Trailer, Upgrade, and every field named
//! in Connection) are removed; cswitch then adds its own fields. Transfer-Encoding and
//! Content-Length are kept because bodies are forwarded as they came.

use crate::head::Version;
use crate::request::RequestHead;
use crate::response::ResponseHead;
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
pub fn write_request_head(buf: &[u8], head: &RequestHead, rw: &RequestRewrite, out: &mut Vec<u8>) {
    let _ = (buf, head, rw, out);
    todo!("http1 helper")
}

/// Appends to `out` the response head to send to the client (status line as sent).
pub fn write_response_head(
    buf: &[u8],
    head: &ResponseHead,
    rw: &ResponseRewrite,
    out: &mut Vec<u8>,
) {
    let _ = (buf, head, rw, out);
    todo!("http1 helper")
}
