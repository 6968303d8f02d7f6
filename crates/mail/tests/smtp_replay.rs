//! The server-facing SMTP replay against scripted servers.

#![allow(clippy::unwrap_used)]

mod common;

use common::text;
use mail::smtp::{
    Body, Cause, ClientInfo, Envelope, MailParams, Mailbox, Outcome, Replay, ReplayConfig, Reply,
};
use mail::ServerError;

fn envelope(rcpts: &[&str], params: MailParams) -> Envelope {
    Envelope {
        helo: "client.example".to_string(),
        esmtp: true,
        from: Some(Mailbox::parse("alice@a.example").unwrap()),
        params,
        rcpts: rcpts.iter().map(|r| Mailbox::parse(r).unwrap()).collect(),
    }
}

fn client() -> Option<ClientInfo> {
    Some(ClientInfo { addr: "192.0.2.7:40000".parse().unwrap(), name: None })
}

/// Feeds each server chunk in turn: what the replay wrote after each, and the outcome.
/// Also replays the whole server side byte by byte and checks it writes the same.
fn script(cfg: ReplayConfig, env: Envelope, server: &[&str]) -> (Vec<String>, Option<Outcome>) {
    let mut replay = Replay::new(cfg.clone(), env.clone(), client());
    let (mut sent, mut outcome) = (Vec::new(), None);
    for chunk in server {
        let mut out = Vec::new();
        let got = replay.feed(chunk.as_bytes(), &mut out);
        sent.push(text(&out));
        if got.is_some() {
            assert!(outcome.is_none(), "one outcome only");
            outcome = got;
        }
    }
    let mut bytewise = Replay::new(cfg, env, client());
    let (mut out, mut outcome1) = (Vec::new(), None);
    for b in server.concat().as_bytes() {
        match &mut outcome1 {
            // After the switch point the caller tunnels what the server says.
            Some(Outcome::Tunnel { to_client }) => to_client.push(*b),
            Some(_) => {}
            None => outcome1 = bytewise.feed(std::slice::from_ref(b), &mut out),
        }
    }
    assert_eq!(text(&out), sent.concat());
    assert_eq!(outcome1, outcome);
    (sent, outcome)
}

const EHLO_FULL: &str =
    "250-mx.b.example\r\n250-PIPELINING\r\n250-SIZE 5000\r\n250-8BITMIME\r\n250 ENHANCEDSTATUSCODES\r\n";
const EHLO_BARE: &str = "250-mx.b.example\r\n250 8BITMIME\r\n";

#[test]
fn pipelining_server_gets_the_envelope_in_one_write() {
    let params = MailParams { size: Some(100), body: Some(Body::EightBitMime) };
    let env = envelope(&["bob@b.example", "carol@b.example"], params);
    let server = [
        "220 mx.b.example ESMTP\r\n",
        EHLO_FULL,
        "250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n250 2.1.5 Ok\r\n",
        "354 End data with <CR><LF>.<CR><LF>\r\n",
    ];
    let (sent, outcome) = script(ReplayConfig::default(), env, &server);
    assert_eq!(
        sent,
        [
            "EHLO client.example\r\n",
            "MAIL FROM:<alice@a.example> SIZE=100 BODY=8BITMIME\r\n\
             RCPT TO:<bob@b.example>\r\nRCPT TO:<carol@b.example>\r\n",
            "DATA\r\n",
            "",
        ]
    );
    assert_eq!(
        outcome,
        Some(Outcome::Tunnel { to_client: b"354 End data with <CR><LF>.<CR><LF>\r\n".to_vec() })
    );
}

#[test]
fn lock_step_without_pipelining_and_parameters_only_when_offered() {
    let params = MailParams { size: Some(100), body: Some(Body::SevenBit) };
    let env = envelope(&["bob@b.example", "carol@b.example"], params);
    let server = [
        "220 mx\r\n",
        "250-mx\r\n250 HELP\r\n",
        "250 ok\r\n",
        "250 ok\r\n",
        "251 will forward\r\n",
        "354 go\r\n",
    ];
    let (sent, outcome) = script(ReplayConfig::default(), env, &server);
    assert_eq!(
        sent,
        [
            "EHLO client.example\r\n",
            "MAIL FROM:<alice@a.example>\r\n",
            "RCPT TO:<bob@b.example>\r\n",
            "RCPT TO:<carol@b.example>\r\n",
            "DATA\r\n",
            ""
        ]
    );
    assert!(matches!(outcome, Some(Outcome::Tunnel { .. })));
}

