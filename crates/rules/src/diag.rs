//! Diagnostics: what `cswitch check` prints. Every error and warning names the file, the
//! 1-based line and column, repeats the source line with a caret under the offending text,
//! and carries a hint where one helps.

use std::fmt;
use std::path::{Path, PathBuf};

/// A byte range in the rules source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span { start: clamp(start), end: clamp(end.max(start)) }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        Span { start: self.start.min(other.start), end: self.end.max(other.end) }
    }
}

fn clamp(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// How bad a diagnostic is: errors stop the load, warnings do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The rules file is rejected.
    Error,
    /// The rules load, but something in them can never take effect.
    Warning,
}

/// One error or warning, already resolved to a line and column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The rules file, as given to [`crate::RuleSet::compile`].
    pub file: PathBuf,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, counted in characters.
    pub col: u32,
    /// What is wrong.
    pub message: String,
    /// How to fix it, where the checker can tell.
    pub hint: Option<String>,
    /// The source line the diagnostic points into (without its line ending).
    pub source_line: String,
    /// How many characters the caret line underlines (at least 1).
    pub width: u32,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        writeln!(f, "{}:{}:{}: {kind}: {}", self.file.display(), self.line, self.col, self.message)?;
        writeln!(f, "    {}", self.source_line)?;
        // Copy tabs from the source line so the caret lands under the right character.
        let pad: String = self
            .source_line
            .chars()
            .take(self.col.saturating_sub(1) as usize)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        writeln!(f, "    {pad}{}", "^".repeat(self.width.max(1) as usize))?;
        if let Some(hint) = &self.hint {
            writeln!(f, "  hint: {hint}")?;
        }
        Ok(())
    }
}

/// A list of diagnostics in source order; `Display` prints them all and a count line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Diagnostics {
    items: Vec<Diagnostic>,
}

impl Diagnostics {
    /// All diagnostics, in source order.
    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.items.iter()
    }

    /// Number of errors.
    pub fn error_count(&self) -> usize {
        self.items.iter().filter(|d| d.severity == Severity::Error).count()
    }

    /// Number of warnings.
    pub fn warning_count(&self) -> usize {
        self.items.iter().filter(|d| d.severity == Severity::Warning).count()
    }

    /// True when there is no diagnostic at all.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Number of diagnostics of either severity.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn push(&mut self, d: Diagnostic) {
        self.items.push(d);
    }

    pub(crate) fn has_errors(&self) -> bool {
        self.error_count() > 0
    }

    pub(crate) fn sort(&mut self) {
        self.items.sort_by_key(|d| (d.line, d.col, d.severity));
    }

    /// Splits off the warnings, leaving the errors.
    pub(crate) fn take_warnings(&mut self) -> Diagnostics {
        let (warn, err) =
            std::mem::take(&mut self.items).into_iter().partition(|d| d.severity == Severity::Warning);
        self.items = err;
        Diagnostics { items: warn }
    }
}

impl<'a> IntoIterator for &'a Diagnostics {
    type Item = &'a Diagnostic;
    type IntoIter = std::slice::Iter<'a, Diagnostic>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.iter()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.items {
            writeln!(f, "{d}")?;
        }
        let (e, w) = (self.error_count(), self.warning_count());
        let plural = |n: usize, s: &str| format!("{n} {s}{}", if n == 1 { "" } else { "s" });
        match (e, w) {
            (0, 0) => Ok(()),
            (e, 0) => write!(f, "{}", plural(e, "error")),
            (0, w) => write!(f, "{}", plural(w, "warning")),
            (e, w) => write!(f, "{}, {}", plural(e, "error"), plural(w, "warning")),
        }
    }
}

impl std::error::Error for Diagnostics {}

/// Builds diagnostics against one source text.
pub(crate) struct Reporter<'s> {
    pub source: &'s str,
    pub file: &'s Path,
    pub out: Diagnostics,
    /// Byte offset of each line's start, so positions cost a binary search, not a scan.
    line_starts: Vec<usize>,
}

impl<'s> Reporter<'s> {
    pub fn new(source: &'s str, file: &'s Path) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(memchr::memchr_iter(b'\n', source.as_bytes()).map(|i| i + 1));
        Reporter { source, file, out: Diagnostics::default(), line_starts }
    }

    /// The 1-based line holding byte `offset`.
    pub fn line_of(&self, offset: u32) -> u32 {
        let at = self.line_starts.partition_point(|&s| s <= offset as usize);
        clamp(at.max(1))
    }

    pub fn error(&mut self, span: Span, message: impl Into<String>, hint: Option<String>) {
        self.report(Severity::Error, span, message.into(), hint);
    }

    pub fn warning(&mut self, span: Span, message: impl Into<String>, hint: Option<String>) {
        self.report(Severity::Warning, span, message.into(), hint);
    }

    fn report(&mut self, severity: Severity, span: Span, message: String, hint: Option<String>) {
        let start = floor_char(self.source, span.start as usize);
        let line = self.line_of(start as u32) as usize;
        let line_start = self.line_starts[line - 1];
        let line_end = self.source[start..].find('\n').map_or(self.source.len(), |i| start + i);
        let source_line = self.source[line_start..line_end].trim_end_matches('\r').to_string();
        let col = self.source[line_start..start].chars().count() + 1;
        let end = floor_char(self.source, (span.end as usize).clamp(start, line_end));
        let width = self.source[start..end].chars().count().max(1);
        self.out.push(Diagnostic {
            severity,
            file: self.file.to_path_buf(),
            line: clamp(line),
            col: clamp(col),
            message,
            hint,
            source_line,
            width: clamp(width),
        });
    }
}

/// The largest char boundary at or below `i` (spans are byte offsets).
fn floor_char(s: &str, i: usize) -> usize {
    let mut i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The closest candidate to `name` by edit distance, if it is close enough to be a typo.
pub(crate) fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (edit_distance(&name.to_ascii_lowercase(), &c.to_ascii_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Edit distance counting an adjacent swap as one edit (optimal string alignment), since
/// swapped letters are the commonest typo. Names are short, so the full table is fine.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}
