//! The ServerHello (RFC 8446 §4.1.3, RFC 5246 §7.4.1.3) and its incremental reader.

use crate::cursor::Cursor;
use crate::ext::{self, Extension};
use crate::record::{HelloReader, HS_HEADER, SERVER_HELLO};
use crate::{HelloError, Progress, TlsVersion};

/// The random of a HelloRetryRequest: SHA-256 of "HelloRetryRequest" (RFC 8446 §4.1.3).
const HELLO_RETRY_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91, 0xc2,
    0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

/// What the switch learns from a ServerHello: the version and the session the server chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerHello {
    /// The version field of the hello itself (0x0303 in every TLS 1.3 hello).
    pub legacy_version: u16,
    /// The selected version: supported_versions if present (TLS 1.3), else
    /// `legacy_version`.
    pub version: TlsVersion,
    /// The session ID. Up to TLS 1.2 it names the session the server cached (new, or the
    /// client's when it resumes); in TLS 1.3 it only echoes the client's.
    pub session_id: Vec<u8>,
    /// The cipher suite the server picked.
    pub cipher_suite: u16,
    /// This is a HelloRetryRequest: the server asks for a second ClientHello.
    pub is_hello_retry: bool,
}

impl ServerHello {
    /// True when a later ClientHello carrying this session ID resumes this session, so
    /// the switch should remember which server issued it: TLS ≤ 1.2 and a non-empty ID.
    pub fn resumption_via_session_id(&self) -> bool {
        self.version.resumes_by_session_id() && !self.session_id.is_empty() && !self.is_hello_retry
    }

    /// The session ID in lowercase hex (empty when there is none).
    pub fn session_id_hex(&self) -> String {
        crate::hex(&self.session_id)
    }
}

/// Reads the ServerHello from the start of a server's stream, bytes as they arrive.
///
/// Like [`crate::ClientHelloReader`] it changes and keeps none of the caller's bytes
/// (a split hello excepted), and stops at the end of the ServerHello: the certificate and
/// whatever else follows in the same record are not looked at.
pub struct ServerHelloReader(HelloReader<ServerHello>);

impl ServerHelloReader {
    /// A reader that gives up with [`HelloError::TooLarge`] when the first `max_bytes`
    /// bytes of the stream hold no complete ServerHello.
    pub fn new(max_bytes: usize) -> Self {
        ServerHelloReader(HelloReader::new(SERVER_HELLO, max_bytes, parse))
    }

    /// Looks at the next bytes of the stream (any split works, down to one byte a call).
    ///
    /// Once the answer is `Done` or `Malformed` the reader is finished: later calls return
    /// the same answer and look at nothing.
    pub fn push(&mut self, bytes: &[u8]) -> Progress<ServerHello> {
        self.0.push(bytes)
    }

    /// Stream bytes looked at so far; once `Done`, the length of the records up to the end
    /// of the ServerHello.
    pub fn consumed(&self) -> usize {
        self.0.consumed()
    }
}

/// Parses a whole ServerHello handshake message, its 4-byte header included.
fn parse(msg: &[u8]) -> Result<ServerHello, HelloError> {
    let mut c = Cursor::new(msg.get(HS_HEADER..).unwrap_or_default());
    let legacy_version = c.u16("legacy_version")?;
    let random = c.take(32, "random")?;
    let session_id = crate::session_id(&mut c)?;
    let cipher_suite = c.u16("cipher_suite")?;
    c.u8("compression_method")?;
    let extensions = ext::block(&mut c, "ServerHello")?;
    let mut hello = ServerHello {
        legacy_version,
        version: TlsVersion::from_wire(legacy_version),
        session_id: session_id.to_vec(),
        cipher_suite,
        is_hello_retry: random == HELLO_RETRY_RANDOM,
    };
    ext::each(extensions, |e| read_extension(&mut hello, e))?;
    Ok(hello)
}

fn read_extension(hello: &mut ServerHello, e: Extension<'_>) -> Result<(), HelloError> {
    if e.kind == ext::SUPPORTED_VERSIONS {
        let mut c = Cursor::new(e.data);
        hello.version = TlsVersion::from_wire(c.u16("selected_version")?);
        c.finish("selected_version")?;
    }
    Ok(())
}
