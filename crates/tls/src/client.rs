//! The ClientHello (RFC 8446 §4.1.2, RFC 5246 §7.4.1.2) and its incremental reader.

use crate::cursor::Cursor;
use crate::ext::{self, Extension};
use crate::record::{HelloReader, CLIENT_HELLO, HS_HEADER};
use crate::{sni, HelloError, Progress, TlsVersion};

/// What the switch learns from a ClientHello: the fields the rules route on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientHello {
    /// The version field of the hello itself (0x0303 in every TLS 1.3 hello).
    pub legacy_version: u16,
    /// The highest known version offered in supported_versions if present, else
    /// `legacy_version`.
    pub version: TlsVersion,
    /// The session ID (0–32 bytes). Up to TLS 1.2 a non-empty one asks to resume that
    /// session; TLS 1.3 clients send random bytes here (middlebox compatibility).
    pub session_id: Vec<u8>,
    /// The host_name of server_name, lowercased, without a trailing dot.
    pub sni: Option<String>,
    /// ALPN protocol names, in the client's order of preference.
    pub alpn: Vec<Vec<u8>>,
    /// Offered cipher suites, in the client's order (GREASE values included).
    pub cipher_suites: Vec<u16>,
    /// A non-empty session_ticket extension: the client resumes a TLS ≤ 1.2 session by
    /// ticket (an empty one only says it would take a ticket).
    pub has_session_ticket: bool,
    /// pre_shared_key is present: TLS 1.3 resumption (or an external PSK).
    pub psk: bool,
}

impl ClientHello {
    /// The ALPN names joined with commas (`h2,http/1.1`), for rules that match on text.
    /// Bytes that are not UTF-8 show as U+FFFD.
    pub fn alpn_joined(&self) -> String {
        let mut joined = String::with_capacity(self.alpn.iter().map(|p| p.len() + 1).sum());
        for (i, name) in self.alpn.iter().enumerate() {
            if i > 0 {
                joined.push(',');
            }
            joined.push_str(&String::from_utf8_lossy(name));
        }
        joined
    }

    /// The session ID in lowercase hex (empty when there is none).
    pub fn session_id_hex(&self) -> String {
        crate::hex(&self.session_id)
    }
}

/// Reads the ClientHello from the start of a client's stream, bytes as they arrive.
///
/// The reader never changes the caller's bytes and keeps none of them except a hello that
/// arrives split, which it gathers once: the proxy forwards its own copy untouched.
pub struct ClientHelloReader(HelloReader<ClientHello>);

impl ClientHelloReader {
    /// A reader that gives up with [`HelloError::TooLarge`] when the first `max_bytes`
    /// bytes of the stream hold no complete ClientHello.
    pub fn new(max_bytes: usize) -> Self {
        ClientHelloReader(HelloReader::new(CLIENT_HELLO, max_bytes, parse))
    }

    /// Looks at the next bytes of the stream (any split works, down to one byte a call).
    ///
    /// Once the answer is `Done` or `Malformed` the reader is finished: later calls return
    /// the same answer and look at nothing.
    pub fn push(&mut self, bytes: &[u8]) -> Progress<ClientHello> {
        self.0.push(bytes)
    }

    /// Stream bytes looked at so far; once `Done`, the length of the records up to the end
    /// of the ClientHello (bytes after it in the same push are not looked at).
    pub fn consumed(&self) -> usize {
        self.0.consumed()
    }
}

/// Parses a whole ClientHello handshake message, its 4-byte header included.
fn parse(msg: &[u8]) -> Result<ClientHello, HelloError> {
    let mut c = Cursor::new(msg.get(HS_HEADER..).unwrap_or_default());
    let legacy_version = c.u16("legacy_version")?;
    c.take(32, "random")?;
    let session_id = crate::session_id(&mut c)?;
    let suites = c.vec16("cipher_suites")?;
    if suites.is_empty() || suites.len() % 2 != 0 {
        return Err(HelloError::BadValue("cipher_suites is empty or of odd length"));
    }
    if c.vec8("compression_methods")?.is_empty() {
        return Err(HelloError::BadValue("no compression method"));
    }
    let extensions = ext::block(&mut c, "ClientHello")?;
    let mut hello = ClientHello {
        legacy_version,
        version: TlsVersion::from_wire(legacy_version),
        session_id: session_id.to_vec(),
        sni: None,
        alpn: Vec::new(),
        cipher_suites: suites.chunks_exact(2).map(|s| u16::from_be_bytes([s[0], s[1]])).collect(),
        has_session_ticket: false,
        psk: false,
    };
    ext::each(extensions, |e| read_extension(&mut hello, e))?;
    Ok(hello)
}

fn read_extension(hello: &mut ClientHello, e: Extension<'_>) -> Result<(), HelloError> {
    match e.kind {
        ext::SERVER_NAME => hello.sni = sni::server_name(e.data)?,
        ext::ALPN => hello.alpn = alpn(e.data)?,
        ext::SESSION_TICKET => hello.has_session_ticket = !e.data.is_empty(),
        ext::PRE_SHARED_KEY => {
            // RFC 8446 §4.2.11: the binders cover everything before it, so it must be last.
            if !e.last {
                return Err(HelloError::BadValue("pre_shared_key is not the last extension"));
            }
            hello.psk = true;
        }
        ext::SUPPORTED_VERSIONS => {
            if let Some(v) = highest_version(e.data)? {
                hello.version = v;
            }
        }
        _ => {}
    }
    Ok(())
}

fn alpn(data: &[u8]) -> Result<Vec<Vec<u8>>, HelloError> {
    let mut outer = Cursor::new(data);
    let list = outer.vec16("ALPN list")?;
    outer.finish("ALPN list")?;
    if list.is_empty() {
        return Err(HelloError::BadValue("empty ALPN list"));
    }
    let mut c = Cursor::new(list);
    let mut names = Vec::new();
    while !c.is_empty() {
        let name = c.vec8("ALPN protocol name")?;
        if name.is_empty() {
            return Err(HelloError::BadValue("empty ALPN protocol name"));
        }
        names.push(name.to_vec());
    }
    Ok(names)
}

/// The highest version of supported_versions this crate knows; GREASE and drafts are
/// skipped, so a list of only those leaves the legacy version in force.
fn highest_version(data: &[u8]) -> Result<Option<TlsVersion>, HelloError> {
    let mut outer = Cursor::new(data);
    let list = outer.vec8("supported_versions")?;
    outer.finish("supported_versions")?;
    if list.is_empty() || list.len() % 2 != 0 {
        return Err(HelloError::BadValue("supported_versions is empty or of odd length"));
    }
    Ok(list
        .chunks_exact(2)
        .map(|v| TlsVersion::from_wire(u16::from_be_bytes([v[0], v[1]])))
        .filter(|v| v.is_known())
        .max_by_key(|v| v.wire()))
}
