//! Mailboxes and paths (RFC 5321 §4.1.2) and ESMTP parameters (§4.1.1.11).
//!
//! Strict where it protects the server (length limits of §4.5.3.1, no 8-bit without
//! SMTPUTF8, which the switch does not offer), lenient where common clients are sloppy: a
//! space after `FROM:` and a path without angle brackets are accepted. A source route
//! (`<@relay:user@domain>`) is accepted and dropped, as §4.1.1.3 allows.

use std::fmt;
use thiserror::Error;

/// `local@domain`, as the client wrote it (a quoted local part keeps its quotes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Mailbox {
    local: String,
    /// Empty only for the special recipient `<postmaster>`.
    domain: String,
}

/// Why a path was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum PathError {
    /// Not a path of RFC 5321.
    #[error("bad address syntax")]
    Syntax,
    /// 8-bit characters, which need SMTPUTF8.
    #[error("non-ASCII address without SMTPUTF8")]
    NonAscii,
    /// Longer than the limits of RFC 5321 §4.5.3.1.
    #[error("address too long")]
    TooLong,
}

impl Mailbox {
    /// Parses `local@domain` (no angle brackets).
    pub fn parse(s: &str) -> Result<Mailbox, PathError> {
        parse_mailbox(s, false)
    }

    /// The local part, as written.
    pub fn local(&self) -> &str {
        &self.local
    }

    /// The domain, as written; empty for `<postmaster>`.
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The domain in lowercase, as the rules compare it.
    pub fn domain_lowercase(&self) -> String {
        self.domain.to_ascii_lowercase()
    }

    /// `local@domain` with the domain lowercased: the form caches key on (domains are
    /// case-insensitive, local parts are the receiving server's business).
    pub fn key(&self) -> String {
        format!("{}@{}", self.local, self.domain.to_ascii_lowercase())
    }

    /// The path in wire form, `<local@domain>`.
    pub fn to_path(&self) -> String {
        format!("<{self}>")
    }
}

impl fmt::Display for Mailbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.domain.is_empty() {
            f.write_str(&self.local)
        } else {
            write!(f, "{}@{}", self.local, self.domain)
        }
    }
}

/// Splits `<path> params` (the text after `FROM:` / `TO:`) into the path's inside and the
/// parameter text.
pub(crate) fn split_path(arg: &str) -> Result<(&str, &str), PathError> {
    let arg = arg.trim_start();
    let Some(after) = arg.strip_prefix('<') else {
        let end = arg.find(' ').unwrap_or(arg.len());
        return Ok((&arg[..end], arg[end..].trim()));
    };
    let close = closing_bracket(after).ok_or(PathError::Syntax)?;
    let (inner, rest) = (&after[..close], &after[close + 1..]);
    if !(rest.is_empty() || rest.starts_with(' ')) {
        return Err(PathError::Syntax);
    }
    if inner.len() > 256 {
        return Err(PathError::TooLong);
    }
    Ok((inner, rest.trim()))
}

