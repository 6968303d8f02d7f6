//! IMAP: the switch's own dialogue, the login replay, and a whole session in memory.

#![allow(clippy::unwrap_used)]

mod common;

use common::{run_imap, stop_at_login, text};
use mail::imap::{Cause, Credentials, Event, Front, FrontConfig, Outcome, Replay, ReplayConfig};
use mail::{CloseReason, Secret, ServerError};

fn cfg() -> FrontConfig {
    FrontConfig {
        hostname: "imap.switch.example".into(),
        starttls: true,
        max_line: 200,
        max_literal: 64,
        max_errors: 5,
    }
}

fn creds(user: &str, password: &[u8]) -> Credentials {
    Credentials { authzid: String::new(), user: user.into(), password: Secret::new(password) }
}

fn login(tag: &str, user: &str, password: &[u8]) -> Event {
    Event::Login { tag: tag.into(), creds: creds(user, password) }
}

/// Runs `input` whole, byte by byte and in 3-byte chunks; all must agree.
fn talk(cfg: FrontConfig, input: &[u8]) -> (String, Vec<Event>, Vec<u8>) {
    let mut results = Vec::new();
    for size in [0, 1, 3] {
        let mut front = Front::new(cfg.clone());
        let (out, events) = run_imap(&mut front, input, size, stop_at_login);
        let rest =
            if matches!(events.last(), Some(Event::Login { .. })) { front.tunnel() } else { Vec::new() };
        results.push((text(&out), events, rest));
    }
    assert_eq!(results[0], results[1]);
    assert_eq!(results[0], results[2]);
    results.remove(0)
}

#[test]
fn greeting_and_capability() {
    let mut out = Vec::new();
    Front::new(cfg()).greeting(&mut out);
    assert_eq!(
        text(&out),
        "* OK [CAPABILITY IMAP4rev1 SASL-IR AUTH=PLAIN STARTTLS] imap.switch.example ready\r\n"
    );
    let (out, events, _) = talk(cfg(), b"a1 CAPABILITY\r\na2 noop\r\na3 LOGOUT\r\na4 NOOP\r\n");
    assert_eq!(
        out,
        "* CAPABILITY IMAP4rev1 SASL-IR AUTH=PLAIN STARTTLS\r\na1 OK CAPABILITY completed\r\n\
         a2 OK NOOP completed\r\n* BYE imap.switch.example logging out\r\na3 OK LOGOUT completed\r\n"
    );
    assert_eq!(events, [Event::Quit]);
}

#[test]
fn login_forms() {
    let (out, events, rest) = talk(cfg(), b"a1 LOGIN alice@b.example s3cret\r\na2 SELECT INBOX\r\n");
    assert_eq!((out.as_str(), rest.as_slice()), ("", &b"a2 SELECT INBOX\r\n"[..]));
    assert_eq!(events, [login("a1", "alice@b.example", b"s3cret")]);

    let (_, events, _) = talk(cfg(), b"x LOGIN \"al ice\" \"p\\\"w\\\\\"\r\n");
    assert_eq!(events, [login("x", "al ice", b"p\"w\\")]);

    // A synchronizing literal waits for the switch's continuation; a LITERAL+ one does not.
    let (out, events, _) = talk(cfg(), b"A001 LOGIN {5}\r\nalice {7+}\r\nse cret\r\n");
    assert_eq!(out, "+ Ready for literal data\r\n");
    assert_eq!(events, [login("A001", "alice", b"se cret")]);
}

