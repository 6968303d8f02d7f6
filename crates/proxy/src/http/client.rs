//! The client side of an HTTP connection, and the state some features keep with it.

use crate::floor::buf::IoBuf;
use crate::floor::conns::Slot;
use crate::floor::parked::Resting;
use crate::floor::pool::Take;
use crate::floor::stream::ClientStream;
use crate::floor::tables::sticky_ip::Target;
use crate::upstream::prealloc::Prealloc;
use std::net::SocketAddr;

/// The client side of a connection.
pub struct Client {
    /// The socket (TLS-terminated or plain).
    pub stream: ClientStream,
    /// Its address.
    pub peer: SocketAddr,
    /// Bytes read and not yet handled; `None` while idle between requests.
    pub buf: Option<IoBuf>,
    /// What only some connections need, boxed so an idle connection does not carry it.
    pub pins: Option<Box<Pins>>,
    /// What the connection is doing, for eviction under a flood.
    pub state: Slot,
    /// Unique within the worker: which pooled server connections it used last.
    pub id: u64,
    /// A request of this connection has been answered by a server (`reuse = "safe"`).
    pub served: bool,
    /// The connection opened with the HTTP/2 preface on a listener that takes it: the
    /// HTTP/1.1 phases stop, and the roof hands the connection to the `http2` wing.
    pub h2_preface: bool,
}

/// Per-connection state of the features that use it.
#[derive(Default)]
pub struct Pins {
    /// Server this connection is pinned to by a `STICKY_IP_PORT` rule.
    pub sticky: Option<Target>,
    /// Server (id) the previous request went to (`connection_persistence` other than
    /// `per_request`).
    pub last_server: Option<u64>,
    /// A server connection started at accept (`preallocate`), not yet used.
    pub prealloc: Option<Prealloc>,
}

impl Client {
    /// The connection's pins, created on first use.
    pub fn pins_mut(&mut self) -> &mut Pins {
        self.pins.get_or_insert_with(Default::default)
    }

    /// The `STICKY_IP_PORT` target, if a rule pinned this connection.
    pub fn sticky(&self) -> Option<Target> {
        self.pins.as_ref().and_then(|p| p.sticky)
    }

    /// The server of the previous request, when it is tracked.
    pub fn last_server(&self) -> Option<u64> {
        self.pins.as_ref().and_then(|p| p.last_server)
    }

    /// The pooled connections this connection's next request may take, by `policy`
    /// (`None`: none). Before its first answer a connection has pooled nothing of its own (a
    /// server connection goes back to the pool only after an answered exchange), so under
    /// `safe` and `never` its first request does not look: the pool holds, at most, every
    /// idle connection of clients that left, and scanning them all would find none.
    pub fn pool_take(&self, policy: config::Reuse) -> Option<Take> {
        match policy {
            config::Reuse::Always => Some(Take::Any),
            config::Reuse::Safe | config::Reuse::Never if !self.served => None,
            config::Reuse::Safe => Some(Take::Any),
            config::Reuse::Never => Some(Take::OwnedBy(self.id)),
        }
    }

    /// Whether the server connection of the exchange that just ended may be pooled, by
    /// `policy`, when the client connection stays open or not (`keep`). Under `never` only
    /// this client connection may take it again, so once it closes nobody can: pooling it
    /// would hold an idle server connection (and a place in the pool) for no one.
    pub fn may_pool(policy: config::Reuse, keep: bool) -> bool {
        keep || policy != config::Reuse::Never
    }

    /// The pre-allocated connection, if it goes to `server`.
    pub fn take_prealloc(&mut self, server: u64) -> Option<Prealloc> {
        self.pins.as_mut()?.prealloc.take_if(|p| p.server == server)
    }

    /// Whether it can park now: plain, with no bytes buffered.
    pub fn can_rest(&self) -> bool {
        self.buf.is_none() && !self.stream.is_tls()
    }

    /// What the connection keeps while parked, its socket out of the runtime. `Err(None)`
    /// when the socket could not leave the runtime (it is closed); `Err(Some(client))` when
    /// it must not leave now (bytes reached the ring meanwhile: the next request). Call only
    /// when [`Client::can_rest`] (a TLS connection given here would be closed).
    #[allow(clippy::result_large_err)] // moved once per park (after a second idle), not per request
    pub fn rest(self, listener: usize) -> Result<Resting, Option<Client>> {
        let Client { stream, peer, buf, pins, state, id, served, h2_preface } = self;
        let stream = match stream {
            ClientStream::Plain(tcp) => tcp.into_std().map_err(|_| None)?,
            ClientStream::Ring(ring) => match ring.leave() {
                Ok(stream) => stream,
                Err(ring) => {
                    let stream = ClientStream::Ring(ring);
                    return Err(Some(Client { stream, peer, buf, pins, state, id, served, h2_preface }));
                }
            },
            _ => return Err(None),
        };
        let extra = pins.map(|p| p as Box<dyn std::any::Any>);
        let since = state.waiting_since();
        Ok(Resting { stream, peer, listener: listener as u32, since, id, served, extra })
    }

    /// A connection another process served until now (a binary upgrade), between two
    /// requests.
    pub fn adopted(
        stream: tokio::net::TcpStream,
        peer: SocketAddr,
        state: Slot,
        id: u64,
        served: bool,
    ) -> Client {
        // An HTTP/1.1 connection between requests: the preface can only open a connection.
        Client {
            stream: ClientStream::Plain(stream),
            peer,
            buf: None,
            pins: None,
            state,
            id,
            served,
            h2_preface: false,
        }
    }

    /// A parked connection served again, its socket back in the runtime, or in the ring
    /// when `ring` (`None`: it could not be registered, and is closed).
    pub fn wake(r: Resting, state: Slot, ring: bool) -> Option<Client> {
        let stream = match ring {
            true => ClientStream::Ring(crate::floor::uring::RingTcp::new(r.stream)),
            false => ClientStream::Plain(tokio::net::TcpStream::from_std(r.stream).ok()?),
        };
        let pins = r.extra.and_then(|e| e.downcast::<Pins>().ok());
        Some(Client {
            stream,
            peer: r.peer,
            buf: None,
            pins,
            state,
            id: r.id,
            served: r.served,
            h2_preface: false,
        })
    }
}
