//! cswitch configuration.
//!
//! Owns the TOML format (documented key by key in `docs/config.md`), its validation, and the
//! validated [`Config`] the rest of the program is built from. Every error names the file,
//! line and column (and the key path) and, where it can, suggests the fix; all errors in a
//! file are reported at once. [`diff`] lists what changed between two configs, for reload.
//!
//! Layout: `model` (the validated types), `load` (TOML → drafts → validated), `walk` (typed
//! reads of one TOML table, with spans), `sections` (`[global]`, `[limits]`, …), `entries`
//! (`[[listener]]`, `[[group]]`), `balancing` (a group's scheduler keys and persistence, a
//! listener's connection persistence), `health` (health checks, passive checks, drain, agent weights, `[admin]`, `[agents]`), `certs` (a listener's TLS certificates), `checks` (across entries: duplicates, references), `diag`
//! (diagnostics and their rendering with a caret), `duration` ("500ms", "10s", "5m"),
//! `addr` (IP:port), `suggest` ("did you mean"), `diff` (old vs new config), `edit` (the admin API's run-time edits).

mod addr;
mod balancing;
mod certs;
mod checks;
mod diag;
mod diff;
mod duration;
pub mod edit;
mod entries;
mod health;
mod load;
mod model;
mod sections;
mod suggest;
mod walk;

pub use diff::{diff, Change};
pub use model::*;

use std::path::Path;

/// One problem found in a config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// File the problem is in.
    pub file: std::path::PathBuf,
    /// 1-based line (0 when the file could not be read at all).
    pub line: usize,
    /// 1-based column, in characters (0 when the file could not be read at all).
    pub col: usize,
    /// Dotted key path, e.g. `group[0].servers[1].addr` (empty when not known).
    pub key: String,
    /// What is wrong.
    pub message: String,
    /// How to fix it, when there is a likely fix (e.g. "did you mean `scheduler`?").
    pub hint: Option<String>,
    /// The source line, for the caret display.
    pub source_line: String,
}

/// All problems found in a config, in file order; `Display` prints each as
/// `file:line:col: error: message`, the source line, a caret, and the hint, then the count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl std::error::Error for Diagnostics {}

/// Reads and validates the config file at `path`. A file that cannot be read gives one
/// diagnostic with `line` and `col` 0 (no position).
pub fn load(path: &Path) -> Result<Config, Diagnostics> {
    load::load(path)
}

/// Validates config text; `path` is used in diagnostics and to resolve relative paths
/// (e.g. a listener's `rules`).
pub fn parse(text: &str, path: &Path) -> Result<Config, Diagnostics> {
    load::parse(text, path)
}
