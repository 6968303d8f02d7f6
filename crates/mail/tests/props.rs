//! Properties: any split of the input gives the same dialogue; every SMTP command gets
//! exactly one reply, in order; no input makes a state machine panic; what an IMAP replay
//! sends, an IMAP front reads back as the same credentials.

#![allow(clippy::unwrap_used)]

mod common;

use common::{accept_all, run_smtp, Flow};
use mail::imap::{self, Credentials};
use mail::smtp::{self, Event, Front, Reply};
use mail::{pop3, Secret};
use proptest::prelude::*;

const VOCABULARY: &[&str] = &[
    "EHLO client.example",
    "HELO client.example",
    "MAIL FROM:<a@b.example>",
    "MAIL FROM:<deny@b.example>",
    "MAIL FROM:<> SIZE=99999999",
    "MAIL FROM:<a@b.example> BODY=8BITMIME",
    "RCPT TO:<x@y.example>",
    "RCPT TO:<reject@y.example>",
    "RCPT TO:<refused@y.example>",
    "RCPT TO:<defer@y.example>",
    "RCPT TO:<bad",
    "DATA",
    "RSET",
    "NOOP",
    "VRFY x",
    "HELP",
    "FOO",
    "AUTH PLAIN",
    "STARTTLS",
    "",
    "QUIT",
];

/// A caller that decides by the local part (a "refused" recipient gets a two-line server
/// refusal) and fails every DATA, so the session goes on.
fn decide(event: &Event, front: &mut Front, out: &mut Vec<u8>) -> Flow {
    match event {
        Event::Mail { from: Some(f), .. } if f.local() == "deny" => front.reject_mail(550, "5.7.1 no", out),
        Event::Mail { .. } => front.accept_mail(out),
        Event::Rcpt { to } if to.local() == "reject" => front.reject_rcpt(550, "5.1.1 no", out),
        Event::Rcpt { to } if to.local() == "defer" => front.defer_rcpt(out),
        Event::Rcpt { to } if to.local() == "refused" => {
            front.answer_rcpt(&Reply { code: 550, lines: vec!["5.1.1 no".into(), "such user".into()] }, out)
        }
        Event::Rcpt { .. } => front.answer_rcpt(&Reply::new(250, "2.1.5 Ok"), out),
        Event::Data => front.data_failed(&Reply::new(451, "4.4.0 later"), out),
        _ => {}
    }
    Flow::Continue
}

/// The commands as one input, and how many of them get answered (all up to QUIT).
fn transcript(commands: &[usize], long: Option<usize>, bare_lf: &[bool]) -> (String, usize) {
    let mut input = String::new();
    let mut answered = 0;
    for (i, &c) in commands.iter().enumerate() {
        let line = if long == Some(i) { "NOOP ".repeat(120) } else { VOCABULARY[c].to_string() };
        input.push_str(&line);
        input.push_str(if bare_lf.get(i).copied().unwrap_or(false) { "\n" } else { "\r\n" });
        answered += 1;
        if line == "QUIT" {
            break;
        }
    }
    (input, answered)
}

fn split(input: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    cuts.sort_unstable();
    let mut parts = Vec::new();
    let mut start = 0;
    for c in cuts.into_iter().chain([input.len()]) {
        parts.push(input[start..c.max(start)].to_vec());
        start = c.max(start);
    }
    parts
}

fn smtp_cfg() -> smtp::FrontConfig {
    smtp::FrontConfig { max_errors: 1000, max_recipients: 2, ..Default::default() }
}

fn run_split(input: &[u8], cuts: &[usize]) -> (Vec<u8>, Vec<Event>) {
    let mut front = Front::new(smtp_cfg());
    let (mut out, mut events) = (Vec::new(), Vec::new());
    for part in split(input, cuts) {
        front.feed(&part);
        while let Some(e) = front.poll(&mut out) {
            decide(&e, &mut front, &mut out);
            events.push(e);
        }
    }
    (out, events)
}

