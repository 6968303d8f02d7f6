//! The text of a `json…` path, as the lexer cut it (what follows `json`), → its steps:
//! `.key` for a bare key, `[N]` for a 0-based array index, `["any key"]` for a quoted key
//! (the rule language's string escapes). A fault is reported with its byte offset in the
//! text, so the parser's error points at the faulty character rather than the whole path.

use crate::ast::{is_bare_key_char, JsonPath, JsonStep};

/// What is wrong with a path and where: `at..at + len` in the text after `json`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct PathError {
    pub at: usize,
    pub len: usize,
    pub what: String,
}

/// What every JSON path error suggests.
pub(crate) const HINT: &str =
    "write keys after '.' and 0-based indexes in brackets: json.order.items[0].sku; quote other keys: json[\"a b\"]";

pub(crate) fn parse(raw: &str) -> Result<JsonPath, PathError> {
    let mut steps = Vec::new();
    let mut at = 0;
    while let Some(c) = raw[at..].chars().next() {
        let (step, len) = match c {
            '.' => bare_key(&raw[at..]),
            '[' if raw[at + 1..].starts_with('"') => quoted_key(&raw[at..]),
            '[' => index(&raw[at..]),
            _ => Err(fault(0, c.len_utf8(), format!("unexpected '{c}'; a step starts with '.' or '['"))),
        }
        .map_err(|e| PathError { at: at + e.at, ..e })?;
        steps.push(step);
        at += len;
    }
    if steps.is_empty() {
        return Err(fault(0, 0, "the path is empty".into()));
    }
    Ok(JsonPath { steps })
}

fn fault(at: usize, len: usize, what: String) -> PathError {
    PathError { at, len, what }
}

/// `.key` at `s[0]`: the step and its length.
fn bare_key(s: &str) -> Result<(JsonStep, usize), PathError> {
    let len = s[1..].find(|c: char| !is_bare_key_char(c)).unwrap_or(s.len() - 1);
    if len == 0 {
        let what = match s[1..].chars().next() {
            Some(c) => format!("a key must follow '.', found '{c}'"),
            None => "a key must follow '.'".to_string(),
        };
        return Err(fault(0, 1, what));
    }
    Ok((JsonStep::Key(s[1..1 + len].to_string()), 1 + len))
}

/// `[N]` at `s[0]`.
fn index(s: &str) -> Result<(JsonStep, usize), PathError> {
    let Some(close) = s.find(']') else {
        return Err(fault(0, 1, "'[' is not closed by ']'".into()));
    };
    let digits = &s[1..close];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        let what = format!("'[{digits}]' is not an array index (0, 1, 2, … or a quoted key)");
        return Err(fault(0, close + 1, what));
    }
    match digits.parse::<u32>() {
        Ok(n) => Ok((JsonStep::Index(n), close + 1)),
        Err(_) => Err(fault(1, digits.len(), format!("index {digits} is too large"))),
    }
}

/// `["key"]` at `s[0]`, with the rule language's string escapes.
fn quoted_key(s: &str) -> Result<(JsonStep, usize), PathError> {
    let mut key = String::new();
    let mut chars = s.char_indices().skip(2);
    while let Some((i, c)) = chars.next() {
        match c {
            '"' if s[i + 1..].starts_with(']') => return Ok((JsonStep::Key(key), i + 2)),
            '"' => return Err(fault(i + 1, 1, "a quoted key must be followed by ']'".into())),
            '\\' => match chars.next() {
                Some((_, '"')) => key.push('"'),
                Some((_, '\\')) => key.push('\\'),
                Some((_, 'n')) => key.push('\n'),
                Some((_, 't')) => key.push('\t'),
                Some((_, 'r')) => key.push('\r'),
                // As in string literals, any other backslash is kept as written.
                Some((_, other)) => {
                    key.push('\\');
                    key.push(other);
                }
                None => break,
            },
            c => key.push(c),
        }
    }
    Err(fault(0, 2, "the quoted key is not closed (by '\"]' on the same line)".into()))
}
