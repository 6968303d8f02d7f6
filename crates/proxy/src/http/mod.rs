//! The HTTP wing: a client connection's requests, one at a time in arrival order, so
//! pipelined requests are answered in order even when they go to different servers
//! (seed 000 §4.5). Each request runs its phases on a `txn::Txn`:
//!
//! | phase | file |
//! |---|---|
//! | wait for the next request (idle; park after a while: `floor::parked`) | `mod.rs` |
//! | read head, admit | `head.rs` |
//! | route (stickiness, rules, persistence: `upstream::decide`) | `route.rs` (`view.rs`: the rules' view) |
//! | forward: choose, connect, learn; retries | `forward.rs` |
//! | exchange (request body up, response down) | `exchange.rs`, `reply.rs`; `exchange_h2.rs` toward HTTP/2 servers |
//! | the switch's own answers | `respond.rs` |
//! | record and log | `txn.rs` → `observe::record` |

mod client;
mod exchange;
mod exchange_h2;
mod forward;
mod handoff;
pub mod head;
mod log_notes;
mod reply;
mod respond;
mod route;
pub(crate) mod scratch;
mod txn;
pub mod view;

use crate::floor::boxed::pinned;
use crate::floor::conns::{ConnState, Slot};
use crate::floor::parked::Resting;
use crate::floor::stats::Counter;
use crate::floor::stream::{ClientStream, LastWrites};
use crate::floor::worker::Open;
use crate::floor::worker::{BusyGuard, Worker};
use crate::upstream::prealloc;
pub(crate) use client::Client;
use client::Pins;
use std::net::SocketAddr;
use std::task::Poll;
use tokio::io::AsyncWriteExt;

/// The client side of a new connection (and, with `preallocate`, its server connection
/// started now). Built before the connection's task, so the task's future holds it once.
/// `state` tells eviction what the connection is doing (fresh until its first head is
/// whole, then busy, idle between requests).
pub(crate) fn client(open: &Open, stream: ClientStream, peer: SocketAddr, state: Slot) -> Client {
    let worker = &open.worker;
    let prealloc = prealloc::start(worker, &worker.shared.snapshot.load(), open.listener(), peer);
    let pins = prealloc.map(|p| Box::new(Pins { prealloc: Some(p), ..Pins::default() }));
    Client { stream, peer, buf: None, pins, state, id: worker.client_id(), served: false, h2_preface: false }
}

/// One HTTP/2 stream, piped in as an HTTP/1.1 request on `client` (the `http2` wing made
/// it): the same phases as any request, on the snapshot current now. Not boxed here: the
/// stream's whole future is boxed once where it is spawned (one allocation, not two).
pub(crate) async fn serve_piped(worker: &Worker, listener: usize, client: &mut Client) {
    serve_one(worker, listener, client).await;
}

/// Serves one HTTP client connection to its end, or until it parks (`floor::parked`: the
/// worker's resume loop serves it again with [`resume`]). A connection that opened with
/// the HTTP/2 preface on a listener that takes it goes to `h2` (the `http2` wing, which
/// this wing does not import), with the bytes read. Everything this future holds is
/// held by every connection, silent ones included: keep it to the open-connection guard
/// and the client.
///
/// Not an `async fn`: one would copy its arguments into locals and hold both copies (a
/// second `Client`) for the connection's whole life; the block uses the captured ones.
#[allow(clippy::manual_async_fn)] // on purpose: see above
pub(crate) fn serve<H, F>(mut open: Open, mut client: Client, h2: H) -> impl std::future::Future<Output = ()>
where
    H: FnOnce(Open, Client) -> F,
    F: std::future::Future<Output = ()>,
{
    async move {
        loop {
            match wait_for_request(&open.worker, &mut client).await {
                Next::Request => {}
                Next::Close => break,
                Next::Park => match park(open, client) {
                    Some((o, c)) => (open, client) = (o, c),
                    None => return,
                },
            }
            // Boxed: the request phases hold far more state than an idle connection needs,
            // and an unboxed future would reserve that space in every idle connection.
            // Made in its box (`floor::boxed`): no copy of the whole future per request.
            let keep = pinned(|| serve_one(&open.worker, open.listener(), &mut client)).await;
            if client.h2_preface {
                // Boxed: only such a connection holds the HTTP/2 wing's state.
                return Box::pin(h2(open, client)).await;
            }
            if !keep || open.worker.shutting_down() {
                break;
            }
        }
        if let Some(buf) = client.buf.take() {
            open.worker.bufs.give(buf);
        }
        if client.stream.is_tls() {
            // Boxed: its timer would otherwise take room in every connection's future.
            Box::pin(close_notify(&mut client.stream)).await;
        }
    }
}

/// Parks an idle connection: its task ends, and its socket waits in the worker's epoll set.
/// Gives the connection back when it cannot park (the task keeps serving it); `None` when
/// it parked, or was lost leaving the runtime.
fn park(open: Open, client: Client) -> Option<(Open, Client)> {
    if !client.can_rest() {
        return Some((open, client));
    }
    let state = std::rc::Rc::clone(&client.state);
    let ring = open.worker.ring_serves(open.listener());
    let resting = match client.rest(open.listener()) {
        Ok(resting) => resting,
        Err(back) => return back.map(|c| (open, c)),
    };
    if let Some(handover) = open.worker.shared.handing_over() {
        // A binary upgrade: the connection leaves for the new process instead.
        let resting = crate::floor::handover::move_out(&open.worker.shared, handover, resting).err()?;
        return Client::wake(resting, state, ring).map(|c| (open, c));
    }
    match open.worker.parked.park(resting) {
        Ok(()) => {
            open.worker.shared.stats.inc(Counter::Parked);
            open.park();
            None
        }
        Err(r) => {
            state.waiting(false);
            Client::wake(r, state, ring).map(|c| (open, c))
        }
    }
}

