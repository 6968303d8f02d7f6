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
//! the token check), `run.rs` (the reporting thread), `cli.rs` (the subcommand's
//! arguments and [`run_blocking`]).

pub mod capacity;
pub mod cli;
pub mod measure;
pub mod run;
pub mod wire;

pub use capacity::CapacityFn;
pub use cli::{run_blocking, AgentArgs};
pub use measure::{Meter, Metric};
pub use run::{spawn, AgentConfig, AgentHandle};
pub use wire::{token_matches, Report, WireError};
