//! cswitch configuration.
//!
//! Owns the TOML format (documented key by key in `docs/config.md`), its validation, and the
//! validated [`Config`] the rest of the program is built from. Every error names the file,
//! line and column (and the key path) and, where it can, suggests the fix; all errors in a
//! file are reported at once. [`diff`] lists what changed between two configs, for reload.
//!
//! Layout, from the entry points down; each file imports only files listed below it, so
//! there are no import loops:
//!
//! - `load`: TOML text → drafts → validated [`Config`], the walk of the whole file.
//! - `refs`: what the file names outside itself (rule files, certificates, the access
//!   log), each with its [`Place`], collected from the drafts even when there are errors.
//! - `checks`: checks across entries, once all are read (duplicate names and binds, the
//!   admin listener's bind against the listeners', `default_group` references).
//! - `entries`: `[[listener]]` and `[[group]]` with its servers, read into drafts that keep
//!   the spans the cross-entry checks point at.
//! - `sections`: the single tables `[global]`, `[limits]`, `[timeouts]`; `access_log`:
//!   `[access_log]` (format, fields, file or syslog).
//! - `endpoints`: `[admin]` and `[agents]` (a bind and a token each); `cluster`:
//!   `[cluster]` (node name, gossip bind, seeds, key); `cluster_l4`: `[cluster.l4]` (the
//!   kernel L4 tier's VIP, ports, nodes and table).
//! - `oneway`: `[oneway]`, a listener's `mode`, a server's `agent` and `mac`, and the checks
//!   across them.
//! - `balancing`: a group's scheduler keys and persistence, a listener's connection
//!   persistence.
//! - `health`: a group's health and passive checks, slow start, drain, weight source, and
//!   a server's state.
//! - `certs`: a listener's TLS certificates.
//! - `walk`: typed reads of one TOML table, each problem reported at its span.
//! - `keys`: the keys every table may hold, and where an unknown key belongs (a leaf).
//! - `diag`: [`Diagnostic`], [`Diagnostics`], [`Place`], their collection while reading,
//!   and their rendering with a caret.
//! - `diff`: what changed between two configs, for reload; `edit`: the admin API's
//!   run-time edits; both work on the validated types only.
//! - `syntax`: where an unclosed bracket opened, for TOML syntax errors the parser reports
//!   where it gave up.
//! - `addr` (IP:port), `duration` ("500ms", "10s", "5m"), `suggest` ("did you mean"):
//!   leaves.
//! - `model`: the validated types (a leaf, with `balance`'s scheduler names).

mod access_log;
mod addr;
mod balancing;
mod certs;
mod checks;
mod cluster;
mod cluster_l4;
mod diag;
mod diff;
mod duration;
pub mod edit;
mod endpoints;
mod entries;
mod health;
mod http2;
mod keys;
mod load;
mod model;
mod oneway;
mod refs;
mod sections;
mod suggest;
mod syntax;
mod walk;

pub use diag::{Diagnostic, Diagnostics, Place};
pub use diff::{diff, Change};
pub use model::*;
pub use oneway::parse_mac;
pub use refs::{FileRef, Inspection, Refs, RulesRef, TlsRef, Written};

use std::path::Path;

/// Reads and validates the config file at `path`. A file that cannot be read gives one
/// diagnostic with `line` and `col` 0 (no position).
pub fn load(path: &Path) -> Result<Config, Diagnostics> {
    load::inspect(path).config
}

/// Validates config text; `path` is used in diagnostics and to resolve relative paths
/// (e.g. a listener's `rules`).
pub fn parse(text: &str, path: &Path) -> Result<Config, Diagnostics> {
    load::inspect_text(text, path).config
}

/// [`load`], and what the file names outside itself (rule files, certificates, the access
/// log) with the place naming each, read even when the config has errors: what `cswitch
/// check` opens to report, in one run, everything `cswitch run` would refuse.
pub fn inspect(path: &Path) -> Inspection {
    load::inspect(path)
}

/// [`parse`], with the references as [`inspect`] gives them.
pub fn inspect_text(text: &str, path: &Path) -> Inspection {
    load::inspect_text(text, path)
}
