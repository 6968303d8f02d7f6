//! The admin token. When one is configured, every request (API, metrics, stats page) must
//! carry it: `Authorization: Bearer <token>` for scripts and `cswitch ctl`, or HTTP Basic
//! with the token as the password (any user name) so a browser can open the stats page.
//! The comparison runs in constant time (`subtle`), so response timing does not reveal how
//! much of a guess was right.

use base64::Engine;
use std::net::SocketAddr;
use subtle::ConstantTimeEq;

/// The token a request must carry now, if any. Read on every request so a reload can set,
/// change or remove it — with two guards: a listener bound beyond loopback (allowed only
/// with a token) keeps the token it started with if a reload drops the token, and a
/// reload that removes `[admin]` (the listener runs until restart) keeps it too.
pub(crate) fn required_token(
    current: Option<&config::Admin>,
    at_start: Option<&str>,
    bound: SocketAddr,
) -> Option<String> {
    match current {
        Some(config::Admin { token: Some(token), .. }) => Some(token.clone()),
        Some(_) if bound.ip().is_loopback() => None,
        _ => at_start.map(str::to_string),
    }
}

/// True when `authorization` (the header's value) carries `token`.
pub(crate) fn authorized(authorization: Option<&[u8]>, token: &str) -> bool {
    let Some(value) = authorization else { return false };
    let value = value.trim_ascii();
    let Some(space) = value.iter().position(|&b| b == b' ') else { return false };
    let (scheme, credentials) = (&value[..space], value[space..].trim_ascii());
    if scheme.eq_ignore_ascii_case(b"bearer") {
        return equal(credentials, token.as_bytes());
    }
    if scheme.eq_ignore_ascii_case(b"basic") {
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(credentials) else {
            return false;
        };
        // user:password; the user name is not checked, only the password.
        let Some(colon) = decoded.iter().position(|&b| b == b':') else { return false };
        return equal(&decoded[colon + 1..], token.as_bytes());
    }
    false
}

/// Constant time in the contents (a length mismatch returns at once; the length of the
/// token is not the secret).
fn equal(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const T: &str = "0123456789abcdef";

    #[test]
    fn bearer_and_basic_are_accepted_with_the_right_token_only() {
        assert!(authorized(Some(b"Bearer 0123456789abcdef"), T));
        assert!(authorized(Some(b"bearer   0123456789abcdef "), T));
        assert!(!authorized(Some(b"Bearer 0123456789abcdeX"), T));
        assert!(!authorized(Some(b"Bearer"), T));
        assert!(!authorized(None, T));
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("admin:{T}"));
        assert!(authorized(Some(format!("Basic {basic}").as_bytes()), T));
        let wrong = base64::engine::general_purpose::STANDARD.encode(format!("{T}:x"));
        assert!(!authorized(Some(format!("Basic {wrong}").as_bytes()), T));
        assert!(!authorized(Some(b"Basic !!!"), T));
        assert!(!authorized(Some(b"Token 0123456789abcdef"), T));
    }

    #[test]
    fn a_reload_cannot_open_a_listener_bound_beyond_loopback() {
        let admin = |token: Option<&str>| config::Admin {
            bind: "127.0.0.1:9900".parse().unwrap(),
            token: token.map(str::to_string),
        };
        let public: SocketAddr = "0.0.0.0:9900".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:9900".parse().unwrap();
        assert_eq!(required_token(Some(&admin(Some("new"))), Some("old"), public).as_deref(), Some("new"));
        assert_eq!(required_token(Some(&admin(None)), Some("old"), public).as_deref(), Some("old"));
        assert_eq!(required_token(Some(&admin(None)), Some("old"), local), None);
        assert_eq!(required_token(None, Some("old"), local).as_deref(), Some("old"));
        assert_eq!(required_token(None, None, local), None);
    }
}
