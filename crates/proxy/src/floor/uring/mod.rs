//! The completion-based data path (issue 14, ADR 0017 and 0021): plain HTTP client sockets whose
//! receives and sends go through the worker's io_uring instead of tokio's epoll, when
//! `[global] io = "uring"` asks for it and the kernel allows it.
//!
//! | part | file |
//! |---|---|
//! | the worker's ring: operations, completions, the tokio hooks (reaper, flush before park) | `driver.rs` |
//! | a socket's receive: multishot with a byte limit, its completions queued for the reader | `driver/receive.rs` |
//! | the provided buffers receives land in (no buffer per waiting connection) | `bufs.rs` |
//! | a TCP socket served by the ring, as `AsyncRead`/`AsyncWrite` | `tcp.rs` |
//! | accepting connections that never join tokio's epoll | `listen.rs` |
//!
//! The ring lives beside tokio, not instead of it: timers, TLS, HTTP/2, the parked set,
//! agents and the admin API stay on epoll. The ring's eventfd sits in the worker's epoll; the
//! reaper task runs the deferred completions in one batch and wakes the futures waiting on
//! them; submissions queued during a turn go to the kernel in one `io_uring_enter` before
//! the worker parks.

mod bufs;
pub mod driver;
pub mod listen;
pub mod tcp;

pub use driver::{install, reaper};
pub use tcp::RingTcp;
