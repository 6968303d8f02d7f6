//! The client-facing SMTP dialogue: every reply the switch gives by itself.

#![allow(clippy::unwrap_used)]

mod common;

use common::{accept_all, run_smtp, smtp_config, text, Flow};
use mail::smtp::{Body, Event, Front, FrontConfig, MailParams, Mailbox, Reply};
use mail::CloseReason;

fn mb(s: &str) -> Mailbox {
    Mailbox::parse(s).unwrap()
}

/// Runs `input` with `accept_all` whole and byte by byte, checks both agree, returns one.
fn talk(cfg: FrontConfig, input: &str) -> (String, Vec<Event>) {
    let mut whole = Front::new(cfg.clone());
    let (out, events) = run_smtp(&mut whole, input.as_bytes(), 0, accept_all);
    let mut bytewise = Front::new(cfg);
    let (out1, events1) = run_smtp(&mut bytewise, input.as_bytes(), 1, accept_all);
    assert_eq!(text(&out), text(&out1));
    assert_eq!(events, events1);
    (text(&out), events)
}

/// The replies to `commands` after an EHLO, one line each.
fn replies_after_ehlo(commands: &str) -> Vec<String> {
    let (out, _) = talk(smtp_config(), &format!("EHLO c.example\r\n{commands}"));
    out.lines().skip(5).map(str::to_string).collect()
}

#[test]
fn greeting_ehlo_and_a_transaction() {
    let cfg = smtp_config();
    let mut front = Front::new(cfg.clone());
    let mut out = Vec::new();
    front.greeting(&mut out);
    assert_eq!(text(&out), "220 mx.switch.example ESMTP ready\r\n");
    let input = "EHLO client.example\r\nMAIL FROM:<Alice@A.example> SIZE=10 BODY=8BITMIME\r\n\
                 RCPT TO:<bob@B.example>\r\nDATA\r\nSubject: hi\r\n";
    let (mut out, events) = run_smtp(&mut front, input.as_bytes(), 0, accept_all);
    assert_eq!(
        text(&out),
        "250-mx.switch.example\r\n250-PIPELINING\r\n250-SIZE 1000\r\n250-8BITMIME\r\n\
         250 ENHANCEDSTATUSCODES\r\n250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n"
    );
    let params = MailParams { size: Some(10), body: Some(Body::EightBitMime) };
    assert_eq!(
        events,
        vec![
            Event::Helo { name: "client.example".into(), extended: true },
            Event::Mail { from: Some(mb("Alice@A.example")), params },
            Event::Rcpt { to: mb("bob@B.example") },
            Event::Data,
        ]
    );
    let env = front.envelope().unwrap();
    assert_eq!((env.helo.as_str(), env.esmtp), ("client.example", true));
    assert_eq!(front.rcpts(), [mb("bob@B.example")]);
    assert_eq!(front.rcpts()[0].domain_lowercase(), "b.example");
    assert_eq!(front.poll(&mut out), None, "nothing happens while DATA is pending");
    assert_eq!(front.tunnel(), b"Subject: hi\r\n");
}

