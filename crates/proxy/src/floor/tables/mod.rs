//! The tables shared by all workers, each a leaf that imports nothing of the crate: which
//! server a client address is pinned to (`sticky_ip`), used last (`last_server`), which
//! server issued a TLS session (`tls_sessions`). Group persistence tables live with the
//! groups (`floor::persist`).

pub mod last_server;
pub mod sticky_ip;
pub mod tls_sessions;
