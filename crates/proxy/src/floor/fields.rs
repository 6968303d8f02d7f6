//! Header fields between HTTP/1.1 and HTTP/2, for both wings that translate: which fields
//! belong to one HTTP/1.1 connection and never cross (RFC 9113 §8.2.2), and trailer
//! sections (a chunked body's, RFC 9112 §7.1.2) read into and written from a field map —
//! gRPC's `grpc-status` travels there.

use http::header::{HeaderMap, HeaderName, HeaderValue};

/// Fields that mean something only to one HTTP/1.1 connection (RFC 9113 §8.2.2).
pub const CONNECTION_SPECIFIC: &[&str] =
    &["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"];

/// Fields a trailer section must not carry: framing, routing and the connection's own
/// (RFC 9110 §6.5.1); they are dropped on the way.
fn forbidden_in_trailers(name: &HeaderName) -> bool {
    let n = name.as_str();
    CONNECTION_SPECIFIC.contains(&n) || matches!(n, "content-length" | "host" | "te" | "trailer")
}

/// The fields of a trailer section as the chunked scanner hands it over (field lines, then
/// the final CRLF; already checked by it); forbidden and unrepresentable ones dropped.
pub fn parse_trailer_section(section: &[u8]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for line in section.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|b| *b == b':') else { continue };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        let (Ok(name), Ok(value)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) else {
            continue;
        };
        if !forbidden_in_trailers(&name) {
            map.append(name, value);
        }
    }
    map
}

/// Appends the last chunk and `trailers` as a chunked body's end (`0`, field lines, CRLF);
/// forbidden fields left out.
pub fn write_chunked_end(trailers: Option<&HeaderMap>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"0\r\n");
    for (name, value) in trailers.into_iter().flatten() {
        if forbidden_in_trailers(name) {
            continue;
        }
        for part in [name.as_str().as_bytes(), b": ", value.as_bytes(), b"\r\n"] {
            out.extend_from_slice(part);
        }
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailer_section_round_trips_without_forbidden_fields() {
        let mut map = HeaderMap::new();
        map.insert("grpc-status", HeaderValue::from_static("0"));
        map.insert("grpc-message", HeaderValue::from_static("all good"));
        map.insert("content-length", HeaderValue::from_static("5"));
        let mut out = Vec::new();
        write_chunked_end(Some(&map), &mut out);
        assert!(!out.windows(14).any(|w| w.eq_ignore_ascii_case(b"content-length")));
        let section = out.strip_prefix(b"0\r\n").unwrap();
        let back = parse_trailer_section(section);
        assert_eq!(back.len(), 2);
        assert_eq!(back["grpc-status"], "0");
        assert_eq!(back["grpc-message"], "all good");
        assert!(parse_trailer_section(b"\r\n").is_empty());
    }
}