#[test]
fn authenticate_plain() {
    // "\0tim\0tanstaaftanstaaf" (RFC 4616's example).
    let b64 = "AHRpbQB0YW5zdGFhZnRhbnN0YWFm";
    let (out, events, _) = talk(cfg(), format!("a AUTHENTICATE PLAIN {b64}\r\n").as_bytes());
    assert_eq!((out.as_str(), events), ("", vec![login("a", "tim", b"tanstaaftanstaaf")]));
    let (out, events, _) = talk(cfg(), format!("b authenticate plain\r\n{b64}\r\n").as_bytes());
    assert_eq!((out.as_str(), events), ("+ \r\n", vec![login("b", "tim", b"tanstaaftanstaaf")]));
    let (out, events, _) =
        talk(cfg(), b"c AUTHENTICATE PLAIN\r\n*\r\nd AUTHENTICATE PLAIN =\r\ne AUTHENTICATE CRAM-MD5\r\n");
    assert_eq!(
        out,
        "+ \r\nc BAD AUTHENTICATE cancelled\r\nd BAD Invalid SASL PLAIN response\r\n\
         e BAD Unsupported authentication mechanism\r\n"
    );
    assert!(events.is_empty());
    // An authorization identity is kept for the replay.
    let (_, events, _) = talk(cfg(), b"f AUTHENTICATE PLAIN YWRtaW4AdGltAHB3\r\n");
    let want = Credentials { authzid: "admin".into(), user: "tim".into(), password: Secret::new("pw") };
    assert_eq!(events, [Event::Login { tag: "f".into(), creds: want }]);
}

#[test]
fn errors_before_login() {
    let (out, events, _) =
        talk(cfg(), b"a SELECT INBOX\r\n+ LOGIN a b\r\nb LOGIN onlyuser\r\nc LOGIN {100}\r\nd\r\n");
    assert_eq!(
        out,
        "a BAD Command unknown or not valid before login\r\n* BAD Missing tag\r\n\
         b BAD Syntax: LOGIN user password\r\nc BAD Literal too big\r\n* BYE Too many errors\r\n"
    );
    assert_eq!(events, [Event::Close { reason: CloseReason::TooManyErrors }]);
    // A too-big LITERAL+ is skipped with the rest of its line.
    let big = format!("a LOGIN {{100+}}\r\n{} pw\r\nb NOOP\r\n", "x".repeat(100));
    let (out, _, _) = talk(cfg(), big.as_bytes());
    assert_eq!(out, "a BAD Literal too big\r\nb OK NOOP completed\r\n");
    let long = format!("a NOOP {}\r\nb NOOP\r\n", "x".repeat(300));
    let (out, events, _) = talk(cfg(), long.as_bytes());
    assert_eq!(
        (out.as_str(), events),
        ("* BYE Line too long\r\n", vec![Event::Close { reason: CloseReason::LineTooLong }])
    );
}

#[test]
fn starttls() {
    let mut front = Front::new(cfg());
    let (out, events) = run_imap(&mut front, b"a STARTTLS\r\nb LOGIN in jected\r\n", 0, stop_at_login);
    assert_eq!(
        (text(&out), events),
        ("a OK Begin TLS negotiation now\r\n".to_string(), vec![Event::StartTls])
    );
    assert!(front.tls_active() && front.buffered() == 0);
    let (out, _) = run_imap(&mut front, b"c CAPABILITY\r\nd STARTTLS\r\n", 0, stop_at_login);
    assert_eq!(
        text(&out),
        "* CAPABILITY IMAP4rev1 SASL-IR AUTH=PLAIN\r\nc OK CAPABILITY completed\r\n\
         d BAD STARTTLS not available\r\n"
    );
}

#[test]
fn failed_login_then_deny() {
    let mut front = Front::new(cfg());
    let mut out = Vec::new();
    front.feed(b"a LOGIN u p\r\nb LOGIN v q\r\n");
    assert!(matches!(front.poll(&mut out), Some(Event::Login { .. })));
    front.login_failed(b"a NO [AUTHENTICATIONFAILED] Authentication failed.\r\n", &mut out);
    assert!(matches!(front.poll(&mut out), Some(Event::Login { .. })));
    front.deny_login("not here", &mut out);
    assert_eq!(
        text(&out),
        "a NO [AUTHENTICATIONFAILED] Authentication failed.\r\nb NO [AUTHENTICATIONFAILED] not here\r\n"
    );
}

