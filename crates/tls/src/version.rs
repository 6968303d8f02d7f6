//! Protocol versions as the rules name them.

use std::fmt;

/// A TLS (or SSL) protocol version.
///
/// `Display` gives the names the rules compare against: `SSLv3`, `TLSv1.0` … `TLSv1.3`
/// (OpenSSL's spelling); any other wire value prints as `0x` and four hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TlsVersion {
    /// SSL 3.0 (0x0300).
    Ssl3,
    /// TLS 1.0 (0x0301).
    Tls10,
    /// TLS 1.1 (0x0302).
    Tls11,
    /// TLS 1.2 (0x0303).
    Tls12,
    /// TLS 1.3 (0x0304).
    Tls13,
    /// Any other wire value (a draft, GREASE, or garbage a peer chose to send).
    Other(u16),
}

impl TlsVersion {
    /// The version a wire value names.
    pub fn from_wire(v: u16) -> Self {
        match v {
            0x0300 => TlsVersion::Ssl3,
            0x0301 => TlsVersion::Tls10,
            0x0302 => TlsVersion::Tls11,
            0x0303 => TlsVersion::Tls12,
            0x0304 => TlsVersion::Tls13,
            other => TlsVersion::Other(other),
        }
    }

    /// The wire value.
    pub fn wire(self) -> u16 {
        match self {
            TlsVersion::Ssl3 => 0x0300,
            TlsVersion::Tls10 => 0x0301,
            TlsVersion::Tls11 => 0x0302,
            TlsVersion::Tls12 => 0x0303,
            TlsVersion::Tls13 => 0x0304,
            TlsVersion::Other(v) => v,
        }
    }

    /// True for SSLv3 through TLS 1.3; false for [`TlsVersion::Other`].
    pub fn is_known(self) -> bool {
        !matches!(self, TlsVersion::Other(_))
    }

    /// True for SSLv3 through TLS 1.2: the versions whose ServerHello session ID names a
    /// session the client can resume by sending it back.
    pub fn resumes_by_session_id(self) -> bool {
        self.is_known() && self != TlsVersion::Tls13
    }
}

impl fmt::Display for TlsVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsVersion::Ssl3 => f.write_str("SSLv3"),
            TlsVersion::Tls10 => f.write_str("TLSv1.0"),
            TlsVersion::Tls11 => f.write_str("TLSv1.1"),
            TlsVersion::Tls12 => f.write_str("TLSv1.2"),
            TlsVersion::Tls13 => f.write_str("TLSv1.3"),
            TlsVersion::Other(v) => write!(f, "0x{v:04x}"),
        }
    }
}
