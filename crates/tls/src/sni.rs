//! The server_name extension (RFC 6066 §3) and the host names it may carry.

use crate::cursor::Cursor;
use crate::HelloError;

/// `NameType` host_name: the only name type RFC 6066 defines.
const HOST_NAME: u8 = 0;

/// The host name of a ClientHello's server_name extension, lowercased.
pub(crate) fn server_name(data: &[u8]) -> Result<Option<String>, HelloError> {
    let mut outer = Cursor::new(data);
    let list = outer.vec16("server_name list")?;
    outer.finish("server_name list")?;
    if list.is_empty() {
        return Err(HelloError::BadSni("empty server_name list"));
    }
    let mut c = Cursor::new(list);
    let mut host = None;
    while !c.is_empty() {
        let kind = c.u8("server name type")?;
        // Other name types have no defined body; every implementation frames them like
        // host_name (two-byte length), so they are skipped that way.
        let name = c.vec16("server name")?;
        if kind != HOST_NAME {
            continue;
        }
        if host.is_some() {
            return Err(HelloError::BadSni("two host names"));
        }
        host = Some(host_name(name)?);
    }
    Ok(host)
}

/// Validates a DNS host name and returns it lowercased.
fn host_name(name: &[u8]) -> Result<String, HelloError> {
    // RFC 6066 says "without a trailing dot", but it names the same host and some clients
    // send it: routing on the canonical name beats refusing the connection.
    let name = name.strip_suffix(b".").unwrap_or(name);
    if name.is_empty() {
        return Err(HelloError::BadSni("empty host name"));
    }
    if name.len() > 253 {
        return Err(HelloError::BadSni("host name longer than 253 bytes"));
    }
    if !name.is_ascii() {
        return Err(HelloError::BadSni("non-ASCII byte (IDNs are sent as A-labels)"));
    }
    // RFC 6066 forbids literal addresses, but OpenSSL-based clients (wrk, `s_client
    // -servername`, some Java and embedded stacks) send the address they were told to reach,
    // and HAProxy's `req_ssl_sni` and nginx's `$ssl_preread_server_name` route on it as
    // written: closing such a connection would refuse real clients for no safety gained.
    if let Some(address) = address_literal(name) {
        return Ok(address);
    }
    if name.iter().all(|b| b.is_ascii_digit() || *b == b'.') {
        return Err(HelloError::BadSni("numeric name that is not an IPv4 address"));
    }
    for label in name.split(|b| *b == b'.') {
        check_label(label)?;
    }
    Ok(name.iter().map(|b| char::from(b.to_ascii_lowercase())).collect())
}

/// An IPv4 or IPv6 address written as the host name, in its canonical text form.
fn address_literal(name: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(name).ok()?;
    text.parse::<std::net::IpAddr>().ok().map(|ip| ip.to_string())
}

fn check_label(label: &[u8]) -> Result<(), HelloError> {
    if label.is_empty() {
        return Err(HelloError::BadSni("empty label"));
    }
    if label.len() > 63 {
        return Err(HelloError::BadSni("label longer than 63 bytes"));
    }
    // Underscores are not LDH, but real names (service labels) carry them and
    // certificate verifiers accept them.
    if !label.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_') {
        return Err(HelloError::BadSni("character outside letters, digits, '-' and '_'"));
    }
    if label.starts_with(b"-") || label.ends_with(b"-") {
        return Err(HelloError::BadSni("label starts or ends with '-'"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str) -> Result<String, HelloError> {
        host_name(name.as_bytes())
    }

    #[test]
    fn accepts_and_lowercases_dns_names() {
        assert_eq!(host("API.Example.COM"), Ok("api.example.com".into()));
        assert_eq!(host("xn--bcher-kva.example."), Ok("xn--bcher-kva.example".into()));
        assert_eq!(host("_srv.a-b.c0"), Ok("_srv.a-b.c0".into()));
        assert_eq!(host("localhost"), Ok("localhost".into()));
    }

    #[test]
    fn refuses_what_rfc_6066_forbids() {
        for bad in
            ["", ".", "a..b", "127.0.0", "1.2.3.4.5", "::1::", "a b", "-a.com", "a-.com", "bü.de", "a.com.."]
        {
            assert!(matches!(host(bad), Err(HelloError::BadSni(_))), "{bad:?}");
        }
        assert!(host(&"a".repeat(64)).is_err());
        assert!(host(&["a"; 128].join(".")).is_err());
        assert!(host(&"a".repeat(63)).is_ok());
        assert!(host(&["a"; 127].join(".")).is_ok(), "253 bytes is the longest name");
    }

    #[test]
    fn keeps_address_literals_in_canonical_form() {
        assert_eq!(host("127.0.0.1"), Ok("127.0.0.1".into()));
        assert_eq!(host("::1"), Ok("::1".into()));
        assert_eq!(host("2001:DB8:0:0:0:0:0:1"), Ok("2001:db8::1".into()));
    }

    #[test]
    fn list_framing() {
        // One host_name entry, plus an unknown name type that is skipped.
        let data = [0, 11, 0, 0, 3, b'a', b'.', b'b', 7, 0, 2, 1, 2];
        assert_eq!(server_name(&data), Ok(Some("a.b".into())));
        let overrun = [0, 6, 0, 0, 9, b'a', b'.', b'b'];
        assert_eq!(server_name(&overrun), Err(HelloError::Overrun("server name")));
        let twice = [0, 10, 0, 0, 3, b'a', b'.', b'b', 0, 0, 1, b'c'];
        assert_eq!(server_name(&twice), Err(HelloError::BadSni("two host names")));
        assert_eq!(server_name(&[0, 0]), Err(HelloError::BadSni("empty server_name list")));
    }
}
