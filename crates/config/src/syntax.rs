//! TOML syntax errors the parser reports where it gave up, moved to where the mistake is.
//! An array or inline table left open is noticed only at the next section header or at the
//! end of the file, with an empty source line; the operator needs the opening bracket.

use std::ops::Range;

/// For an error about a missing `]` or `}`, the offset of the innermost bracket still open
/// at the error, and the character that would close it.
pub(crate) fn unclosed_bracket(text: &str, message: &str, at: Option<Range<usize>>) -> Option<(usize, char)> {
    let wants = if message.contains("expected `]`") || message.contains("invalid array") {
        '['
    } else if message.contains("expected `}`") || message.contains("invalid inline table") {
        '{'
    } else {
        return None;
    };
    // An array's bracket must open before the line the parser stopped on (that line is
    // often the next `[section]`, whose own bracket is not the culprit); an inline table
    // lives on one line, so its brace is on the line of the error.
    let stop = at.map_or(text.len(), |r| r.start).min(text.len());
    let end = if wants == '[' { text[..stop].rfind('\n').map_or(0, |p| p + 1) } else { stop };
    let open = open_brackets(&text[..end]);
    let (pos, c) = open.into_iter().rev().find(|(_, c)| *c == wants)?;
    Some((pos, if c == '[' { ']' } else { '}' }))
}

/// Brackets opened and not closed in `text`, skipping strings and comments.
fn open_brackets(text: &str) -> Vec<(usize, char)> {
    let bytes = text.as_bytes();
    let mut stack = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'#' => i = skip_to(bytes, i, b"\n"),
            b'"' if bytes[i..].starts_with(b"\"\"\"") => i = skip_to(bytes, i + 3, b"\"\"\""),
            b'\'' if bytes[i..].starts_with(b"'''") => i = skip_to(bytes, i + 3, b"'''"),
            b'"' => i = skip_basic_string(bytes, i + 1),
            b'\'' => i = skip_to(bytes, i + 1, b"'"),
            c @ (b'[' | b'{') => {
                stack.push((i, c as char));
                i += 1;
            }
            b']' | b'}' => {
                stack.pop();
                i += 1;
            }
            _ => i += 1,
        }
    }
    stack
}

/// The offset just after the next `end` from `from` (or the text's end).
fn skip_to(bytes: &[u8], from: usize, end: &[u8]) -> usize {
    bytes[from.min(bytes.len())..]
        .windows(end.len())
        .position(|w| w == end)
        .map_or(bytes.len(), |p| from + p + end.len())
}

/// After a `"…"` string (escapes honoured; a string does not span lines).
fn skip_basic_string(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' | b'\n' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_open_bracket_not_the_end() {
        let text = "a = [ 1, 2,\n\n# ] in a comment\nb = \"]\"\n";
        assert_eq!(unclosed_bracket(text, "invalid array; expected `]`", None), Some((4, ']')));
        let text = "s = { x = 1, y = [1, 2]\n";
        assert_eq!(unclosed_bracket(text, "invalid inline table; expected `}`", None), Some((4, '}')));
        assert_eq!(unclosed_bracket("a = [1]\n", "something else", None), None);
    }
}
