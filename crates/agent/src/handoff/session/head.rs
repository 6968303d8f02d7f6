//! Copying a head with edits: fields dropped or given a new value, lines added at the end.

use http1::HeaderSpan;

/// What becomes of one field.
pub(super) enum Field {
    Keep,
    Drop,
    /// The same name with this value.
    Value(Vec<u8>),
}

/// Appends to `out` the head whose start line begins at `start` of `buf`, its `headers`
/// each as `field(name, value)` says, then `extra` (whole lines), then the empty line.
pub(super) fn write(
    buf: &[u8],
    start: usize,
    headers: &[HeaderSpan],
    mut field: impl FnMut(&[u8], &[u8]) -> Field,
    extra: &[u8],
    out: &mut Vec<u8>,
) {
    let line_end = buf[start..].iter().position(|&b| b == b'\n').map_or(start, |p| start + p + 1);
    out.extend_from_slice(&buf[start..line_end]);
    for h in headers {
        let name = h.name.slice(buf);
        match field(name, h.value.slice(buf)) {
            Field::Keep => out.extend_from_slice(h.line.slice(buf)),
            Field::Drop => continue,
            Field::Value(v) => {
                out.extend_from_slice(name);
                out.extend_from_slice(b": ");
                out.extend_from_slice(&v);
            }
        }
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(extra);
    out.extend_from_slice(b"\r\n");
}

/// `Connection` and `Keep-Alive`: replaced by `Connection: close` where a side must close.
pub(super) fn is_connection_field(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"connection") || name.eq_ignore_ascii_case(b"keep-alive")
}