/// Feeds each server chunk in turn: what the replay wrote after each, and the outcome.
fn replay(tag: &str, creds: &Credentials, server: &[&str]) -> (Vec<String>, Option<Outcome>) {
    let mut r = Replay::new(ReplayConfig::default(), tag, creds);
    let (mut sent, mut outcome) = (Vec::new(), None);
    for chunk in server {
        let mut out = Vec::new();
        if let Some(o) = r.feed(chunk.as_bytes(), &mut out) {
            outcome = Some(o);
        }
        sent.push(text(&out));
    }
    (sent, outcome)
}

#[test]
fn replay_login_with_the_client_tag() {
    let server = [
        "* OK [CAPABILITY IMAP4rev1 LITERAL+ AUTH=PLAIN] Dovecot ready.\r\n",
        "* CAPABILITY IMAP4rev1 IDLE\r\nA7 OK [CAPABILITY IMAP4rev1 IDLE] Logged in\r\n",
    ];
    let (sent, outcome) = replay("A7", &creds("al\"ice", b"p w"), &server);
    assert_eq!(sent, ["A7 LOGIN \"al\\\"ice\" \"p w\"\r\n", ""]);
    assert_eq!(outcome, Some(Outcome::LoggedIn { to_client: server[1].as_bytes().to_vec() }));
}

#[test]
fn replay_literals() {
    // Not printable ASCII: a literal; without LITERAL+ it waits for "+".
    let server = ["* OK ready\r\n", "+ go\r\n", "t OK done\r\n"];
    let (sent, outcome) = replay("t", &creds("jürgen", b"pa\"ss"), &server);
    assert_eq!(sent, ["t LOGIN {7}\r\n", "jürgen \"pa\\\"ss\"\r\n", ""]);
    assert!(matches!(outcome, Some(Outcome::LoggedIn { .. })));
    let (sent, _) =
        replay("t", &creds("u", "pä".as_bytes()), &["* OK [CAPABILITY IMAP4rev1 LITERAL+] hi\r\n"]);
    assert_eq!(sent, ["t LOGIN \"u\" {3+}\r\npä\r\n"]);
    // Two literals: two waits.
    let (sent, _) = replay("t", &creds("ü", b"\x01"), &["* OK hi\r\n", "+ \r\n", "+ \r\n"]);
    assert_eq!(sent, ["t LOGIN {2}\r\n", "ü {1}\r\n", "\x01\r\n"]);
    // A literal in a server response is read as part of it.
    let server = ["* OK hi\r\n", "* ID (\"name\" {5}\r\nDo\r\nt)\r\nt OK in\r\n"];
    let (_, outcome) = replay("t", &creds("u", b"p"), &server);
    assert_eq!(outcome, Some(Outcome::LoggedIn { to_client: server[1].as_bytes().to_vec() }));
}

#[test]
fn replay_authenticate_plain() {
    let with_authzid =
        Credentials { authzid: "admin".into(), user: "tim".into(), password: Secret::new("pw") };
    let (sent, _) = replay("a", &with_authzid, &["* OK [CAPABILITY IMAP4rev1 SASL-IR AUTH=PLAIN] hi\r\n"]);
    assert_eq!(sent, ["a AUTHENTICATE PLAIN YWRtaW4AdGltAHB3\r\n"]);
    let (sent, outcome) = replay(
        "a",
        &creds("tim", b"pw"),
        &["* OK [CAPABILITY IMAP4rev1 LOGINDISABLED] hi\r\n", "+ \r\n", "a OK in\r\n"],
    );
    assert_eq!(sent, ["a AUTHENTICATE PLAIN\r\n", "AHRpbQBwdw==\r\n", ""]);
    assert!(matches!(outcome, Some(Outcome::LoggedIn { .. })));
}