#[test]
fn helo_and_the_null_path() {
    let (out, events) = talk(
        smtp_config(),
        "HELO old.example\r\nMAIL FROM:<> SIZE=5\r\nMAIL FROM:<>\r\nRCPT TO:<Postmaster>\r\n",
    );
    assert_eq!(
        out,
        "250 mx.switch.example\r\n555 5.5.4 Parameters need EHLO\r\n250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n"
    );
    assert!(events.contains(&Event::Mail { from: None, params: MailParams::default() }));
    match events.last() {
        Some(Event::Rcpt { to }) => {
            assert_eq!(
                (to.to_string(), to.domain(), to.to_path()),
                ("Postmaster".into(), "", "<Postmaster>".into())
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn pipelined_decisions_are_answered_in_order() {
    let input = "EHLO c.example\r\nMAIL FROM:<s@a.example>\r\nRCPT TO:<ok@b.example>\r\n\
                 RCPT TO:<deny@b.example>\r\nRCPT TO:<other@c.example>\r\nNOOP\r\nDATA\r\n";
    let decide = |event: &Event, front: &mut Front, out: &mut Vec<u8>| {
        match event {
            Event::Mail { .. } => front.accept_mail(out),
            Event::Rcpt { to } if to.local() == "deny" => {
                front.reject_rcpt(550, "5.7.1 Rejected by policy", out)
            }
            Event::Rcpt { to } if to.domain() == "c.example" => front.defer_rcpt(out),
            Event::Rcpt { .. } => front.answer_rcpt(&Reply::new(250, "2.1.5 Ok"), out),
            Event::Data => return Flow::Stop,
            _ => {}
        }
        Flow::Continue
    };
    for size in [0, 1, 7] {
        let mut front = Front::new(smtp_config());
        let (out, events) = run_smtp(&mut front, input.as_bytes(), size, decide);
        let out = text(&out);
        assert!(
            out.ends_with(
                "250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n550 5.7.1 Rejected by policy\r\n\
             451 4.3.0 send this recipient in a separate transaction\r\n250 2.0.0 Ok\r\n"
            ),
            "{out}"
        );
        assert_eq!(events.last(), Some(&Event::Data));
        assert_eq!(front.rcpts(), [mb("ok@b.example")]);
    }
}

#[test]
fn sequence_errors() {
    assert_eq!(
        talk(smtp_config(), "MAIL FROM:<a@b>\r\nRCPT TO:<a@b>\r\nDATA\r\n").0,
        "503 5.5.1 Error: send HELO/EHLO first\r\n503 5.5.1 Error: need MAIL command\r\n\
         503 5.5.1 Error: need MAIL command\r\n"
    );
    assert_eq!(
        replies_after_ehlo("MAIL FROM:<a@b>\r\nMAIL FROM:<a@b>\r\nDATA\r\n"),
        ["250 2.1.0 Ok", "503 5.5.1 Error: nested MAIL command", "503 5.5.1 Error: need RCPT command"]
    );
    let mut front = Front::new(smtp_config());
    let input = b"EHLO c\r\nMAIL FROM:<a@b>\r\nRCPT TO:<x@y>\r\nDATA\r\n";
    let (out, _) = run_smtp(&mut front, input, 0, |event, front, out| {
        match event {
            Event::Mail { .. } => front.accept_mail(out),
            Event::Rcpt { .. } => front.reject_rcpt(550, "5.1.1 no", out),
            _ => {}
        }
        Flow::Continue
    });
    assert!(text(&out).ends_with("550 5.1.1 no\r\n554 5.5.1 Error: no valid recipients\r\n"));
}

#[test]
fn syntax_errors() {
    let long = format!("NOOP {}\r\n", "x".repeat(600));
    let cases: &[(&str, &str)] = &[
        ("EHLO\r\n", "501 5.5.4 Syntax: EHLO hostname"),
        ("MAIL <a@b>\r\n", "501 5.5.4 Syntax: MAIL FROM:<address>"),
        ("MAIL FROM:<a@@b>\r\n", "501 5.1.7 Bad sender address syntax"),
        ("MAIL FROM:<jörg@b.example>\r\n", "553 5.6.7 Non-ASCII address needs SMTPUTF8"),
        ("MAIL FROM:<a@b> SIZE=1001\r\n", "552 5.3.4 Message size exceeds fixed maximum message size"),
        ("MAIL FROM:<a@b> SMTPUTF8\r\n", "555 5.5.4 Unsupported option: SMTPUTF8"),
        ("MAIL FROM:<a@b> SIZE=x\r\n", "501 5.5.4 Syntax error in parameters"),
        ("RSET now\r\n", "501 5.5.4 Syntax: RSET"),
        ("DATA now\r\n", "501 5.5.4 Syntax: DATA"),
        ("VRFY\r\n", "501 5.5.4 Syntax: VRFY address"),
        (&long, "500 5.5.2 Line too long"),
        ("FOO bar\r\n", "500 5.5.2 Command unrecognized"),
        ("AUTH PLAIN AGFsaWNl\r\n", "502 5.5.1 Command not implemented"),
        ("STARTTLS\r\n", "502 5.5.1 Command not implemented"),
        ("NO\0OP\r\n", "500 5.5.2 Invalid characters in command"),
    ];
    for (command, reply) in cases {
        assert_eq!(replies_after_ehlo(command), [*reply], "{command:?}");
    }
    let rcpt_cases: &[(&str, &str)] = &[
        ("RCPT <x@y>\r\n", "501 5.5.4 Syntax: RCPT TO:<address>"),
        ("RCPT TO:<>\r\n", "501 5.1.3 Bad recipient address syntax"),
        ("RCPT TO:<x@y> NOTIFY=NEVER\r\n", "555 5.5.4 Unsupported RCPT option"),
    ];
    for (command, reply) in rcpt_cases {
        let got = replies_after_ehlo(&format!("MAIL FROM:<a@b>\r\n{command}"));
        assert_eq!(got, ["250 2.1.0 Ok", reply], "{command:?}");
    }
}

#[test]
fn invalid_utf8_and_bare_lf_are_handled() {
    let mut front = Front::new(smtp_config());
    let (out, _) = run_smtp(&mut front, b"EHLO c\nNOOP\n\xff\xfe\r\nNOOP\r\n", 0, accept_all);
    assert!(
        text(&out).ends_with("250 2.0.0 Ok\r\n500 5.5.2 Invalid characters in command\r\n250 2.0.0 Ok\r\n")
    );
}

#[test]
fn simple_commands() {
    assert_eq!(
        replies_after_ehlo("NOOP\r\nHELP\r\nVRFY bob\r\nRSET\r\nQUIT\r\nNOOP\r\n"),
        [
            "250 2.0.0 Ok",
            "214 2.0.0 See RFC 5321",
            "252 2.5.0 Cannot VRFY user, but will accept message and attempt delivery",
            "250 2.0.0 Ok",
            "221 2.0.0 Bye",
        ]
    );
    let (_, events) = talk(smtp_config(), "EHLO c\r\nRSET\r\nQUIT\r\n");
    assert_eq!(events[1..], [Event::Reset, Event::Quit]);
}

#[test]
fn too_many_recipients_get_452_without_asking() {
    let rcpts: String = (0..5).map(|i| format!("RCPT TO:<r{i}@b.example>\r\n")).collect();
    let (out, events) = talk(smtp_config(), &format!("EHLO c\r\nMAIL FROM:<a@b>\r\n{rcpts}"));
    assert_eq!(events.iter().filter(|e| matches!(e, Event::Rcpt { .. })).count(), 3);
    assert_eq!(out.matches("452 4.5.3 Error: too many recipients\r\n").count(), 2);
}

#[test]
fn too_many_errors_close_with_421() {
    let cfg = FrontConfig { max_errors: 3, ..smtp_config() };
    let (out, events) = talk(cfg, "FOO\r\nBAR\r\nBAZ\r\nNOOP\r\n");
    assert_eq!(
        out,
        "500 5.5.2 Command unrecognized\r\n500 5.5.2 Command unrecognized\r\n\
         421 4.7.0 mx.switch.example Error: too many errors\r\n"
    );
    assert_eq!(events, [Event::Close { reason: CloseReason::TooManyErrors }]);
}

#[test]
fn bdat_is_refused_and_its_chunk_skipped() {
    let replies = replies_after_ehlo("BDAT 12 LAST\r\nNOOP\r\nNOOP\r\nNOOP\r\nBDAT x\r\n");
    assert_eq!(
        replies,
        [
            "502 5.5.1 BDAT not implemented: CHUNKING is not offered",
            "250 2.0.0 Ok",
            "501 5.5.4 Syntax: BDAT size [LAST]"
        ]
    );
}

#[test]
fn starttls_discards_pipelined_plaintext_and_resets() {
    let cfg = FrontConfig { starttls: true, ..smtp_config() };
    let mut front = Front::new(cfg);
    let input = b"EHLO c\r\nSTARTTLS\r\nMAIL FROM:<injected@x>\r\n";
    let (out, events) = run_smtp(&mut front, input, 0, accept_all);
    let out = text(&out);
    assert!(out.contains("250 STARTTLS\r\n") && out.ends_with("220 2.0.0 Ready to start TLS\r\n"), "{out}");
    assert_eq!(events.last(), Some(&Event::StartTls));
    assert!(front.tls_active() && front.helo().is_none() && front.buffered() == 0);
    let (out, _) = run_smtp(&mut front, b"MAIL FROM:<a@b>\r\nEHLO c\r\nSTARTTLS\r\n", 0, accept_all);
    let out = text(&out);
    assert!(out.starts_with("503 5.5.1 Error: send HELO/EHLO first\r\n"), "{out}");
    assert!(!out.contains("STARTTLS") && out.ends_with("503 5.5.1 Error: TLS already active\r\n"), "{out}");
}

#[test]
fn starttls_inside_a_transaction_is_refused() {
    let cfg = FrontConfig { starttls: true, ..smtp_config() };
    let (out, _) = talk(cfg, "EHLO c\r\nMAIL FROM:<a@b>\r\nSTARTTLS x\r\nSTARTTLS\r\n");
    assert!(out.ends_with("501 5.5.4 Syntax: STARTTLS\r\n503 5.5.1 Error: MAIL transaction in progress\r\n"));
}

#[test]
fn later_transactions_and_a_failed_data() {
    let mut front = Front::new(smtp_config());
    let input = b"EHLO c\r\nMAIL FROM:<a@b>\r\nRCPT TO:<one@x>\r\nRSET\r\n\
                  MAIL FROM:<a@b>\r\nRCPT TO:<two@x>\r\nDATA\r\nMAIL FROM:<c@d>\r\n";
    let (_, events) = run_smtp(&mut front, input, 1, accept_all);
    assert!(events.contains(&Event::Reset));
    assert_eq!(front.rcpts(), [mb("two@x")]);
    let mut out = Vec::new();
    front.data_failed(&Reply::new(451, "4.3.0 try again"), &mut out);
    assert_eq!(text(&out), "451 4.3.0 try again\r\n");
    assert_eq!(front.envelope(), None, "the transaction ended");
    assert_eq!(
        front.poll(&mut out),
        Some(Event::Mail { from: Some(mb("c@d")), params: MailParams::default() })
    );
}

#[test]
fn reject_mail_and_odd_codes() {
    let mut front = Front::new(smtp_config());
    let (out, _) = run_smtp(
        &mut front,
        b"EHLO c\r\nMAIL FROM:<spam@bad.example>\r\nMAIL FROM:<x@y>\r\n",
        0,
        |e, f, o| {
            if let Event::Mail { from: Some(from), .. } = e {
                if from.domain() == "bad.example" {
                    f.reject_mail(250, "5.7.1 go away\r\nfake: header", o);
                } else {
                    f.accept_mail(o);
                }
            }
            Flow::Continue
        },
    );
    assert!(text(&out).ends_with("550 5.7.1 go away  fake: header\r\n250 2.1.0 Ok\r\n"));
}

#[test]
fn size_zero_means_no_limit() {
    let cfg = FrontConfig { max_size: 0, ..smtp_config() };
    let (out, _) = talk(cfg, "EHLO c\r\nMAIL FROM:<a@b> SIZE=999999999\r\n");
    assert!(out.contains("250-SIZE\r\n") && out.ends_with("250 2.1.0 Ok\r\n"));
}

#[test]
fn server_answers_to_rcpt_pass_verbatim() {
    let mut front = Front::new(smtp_config());
    let input =
        b"EHLO c\r\nMAIL FROM:<a@b>\r\nRCPT TO:<one@x>\r\nRCPT TO:<two@x>\r\nRCPT TO:<three@x>\r\nDATA\r\n";
    let answers = [
        Reply { code: 550, lines: vec!["5.1.1 <one@x>: unknown".into(), "5.1.1 try another".into()] },
        Reply::new(251, "2.1.5 will forward"),
        Reply::new(354, "odd"),
    ];
    let mut next = answers.iter();
    let (out, events) = run_smtp(&mut front, input, 0, |e, f, o| {
        match e {
            Event::Mail { .. } => f.accept_mail(o),
            Event::Rcpt { .. } => f.answer_rcpt(next.next().unwrap(), o),
            Event::Data => return Flow::Stop,
            _ => {}
        }
        Flow::Continue
    });
    assert!(
        text(&out).ends_with(
            "250 2.1.0 Ok\r\n550-5.1.1 <one@x>: unknown\r\n550 5.1.1 try another\r\n\
             251 2.1.5 will forward\r\n550 odd\r\n"
        ),
        "{}",
        text(&out)
    );
    assert_eq!(events.last(), Some(&Event::Data));
    assert_eq!(front.rcpts(), [mb("two@x")], "only the 2xx joined the transaction");
}
