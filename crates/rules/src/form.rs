//! `application/x-www-form-urlencoded` reading (seed 000 §4.2): `name=value` pairs joined
//! by `&`, `+` for space, `%XX` for any byte. Used for query arguments, form fields and
//! the form field that carries an XML document. Malformed escapes are kept literally
//! rather than refused: a switch must not fail a request over an odd byte.

/// One `name=value` pair, still encoded.
pub(crate) struct Pair<'a> {
    pub name: &'a [u8],
    pub value: &'a [u8],
    /// False for the last pair of an incomplete body: more of it may still arrive.
    pub whole: bool,
}

/// The pairs of `data`; `complete` says whether `data` is all there is.
pub(crate) fn pairs(data: &[u8], complete: bool) -> impl Iterator<Item = Pair<'_>> {
    let mut rest = Some(data);
    std::iter::from_fn(move || loop {
        let cur = rest?;
        let (item, whole) = match memchr::memchr(b'&', cur) {
            Some(i) => {
                rest = Some(&cur[i + 1..]);
                (&cur[..i], true)
            }
            None => {
                rest = None;
                (cur, complete)
            }
        };
        if item.is_empty() && whole {
            continue;
        }
        let (name, value) = match memchr::memchr(b'=', item) {
            Some(i) => (&item[..i], &item[i + 1..]),
            None => (item, &b""[..]),
        };
        return Some(Pair { name, value, whole });
    })
}

/// Hex digit values, 0xFF for non-digits: a table keeps the decoding loop branch-light.
const HEX: [u8; 256] = {
    let mut t = [0xFF; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

fn hex(b: u8) -> Option<u8> {
    let v = HEX[b as usize];
    (v != 0xFF).then_some(v)
}

/// Appends the decoded form of `s` to `out`. With `truncated`, an escape cut off at the
/// very end (`%` or `%4`) is left out: its byte is not known yet.
pub(crate) fn decode_into(out: &mut Vec<u8>, s: &[u8], truncated: bool) {
    // A plain byte loop writing into space reserved up front (decoding never grows the
    // text): an XML document in a form is about one third escapes, too dense for
    // searching from one escape to the next to pay off.
    let start = out.len();
    out.resize(start + s.len(), 0);
    let dst = &mut out[start..];
    let (mut i, mut o) = (0, 0);
    while i < s.len() {
        let b = s[i];
        i += 1;
        dst[o] = match b {
            b'+' => b' ',
            b'%' if i + 1 < s.len() && (HEX[s[i] as usize] | HEX[s[i + 1] as usize]) != 0xFF => {
                i += 2;
                HEX[s[i - 2] as usize] << 4 | HEX[s[i - 1] as usize]
            }
            b'%' if truncated && s.len() - i <= 1 && s[i..].iter().all(|b| hex(*b).is_some()) => break,
            b => b,
        };
        o += 1;
    }
    out.truncate(start + o);
}

/// The decoded bytes of `enc`, one at a time.
fn decoded(enc: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let (byte, step) = match *enc.get(i)? {
            b'+' => (b' ', 1),
            b'%' => match (enc.get(i + 1).copied().and_then(hex), enc.get(i + 2).copied().and_then(hex)) {
                (Some(h), Some(l)) => (h << 4 | l, 3),
                _ => (b'%', 1),
            },
            b => (b, 1),
        };
        i += step;
        Some(byte)
    })
}

/// Whether the decoded form of `enc` equals `plain`, without decoding into a buffer.
pub(crate) fn decoded_eq(enc: &[u8], plain: &[u8]) -> bool {
    decoded(enc).eq(plain.iter().copied())
}

/// The first decoded byte of a field value (`value` runs to the end of the body) that is
/// not ASCII whitespace; `None` when the value is blank up to its `&` or, so far, up to
/// the end. Reads no further than that byte, however long the value.
pub(crate) fn first_meaningful_byte(value: &[u8], truncated: bool) -> Option<u8> {
    let mut i = 0;
    while i < value.len() && value[i] != b'&' {
        let (byte, step) = match value[i] {
            b'+' => (b' ', 1),
            b'%' => {
                match (value.get(i + 1).copied().and_then(hex), value.get(i + 2).copied().and_then(hex)) {
                    (Some(h), Some(l)) => (h << 4 | l, 3),
                    // Cut off at the end of a body still arriving: its byte is not known yet.
                    _ if truncated
                        && value.len() - i <= 2
                        && value[i + 1..].iter().all(|b| hex(*b).is_some()) =>
                    {
                        return None
                    }
                    _ => (b'%', 1),
                }
            }
            b => (b, 1),
        };
        if !byte.is_ascii_whitespace() {
            return Some(byte);
        }
        i += step;
    }
    None
}
