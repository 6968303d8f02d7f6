//! The HTTP wing: a client connection's requests, one at a time in arrival order, so
//! pipelined requests are answered in order even when they go to different servers
//! (seed 000 §4.5). Each request runs its phases on a `txn::Txn`:
//!
//! | phase | file |
//! |---|---|
//! | wait for the next request (idle) | `mod.rs` |
//! | read head, admit | `head.rs` |
//! | route (stickiness, rules, persistence: `upstream::decide`) | `route.rs` (`view.rs`: the rules' view) |
//! | forward: choose, connect, learn; retries | `forward.rs` |
//! | exchange (request body up, response down) | `exchange.rs`, `reply.rs` |
//! | the switch's own answers | `respond.rs` |
//! | record and log | `txn.rs` → `observe::record` |

mod client;
mod exchange;
mod forward;
mod handoff;
pub mod head;
mod log_notes;
mod reply;
mod respond;
mod route;
mod scratch;
mod txn;
pub mod view;

use crate::floor::conns::{ConnState, Slot};
use crate::floor::stream::ClientStream;
use crate::floor::worker::Open;
use crate::floor::worker::{BusyGuard, Worker};
use crate::upstream::prealloc;
pub(crate) use client::Client;
use client::Pins;
use std::net::SocketAddr;
use tokio::io::AsyncWriteExt;

/// The client side of a new connection (and, with `preallocate`, its server connection
/// started now). Built before the connection's task, so the task's future holds it once.
/// `state` tells eviction what the connection is doing (fresh until its first head is
/// whole, then busy, idle between requests).
pub(crate) fn client(open: &Open, stream: ClientStream, peer: SocketAddr, state: Slot) -> Client {
    let worker = &open.worker;
    let prealloc = prealloc::start(worker, &worker.shared.snapshot.load(), open.listener, peer);
    let pins = prealloc.map(|p| Box::new(Pins { prealloc: Some(p), ..Pins::default() }));
    Client { stream, peer, buf: None, pins, state, id: worker.client_id(), served: false }
}

/// Serves one HTTP client connection to its end. Everything this future holds is held by
/// every connection, silent ones included: keep it to the open-connection guard and the
/// client.
///
/// Not an `async fn`: one would copy its arguments into locals and hold both copies (a
/// second `Client`) for the connection's whole life; the block uses the captured ones.
#[allow(clippy::manual_async_fn)] // on purpose: see above
pub(crate) fn serve(open: Open, mut client: Client) -> impl std::future::Future<Output = ()> {
    async move {
        let (worker, listener) = (&*open.worker, open.listener);
        while wait_for_request(worker, &mut client).await {
            // Boxed: the request phases hold far more state than an idle connection needs,
            // and an unboxed future would reserve that space in every idle connection.
            let keep = Box::pin(serve_one(worker, listener, &mut client)).await;
            if !keep || worker.shutting_down() {
                break;
            }
        }
        if let Some(buf) = client.buf.take() {
            worker.bufs.give(buf);
        }
        if client.stream.is_tls() {
            // Boxed: its timer would otherwise take room in every connection's future.
            Box::pin(close_notify(&mut client.stream)).await;
        }
    }
}

/// close_notify, so a TLS client can tell the end from a truncation (a plain TCP connection
/// needs nothing more than the close itself).
async fn close_notify(stream: &mut ClientStream) {
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), stream.shutdown()).await;
}

/// One request, on the snapshot current when it started.
async fn serve_one(worker: &Worker, listener: usize, client: &mut Client) -> bool {
    let _busy = BusyGuard::new(worker);
    let snap = worker.shared.snapshot.load_full();
    let mut scratch = scratch::take();
    let keep = txn::handle(worker, &snap, listener, client, &mut scratch).await;
    scratch::give(scratch);
    keep
}

/// Waits until the next request's first bytes are here. An idle connection gives its buffer
/// back while it waits, and holds nothing but this small future (the idle-memory bench
/// measures it). False: close (idle timeout, shutdown, or the client went away).
async fn wait_for_request(worker: &Worker, client: &mut Client) -> bool {
    if client.buf.as_ref().is_some_and(|b| !b.is_empty()) {
        return true; // pipelined bytes already here
    }
    if let Some(buf) = client.buf.take() {
        worker.bufs.give(buf);
    }
    if client.state.get() == ConnState::Busy {
        client.state.set(ConnState::Idle);
    }
    // The idle timeout is enforced by the worker's housekeeping (`floor::conns`), which
    // closes this connection if it waits too long: no timer here, see `Watch`.
    client.state.waiting(true);
    let readable = async {
        loop {
            // `poll_read_ready` parks the waker in the socket's own registration;
            // `readable()` would add a waiter node to this future, which every idle
            // connection would carry.
            std::future::poll_fn(|cx| client.stream.poll_read_ready(cx)).await?;
            // The reactor calls a new socket readable before a byte is there: on a fresh
            // connection ask the kernel, and wait again if nothing came, so a silent
            // connection never takes a buffer. (Later waits follow reads that cleared the
            // readiness, and cost no extra syscall.)
            if client.state.get() != ConnState::Fresh || client.stream.has_bytes() {
                return Ok::<(), std::io::Error>(());
            }
        }
    };
    let ready = readable.await.is_ok();
    client.state.waiting(false);
    if !ready || worker.shutting_down() {
        return false;
    }
    client.buf = Some(worker.bufs.take_for_head());
    true
}