/// A parked connection whose socket turned readable, as a client to serve again (its
/// count taken over by `open`); `None` if its socket could not rejoin the runtime.
pub(crate) fn resume(r: Resting, state: Slot, ring: bool) -> Option<Client> {
    Client::wake(r, state, ring)
}

/// close_notify, so a TLS client can tell the end from a truncation (a plain TCP connection
/// needs nothing more than the close itself).
async fn close_notify(stream: &mut ClientStream) {
    stream.last_writes(); // the alert and the FIN in one segment (on the ring)
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), stream.shutdown()).await;
}

/// One request, on the snapshot current when it started.
async fn serve_one(worker: &Worker, listener: usize, client: &mut Client) -> bool {
    let _busy = BusyGuard::new(worker);
    let snap = worker.snapshot();
    let mut scratch = scratch::take();
    let keep = txn::handle(worker, &snap, listener, client, &mut scratch).await;
    scratch::give(scratch);
    keep
}

/// Only a plain connection parks (a TLS session cannot leave its task), and only a
/// keep-alive one when asked by the housekeeping (a fresh one is left where admission's
/// eviction looks for it first; a binary upgrade's hand-over asks fresh ones too). Asked at
/// each poll rather than kept: every waiting connection's future would carry the answer.
fn may_park(worker: &Worker, client: &Client) -> bool {
    let waiting = matches!(client.state.get(), ConnState::Idle | ConnState::Fresh);
    let can_leave = worker.parked.enabled() || worker.shared.handing_over().is_some();
    waiting && !client.stream.is_tls() && can_leave
}

/// What a connection waiting for its next request does next.
enum Next {
    /// The request's first bytes are here (a buffer is taken for them).
    Request,
    /// Close: the client went away, or shutdown.
    Close,
    /// The housekeeping asked it to park.
    Park,
}

/// Waits until the next request's first bytes are here. An idle connection gives its buffer
/// back while it waits, and holds nothing but this small future (the idle-memory bench
/// measures it); after `floor::parked::PARK_AFTER` a keep-alive one is asked to park.
async fn wait_for_request(worker: &Worker, client: &mut Client) -> Next {
    if client.buf.as_ref().is_some_and(|b| !b.is_empty()) {
        return Next::Request; // pipelined bytes already here
    }
    if let Some(buf) = client.buf.take() {
        worker.bufs.give(buf);
    }
    if client.state.get() == ConnState::Busy {
        client.state.set(ConnState::Idle);
    }
    if let Some(handover) = worker.shared.handing_over() {
        // A binary upgrade: between requests, a plain connection moves to the new process
        // and a TLS-terminated one closes (its session cannot move) once it is idle: not
        // while the next request is already there, which would be lost (and the close
        // might reset the answers before it).
        if !client.stream.is_tls() {
            // On the ring the answer's last send may still be in flight: the socket can
            // leave only once it is done.
            let _ = tokio::io::AsyncWriteExt::flush(&mut client.stream).await;
            return Next::Park;
        }
        if !client.stream.request_waiting() {
            handover.note_tls_closed(1);
            return Next::Close;
        }
    }
    // The idle timeout is enforced by the worker's housekeeping (`floor::conns`), which
    // closes this connection if it waits too long: no timer here, see `Watch`.
    client.state.waiting(true);
    let readable = async {
        loop {
            // `poll_read_ready` parks the waker in the socket's own registration;
            // `readable()` would add a waiter node to this future, which every idle
            // connection would carry.
            let ready = std::future::poll_fn(|cx| match client.stream.poll_read_ready(cx) {
                Poll::Ready(r) => Poll::Ready(r.map(|()| true)),
                Poll::Pending if may_park(worker, client) => {
                    if client.state.park_asked() {
                        return Poll::Ready(Ok(false));
                    }
                    client.state.may_park(cx.waker());
                    Poll::Pending
                }
                Poll::Pending if client.stream.is_tls() && !client.stream.is_piped() => {
                    if client.state.park_asked() && worker.shared.handing_over().is_some() {
                        return Poll::Ready(Ok(false)); // idle at a hand-over: closed below
                    }
                    client.state.may_be_woken(cx.waker());
                    Poll::Pending
                }
                Poll::Pending => Poll::Pending,
            })
            .await?;
            if !ready {
                return Ok::<Next, std::io::Error>(Next::Park);
            }
            // The reactor calls a new socket readable before a byte is there: on a fresh
            // connection ask the kernel, and wait again if nothing came, so a silent
            // connection never takes a buffer. (Later waits follow reads that cleared the
            // readiness, and cost no extra syscall.)
            if client.state.get() != ConnState::Fresh || client.stream.has_bytes() {
                return Ok(Next::Request);
            }
        }
    };
    let next = readable.await.unwrap_or(Next::Close);
    if matches!(next, Next::Park) && client.stream.is_tls() {
        // Woken by a binary upgrade's hand-over while idle: its session cannot move.
        client.state.waiting(false);
        if let Some(handover) = worker.shared.handing_over() {
            handover.note_tls_closed(1);
        }
        return Next::Close;
    }
    if matches!(next, Next::Park) {
        return Next::Park; // still waiting, since the same time: the parked table goes on
    }
    client.state.waiting(false);
    if matches!(next, Next::Close) || worker.shutting_down() {
        return Next::Close;
    }
    client.buf = Some(worker.bufs.take_for_head());
    Next::Request
}
