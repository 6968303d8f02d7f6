//! What an origin saw of a request, and what its connection does after answering: the
//! vocabulary `origin`, `routes` and `ws` share (a leaf, so none of them imports another
//! in a circle).

use crate::wire::find;

/// One request as an origin received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenRequest {
    /// Which accepted connection carried it (0 for the origin's first connection).
    pub conn_id: usize,
    /// Request method, as sent.
    pub method: String,
    /// Request target, as sent.
    pub target: String,
    /// Protocol version, e.g. `HTTP/1.1`.
    pub version: String,
    /// Headers in arrival order, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The head exactly as received, blank line included.
    pub raw_head: Vec<u8>,
    /// The decoded body (for `/sink`, only its first MiB).
    pub body: Vec<u8>,
    /// The decoded body's full length.
    pub body_len: u64,
}

impl SeenRequest {
    /// The first value of header `name`, ignoring ASCII case.
    pub fn header(&self, name: &str) -> Option<&str> {
        find(&self.headers, name)
    }

    /// The target's path: no query, and no scheme or authority if the target had them.
    pub fn path(&self) -> &str {
        let target = self.target.as_str();
        let origin_form = match target.split_once("://") {
            Some((_, rest)) => rest.find('/').map_or("/", |i| &rest[i..]),
            None => target,
        };
        origin_form.split('?').next().unwrap_or(origin_form)
    }
}

/// What the connection does after a response.
pub(crate) enum Next {
    /// Read the next request if the request allowed keep-alive.
    KeepAlive,
    /// Close gracefully.
    Close,
    /// Close with a reset.
    Reset,
}
