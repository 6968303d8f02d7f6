//! The cswitch data plane.
//!
//! Owns everything that touches a socket on the request path: workers (one thread and one
//! single-threaded tokio runtime per core, each with its own SO_REUSEPORT listeners and
//! server connection pools, so the hot path takes no lock), client sessions, the request
//! phases, admission control, the access log, and the running [`Switch`] with its reload
//! and graceful shutdown.
//!
//! Layout, in request order: `worker` (threads, accept, admission) → `session` (client
//! connection, idle wait, head reading) → `request` (route, pick, retries, log) →
//! `persist` (session persistence lookup and response edits) → `balancing` (scheduler
//! pick, hash keys) → `upstream` (maxconn queue, connect / pool) → `exchange` (request body
//! pump) → `reply` (response forwarding) → `tunnel` (upgrades). Support: `buf`, `io`,
//! `pool`, `prealloc` (connect ahead of the request), `snapshot`, `stats`, `respond`, `access_log`, `switch`.

mod access_log;
mod balancing;
mod buf;
mod connect;
mod dialogue;
mod exchange;
pub mod explain;
mod health;
mod io;
mod live;
mod mail_login;
mod persist;
mod pool;
mod prealloc;
mod reply;
mod request;
mod respond;
mod route;
mod session;
mod smtp;
mod snapshot;
mod stats;
mod sticky;
mod stream;
mod switch;
mod termination;
mod tls_pass;
mod tunnel;
mod upstream;
pub mod view;
mod worker;

pub use balancing::extract_key;
pub use stats::{Counter, Stats};
pub use switch::{compile_rules, EditFailed, ReloadError, Switch};
