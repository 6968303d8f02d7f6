//! Byte-level grammar shared by heads, bodies and the rewriter (RFC 9110 §5.6).

/// `tchar` (RFC 9110 §5.6.2): the bytes of a token.
pub(crate) const fn is_tchar(b: u8) -> bool {
    matches!(b,
        b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z'
        | b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+'
        | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~')
}

/// `token = 1*tchar` (RFC 9110 §5.6.2).
pub(crate) fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// SP or HTAB: the bytes of OWS / BWS (RFC 9110 §5.6.3).
pub(crate) fn is_ws(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// `s` without leading and trailing OWS.
pub(crate) fn trim_ows(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| !is_ws(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|&b| !is_ws(b)).map_or(start, |i| i + 1);
    s.get(start..end).unwrap_or_default()
}

/// Offsets `(start, end)` of `s` trimmed of OWS, relative to `s`.
pub(crate) fn trim_ows_range(s: &[u8]) -> (usize, usize) {
    let start = s.iter().position(|&b| !is_ws(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|&b| !is_ws(b)).map_or(start, |i| i + 1);
    (start, end)
}

/// The elements of a comma-separated list (RFC 9110 §5.6.1), OWS trimmed. Empty
/// elements are yielded too (as empty slices): some callers must refuse them, others
/// skip them as §5.6.1 asks of recipients.
pub(crate) fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(trim_ows)
}

/// Whether the comma-separated list `value` holds `token` (ASCII case-insensitive).
pub(crate) fn list_has(value: &[u8], token: &[u8]) -> bool {
    list_elements(value).any(|e| e.eq_ignore_ascii_case(token))
}

/// `field-vchar / SP / HTAB` (RFC 9110 §5.5), obs-text included: the bytes a field value
/// or reason phrase may hold.
pub(crate) fn is_text(b: u8) -> bool {
    b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_and_splits_lists() {
        assert_eq!(trim_ows(b" \t a b\t "), b"a b");
        assert_eq!(trim_ows(b"  "), b"");
        assert_eq!(trim_ows_range(b" x "), (1, 2));
        assert_eq!(trim_ows_range(b"   "), (3, 3));
        let v: Vec<&[u8]> = list_elements(b"a , b,,c ").collect();
        assert_eq!(v, vec![&b"a"[..], b"b", b"", b"c"]);
        assert!(list_has(b"keep-alive, Close", b"close"));
        assert!(!list_has(b"closed", b"close"));
    }

    #[test]
    fn tokens() {
        assert!(is_token(b"GET"));
        assert!(!is_token(b""));
        assert!(!is_token(b"G T"));
        assert!(!is_token(b"a:b"));
    }
}
