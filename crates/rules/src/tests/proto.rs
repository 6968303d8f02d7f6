//! Protocol fields (`tls.*`, `smtp.*`, `pop.*`, `imap.*`) read through `Request::proto_field`.

use super::{addr, compile, errors, outcome};
use crate::{ConnectionRequest, ProtoField};

/// A connection-level request with these protocol fields.
fn conn<'a>(fields: &'a [(ProtoField, &'a [u8])]) -> ConnectionRequest<'a> {
    ConnectionRequest { src: addr("192.0.2.10:40000"), dst: addr("198.51.100.1:443"), host: None, fields }
}

#[test]
fn tls_and_mail_fields_route() {
    let rs = compile(
        "Api: if (tls.sni == \"api.example.com\" && match(tls.alpn, \"h2\")) { routeTo(api); }\n\
         Spam: if (suffix(smtp.mail_from_domain, \"spam.example\")) { deny(550); }\n\
         Eu: if (smtp.rcpt_to_domain == \"eu.example\" || imap.user_domain == \"eu.example\") { routeTo(eu.web-1); }\n\
         Many: if (smtp.rcpt_count > 10) { routeTo(static); }\n",
    );
    assert_eq!(
        outcome(
            &rs,
            &conn(&[(ProtoField::TlsSni, b"api.example.com"), (ProtoField::TlsAlpn, b"h2,http/1.1")])
        ),
        "Api:api/Off"
    );
    assert_eq!(outcome(&rs, &conn(&[(ProtoField::TlsSni, b"www.example.com")])), "-:default");
    assert_eq!(
        outcome(&rs, &conn(&[(ProtoField::SmtpMailFromDomain, b"bulk.spam.example")])),
        "Spam:deny 550"
    );
    assert_eq!(outcome(&rs, &conn(&[(ProtoField::ImapUserDomain, b"eu.example")])), "Eu:eu.web-1/Off");
    assert_eq!(outcome(&rs, &conn(&[(ProtoField::SmtpRcptCount, b"12")])), "Many:static/Off");
    // An HTTP request has none of them.
    assert_eq!(outcome(&rs, &super::request("GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n")), "-:default");
}

#[test]
fn misspelled_protocol_fields_get_a_suggestion() {
    let e = errors("A: if (tls.snii == \"x\") { routeTo(web); }\n");
    assert!(e.contains("unknown field 'tls.snii' — did you mean 'tls.sni'?"), "{e}");
}
