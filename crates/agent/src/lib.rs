//! The capacity agent (`cswitch agent`), run on each server host (seed 004 §3.3, §4.2).
//!
//! Owns the server side of dynamic weights: every interval it measures the host's load,
//! turns it into a capacity with g(x) = C·e^(−k·x), and sends one UDP report to each
//! switch. The switch uses the capacity as the server's weight and treats a server
//! silent for two seconds as having capacity 0; its receiving side lives in
//! `cswitch-proxy` and reads reports with this crate's [`wire`] module.
//!
//! Layout: `capacity.rs` (the function g), `measure.rs` (load metrics: pure parsers of
//! `/proc` text and the [`Meter`] that reads them), `wire.rs` (the report datagram and
//! the token check, which the switch's receiver uses too), `run.rs` (the reporting thread:
//! [`spawn`] with an [`AgentConfig`]). The command line (`cswitch agent`, clap) lives in
//! the binary, `crates/cswitch/src/agent_cli.rs`; this crate needs no argument parser.
//!
//! `handoff.rs` (with `handoff/control.rs`, `handoff/relay.rs`) is the other half of the
//! agent: one-way switching's hand-off server, which restores connections a switch hands
//! over (`oneway`) and relays them with `splice` to the local server for the VIP port the
//! client connected to (the web server, or the TLS server of a TLS passthrough listener).

pub mod capacity;
pub mod handoff;
pub mod measure;
pub mod run;
pub mod wire;

pub use capacity::CapacityFn;
pub use handoff::{HandoffConfig, HandoffCounts, HandoffServer};
pub use measure::{Meter, Metric};
pub use run::{spawn, AgentConfig, AgentHandle};
pub use wire::{token_matches, Report, WireError};
