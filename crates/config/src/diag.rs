//! The diagnostics a config load reports: their types, their collection while the file is
//! read, and their rendering with a caret.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// One problem found in a config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// File the problem is in.
    pub file: PathBuf,
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

/// Where a value is written in a config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// The config file.
    pub file: PathBuf,
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub col: usize,
    /// Dotted key path, e.g. `listener[0].tls.key`.
    pub key: String,
    /// The source line, for the caret display.
    pub source_line: String,
}

impl Place {
    /// A diagnostic pointing here, rendered like every other config diagnostic.
    pub fn error(&self, message: impl Into<String>, hint: Option<String>) -> Diagnostic {
        Diagnostic {
            file: self.file.clone(),
            line: self.line,
            col: self.col,
            key: self.key.clone(),
            message: message.into(),
            hint,
            source_line: self.source_line.clone(),
        }
    }
}

/// Where something was written: a byte range into the config text, when known.
pub(crate) type Span = Option<Range<usize>>;

/// Gathers every problem found in one config text; reading goes on after an error so the
/// operator sees all of them at once.
pub(crate) struct Sink<'a> {
    file: &'a Path,
    text: &'a str,
    diags: Vec<Diagnostic>,
}

impl<'a> Sink<'a> {
    pub(crate) fn new(file: &'a Path, text: &'a str) -> Self {
        Sink { file, text, diags: Vec::new() }
    }

    /// Records a problem at `span` (start of the file when unknown).
    pub(crate) fn error(&mut self, span: &Span, key: &str, message: impl Into<String>, hint: Option<String>) {
        let diagnostic = self.place(span, key).error(message, hint);
        self.diags.push(diagnostic);
    }

    /// Where `span` is (start of the file when unknown), for a report made later, outside.
    pub(crate) fn place(&self, span: &Span, key: &str) -> Place {
        let offset = span.as_ref().map_or(0, |s| s.start);
        let (line, col, source_line) = locate(self.text, offset);
        Place { file: self.file.to_path_buf(), line, col, key: key.to_string(), source_line }
    }

    /// 1-based line of `span`, to point from one report to an earlier definition.
    pub(crate) fn line_of(&self, span: &Span) -> usize {
        locate(self.text, span.as_ref().map_or(0, |s| s.start)).0
    }

    /// `value` when nothing was reported, else every problem in file order.
    pub(crate) fn finish<T>(self, value: T) -> Result<T, Diagnostics> {
        if self.diags.is_empty() {
            return Ok(value);
        }
        Err(self.into_diagnostics())
    }

    /// Every problem reported, in file order.
    pub(crate) fn into_diagnostics(mut self) -> Diagnostics {
        // Cross-entry checks run after the walk; sorting puts their reports back in file order.
        self.diags.sort_by_key(|d| (d.line, d.col));
        Diagnostics(self.diags)
    }
}

/// 1-based line, 1-based column (in characters, so the caret lines up) and the line's text.
fn locate(text: &str, offset: usize) -> (usize, usize, String) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = before.matches('\n').count() + 1;
    let col = text[line_start..offset].chars().count() + 1;
    let line_end = text[line_start..].find('\n').map_or(text.len(), |i| line_start + i);
    let source = text[line_start..line_end].trim_end_matches('\r');
    (line, col, source.to_string())
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.0 {
            write!(f, "{d}")?;
        }
        let n = self.0.len();
        write!(f, "{n} {}", if n == 1 { "error" } else { "errors" })
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let file = self.file.display();
        if self.line == 0 {
            // No position: the file itself could not be read.
            writeln!(f, "{file}: error: {}", self.message)?;
        } else {
            writeln!(f, "{file}:{}:{}: error: {}", self.line, self.col, self.message)?;
            self.caret(f)?;
        }
        if let Some(hint) = &self.hint {
            writeln!(f, "  hint: {hint}")?;
        }
        Ok(())
    }
}

impl Diagnostic {
    /// The source line and a caret under the column.
    fn caret(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "  {}", self.source_line)?;
        // Tabs are kept so the caret sits under the right character in a terminal.
        let pad: String = self
            .source_line
            .chars()
            .chain(std::iter::repeat(' '))
            .take(self.col.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        writeln!(f, "  {pad}^")
    }
}

#[cfg(test)]
mod tests {
    use super::locate;

    #[test]
    fn locate_counts_lines_and_characters() {
        let text = "a = 1\r\nbé = \"x\"\n";
        assert_eq!(locate(text, 0), (1, 1, "a = 1".to_string()));
        let at = text.rfind('=').unwrap();
        assert_eq!(locate(text, at), (2, 4, "bé = \"x\"".to_string()));
        assert_eq!(locate(text, text.len()), (3, 1, String::new()));
    }
}
