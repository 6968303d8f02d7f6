//! Fields of the non-HTTP protocols a listener can speak: what the switch read from a TLS
//! ClientHello, or from the start of an SMTP, POP3 or IMAP dialogue before routing
//! (seed 000 §1 and §4.4). The proxy supplies their values through
//! [`crate::Request::proto_field`]; on a listener of another protocol they are absent.

/// One protocol field, written in rules as `tls.sni`, `smtp.mail_from`, …
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProtoField {
    /// The server name a TLS client asked for (SNI), lower case.
    TlsSni,
    /// The ALPN protocols a TLS client offered, comma-separated, in its order.
    TlsAlpn,
    /// The TLS session ID the client sent, in hex (empty for a new session).
    TlsSessionId,
    /// The highest TLS version offered, e.g. `TLSv1.3`.
    TlsVersion,
    /// The name an SMTP client gave in EHLO / HELO.
    SmtpHelo,
    /// The reverse path of MAIL FROM, without angle brackets (empty for `<>`).
    SmtpMailFrom,
    /// Its domain, lower case.
    SmtpMailFromDomain,
    /// The first accepted recipient of the transaction.
    SmtpRcptTo,
    /// Its domain, lower case.
    SmtpRcptToDomain,
    /// Recipients so far in the transaction (a number).
    SmtpRcptCount,
    /// The POP3 user name (USER).
    PopUser,
    /// Its domain part, lower case (after the last `@`).
    PopUserDomain,
    /// The IMAP user name (LOGIN or AUTHENTICATE PLAIN).
    ImapUser,
    /// Its domain part, lower case.
    ImapUserDomain,
}

impl ProtoField {
    /// Every field, in the order docs list them.
    pub const ALL: [ProtoField; 14] = [
        ProtoField::TlsSni,
        ProtoField::TlsAlpn,
        ProtoField::TlsSessionId,
        ProtoField::TlsVersion,
        ProtoField::SmtpHelo,
        ProtoField::SmtpMailFrom,
        ProtoField::SmtpMailFromDomain,
        ProtoField::SmtpRcptTo,
        ProtoField::SmtpRcptToDomain,
        ProtoField::SmtpRcptCount,
        ProtoField::PopUser,
        ProtoField::PopUserDomain,
        ProtoField::ImapUser,
        ProtoField::ImapUserDomain,
    ];

    /// How rules write it.
    pub fn name(&self) -> &'static str {
        match self {
            ProtoField::TlsSni => "tls.sni",
            ProtoField::TlsAlpn => "tls.alpn",
            ProtoField::TlsSessionId => "tls.session_id",
            ProtoField::TlsVersion => "tls.version",
            ProtoField::SmtpHelo => "smtp.helo",
            ProtoField::SmtpMailFrom => "smtp.mail_from",
            ProtoField::SmtpMailFromDomain => "smtp.mail_from_domain",
            ProtoField::SmtpRcptTo => "smtp.rcpt_to",
            ProtoField::SmtpRcptToDomain => "smtp.rcpt_to_domain",
            ProtoField::SmtpRcptCount => "smtp.rcpt_count",
            ProtoField::PopUser => "pop.user",
            ProtoField::PopUserDomain => "pop.user_domain",
            ProtoField::ImapUser => "imap.user",
            ProtoField::ImapUserDomain => "imap.user_domain",
        }
    }

    /// The field a rule name denotes.
    pub fn from_name(name: &str) -> Option<ProtoField> {
        ProtoField::ALL.iter().copied().find(|f| f.name() == name)
    }

    /// The protocol that supplies it: `tls`, `smtp`, `pop3` or `imap`.
    pub fn protocol(&self) -> &'static str {
        match self {
            ProtoField::TlsSni | ProtoField::TlsAlpn | ProtoField::TlsSessionId | ProtoField::TlsVersion => {
                "tls"
            }
            ProtoField::PopUser | ProtoField::PopUserDomain => "pop3",
            ProtoField::ImapUser | ProtoField::ImapUserDomain => "imap",
            _ => "smtp",
        }
    }
}

/// A connection-level "request" for listeners that are not HTTP (TLS passthrough, mail):
/// the addresses, an optional `host` (a TLS client's SNI) and the protocol fields; every
/// HTTP field is absent.
pub struct ConnectionRequest<'a> {
    /// Client address.
    pub src: std::net::SocketAddr,
    /// The address the client connected to.
    pub dst: std::net::SocketAddr,
    /// What `host` reads, if anything.
    pub host: Option<&'a [u8]>,
    /// The protocol fields present, with their values.
    pub fields: &'a [(ProtoField, &'a [u8])],
}

impl crate::Request for ConnectionRequest<'_> {
    fn src(&self) -> std::net::SocketAddr {
        self.src
    }
    fn dst(&self) -> std::net::SocketAddr {
        self.dst
    }
    fn method(&self) -> &[u8] {
        b""
    }
    fn target(&self) -> &[u8] {
        b""
    }
    fn version(&self) -> &[u8] {
        b""
    }
    fn header(&self, name: &str) -> Option<&[u8]> {
        if name == "host" {
            self.host
        } else {
            None
        }
    }
    fn header_each<'b>(&'b self, name: &str, visit: &mut dyn FnMut(&'b [u8]) -> bool) {
        if let Some(v) = self.header(name) {
            visit(v);
        }
    }
    fn body(&self) -> crate::Body<'_> {
        crate::Body { bytes: &[], complete: true }
    }
    fn proto_field(&self, field: ProtoField) -> Option<&[u8]> {
        self.fields.iter().find(|(f, _)| *f == field).map(|(_, v)| *v)
    }
}
