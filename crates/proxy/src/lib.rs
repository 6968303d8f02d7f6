//! The cswitch data plane: everything that touches a socket on the request path.
//!
//! Workers (one thread and one single-threaded tokio runtime per core, each with its own
//! SO_REUSEPORT listeners and server connection pools, so the hot path takes no lock)
//! accept connections and hand each to the wing of its listener's protocol; the running
//! [`Switch`] swaps config snapshots on reload and shuts down gracefully.
//!
//! Layout, in layers; a file imports only from its own folder and the layers below it, so
//! no two wings import each other:
//!
//! - the roof: `switch` (start, reload, shutdown), `bind` (its sockets, bound or
//!   inherited), `accept` (worker threads, accept loops,
//!   admission, the protocol dispatch), `explain` (how a request would be routed),
//!   `upgrade` (a binary upgrade: inherited listeners, idle connections handed over and
//!   adopted);
//! - the wings: `http/` (the request phases; toward HTTP/1.1 or HTTP/2 servers), `http2/`
//!   (HTTP/2 and gRPC from clients: each stream piped through `http/`'s phases as an
//!   HTTP/1.1 request, within the connection's memory budget), `mail/` (SMTP, POP3, IMAP), `tls/`
//!   (passthrough, certificates), `health/` (the control loop and its checks);
//! - `handoff/`: one-way switching's hand-off of a routed connection to a server's agent
//!   (freeze, dump, ship, flip, GO; two-way on any failure), used by the HTTP wing;
//! - what every wing uses: `upstream/` (the one routing decision, pick, queue, connect,
//!   pool, pre-allocation, passive health, tunnel) and `observe/` (the end-of-request
//!   record, the access log, the admin views);
//! - `floor/`: the runtime state they all stand on (snapshot, groups, servers, shared
//!   tables, per-worker state, counters, live figures, typed failures), importing nothing
//!   above it.

mod accept;
mod bind;
pub mod explain;
mod floor;
mod handoff;
mod health;
mod http;
mod http2;
mod mail;
mod observe;
mod switch;
mod tls;
mod upgrade;
mod upstream;

pub use floor::handover::{HandoverTally, Moving, Sink};
pub use floor::stats::{Counter, Stats};
pub use handoff::timing::{
    PhaseView as HandoffPhaseView, TimingView as HandoffTimingView, BOUNDS_US as HANDOFF_BOUNDS_US,
};
pub use observe::view;
pub use switch::{compile_rules, EditFailed, ReloadError, RuleErrors, Switch};
pub use tls::termination::check_pair as check_tls_pair;
pub use upgrade::state::State as UpgradeState;
pub use upgrade::Inherited;
pub use upstream::pick::extract_key;
