//! cswitch configuration.
//!
//! Owns the TOML format (documented key by key in `docs/config.md`), its validation, and the
//! validated [`Config`] the rest of the program is built from. Every error names the file,
//! line and column (and the key path) and, where it can, suggests the fix.
//! Layout: `model` (the validated types), `load` (TOML → raw → validated), `diag`
//! (diagnostics and their rendering with a caret), `duration` ("500ms", "10s", "5m").

mod model;
pub use model::*;

use std::path::Path;

/// One problem found in a config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// File the problem is in.
    pub file: std::path::PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
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

/// All problems found in a config; `Display` prints each as
/// `file:line:col: error: message`, the source line, a caret, and the hint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl std::fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let _ = f;
        todo!("config helper")
    }
}

impl std::error::Error for Diagnostics {}

/// Reads and validates the config file at `path`.
pub fn load(path: &Path) -> Result<Config, Diagnostics> {
    let _ = path;
    todo!("config helper")
}

/// Validates config text; `path` is used in diagnostics and to resolve relative paths
/// (e.g. a listener's `rules`).
pub fn parse(text: &str, path: &Path) -> Result<Config, Diagnostics> {
    let _ = (text, path);
    todo!("config helper")
}
