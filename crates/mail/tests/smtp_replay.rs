//! The server-facing SMTP replay and relay against scripted servers.

#![allow(clippy::unwrap_used)]

mod common;

use common::text;
use mail::smtp::{
    Body, Cause, ClientInfo, Envelope, MailParams, Mailbox, Outcome, Replay, ReplayConfig, Reply,
};
use mail::ServerError;

fn mb(s: &str) -> Mailbox {
    Mailbox::parse(s).unwrap()
}

fn envelope(params: MailParams) -> Envelope {
    Envelope { helo: "client.example".to_string(), esmtp: true, from: Some(mb("alice@a.example")), params }
}

fn client() -> Option<ClientInfo> {
    Some(ClientInfo { addr: "192.0.2.7:40000".parse().unwrap(), name: None })
}

/// What the caller relays after each answered RCPT.
#[derive(Clone, Copy)]
enum Next {
    Rcpt(&'static str),
    Data,
}

/// Runs the replay for first recipient bob@b.example over `chunks` of server bytes, sending
/// the `next` command after each [`Outcome::Rcpt`]; what the replay wrote after each chunk,
/// and the outcomes. After a 354 the caller tunnels: later bytes join its `to_client`.
fn run(cfg: ReplayConfig, env: Envelope, chunks: &[&[u8]], next: &[Next]) -> (Vec<String>, Vec<Outcome>) {
    let mut replay = Replay::new(cfg, env, mb("bob@b.example"), client());
    let mut next = next.iter();
    let (mut sent, mut outcomes) = (Vec::new(), Vec::<Outcome>::new());
    for chunk in chunks {
        let mut out = Vec::new();
        if let Some(Outcome::Tunnel { to_client }) = outcomes.last_mut() {
            to_client.extend_from_slice(chunk);
        } else if let Some(outcome) = replay.feed(chunk, &mut out) {
            match (&outcome, next.next()) {
                (Outcome::Rcpt(_), Some(Next::Rcpt(to))) => replay.rcpt(&mb(to), &mut out),
                (Outcome::Rcpt(_), Some(Next::Data)) => replay.data(&mut out),
                _ => {}
            }
            outcomes.push(outcome);
        }
        sent.push(text(&out));
    }
    (sent, outcomes)
}

/// [`run`] on the server's chunks, checked against the same server side byte by byte.
fn script(cfg: ReplayConfig, env: Envelope, server: &[&str], next: &[Next]) -> (Vec<String>, Vec<Outcome>) {
    let chunks: Vec<&[u8]> = server.iter().map(|s| s.as_bytes()).collect();
    let (sent, outcomes) = run(cfg.clone(), env.clone(), &chunks, next);
    let whole = server.concat();
    let bytes: Vec<&[u8]> = whole.as_bytes().chunks(1).collect();
    let (sent1, outcomes1) = run(cfg, env, &bytes, next);
    assert_eq!(sent1.concat(), sent.concat());
    assert_eq!(outcomes1, outcomes);
    (sent, outcomes)
}

fn ok(text: &str) -> Outcome {
    Outcome::Rcpt(Reply::new(250, text))
}

const EHLO_FULL: &str =
    "250-mx.b.example\r\n250-PIPELINING\r\n250-SIZE 5000\r\n250-8BITMIME\r\n250 ENHANCEDSTATUSCODES\r\n";
const EHLO_BARE: &str = "250-mx.b.example\r\n250 8BITMIME\r\n";

#[test]
fn pipelining_server_gets_mail_and_the_first_rcpt_in_one_write_then_each_rcpt_live() {
    let params = MailParams { size: Some(100), body: Some(Body::EightBitMime) };
    let server = [
        "220 mx.b.example ESMTP\r\n",
        EHLO_FULL,
        "250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n",
        "250 2.1.5 Ok carol\r\n",
        "354 End data with <CR><LF>.<CR><LF>\r\n",
    ];
    let next = [Next::Rcpt("carol@b.example"), Next::Data];
    let (sent, outcomes) = script(ReplayConfig::default(), envelope(params), &server, &next);
    assert_eq!(
        sent,
        [
            "EHLO client.example\r\n",
            "MAIL FROM:<alice@a.example> SIZE=100 BODY=8BITMIME\r\nRCPT TO:<bob@b.example>\r\n",
            "RCPT TO:<carol@b.example>\r\n",
            "DATA\r\n",
            "",
        ]
    );
    assert_eq!(
        outcomes,
        [
            ok("2.1.5 Ok"),
            ok("2.1.5 Ok carol"),
            Outcome::Tunnel { to_client: b"354 End data with <CR><LF>.<CR><LF>\r\n".to_vec() }
        ]
    );
}

#[test]
fn lock_step_without_pipelining_and_parameters_only_when_offered() {
    let params = MailParams { size: Some(100), body: Some(Body::SevenBit) };
    let server = [
        "220 mx\r\n",
        "250-mx\r\n250 HELP\r\n",
        "250 ok\r\n",
        "250 ok\r\n",
        "251 will forward\r\n",
        "354 go\r\n",
    ];
    let next = [Next::Rcpt("carol@b.example"), Next::Data];
    let (sent, outcomes) = script(ReplayConfig::default(), envelope(params), &server, &next);
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
    assert_eq!(outcomes[..2], [ok("ok"), Outcome::Rcpt(Reply::new(251, "will forward"))]);
    assert!(matches!(outcomes[2], Outcome::Tunnel { .. }));
}

#[test]
fn refused_recipients_are_answered_verbatim_and_the_transaction_goes_on() {
    let server = [
        "220 mx\r\n",
        EHLO_FULL,
        "250 2.1.0 Ok\r\n550 5.1.1 <bob@b.example>: User unknown\r\n",
        "250 2.1.5 Ok\r\n",
        "550-5.1.1 <nobody@b.example>: User unknown\r\n550 5.1.1 in virtual mailbox table\r\n",
        "452 4.5.3 Too many recipients\r\n",
        "354 go\r\n",
    ];
    let next = [
        Next::Rcpt("carol@b.example"),
        Next::Rcpt("nobody@b.example"),
        Next::Rcpt("dave@b.example"),
        Next::Data,
    ];
    let (sent, outcomes) = script(ReplayConfig::default(), envelope(MailParams::default()), &server, &next);
    assert_eq!(
        sent[2..6],
        [
            "RCPT TO:<carol@b.example>\r\n",
            "RCPT TO:<nobody@b.example>\r\n",
            "RCPT TO:<dave@b.example>\r\n",
            "DATA\r\n"
        ]
    );
    let multi = Reply {
        code: 550,
        lines: vec!["5.1.1 <nobody@b.example>: User unknown".into(), "5.1.1 in virtual mailbox table".into()],
    };
    assert_eq!(
        outcomes[..4],
        [
            Outcome::Rcpt(Reply::new(550, "5.1.1 <bob@b.example>: User unknown")),
            ok("2.1.5 Ok"),
            Outcome::Rcpt(multi.clone()),
            Outcome::Rcpt(Reply::new(452, "4.5.3 Too many recipients")),
        ]
    );
    assert_eq!(
        multi.to_bytes(),
        b"550-5.1.1 <nobody@b.example>: User unknown\r\n550 5.1.1 in virtual mailbox table\r\n",
        "the client gets the lines as the server sent them"
    );
    assert!(matches!(outcomes[4], Outcome::Tunnel { .. }));
}

#[test]
fn a_421_to_a_rcpt_ends_the_relay_with_451() {
    let server = ["220 mx\r\n", EHLO_FULL, "250 Ok\r\n250 Ok\r\n", "421 4.3.2 shutting down\r\n"];
    let (sent, outcomes) = script(
        ReplayConfig::default(),
        envelope(MailParams::default()),
        &server,
        &[Next::Rcpt("c@b.example")],
    );
    assert_eq!(sent[3], "QUIT\r\n");
    assert_eq!(
        outcomes[1],
        Outcome::Refused {
            reply: Reply::new(451, "4.3.2 shutting down"),
            cause: Cause::Closing(Reply::new(421, "4.3.2 shutting down"))
        }
    );
}

#[test]
fn xclient_when_offered_then_a_new_ehlo() {
    let env = envelope(MailParams::default());
    let ehlo = "250-mx\r\n250-XCLIENT NAME ADDR PROTO HELO LOGIN\r\n250 PIPELINING\r\n";
    let server = ["220 mx\r\n", ehlo, "220 mx ESMTP\r\n", ehlo, "250 ok\r\n250 ok\r\n", "354 go\r\n"];
    let (sent, _) = script(ReplayConfig::default(), env.clone(), &server, &[Next::Data]);
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
    let (sent, outcomes) = script(ReplayConfig::default(), env.clone(), &server, &[Next::Data]);
    assert_eq!(sent[2], "MAIL FROM:<alice@a.example>\r\nRCPT TO:<bob@b.example>\r\n");
    assert!(matches!(outcomes[..], [Outcome::Rcpt(_), Outcome::Tunnel { .. }]));

    // Disabled in the config.
    let cfg = ReplayConfig { xclient: false, ..ReplayConfig::default() };
    let (sent, _) = script(cfg, env.clone(), &server[..2], &[]);
    assert!(sent[1].starts_with("MAIL FROM:"));

    // IPv6, a name with characters xtext must escape, the PORT attribute.
    let ehlo6 = "250-mx\r\n250 XCLIENT ADDR NAME PORT\r\n";
    let client6 = ClientInfo { addr: "[2001:db8::7]:2525".parse().unwrap(), name: Some("h+st".into()) };
    let mut replay = Replay::new(ReplayConfig::default(), env, mb("bob@b.example"), Some(client6));
    let mut out = Vec::new();
    replay.feed(format!("220 mx\r\n{ehlo6}").as_bytes(), &mut out);
    assert!(
        text(&out).ends_with("XCLIENT NAME=h+2Bst ADDR=IPV6:2001:db8::7 PORT=2525\r\n"),
        "{}",
        text(&out)
    );
}

#[test]
fn unavailable_servers_get_451() {
    let env = envelope(MailParams::default());
    let cases: Vec<(Vec<&str>, Cause)> = vec![
        (vec!["421 4.3.2 busy\r\n"], Cause::Greeting(Reply::new(421, "4.3.2 busy"))),
        (vec!["554 no service\r\n"], Cause::Greeting(Reply::new(554, "no service"))),
        (vec!["220 mx\r\n", "421 closing\r\n"], Cause::Hello(Reply::new(421, "closing"))),
        (vec!["220 mx\r\n", "502 no\r\n", "501 nope\r\n"], Cause::Hello(Reply::new(501, "nope"))),
        (
            vec!["HTTP/1.1 400 Bad Request\r\n"],
            Cause::Protocol(ServerError::Malformed("HTTP/1.1 400 Bad Request".into())),
        ),
        (
            vec!["220 mx\r\n", EHLO_FULL, "250 ok\r\n354 what\r\n"],
            Cause::Protocol(ServerError::Malformed("RCPT answered 354".into())),
        ),
    ];
    for (server, want) in cases {
        let (sent, outcomes) = script(ReplayConfig::default(), env.clone(), &server, &[]);
        assert!(sent.last().unwrap().ends_with("QUIT\r\n"));
        let unavailable = Reply::new(451, "4.4.0 Mail server temporarily unavailable; try again later");
        assert_eq!(outcomes, [Outcome::Refused { reply: unavailable, cause: want }]);
    }
    let cfg = ReplayConfig { max_line: 64, ..ReplayConfig::default() };
    let (_, outcomes) = script(cfg, env.clone(), &[&format!("220 {}\r\n", "x".repeat(100))], &[]);
    assert!(matches!(
        outcomes[..],
        [Outcome::Refused { cause: Cause::Protocol(ServerError::LineTooLong(64)), .. }]
    ));
    let mut replay = Replay::new(ReplayConfig::default(), env, mb("bob@b.example"), None);
    let mut out = Vec::new();
    assert!(
        matches!(replay.server_gone("gone", &mut out), Outcome::Refused { reply, .. } if reply.code == 451)
    );
}

#[test]
fn a_server_that_answers_what_was_not_asked_is_dropped() {
    // Two replies to the one RCPT in flight.
    let mut replay =
        Replay::new(ReplayConfig::default(), envelope(MailParams::default()), mb("bob@b.example"), None);
    let mut out = Vec::new();
    let got =
        replay.feed(format!("220 mx\r\n{EHLO_FULL}250 ok\r\n250 ok\r\n250 more\r\n").as_bytes(), &mut out);
    assert!(matches!(got, Some(Outcome::Refused { reply, cause: Cause::Protocol(_) }) if reply.code == 451));
    assert!(text(&out).ends_with("QUIT\r\n"));
    // A reply while idle.
    let mut replay =
        Replay::new(ReplayConfig::default(), envelope(MailParams::default()), mb("bob@b.example"), None);
    let mut out = Vec::new();
    let got = replay.feed(format!("220 mx\r\n{EHLO_FULL}250 ok\r\n250 ok\r\n").as_bytes(), &mut out);
    assert_eq!(got, Some(ok("ok")));
    assert!(matches!(
        replay.feed(b"250 unasked\r\n", &mut out),
        Some(Outcome::Refused { cause: Cause::Protocol(_), .. })
    ));
}

#[test]
fn helo_fallback() {
    let env = envelope(MailParams { size: Some(5), body: None });
    let server = ["220 mx\r\n", "500 what\r\n", "250 mx\r\n", "250 ok\r\n", "250 ok\r\n", "354 go\r\n"];
    let (sent, outcomes) = script(ReplayConfig::default(), env, &server, &[Next::Data]);
    assert_eq!(
        sent[1..4],
        ["HELO client.example\r\n", "MAIL FROM:<alice@a.example>\r\n", "RCPT TO:<bob@b.example>\r\n"]
    );
    assert!(matches!(outcomes[..], [Outcome::Rcpt(_), Outcome::Tunnel { .. }]));
}

#[test]
fn sender_data_and_8bit_refusals() {
    let env = envelope(MailParams::default());
    // The sender's refusal answers the pending RCPT (553 is valid there); the pipelined
    // RCPT's answer that follows is ignored.
    let server = ["220 mx\r\n", EHLO_FULL, "553 5.7.1 sender rejected\r\n503 5.5.1 need MAIL\r\n"];
    let (sent, outcomes) = script(ReplayConfig::default(), env.clone(), &server, &[]);
    assert_eq!(sent[2], "QUIT\r\n");
    assert_eq!(
        outcomes,
        [Outcome::Refused {
            reply: Reply::new(553, "5.7.1 sender rejected"),
            cause: Cause::Sender(Reply::new(553, "5.7.1 sender rejected"))
        }]
    );

    let server = ["220 mx\r\n", EHLO_FULL, "250 ok\r\n250 ok\r\n", "452 4.3.1 out of disk\r\n"];
    let (sent, outcomes) = script(ReplayConfig::default(), env, &server, &[Next::Data]);
    assert_eq!(sent[3], "QUIT\r\n");
    assert!(
        matches!(&outcomes[1], Outcome::Refused { reply, cause: Cause::Data(_) } if *reply == Reply::new(452, "4.3.1 out of disk"))
    );

    let eight = envelope(MailParams { size: None, body: Some(Body::EightBitMime) });
    let (_, outcomes) =
        script(ReplayConfig::default(), eight, &["220 mx\r\n", "250-mx\r\n250 PIPELINING\r\n"], &[]);
    assert_eq!(
        outcomes,
        [Outcome::Refused {
            reply: Reply::new(550, "5.6.3 The mail server cannot take 8-bit messages"),
            cause: Cause::EightBit
        }]
    );
}

#[test]
fn null_sender_and_a_server_that_talks_after_354() {
    let mut env = envelope(MailParams::default());
    env.from = None;
    let (sent, outcomes) = script(
        ReplayConfig::default(),
        env,
        &["220 mx\r\n", EHLO_BARE, "250 ok\r\n", "250 ok\r\n", "354 go\r\nextra"],
        &[Next::Data],
    );
    assert_eq!(sent[1..3], ["MAIL FROM:<>\r\n", "RCPT TO:<bob@b.example>\r\n"]);
    assert_eq!(outcomes[1], Outcome::Tunnel { to_client: b"354 go\r\nextra".to_vec() });
}

#[test]
fn quit_and_nothing_after_the_end() {
    let env = envelope(MailParams::default());
    let mut replay = Replay::new(ReplayConfig::default(), env.clone(), mb("bob@b.example"), None);
    let mut out = Vec::new();
    assert!(replay.feed(b"421 bye\r\n", &mut out).is_some());
    assert_eq!(replay.feed(b"220 hello\r\n", &mut out), None);
    replay.quit(&mut out);
    assert_eq!(text(&out), "QUIT\r\n", "QUIT once");

    // The client reset the transaction while the server waited for the next command.
    let mut replay = Replay::new(ReplayConfig::default(), env, mb("bob@b.example"), None);
    let mut out = Vec::new();
    let got = replay.feed(format!("220 mx\r\n{EHLO_FULL}250 ok\r\n250 ok\r\n").as_bytes(), &mut out);
    assert_eq!(got, Some(ok("ok")));
    out.clear();
    replay.quit(&mut out);
    replay.quit(&mut out);
    assert_eq!(text(&out), "QUIT\r\n");
    assert_eq!(replay.feed(b"221 bye\r\n", &mut out), None);
}

#[test]
fn a_callers_helo_cannot_inject_commands() {
    let mut env = envelope(MailParams::default());
    env.helo = "evil\r\nRSET".to_string();
    let (sent, _) = script(ReplayConfig::default(), env, &["220 mx\r\n"], &[]);
    assert_eq!(sent, ["EHLO evilRSET\r\n"]);
}
