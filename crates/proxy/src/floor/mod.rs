//! The floor: the runtime state every wing stands on, importing nothing above it. The
//! snapshot of one config generation (`snapshot`, `group`, `server`, with each group's
//! scheduler instance `sched_slot` and session persistence `persist`, and the weight rules
//! `weights`), what the workers share (`shared`: the snapshot, `stats` counters, `live`
//! figures, the `tables`), per-worker state (`worker`, `schedulers`, `pool`, `h2pool`: the
//! HTTP/2 server connections streams share, `budget`: an HTTP/2 client connection's memory
//! bound, `pipe`: an HTTP/2 stream's way into the HTTP/1.1 phases, `buf`, `spares`: how
//! many spare objects a free list keeps, `boxed`: a future boxed where it is made, `conns`:
//! the connections eviction may close, `parked`: idle keep-alive connections waiting
//! outside the runtime, `handover`: idle connections leaving for a new binary), socket
//! helpers (`io`, `stream`: plain or TLS client streams and the handshake, `socket`: a TCP
//! socket, tokio's or the ring's, under server connections and TLS sessions, `uring`: plain
//! client sockets served by the worker's io_uring, `clock`: a cheap clock for deadlines),
//! header fields between HTTP/1.1 and HTTP/2 (`fields`: connection-specific fields, trailer
//! sections), and the typed failure every step returns (`failure`).

pub mod boxed;
pub mod budget;
pub mod buf;
pub mod clock;
pub mod conns;
pub mod failure;
pub mod fields;
pub mod group;
pub mod h2pool;
pub mod handover;
pub mod io;
pub mod live;
pub mod parked;
pub mod persist;
pub mod pipe;
pub mod pool;
pub mod sched_slot;
pub mod schedulers;
pub mod server;
pub mod shared;
pub mod snapshot;
pub mod socket;
pub mod spares;
pub mod stats;
pub mod stream;
pub mod tables;
pub mod uring;
pub mod weights;
pub mod worker;
