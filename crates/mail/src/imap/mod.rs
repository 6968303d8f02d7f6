//! IMAP (RFC 9051 / RFC 3501) up to the login, and its replay.
//!
//! The switch greets with its capabilities, answers CAPABILITY, NOOP, LOGOUT and STARTTLS,
//! and takes LOGIN (atoms, quoted strings and literals, synchronizing or not) or
//! AUTHENTICATE PLAIN (with SASL-IR or after a `+ ` continuation) ([`Front`]). The login is
//! the switch point: the caller routes on the user (rule field `imap.user` and
//! [`crate::domain_of`] of it), connects, and runs a [`Replay`] that reads the server's
//! greeting and logs in **with the client's own tag**, so the server's tagged answer goes to
//! the client verbatim: `OK` (with the server's `[CAPABILITY …]`; CAPABILITY from then on is
//! the server's) and the caller tunnels; `NO` / `BAD` and the front waits for another login.
//! A server that is down or does not greet with `* OK` gives the client
//! `tag NO [UNAVAILABLE]`.
//!
//! The replay uses LOGIN, quoting the user and password, or sending them as literals when
//! they are not printable ASCII (synchronizing unless the server offers LITERAL+); it uses
//! AUTHENTICATE PLAIN instead when the client gave an authorization identity or the server
//! announces LOGINDISABLED. The server's capabilities are taken from its greeting's
//! `[CAPABILITY …]` code; without it the replay assumes none.

mod front;
mod replay;
mod syntax;

pub use crate::login::{Cause, Outcome};
pub use front::{Event, Front, FrontConfig};
pub use replay::{Replay, ReplayConfig};

use crate::Secret;

/// Who the client logs in as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// The SASL authorization identity (AUTHENTICATE PLAIN); empty for LOGIN.
    pub authzid: String,
    /// The user name (rule field `imap.user`).
    pub user: String,
    /// The password.
    pub password: Secret,
}

/// Decodes an AUTHENTICATE PLAIN response (RFC 4616): base64 of `authzid NUL user NUL
/// password`.
fn decode_plain(b64: &str) -> Option<Credentials> {
    use base64::Engine;
    let raw = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    let mut parts = raw.splitn(3, |&b| b == 0);
    let authzid = String::from_utf8(parts.next()?.to_vec()).ok()?;
    let user = String::from_utf8(parts.next()?.to_vec()).ok()?;
    let password = Secret::new(parts.next()?);
    (!user.is_empty()).then_some(Credentials { authzid, user, password })
}

/// The AUTHENTICATE PLAIN response for `creds`.
fn encode_plain(creds: &Credentials) -> String {
    use base64::Engine;
    let mut raw = Vec::new();
    raw.extend_from_slice(creds.authzid.as_bytes());
    raw.push(0);
    raw.extend_from_slice(creds.user.as_bytes());
    raw.push(0);
    raw.extend_from_slice(creds.password.expose());
    base64::engine::general_purpose::STANDARD.encode(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sasl_plain_round_trip() {
        let creds = Credentials {
            authzid: String::new(),
            user: "tim".into(),
            password: Secret::new("tanstaaftanstaaf"),
        };
        assert_eq!(encode_plain(&creds), "AHRpbQB0YW5zdGFhZnRhbnN0YWFm");
        assert_eq!(decode_plain("AHRpbQB0YW5zdGFhZnRhbnN0YWFm"), Some(creds));
        assert_eq!(decode_plain("AAB4"), None, "empty user");
        assert_eq!(decode_plain("dGlt"), None, "no NULs");
        assert_eq!(decode_plain("!!"), None);
    }
}