proptest! {
    #[test]
    fn smtp_any_split_same_dialogue_one_reply_per_command(
        commands in prop::collection::vec(0..VOCABULARY.len(), 1..40),
        long in prop::option::of(0usize..40),
        bare_lf in prop::collection::vec(any::<bool>(), 0..40),
        cuts in prop::collection::vec(any::<usize>(), 0..20),
    ) {
        let (input, answered) = transcript(&commands, long, &bare_lf);
        let mut whole = Front::new(smtp_cfg());
        let (out, events) = run_smtp(&mut whole, input.as_bytes(), 0, decide);
        let (out1, events1) = run_split(input.as_bytes(), &cuts);
        prop_assert_eq!(&out, &out1);
        prop_assert_eq!(events, events1);
        let text = String::from_utf8(out).unwrap();
        prop_assert!(text.ends_with("\r\n") || text.is_empty());
        let finals = text.split("\r\n").filter(|l| l.len() >= 4 && l.as_bytes()[3] == b' ').count();
        prop_assert_eq!(finals, answered, "{}", text);
    }

    #[test]
    fn smtp_front_survives_any_bytes(
        input in prop::collection::vec(any::<u8>(), 0..2000),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let cfg = smtp::FrontConfig { max_line: 64, ..Default::default() };
        let mut front = Front::new(cfg);
        let mut out = Vec::new();
        for part in split(&input, &cuts) {
            front.feed(&part);
            while let Some(e) = front.poll(&mut out) {
                if accept_all(&e, &mut front, &mut out) == Flow::Stop {
                    front.data_failed(&Reply::new(451, "4.4.0 x"), &mut out);
                }
            }
        }
        let text = String::from_utf8(out).unwrap();
        for line in text.split_terminator("\r\n") {
            prop_assert!(line.len() >= 3 && line[..3].bytes().all(|b| b.is_ascii_digit()), "{:?}", line);
        }
    }

    #[test]
    fn replays_and_other_fronts_survive_any_bytes(input in prop::collection::vec(any::<u8>(), 0..1000)) {
        let env = smtp::Envelope {
            helo: "c".into(), esmtp: true, from: None, params: smtp::MailParams::default(),
        };
        let mut out = Vec::new();
        let first = smtp::Mailbox::parse("a@b").unwrap();
        let mut replay = smtp::Replay::new(smtp::ReplayConfig::default(), env, first, None);
        for b in input.chunks(7) {
            replay.feed(b, &mut out);
        }
        let mut pop = pop3::Replay::new(pop3::ReplayConfig::default(), "u", &Secret::new("p"));
        pop.feed(&input, &mut out);
        let creds = Credentials { authzid: String::new(), user: "u".into(), password: Secret::new("p") };
        let mut imap_replay = imap::Replay::new(imap::ReplayConfig::default(), "t", &creds);
        imap_replay.feed(&input, &mut out);
        let mut pop_front = pop3::Front::new(pop3::FrontConfig::default());
        pop_front.feed(&input);
        while pop_front.poll(&mut out).is_some() {}
        let imap_cfg = imap::FrontConfig { max_line: 100, max_literal: 10, ..Default::default() };
        let mut imap_front = imap::Front::new(imap_cfg);
        for b in input.chunks(5) {
            imap_front.feed(b);
            while imap_front.poll(&mut out).is_some() {}
        }
    }

    #[test]
    fn imap_replay_is_read_back_by_the_front(
        user in "[^\u{0}]{1,20}",
        password in prop::collection::vec(any::<u8>(), 0..20),
        authzid in prop::option::of("[a-z]{1,8}"),
        literal_plus in any::<bool>(),
        chunk in 1usize..9,
    ) {
        let authzid = authzid.unwrap_or_default();
        let creds = Credentials { authzid, user, password: Secret::new(password) };
        let caps = if literal_plus { "IMAP4rev1 LITERAL+" } else { "IMAP4rev1" };
        let mut replay = imap::Replay::new(imap::ReplayConfig::default(), "T1", &creds);
        let mut front = imap::Front::new(imap::FrontConfig::default());
        let mut to_front = Vec::new();
        replay.feed(format!("* OK [CAPABILITY {caps}] hi\r\n").as_bytes(), &mut to_front);
        let mut rounds = 0;
        let event = loop {
            prop_assert!(rounds < 4, "too many round trips");
            rounds += 1;
            let mut answer = Vec::new();
            let mut event = None;
            for part in to_front.chunks(chunk) {
                front.feed(part);
                event = event.or_else(|| front.poll(&mut answer));
            }
            if let Some(event) = event {
                break event;
            }
            // The front asked for more ("+ …"): that is the server's continuation too.
            prop_assert!(answer.starts_with(b"+ "), "{:?}", String::from_utf8_lossy(&answer));
            to_front.clear();
            replay.feed(b"+ go\r\n", &mut to_front);
        };
        prop_assert_eq!(event, imap::Event::Login { tag: "T1".into(), creds });
    }

    #[test]
    fn pop3_any_split_same_dialogue(cuts in prop::collection::vec(any::<usize>(), 0..10)) {
        let input = b"CAPA\r\nXX\r\nUSER a@b\nNOOP\r\nPASS p w\r\nSTAT\r\n";
        let run = |parts: Vec<Vec<u8>>| {
            let mut front = pop3::Front::new(pop3::FrontConfig::default());
            let (mut out, mut events) = (Vec::new(), Vec::new());
            for p in parts {
                front.feed(&p);
                if events.is_empty() {
                    events.extend(front.poll(&mut out));
                }
            }
            (out, events, front.tunnel())
        };
        prop_assert_eq!(run(vec![input.to_vec()]), run(split(input, &cuts)));
    }
}
