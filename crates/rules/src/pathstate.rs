//! What a streaming body scan (XML in `xml.rs`, JSON in `json.rs`) knows about each path
//! it resolves; `cond.rs` turns it into a field value, absent, or "not yet known".

/// What is known about one path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PathState {
    /// Not seen yet and the input ended early: need more body.
    Pending,
    Found,
    Absent,
}