/// The `>` that ends the path, skipping any inside a quoted local part.
fn closing_bracket(s: &str) -> Option<usize> {
    let (mut quoted, mut escaped) = (false, false);
    for (i, b) in s.bytes().enumerate() {
        match b {
            _ if escaped => escaped = false,
            b'\\' if quoted => escaped = true,
            b'"' => quoted = !quoted,
            b'>' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

/// MAIL FROM's path: empty is the null reverse-path `<>` (bounces).
pub(crate) fn parse_reverse_path(inner: &str) -> Result<Option<Mailbox>, PathError> {
    if inner.is_empty() {
        return Ok(None);
    }
    parse_mailbox(strip_route(inner)?, false).map(Some)
}

/// RCPT TO's path: a mailbox, or `<postmaster>` alone (§4.1.1.3).
pub(crate) fn parse_forward_path(inner: &str) -> Result<Mailbox, PathError> {
    parse_mailbox(strip_route(inner)?, true)
}

fn strip_route(inner: &str) -> Result<&str, PathError> {
    if !inner.starts_with('@') {
        return Ok(inner);
    }
    let colon = inner.find(':').ok_or(PathError::Syntax)?;
    for hop in inner[..colon].split(',') {
        let domain = hop.strip_prefix('@').ok_or(PathError::Syntax)?;
        valid_domain(domain)?;
    }
    Ok(&inner[colon + 1..])
}

fn parse_mailbox(s: &str, allow_postmaster: bool) -> Result<Mailbox, PathError> {
    if !s.is_ascii() {
        return Err(PathError::NonAscii);
    }
    let at = if s.starts_with('"') { quoted_end(s)? + 1 } else { s.find('@').unwrap_or(s.len()) };
    let (local, domain) = (&s[..at], s.get(at + 1..));
    let Some(domain) = domain.filter(|_| s.as_bytes().get(at) == Some(&b'@')) else {
        if allow_postmaster && s.eq_ignore_ascii_case("postmaster") {
            return Ok(Mailbox { local: s.to_string(), domain: String::new() });
        }
        return Err(PathError::Syntax);
    };
    if local.len() > 64 || domain.len() > 255 {
        return Err(PathError::TooLong);
    }
    if !local.starts_with('"') && !valid_dot_string(local) {
        return Err(PathError::Syntax);
    }
    valid_domain(domain)?;
    Ok(Mailbox { local: local.to_string(), domain: domain.to_string() })
}

/// Index of the quote that closes the quoted string starting at 0 (§4.1.2 Quoted-string).
fn quoted_end(s: &str) -> Result<usize, PathError> {
    let mut escaped = false;
    for (i, b) in s.bytes().enumerate().skip(1) {
        match b {
            b' '..=b'~' if escaped => escaped = false,
            _ if escaped => return Err(PathError::Syntax),
            b'\\' => escaped = true,
            b'"' => return Ok(i),
            b' '..=b'~' => {}
            _ => return Err(PathError::Syntax),
        }
    }
    Err(PathError::Syntax)
}

fn valid_dot_string(s: &str) -> bool {
    let atext = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~".contains(&b);
    s.split('.').all(|atom| !atom.is_empty() && atom.bytes().all(atext))
}

/// A domain name or an address literal (`[192.0.2.1]`, `[IPv6:…]`).
fn valid_domain(d: &str) -> Result<(), PathError> {
    if let Some(lit) = d.strip_prefix('[') {
        let inner = lit.strip_suffix(']').ok_or(PathError::Syntax)?;
        let ok = !inner.is_empty() && inner.bytes().all(|b| b.is_ascii_graphic() && !b"[]\\".contains(&b));
        return if ok { Ok(()) } else { Err(PathError::Syntax) };
    }
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if d.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(PathError::Syntax)
    }
}

/// ESMTP parameters as `(KEYWORD, value)`, keyword uppercased; `None` on a malformed one.
pub(crate) fn parse_params(text: &str) -> Option<Vec<(String, Option<&str>)>> {
    let mut params = Vec::new();
    for p in text.split(' ').filter(|p| !p.is_empty()) {
        let (key, value) = match p.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (p, None),
        };
        let key_ok = key.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !key_ok || value.is_some_and(str::is_empty) {
            return None;
        }
        params.push((key.to_ascii_uppercase(), value));
    }
    Some(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_params() {
        assert_eq!(split_path("<a@b.example> SIZE=10"), Ok(("a@b.example", "SIZE=10")));
        assert_eq!(split_path(" <a@b>"), Ok(("a@b", "")));
        assert_eq!(split_path("a@b BODY=8BITMIME"), Ok(("a@b", "BODY=8BITMIME")));
        assert_eq!(split_path("<\"x>y\"@b>"), Ok(("\"x>y\"@b", "")));
        assert_eq!(split_path("<a@b>x"), Err(PathError::Syntax));
        assert_eq!(split_path("<a@b"), Err(PathError::Syntax));
        assert_eq!(parse_reverse_path(""), Ok(None));
        let mb = parse_forward_path("@r1.example,@r2.example:Bob@Ex.ORG").unwrap();
        assert_eq!((mb.local(), mb.domain_lowercase()), ("Bob", "ex.org".to_string()));
        assert_eq!(mb.key(), "Bob@ex.org");
        assert_eq!(mb.to_path(), "<Bob@Ex.ORG>");
        let pm = parse_forward_path("Postmaster").unwrap();
        assert_eq!((pm.to_string(), pm.domain()), ("Postmaster".to_string(), ""));
        assert_eq!(parse_reverse_path("postmaster"), Err(PathError::Syntax));
        let q = Mailbox::parse("\"john \\\"q\\\" doe\"@[192.0.2.1]").unwrap();
        assert_eq!(q.local(), "\"john \\\"q\\\" doe\"");
        assert_eq!(q.domain(), "[192.0.2.1]");
    }

    #[test]
    fn refusals() {
        for bad in ["a", "a@", "@b", "a..b@c", ".a@c", "a@-b", "a@b..c", "a b@c", "\"a@c", "a@[]"] {
            assert_eq!(Mailbox::parse(bad), Err(PathError::Syntax), "{bad}");
        }
        assert_eq!(Mailbox::parse("jürgen@x.example"), Err(PathError::NonAscii));
        assert_eq!(Mailbox::parse(&format!("{}@x", "a".repeat(65))), Err(PathError::TooLong));
        let long = format!("<{}@{}>", "a".repeat(60), vec!["b".repeat(60); 4].join("."));
        assert_eq!(split_path(&long), Err(PathError::TooLong));
        assert_eq!(
            parse_params("SIZE=10 body=8bitmime"),
            Some(vec![("SIZE".to_string(), Some("10")), ("BODY".to_string(), Some("8bitmime")),])
        );
        assert_eq!(parse_params("SIZE="), None);
        assert_eq!(parse_params("=x"), None);
    }
}