#[test]
fn replay_refusals() {
    let (sent, outcome) = replay(
        "a1",
        &creds("u", b"p"),
        &["* OK hi\r\n", "a1 NO [AUTHENTICATIONFAILED] Authentication failed.\r\n"],
    );
    assert_eq!(sent[1], "cswitch-logout LOGOUT\r\n");
    assert_eq!(
        outcome,
        Some(Outcome::Refused {
            to_client: b"a1 NO [AUTHENTICATIONFAILED] Authentication failed.\r\n".to_vec(),
            cause: Cause::Rejected("a1 NO [AUTHENTICATIONFAILED] Authentication failed.".into()),
        })
    );
    let unavailable = b"a1 NO [UNAVAILABLE] mail server unavailable, try again later\r\n".to_vec();
    for (server, cause) in [
        (vec!["* PREAUTH hi\r\n"], Cause::Greeting("* PREAUTH hi".into())),
        (vec!["* BYE overloaded\r\n"], Cause::Greeting("* BYE overloaded".into())),
        (vec!["* OK hi\r\n", "* BYE going down\r\n"], Cause::Bye("* BYE going down".into())),
        (vec!["* OK hi\r\n", "zz OK what\r\n"], Cause::Protocol(ServerError::Malformed("zz OK what".into()))),
        (vec!["* OK hi\r\n", "+ more?\r\n"], Cause::Protocol(ServerError::Malformed("+ more?".into()))),
    ] {
        let (_, outcome) = replay("a1", &creds("u", b"p"), &server);
        assert_eq!(outcome, Some(Outcome::Refused { to_client: unavailable.clone(), cause }));
    }
}

#[test]
fn end_to_end_literal_user_rejected_then_logged_in() {
    let mut front = Front::new(cfg());
    let mut to_client = Vec::new();
    front.greeting(&mut to_client);
    let mut server_saw = Vec::new();
    front.feed(b"a1 LOGIN {5}\r\n");
    assert_eq!(front.poll(&mut to_client), None);
    front.feed(b"alice wrong\r\n");
    for (password, answer) in [
        (&b"wrong"[..], "NO [AUTHENTICATIONFAILED] Authentication failed."),
        (b"right", "OK [CAPABILITY IMAP4rev1 IDLE] Logged in"),
    ] {
        let Some(Event::Login { tag, creds }) = front.poll(&mut to_client) else { panic!() };
        assert_eq!((creds.user.as_str(), creds.password.expose()), ("alice", password));
        let mut r = Replay::new(ReplayConfig::default(), &tag, &creds);
        let mut to_server = Vec::new();
        assert_eq!(r.feed(b"* OK [CAPABILITY IMAP4rev1] ready\r\n", &mut to_server), None);
        let outcome = r.feed(format!("{tag} {answer}\r\n").as_bytes(), &mut to_server).unwrap();
        server_saw.extend(to_server);
        match outcome {
            Outcome::Refused { to_client: bytes, .. } => {
                front.login_failed(&bytes, &mut to_client);
                front.feed(b"a2 LOGIN alice right\r\na3 SELECT INBOX\r\n");
            }
            Outcome::LoggedIn { to_client: bytes } => to_client.extend(bytes),
        }
    }
    assert_eq!(front.tunnel(), b"a3 SELECT INBOX\r\n");
    assert_eq!(
        text(&server_saw),
        "a1 LOGIN \"alice\" \"wrong\"\r\ncswitch-logout LOGOUT\r\na2 LOGIN \"alice\" \"right\"\r\n"
    );
    assert_eq!(
        text(&to_client),
        "* OK [CAPABILITY IMAP4rev1 SASL-IR AUTH=PLAIN STARTTLS] imap.switch.example ready\r\n\
         + Ready for literal data\r\n\
         a1 NO [AUTHENTICATIONFAILED] Authentication failed.\r\n\
         a2 OK [CAPABILITY IMAP4rev1 IDLE] Logged in\r\n"
    );
}
