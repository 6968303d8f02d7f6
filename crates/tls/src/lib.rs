//! Sans-io TLS hello readers for cswitch's TLS passthrough.
//!
//! This crate owns reading the two plaintext messages that open a TLS connection and
//! nothing else: no sockets, no crypto, no rewriting. Bytes go in as they are read, values
//! come out: the ClientHello's SNI, ALPN, offered version and session ID for the rules,
//! and the ServerHello's chosen version and session ID for session-ID persistence (seed
//! 000 §1: a client resuming a TLS ≤ 1.2 session goes back to the server that issued it).
//! The readers never change or keep the caller's bytes, which the proxy forwards verbatim.
//!
//! Layout: `client` ([`ClientHelloReader`], [`ClientHello`]) and `server`
//! ([`ServerHelloReader`], [`ServerHello`]) parse the hello bodies; `record` strips the
//! record layer incrementally (a hello split over reads or records); `ext` walks
//! extension blocks; `sni` validates host names (RFC 6066); `cursor` is the bounds-checked
//! reader under all of them; `error` and `version` hold the public vocabulary.

mod client;
mod cursor;
mod error;
mod ext;
mod record;
mod server;
mod sni;
mod version;

pub use client::{ClientHello, ClientHelloReader};
pub use error::{HelloError, NotTls};
pub use server::{ServerHello, ServerHelloReader};
pub use version::TlsVersion;

use cursor::Cursor;

/// A `max_bytes` that fits every real hello: today's largest (post-quantum key shares,
/// many PSK identities) are under 8 KiB, and a hello may legally span records.
pub const DEFAULT_MAX_BYTES: usize = 16 * 1024;

/// Where a reader stands after a push.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Progress<H> {
    /// The hello is not whole yet: push the next bytes.
    NeedMore,
    /// The hello, parsed.
    Done(H),
    /// The stream holds no usable hello; the connection should be closed.
    Malformed(HelloError),
}

impl<H> From<Result<H, HelloError>> for Progress<H> {
    fn from(r: Result<H, HelloError>) -> Self {
        match r {
            Ok(hello) => Progress::Done(hello),
            Err(e) => Progress::Malformed(e),
        }
    }
}

/// A hello's session ID: at most 32 bytes (RFC 5246 §7.4.1.2).
fn session_id<'a>(c: &mut Cursor<'a>) -> Result<&'a [u8], HelloError> {
    let id = c.vec8("session_id")?;
    if id.len() > 32 {
        return Err(HelloError::BadValue("session_id longer than 32 bytes"));
    }
    Ok(id)
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    // Sized once: a session ID is hexed for every passthrough connection.
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}
