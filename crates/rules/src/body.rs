//! Where the body's document is. XML (seed 000 §4.2): a urlencoded body carries it in a
//! form field (the listener's `xml_form_field`, or else the first field whose decoded value
//! starts with `<`), which is decoded first; any other body is read as it is. JSON: only a
//! body whose Content-Type says JSON is read, so JSON rules never wait for other bodies.

use crate::fields::{is_form, is_json};
use crate::form;
use crate::pathstate::PathState;
use crate::request::Request;
use crate::{EvalState, RuleSet};

/// Prefixes of a form-carried document that are decoded and scanned on their own first.
const PREFIXES: [usize; 2] = [1 << 10, 32 << 10];

/// Resolves every JSON path of `rs` into `st.json`.
pub(crate) fn scan_json(rs: &RuleSet, st: &mut EvalState, req: &impl Request) {
    if !is_json(req) {
        return st.json.not_json(&rs.json);
    }
    let body = req.body();
    st.json.scan(&rs.json, body.bytes, body.complete);
}

/// Resolves every XML path of `rs` into `st.xml`.
pub(crate) fn scan_xml(rs: &RuleSet, st: &mut EvalState, req: &impl Request) {
    let body = req.body();
    if !is_form(req) {
        st.xml.scan(&rs.xml, body.bytes, body.complete);
        return;
    }
    let start = match find_field(body.bytes, body.complete, rs.xml_form_field.as_deref()) {
        Found::Field(start) => start,
        Found::NotYet => return st.xml.all(&rs.xml, PathState::Pending),
        Found::Absent => return st.xml.all(&rs.xml, PathState::Absent),
    };
    let rest = &body.bytes[start..];
    // Decode and scan a 1 KiB, then a 32 KiB prefix first: paths near the start of a
    // large document resolve without finding the end of the field or decoding all of it.
    // A prefix is tried only on a value eight times its size, so a path at the end costs
    // at most an eighth more.
    for prefix in PREFIXES {
        if 8 * prefix > rest.len() {
            break;
        }
        let head = &rest[..prefix];
        if memchr::memchr(b'&', head).is_some() {
            break; // the whole value is in hand: decode it once below
        }
        st.form_buf.clear();
        form::decode_into(&mut st.form_buf, head, true);
        st.xml.scan(&rs.xml, &st.form_buf, false);
        if !st.xml.states.contains(&PathState::Pending) {
            return;
        }
    }
    let end = memchr::memchr(b'&', rest);
    let whole = end.is_some() || body.complete;
    st.form_buf.clear();
    form::decode_into(&mut st.form_buf, &rest[..end.unwrap_or(rest.len())], !whole);
    st.xml.scan(&rs.xml, &st.form_buf, whole);
}

enum Found {
    /// Where the field's (encoded) value starts in the body.
    Field(usize),
    NotYet,
    Absent,
}

/// Finds the form field holding the XML without looking past the start of its value.
fn find_field(body: &[u8], complete: bool, name: Option<&str>) -> Found {
    let mut at = 0;
    while at < body.len() || (at == body.len() && !complete) {
        let rest = &body[at..];
        let Some(eq) = memchr::memchr2(b'=', b'&', rest) else { return not_yet_or_absent(complete) };
        if rest[eq] == b'&' {
            at += eq + 1; // a field without a value
            continue;
        }
        let (field, value_start) = (&rest[..eq], at + eq + 1);
        let value = &body[value_start..];
        let hit = match name {
            Some(name) => Some(form::decoded_eq(field, name.as_bytes())),
            None => form::first_meaningful_byte(value, !complete).map(|b| b == b'<'),
        };
        match hit {
            Some(true) => return Found::Field(value_start),
            // The value so far is blank and more may come: can't tell yet.
            None if !complete && memchr::memchr(b'&', value).is_none() => return Found::NotYet,
            _ => match memchr::memchr(b'&', value) {
                Some(amp) => at = value_start + amp + 1,
                None => return not_yet_or_absent(complete),
            },
        }
    }
    not_yet_or_absent(complete)
}

fn not_yet_or_absent(complete: bool) -> Found {
    if complete {
        Found::Absent
    } else {
        Found::NotYet
    }
}
