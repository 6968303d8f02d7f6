//! Why a byte stream holds no usable hello.

use std::fmt;

/// Why a reader gave up: the stream is not TLS, or its hello breaks the wire format.
///
/// Every variant is final: the proxy closes the connection and counts the reason
/// ([`HelloError::reason`] is a short fixed label, fit for a metric or a log field).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    /// The first bytes are not a TLS handshake record.
    #[error("not TLS: {0}")]
    NotTls(NotTls),
    /// The peer sent an alert record before any hello (a server refusing the client, say).
    #[error("alert {description} (level {level}) instead of a hello")]
    Alert {
        /// Alert level: 1 warning, 2 fatal.
        level: u8,
        /// Alert description code (RFC 8446 §6), e.g. 112 unrecognized_name.
        description: u8,
    },
    /// A hello in a format this crate does not read (the SSLv2-compatible ClientHello).
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
    /// No complete hello within the reader's byte limit.
    #[error("no complete hello within {limit} bytes")]
    TooLarge {
        /// The `max_bytes` the reader was built with.
        limit: usize,
    },
    /// A record header that breaks the record layer (RFC 8446 §5.1).
    #[error("bad record: {0}")]
    BadRecord(&'static str),
    /// The first handshake message is not the hello this reader expects.
    #[error("handshake message type {got}, expected {expected}")]
    WrongHandshake {
        /// 1 (ClientHello) or 2 (ServerHello).
        expected: u8,
        /// The type that came instead.
        got: u8,
    },
    /// A length field runs past the end of what encloses it (a truncated field).
    #[error("{0} overruns its enclosing length")]
    Overrun(&'static str),
    /// Bytes left over after the last field of a length-delimited block.
    #[error("trailing bytes after {0}")]
    Trailing(&'static str),
    /// The same extension type twice in one hello (RFC 8446 §4.2 forbids it).
    #[error("duplicate extension {0}")]
    DuplicateExtension(u16),
    /// The server_name extension holds no valid DNS host name (RFC 6066 §3).
    #[error("bad server name: {0}")]
    BadSni(&'static str),
    /// A field whose value the format forbids.
    #[error("bad field: {0}")]
    BadValue(&'static str),
}

impl HelloError {
    /// A short fixed label for counting refusals by kind.
    pub fn reason(&self) -> &'static str {
        match self {
            HelloError::NotTls(NotTls::PlainHttp) => "plain HTTP on a TLS port",
            HelloError::NotTls(_) => "not TLS",
            HelloError::Alert { .. } => "alert instead of hello",
            HelloError::Unsupported(_) => "unsupported hello format",
            HelloError::TooLarge { .. } => "hello too large",
            HelloError::BadRecord(_) => "bad record layer",
            HelloError::WrongHandshake { .. } => "wrong handshake message",
            HelloError::Overrun(_) => "truncated field",
            HelloError::Trailing(_) => "trailing bytes",
            HelloError::DuplicateExtension(_) => "duplicate extension",
            HelloError::BadSni(_) => "bad server name",
            HelloError::BadValue(_) => "bad field value",
        }
    }
}

/// What the first bytes of a stream that is not TLS look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotTls {
    /// An HTTP request or response line (`GET /`, `HTTP/1.1 …`): plain HTTP to a TLS port.
    PlainHttp,
    /// A TLS record of another content type (change_cipher_spec, application_data, …).
    Record(u8),
    /// A first byte that opens no TLS record.
    Other(u8),
}

impl fmt::Display for NotTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotTls::PlainHttp => f.write_str("looks like plain HTTP"),
            NotTls::Record(t) => write!(f, "first record has content type {t}, not handshake (22)"),
            NotTls::Other(b) => write!(f, "first byte 0x{b:02x} opens no TLS record"),
        }
    }
}
