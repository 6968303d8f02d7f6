//! Test origins and clients for cswitch: real servers on 127.0.0.1 that say who they are,
//! and clients that send exact bytes.
//!
//! Used by the proxy's integration tests and by `cswitch demo`. It has its own small,
//! lenient HTTP/1.1 reader so that the proxy is never checked with its own parser.
//!
//! Layout:
//! - `origin.rs`: [`Origin`] (listener, connection tasks, request log, [`Origin::kill`])
//!   and [`SeenRequest`].
//! - `passed.rs`: connections received as descriptors over a Unix socket
//!   ([`Origin::start_passed`], the web server of `cswitch agent --pass-fd`).
//! - `routes.rs`: what an origin answers on each path (`/echo`, `/chunked`, `/big/N`, …).
//! - `ws.rs`: the WebSocket echo endpoint and frame helpers for clients.
//! - `client.rs`: [`RawClient`], [`Response`] and the one-shot [`get`].
//! - `wire.rs`: the HTTP/1.1 head and body reader both sides use.
//! - `netns.rs`: [`netns::Testbed`], network namespaces on a bridge for kernel tests
//!   (one-way switching), removed on drop.
//!
//! Every origin response carries `X-Origin: <name>`. Paths: any other path answers 200
//! `"<name> <METHOD> <path>\n"`; `/index.html`, `/img/a.gif`, `/cgi/xmlprocess.pl` (the
//! demo's pages); `/echo` (request body back); `/headers` (raw request head back);
//! `/chunked` (three chunks and a trailer); `/close` (close-delimited body);
//! `/status/NNN`; `/login/NAME` (sets cookie `NAME=<origin>-session`); `/slow/MS`; `/big/N` (N bytes of [`big_byte`]s, streamed); `/sink`
//! (counts the body); `/malformed` (a bad `Content-Length`); `/reset` (RST, no response);
//! `/ws` (WebSocket echo).

mod client;
pub mod netns;
mod origin;
mod passed;
mod routes;
mod seen;
mod wire;
mod ws;

pub use client::{get, RawClient, Response};
pub use origin::{Origin, SeenRequest};
pub use routes::big_byte;
pub use ws::{
    ws_accept_key, ws_client_frame, ws_client_frame_op, ws_read_frame, WS_BINARY, WS_CLOSE, WS_PING, WS_PONG,
    WS_TEXT,
};
