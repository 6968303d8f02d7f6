//! Protocol fields (`tls.*`, `smtp.*`, `pop.*`, `imap.*`) read through `Request::proto_field`.

use super::{addr, compile, errors, outcome};
use crate::{Body, ProtoField, Request};
use std::net::SocketAddr;

/// A connection-level "request": no HTTP head, only protocol fields.
struct Conn(Vec<(ProtoField, &'static str)>);

impl Request for Conn {
    fn src(&self) -> SocketAddr {
        addr("192.0.2.10:40000")
    }
    fn dst(&self) -> SocketAddr {
        addr("198.51.100.1:443")
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
    fn header(&self, _: &str) -> Option<&[u8]> {
        None
    }
    fn header_each<'a>(&'a self, _: &str, _: &mut dyn FnMut(&'a [u8]) -> bool) {}
    fn body(&self) -> Body<'_> {
        Body { bytes: &[], complete: true }
    }
    fn proto_field(&self, field: ProtoField) -> Option<&[u8]> {
        self.0.iter().find(|(f, _)| *f == field).map(|(_, v)| v.as_bytes())
    }
}

#[test]
fn tls_and_mail_fields_route() {
    let rs = compile(
        "Api: if (tls.sni == \"api.example.com\" && match(tls.alpn, \"h2\")) { routeTo(api); }\n\
         Spam: if (suffix(smtp.mail_from_domain, \"spam.example\")) { deny(550); }\n\
         Eu: if (smtp.rcpt_to_domain == \"eu.example\" || imap.user_domain == \"eu.example\") { routeTo(eu.web-1); }\n\
         Many: if (smtp.rcpt_count > 10) { routeTo(static); }\n",
    );
    let conn = |fields| Conn(fields);
    assert_eq!(
        outcome(
            &rs,
            &conn(vec![(ProtoField::TlsSni, "api.example.com"), (ProtoField::TlsAlpn, "h2,http/1.1")])
        ),
        "Api:api/Off"
    );
    assert_eq!(outcome(&rs, &conn(vec![(ProtoField::TlsSni, "www.example.com")])), "-:default");
    assert_eq!(
        outcome(&rs, &conn(vec![(ProtoField::SmtpMailFromDomain, "bulk.spam.example")])),
        "Spam:deny 550"
    );
    assert_eq!(outcome(&rs, &conn(vec![(ProtoField::ImapUserDomain, "eu.example")])), "Eu:eu.web-1/Off");
    assert_eq!(outcome(&rs, &conn(vec![(ProtoField::SmtpRcptCount, "12")])), "Many:static/Off");
    // An HTTP request has none of them.
    assert_eq!(outcome(&rs, &super::request("GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n")), "-:default");
}

#[test]
fn misspelled_protocol_fields_get_a_suggestion() {
    let e = errors("A: if (tls.snii == \"x\") { routeTo(web); }\n");
    assert!(e.contains("unknown field 'tls.snii' — did you mean 'tls.sni'?"), "{e}");
}
