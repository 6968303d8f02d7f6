//! Socket addresses as written in the config: `IP:port`, IPv6 in brackets.
//!
//! Hostnames are refused on purpose: resolving them would make loading depend on DNS, and a
//! name that resolves differently later would silently move traffic.

use std::net::{IpAddr, SocketAddr};

/// Why an address was refused, and how to fix it.
pub(crate) struct AddrError {
    pub(crate) message: String,
    pub(crate) hint: Option<String>,
}

/// Parses a listener's `bind`; port 0 asks the OS for a free port (tests use it).
pub(crate) fn parse_bind(text: &str) -> Result<SocketAddr, AddrError> {
    text.parse::<SocketAddr>().map_err(|_| explain(text, 8080))
}

/// Parses a server's `addr`; port 0 is refused, nothing listens there.
pub(crate) fn parse_server(text: &str) -> Result<SocketAddr, AddrError> {
    let addr = text.parse::<SocketAddr>().map_err(|_| explain(text, 9001))?;
    if addr.port() == 0 {
        return Err(AddrError {
            message: format!("`{text}` has port 0, which no server listens on"),
            hint: Some("write the server's port, e.g. \"127.0.0.1:9001\"".into()),
        });
    }
    Ok(addr)
}

/// Parses a network: `IP/prefix`, or a bare IP (one address).
pub(crate) fn parse_net(text: &str) -> Result<crate::IpNet, AddrError> {
    let (ip, prefix) = text.split_once('/').map_or((text, None), |(ip, p)| (ip, Some(p)));
    let bad = || AddrError {
        message: format!("`{text}` is not a network"),
        hint: Some("write an IP or IP/prefix, e.g. \"10.0.0.0/8\" or \"::1\"".into()),
    };
    let addr: IpAddr = ip.parse().map_err(|_| bad())?;
    let width = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match prefix {
        None => width,
        Some(p) => p.parse::<u8>().ok().filter(|p| *p <= width).ok_or_else(bad)?,
    };
    Ok(crate::IpNet { addr, prefix })
}

/// Says what is wrong with a string that is not `IP:port`; `port` goes into examples.
fn explain(text: &str, port: u16) -> AddrError {
    let error = |message: String, hint: String| AddrError { message, hint: Some(hint) };
    if let Ok(ip) = text.parse::<IpAddr>() {
        let example = SocketAddr::new(ip, port);
        return error(
            format!("`{text}` has no port"),
            format!("write \"{example}\" (IP:port; IPv6 in brackets)"),
        );
    }
    let Some((host, written_port)) = text.rsplit_once(':') else {
        return error(
            format!("`{text}` is not an address; write IP:port"),
            format!("e.g. \"127.0.0.1:{port}\" or \"[::1]:{port}\""),
        );
    };
    let port = match written_port.parse::<u16>() {
        Ok(port) => port,
        Err(_) => {
            return error(
                format!("`{written_port}` in `{text}` is not a port"),
                format!("a port is a number from 1 to 65535, e.g. \"127.0.0.1:{port}\""),
            )
        }
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.parse::<IpAddr>().is_ok() {
        // Only IPv6 without brackets lands here ("::1:8080" parses as an IP with no port).
        return error(
            format!("`{text}` is not an address; IPv6 needs brackets"),
            format!("write \"[{host}]:{port}\""),
        );
    }
    let example = if host.eq_ignore_ascii_case("localhost") {
        format!("write \"127.0.0.1:{port}\"")
    } else {
        format!("resolve `{host}` and write its IP address, e.g. \"10.0.0.5:{port}\"")
    };
    error(format!("hostnames are not supported (`{host}`); write an IP address and port"), example)
}

#[cfg(test)]
mod tests {
    use super::{parse_bind, parse_server};

    fn hint(text: &str) -> String {
        parse_bind(text).err().and_then(|e| e.hint).unwrap_or_default()
    }

    #[test]
    fn accepts_ipv4_and_bracketed_ipv6() {
        assert!(parse_server("127.0.0.1:8080").is_ok());
        assert!(parse_server("[::1]:8080").is_ok());
        assert!(parse_bind("0.0.0.0:0").is_ok());
        assert!(parse_server("10.0.0.1:0").is_err());
    }

    #[test]
    fn refusals_suggest_the_fix() {
        assert!(hint("localhost:8080").contains("\"127.0.0.1:8080\""));
        assert!(hint("backend.example:80").contains("resolve `backend.example`"));
        assert!(hint("127.0.0.1").contains("\"127.0.0.1:8080\""));
        assert!(hint("127.0.0.1:http").contains("1 to 65535"));
        assert!(hint("127.0.0.1:70000").contains("1 to 65535"));
        assert!(hint("::ffff:1.2.3.4:80").contains("\"[::ffff:1.2.3.4]:80\""));
        assert!(hint("::1").contains("\"[::1]:8080\""));
        assert!(hint("nonsense").contains("127.0.0.1:8080"));
    }
}
