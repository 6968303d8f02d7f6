//! Tests of the whole crate through its public API.

mod body;
mod props;
mod request;
mod response;
mod rewrite;
mod rewrite_props;
mod smuggling;
mod validate;

use crate::{HeadError, HeadLimits, Parse, RequestHead, ResponseHead};

/// Parses a request with default limits.
pub(crate) fn req(buf: &[u8]) -> Result<RequestHead, HeadError> {
    let mut head = RequestHead::new();
    match head.parse(buf, &HeadLimits::default())? {
        Parse::Complete => Ok(head),
        Parse::Partial => panic!("partial: {:?}", String::from_utf8_lossy(buf)),
    }
}

/// Parses a response (to a non-HEAD request) with default limits.
pub(crate) fn resp(buf: &[u8]) -> Result<ResponseHead, HeadError> {
    let mut head = ResponseHead::new();
    match head.parse(buf, &HeadLimits::default(), false)? {
        Parse::Complete => Ok(head),
        Parse::Partial => panic!("partial: {:?}", String::from_utf8_lossy(buf)),
    }
}

/// Header (name, value) pairs of a parsed head, as strings.
pub(crate) fn pairs(buf: &[u8], headers: &[crate::HeaderSpan]) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|h| {
            let s = |sp: crate::Span| String::from_utf8_lossy(sp.slice(buf)).into_owned();
            (s(h.name), s(h.value))
        })
        .collect()
}
