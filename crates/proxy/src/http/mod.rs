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
pub mod head;
mod log_notes;
mod reply;
mod respond;
mod route;
mod scratch;
mod txn;
pub mod view;

use crate::floor::conns::{ConnState, Slot};
use crate::floor::stats::Counter;
use crate::floor::stream::ClientStream;
use crate::floor::worker::{BusyGuard, Worker};
use crate::upstream::prealloc;
use client::{Client, Pins};
use std::net::SocketAddr;
use std::rc::Rc;
use tokio::io::AsyncWriteExt;

/// Serves one HTTP client connection to its end.
/// `state` tells eviction what the connection is doing (fresh until its first head is
/// whole, then busy, idle between requests).
pub async fn serve(worker: Rc<Worker>, stream: ClientStream, peer: SocketAddr, listener: usize, state: Slot) {
    let prealloc = prealloc::start(&worker, &worker.shared.snapshot.load(), listener, peer);
    let pins = prealloc.map(|p| Box::new(Pins { prealloc: Some(p), ..Pins::default() }));
    let id = worker.client_id();
    let mut client = Client { stream, peer, buf: None, pins, state, id, served: false };
    while wait_for_request(&worker, &mut client).await {
        // Boxed: the request phases hold far more state than an idle connection needs, and
        // an unboxed future would reserve that space in every idle keep-alive connection.
        let keep = Box::pin(serve_one(&worker, listener, &mut client)).await;
        if !keep || worker.shutting_down() {
            break;
        }
    }
    if let Some(buf) = client.buf.take() {
        worker.bufs.give(buf);
    }
    if client.stream.is_tls() {
        // close_notify, so the client can tell the end from a truncation (a plain TCP
        // connection needs nothing more than the close itself).
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), client.stream.shutdown()).await;
    }
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
    let idle = worker.shared.snapshot.load().config.timeouts.client_idle;
    // `poll_read_ready` parks the waker in the socket's own registration; `readable()` would
    // add a waiter node to this future, which every idle connection would carry.
    let readable = async {
        loop {
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
    match tokio::time::timeout(idle, readable).await {
        Ok(Ok(())) if !worker.shutting_down() => {
            client.buf = Some(worker.bufs.take_for_head());
            true
        }
        Ok(_) => false,
        Err(_) => {
            worker.shared.stats.inc(Counter::IdleTimeout);
            false
        }
    }
}