#[test]
fn xclient_when_offered_then_a_new_ehlo() {
    let env = envelope(&["bob@b.example"], MailParams::default());
    let ehlo = "250-mx\r\n250-XCLIENT NAME ADDR PROTO HELO LOGIN\r\n250 PIPELINING\r\n";
    let server = ["220 mx\r\n", ehlo, "220 mx ESMTP\r\n", ehlo, "250 ok\r\n250 ok\r\n", "354 go\r\n"];
    let (sent, _) = script(ReplayConfig::default(), env.clone(), &server);
    assert_eq!(sent[1], "XCLIENT NAME=[UNAVAILABLE] ADDR=192.0.2.7 PROTO=ESMTP HELO=client.example\r\n");
    assert_eq!(sent[2], "EHLO client.example\r\n");
    assert_eq!(sent[3], "MAIL FROM:<alice@a.example>\r\nRCPT TO:<bob@b.example>\r\n");

    // Not an authorized XCLIENT client: go on without it.
    let server = [
        "220 mx\r\n",
        ehlo,
        "550 5.7.0 insufficient authorization\r\n",
        "250 ok\r\n250 ok\r\n",
        "354 go\r\n",
    ];
    let (sent, outcome) = script(ReplayConfig::default(), env.clone(), &server);
    assert_eq!(sent[2], "MAIL FROM:<alice@a.example>\r\nRCPT TO:<bob@b.example>\r\n");
    assert!(matches!(outcome, Some(Outcome::Tunnel { .. })));

    // Disabled in the config.
    let cfg = ReplayConfig { xclient: false, ..ReplayConfig::default() };
    let (sent, _) = script(cfg, env.clone(), &server[..2]);
    assert!(sent[1].starts_with("MAIL FROM:"));

    // IPv6, a name with characters xtext must escape, the PORT attribute.
    let ehlo6 = "250-mx\r\n250 XCLIENT ADDR NAME PORT\r\n";
    let client6 = ClientInfo { addr: "[2001:db8::7]:2525".parse().unwrap(), name: Some("h+st".into()) };
    let mut replay = Replay::new(ReplayConfig::default(), env, Some(client6));
    let mut out = Vec::new();
    replay.feed(format!("220 mx\r\n{ehlo6}").as_bytes(), &mut out);
    assert!(
        text(&out).ends_with("XCLIENT NAME=h+2Bst ADDR=IPV6:2001:db8::7 PORT=2525\r\n"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_refused_recipient_stops_before_data() {
    let env = envelope(&["bob@b.example", "nobody@b.example"], MailParams::default());
    let server = [
        "220 mx\r\n",
        EHLO_FULL,
        "250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n550 5.1.1 <nobody@b.example>: User unknown\r\n",
    ];
    let (sent, outcome) = script(ReplayConfig::default(), env, &server);
    assert_eq!(sent[2], "QUIT\r\n", "no DATA");
    let Some(Outcome::Refused { reply, refused, cause }) = outcome else { panic!() };
    assert_eq!(cause, Cause::Recipients);
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].rcpt.to_string(), "nobody@b.example");
    assert_eq!(refused[0].reply.code, 550);
    assert_eq!(
        text(&reply.to_bytes()),
        "451-4.3.0 <nobody@b.example> refused: 550 5.1.1 <nobody@b.example>: User unknown\r\n\
         451 4.3.0 the mail server refused some recipients; send the message again\r\n"
    );
}

#[test]
fn all_recipients_refused() {
    let env = envelope(&["x@b.example", "y@b.example"], MailParams::default());
    let perm = "250 Ok\r\n550 5.1.1 no x\r\n553 5.1.3 no y\r\n";
    let (_, outcome) = script(ReplayConfig::default(), env.clone(), &["220 mx\r\n", EHLO_FULL, perm]);
    let Some(Outcome::Refused { reply, refused, .. }) = outcome else { panic!() };
    assert_eq!((reply.code, refused.len()), (554, 2));
    assert_eq!(reply.lines[2], "5.1.1 no valid recipients: the mail server refused them all");

    let mixed = "250 Ok\r\n550 5.1.1 no x\r\n450 4.2.1 later y\r\n";
    let (_, outcome) = script(ReplayConfig::default(), env, &["220 mx\r\n", EHLO_FULL, mixed]);
    let Some(Outcome::Refused { reply, .. }) = outcome else { panic!() };
    assert_eq!(reply.code, 451);
    assert!(reply.lines.iter().all(|l| l.starts_with("4.2.1 ")), "{reply:?}");
}

#[test]
fn unavailable_servers_get_451() {
    let env = envelope(&["bob@b.example"], MailParams::default());
    let cases: Vec<(Vec<&str>, Cause)> = vec![
        (vec!["421 4.3.2 busy\r\n"], Cause::Greeting(Reply::new(421, "4.3.2 busy"))),
        (vec!["554 no service\r\n"], Cause::Greeting(Reply::new(554, "no service"))),
        (vec!["220 mx\r\n", "421 closing\r\n"], Cause::Hello(Reply::new(421, "closing"))),
        (vec!["220 mx\r\n", "502 no\r\n", "501 nope\r\n"], Cause::Hello(Reply::new(501, "nope"))),
        (
            vec!["HTTP/1.1 400 Bad Request\r\n"],
            Cause::Protocol(ServerError::Malformed("HTTP/1.1 400 Bad Request".into())),
        ),
    ];
    for (server, want) in cases {
        let (sent, outcome) = script(ReplayConfig::default(), env.clone(), &server);
        assert!(sent.last().unwrap().ends_with("QUIT\r\n"));
        let Some(Outcome::Refused { reply, refused, cause }) = outcome else { panic!() };
        assert_eq!(reply, Reply::new(451, "4.4.0 Mail server temporarily unavailable; try again later"));
        assert!(refused.is_empty());
        assert_eq!(cause, want);
    }
    let cfg = ReplayConfig { max_line: 64, ..ReplayConfig::default() };
    let (_, outcome) = script(cfg, env, &[&format!("220 {}\r\n", "x".repeat(100))]);
    assert!(matches!(
        outcome,
        Some(Outcome::Refused { cause: Cause::Protocol(ServerError::LineTooLong(64)), .. })
    ));
}

#[test]
fn helo_fallback() {
    let env = envelope(&["bob@b.example"], MailParams { size: Some(5), body: None });
    let server = ["220 mx\r\n", "500 what\r\n", "250 mx\r\n", "250 ok\r\n", "250 ok\r\n", "354 go\r\n"];
    let (sent, outcome) = script(ReplayConfig::default(), env, &server);
    assert_eq!(sent[1], "HELO client.example\r\n");
    assert_eq!(sent[2], "MAIL FROM:<alice@a.example>\r\n");
    assert!(matches!(outcome, Some(Outcome::Tunnel { .. })));
}

#[test]
fn sender_data_and_8bit_refusals() {
    let env = envelope(&["bob@b.example"], MailParams::default());
    let (sent, outcome) = script(
        ReplayConfig::default(),
        env.clone(),
        &["220 mx\r\n", EHLO_FULL, "553 5.7.1 sender rejected\r\n"],
    );
    assert_eq!(sent[2], "QUIT\r\n");
    let Some(Outcome::Refused { reply, cause, .. }) = outcome else { panic!() };
    assert_eq!(reply, Reply::new(554, "5.7.1 sender rejected"));
    assert_eq!(cause, Cause::Sender(Reply::new(553, "5.7.1 sender rejected")));

    let server = ["220 mx\r\n", EHLO_FULL, "250 ok\r\n250 ok\r\n", "452 4.3.1 out of disk\r\n"];
    let (_, outcome) = script(ReplayConfig::default(), env, &server);
    let Some(Outcome::Refused { reply, cause: Cause::Data(_), .. }) = outcome else { panic!() };
    assert_eq!(reply, Reply::new(452, "4.3.1 out of disk"));

    let eight = envelope(&["bob@b.example"], MailParams { size: None, body: Some(Body::EightBitMime) });
    let (_, outcome) =
        script(ReplayConfig::default(), eight, &["220 mx\r\n", "250-mx\r\n250 PIPELINING\r\n"]);
    assert!(
        matches!(outcome, Some(Outcome::Refused { reply, cause: Cause::EightBit, .. }) if reply.code == 554)
    );
}

#[test]
fn null_sender_and_a_server_that_talks_after_354() {
    let mut env = envelope(&["bob@b.example"], MailParams::default());
    env.from = None;
    let (sent, outcome) = script(
        ReplayConfig::default(),
        env,
        &["220 mx\r\n", EHLO_BARE, "250 ok\r\n", "250 ok\r\n", "354 go\r\nextra"],
    );
    assert_eq!(sent[1..3], ["MAIL FROM:<>\r\n", "RCPT TO:<bob@b.example>\r\n"]);
    assert_eq!(outcome, Some(Outcome::Tunnel { to_client: b"354 go\r\nextra".to_vec() }));
}

#[test]
fn nothing_after_the_outcome() {
    let env = envelope(&["bob@b.example"], MailParams::default());
    let mut replay = Replay::new(ReplayConfig::default(), env, None);
    let mut out = Vec::new();
    assert!(replay.feed(b"421 bye\r\n", &mut out).is_some());
    assert_eq!(replay.feed(b"220 hello\r\n", &mut out), None);
    assert_eq!(text(&out), "QUIT\r\n");
}

#[test]
fn a_callers_helo_cannot_inject_commands() {
    let mut env = envelope(&["bob@b.example"], MailParams::default());
    env.helo = "evil\r\nRSET".to_string();
    let (sent, _) = script(ReplayConfig::default(), env, &["220 mx\r\n"]);
    assert_eq!(sent, ["EHLO evilRSET\r\n"]);
}
