//! One-way switching (seed 001 §II–§III, seed 003 §3): the switch reads and routes a
//! request, then hands the live TCP connection to the chosen server host, which answers the
//! client directly. This crate owns the parts that touch the kernel's TCP state and the
//! hand-off's data; the design and its pitfalls are `../shared/research/oneway-spike.md`.
//!
//! Layout:
//! - `repair`: `TCP_REPAIR` on a socket — enter and leave repair mode, [`dump`] an
//!   established connection, [`restore`] it on another socket; and whether a connection
//!   has [`closed`] (the agent's end-of-flow report). The workspace's one module
//!   with `unsafe` code (raw `getsockopt`/`setsockopt`/`ioctl`), each call with its
//!   `SAFETY` line.
//! - `host`: what a host lacks for hand-offs (`CAP_NET_ADMIN`, kernel, interface), for
//!   `cswitch check`.
//! - `state`: [`TcpState`], what a dump holds (sequence numbers, options, window,
//!   timestamp, queues), and its byte encoding for the control channel. Sans-io.
//! - `steer`: the switch's steering table (nftables netdev ingress: install once, then
//!   freeze / flip / unfreeze / forget as one netlink transaction each; the `ended` and
//!   `flows` dumps the switch's sweep reads).
//! - `wire`: the control channel's [`Frame`]s and their incremental [`Reader`]; `wire::policy`
//!   the hand-off's [`Route`] and a listener's [`Policy`] (rules for the agent). Sans-io.

mod host;
mod repair;
mod state;
mod steer;
mod wire;

pub use host::{missing, Missing};
pub use repair::{closed, dump, enter_repair, leave_repair, restore, RepairError};
pub use state::{DecodeError, TcpState, Window};
pub use steer::{
    install as install_steering, remove as remove_steering, ruleset, Ended, Steering, TableSpec,
    ENDED_TIMEOUT,
};
pub use wire::{
    CookieMode, CookieRule, Frame, InsertRule, Persistence, Policy, Reader, Route, WireError, MAX_FRAME,
};
