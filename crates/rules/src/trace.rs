//! What `cswitch explain` prints: every rule tried, each test with the values it saw and
//! its result, the branch taken and the outcome. Only built when asked for (it allocates).

use std::fmt;

/// A three-valued truth: tests on body fields are "unknown" until enough body arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Truth {
    /// Holds.
    True,
    /// Does not hold (every test on an absent field is false).
    False,
    /// Depends on body bytes that have not arrived yet.
    Unknown,
}

impl Truth {
    pub(crate) fn from_bool(b: bool) -> Truth {
        if b {
            Truth::True
        } else {
            Truth::False
        }
    }

    pub(crate) fn not(self) -> Truth {
        match self {
            Truth::True => Truth::False,
            Truth::False => Truth::True,
            Truth::Unknown => Truth::Unknown,
        }
    }
}

impl fmt::Display for Truth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Truth::True => "true",
            Truth::False => "false",
            Truth::Unknown => "not known yet (body incomplete)",
        })
    }
}

/// One test of a condition as evaluated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceTest {
    /// The test as written, e.g. `match(url, "gif$")`.
    pub test: String,
    /// The field values it read, e.g. `url = "/a.gif"`, `header("x") absent`.
    pub saw: Vec<String>,
    /// Its result.
    pub result: Truth,
}

/// One rule as tried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRule {
    /// The rule's label.
    pub label: String,
    /// Line of the label in the rules file.
    pub line: u32,
    /// The tests evaluated (short-circuiting skips some).
    pub tests: Vec<TraceTest>,
    /// The condition's result.
    pub result: Truth,
    /// What the rule did: the actions of the branch taken, or that nothing ran.
    pub action: String,
}

/// A record of one evaluation, for `cswitch explain`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    /// The rules tried, in order.
    pub rules: Vec<TraceRule>,
    /// The outcome in words.
    pub outcome: String,
}

impl Trace {
    /// An empty trace to pass to [`crate::RuleSet::evaluate`].
    pub fn new() -> Trace {
        Trace::default()
    }

    pub(crate) fn clear(&mut self) {
        self.rules.clear();
        self.outcome.clear();
    }
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for rule in &self.rules {
            writeln!(f, "{} (line {}): condition {}", rule.label, rule.line, rule.result)?;
            for t in &rule.tests {
                let saw = if t.saw.is_empty() { String::new() } else { format!("  [{}]", t.saw.join(", ")) };
                writeln!(f, "    {} → {}{saw}", t.test, t.result)?;
            }
            writeln!(f, "    {}", rule.action)?;
        }
        writeln!(f, "outcome: {}", self.outcome)
    }
}

/// `bytes` as a quoted, escaped string, cut at 120 bytes (values can be whole documents).
pub(crate) fn quote(bytes: &[u8]) -> String {
    const MAX: usize = 120;
    let shown = &bytes[..bytes.len().min(MAX)];
    let mut s = format!("\"{}\"", shown.escape_ascii());
    if bytes.len() > MAX {
        s.push_str(&format!("… ({} bytes)", bytes.len()));
    }
    s
}
