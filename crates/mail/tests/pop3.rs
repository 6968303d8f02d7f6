//! POP3: the switch's own dialogue, the login replay, and a whole session in memory.

#![allow(clippy::unwrap_used)]

mod common;

use common::{run_pop3, stop_at_login, text};
use mail::pop3::{Cause, Event, Front, FrontConfig, Outcome, Replay, ReplayConfig};
use mail::{domain_of, CloseReason, Secret, ServerError};

fn cfg() -> FrontConfig {
    FrontConfig { hostname: "pop.switch.example".into(), stls: true, max_line: 100, max_errors: 4 }
}

fn talk(cfg: FrontConfig, input: &str) -> (String, Vec<Event>) {
    let mut results = Vec::new();
    for size in [0, 1] {
        let mut front = Front::new(cfg.clone());
        let (out, events) = run_pop3(&mut front, input.as_bytes(), size, stop_at_login);
        results.push((text(&out), events));
    }
    assert_eq!(results[0], results[1]);
    results.remove(0)
}

#[test]
fn greeting_capa_user_pass() {
    let mut front = Front::new(cfg());
    let mut out = Vec::new();
    front.greeting(&mut out);
    assert_eq!(text(&out), "+OK pop.switch.example POP3 ready\r\n");
    let input = b"CAPA\r\nUSER alice@Example.ORG\r\nPASS s3cret with spaces\r\nSTAT\r\n";
    let (out, events) = run_pop3(&mut front, input, 1, stop_at_login);
    assert_eq!(text(&out), "+OK capability list follows\r\nUSER\r\nSTLS\r\n.\r\n+OK send PASS\r\n");
    assert_eq!(
        events,
        [Event::Login { user: "alice@Example.ORG".into(), pass: Secret::new("s3cret with spaces") }]
    );
    assert_eq!(front.user().map(domain_of), Some("example.org".to_string()));
    assert_eq!(front.tunnel(), b"STAT\r\n");
}

#[test]
fn errors_before_login() {
    let (out, events) = talk(cfg(), "PASS x\r\nUSER\r\nSTAT\r\nAPOP a b\r\n");
    assert_eq!(
        out,
        "-ERR send USER first\r\n-ERR USER needs a name\r\n-ERR log in first\r\n-ERR too many errors\r\n"
    );
    assert_eq!(events, [Event::Close { reason: CloseReason::TooManyErrors }]);
    let long = format!("USER {}\r\nNOOP\r\nXYZZY\r\nQUIT\r\nUSER a\r\n", "a".repeat(200));
    let (out, events) = talk(cfg(), &long);
    assert_eq!(
        out,
        "-ERR line too long\r\n-ERR log in first\r\n-ERR unknown command\r\n\
         +OK pop.switch.example signing off\r\n"
    );
    assert_eq!(events, [Event::Quit]);
}

#[test]
fn stls_discards_plaintext_and_is_not_offered_twice() {
    let mut front = Front::new(cfg());
    let (out, events) = run_pop3(&mut front, b"USER a\r\nSTLS\r\nPASS injected\r\n", 0, stop_at_login);
    assert_eq!(text(&out), "+OK send PASS\r\n+OK begin TLS negotiation\r\n");
    assert_eq!(events, [Event::StartTls]);
    assert!(front.tls_active() && front.user().is_none() && front.buffered() == 0);
    let (out, _) = run_pop3(&mut front, b"CAPA\r\nSTLS\r\n", 0, stop_at_login);
    assert_eq!(text(&out), "+OK capability list follows\r\nUSER\r\n.\r\n-ERR STLS not available\r\n");
    let no_tls = FrontConfig { stls: false, ..cfg() };
    assert_eq!(talk(no_tls, "STLS\r\n").0, "-ERR STLS not available\r\n");
}

#[test]
fn failed_logins_count_and_close() {
    let mut front = Front::new(FrontConfig { max_errors: 2, ..cfg() });
    let mut out = Vec::new();
    for attempt in 0..2 {
        front.feed(b"USER a\r\nPASS b\r\n");
        assert!(matches!(front.poll(&mut out), Some(Event::Login { .. })), "attempt {attempt}");
        if attempt == 0 {
            front.login_failed(b"-ERR [AUTH] nope\r\n", &mut out);
        } else {
            front.deny_login("blocked\r\nby rule", &mut out);
        }
    }
    assert_eq!(front.poll(&mut out), Some(Event::Close { reason: CloseReason::TooManyErrors }));
    assert_eq!(
        text(&out),
        "+OK send PASS\r\n-ERR [AUTH] nope\r\n+OK send PASS\r\n-ERR [AUTH] blocked  by rule\r\n"
    );
}

fn replay(server: &[&str]) -> (Vec<String>, Option<Outcome>) {
    let mut r = Replay::new(ReplayConfig::default(), "alice", &Secret::new("pw"));
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
fn replay_logs_in() {
    let (sent, outcome) = replay(&["+OK Dovecot ready.\r\n", "+OK\r\n", "+OK Logged in.\r\n"]);
    assert_eq!(sent, ["USER alice\r\n", "PASS pw\r\n", ""]);
    assert_eq!(outcome, Some(Outcome::LoggedIn { to_client: b"+OK Logged in.\r\n".to_vec() }));
}

#[test]
fn replay_refusals() {
    let (sent, outcome) = replay(&["+OK ready\r\n", "+OK\r\n", "-ERR [AUTH] Authentication failed.\r\n"]);
    assert_eq!(sent[2], "QUIT\r\n");
    assert_eq!(
        outcome,
        Some(Outcome::Refused {
            to_client: b"-ERR [AUTH] Authentication failed.\r\n".to_vec(),
            cause: Cause::Rejected("-ERR [AUTH] Authentication failed.".into())
        })
    );
    let (_, outcome) = replay(&["+OK ready\r\n-ERR no such user\r\n"]);
    assert!(
        matches!(outcome, Some(Outcome::Refused { to_client, .. }) if to_client == b"-ERR no such user\r\n")
    );
    let unavailable = b"-ERR [SYS/TEMP] mail server unavailable, try again later\r\n".to_vec();
    let (sent, outcome) = replay(&["-ERR [SYS/TEMP] overloaded\r\n"]);
    assert_eq!(sent, ["QUIT\r\n"]);
    assert_eq!(
        outcome,
        Some(Outcome::Refused {
            to_client: unavailable.clone(),
            cause: Cause::Greeting("-ERR [SYS/TEMP] overloaded".into())
        })
    );
    let (_, outcome) = replay(&["* OK IMAP4rev1\r\n"]);
    assert!(matches!(outcome, Some(Outcome::Refused { cause: Cause::Greeting(_), .. })));
    let (_, outcome) = replay(&["+OK\r\n", "250 what\r\n"]);
    assert_eq!(
        outcome,
        Some(Outcome::Refused {
            to_client: unavailable,
            cause: Cause::Protocol(ServerError::Malformed("250 what".into()))
        })
    );
}

#[test]
fn end_to_end_login_rejected_then_accepted() {
    let mut front = Front::new(cfg());
    let mut to_client = Vec::new();
    front.greeting(&mut to_client);
    let mut server_saw = Vec::new();
    let mut attempt = 0;
    let client = b"USER bob@b.example\r\nPASS wrong\r\nUSER bob@b.example\r\nPASS right\r\nLIST\r\n";
    front.feed(client);
    let rest = loop {
        let Some(Event::Login { user, pass }) = front.poll(&mut to_client) else { panic!() };
        assert_eq!(domain_of(&user), "b.example");
        attempt += 1;
        let mut r = Replay::new(ReplayConfig::default(), &user, &pass);
        let mut to_server = Vec::new();
        let answer: &[u8] = if pass.expose() == b"right" {
            b"+OK Logged in.\r\n"
        } else {
            b"-ERR [AUTH] Authentication failed.\r\n"
        };
        for chunk in [&b"+OK ready\r\n"[..], b"+OK\r\n", answer] {
            if let Some(outcome) = r.feed(chunk, &mut to_server) {
                server_saw.append(&mut to_server);
                match outcome {
                    Outcome::LoggedIn { to_client: bytes } => to_client.extend(bytes),
                    Outcome::Refused { to_client: bytes, .. } => front.login_failed(&bytes, &mut to_client),
                }
            }
        }
        server_saw.extend(to_server);
        if attempt == 2 {
            break front.tunnel();
        }
    };
    assert_eq!(rest, b"LIST\r\n");
    assert_eq!(
        text(&server_saw),
        "USER bob@b.example\r\nPASS wrong\r\nQUIT\r\nUSER bob@b.example\r\nPASS right\r\n"
    );
    assert_eq!(
        text(&to_client),
        "+OK pop.switch.example POP3 ready\r\n+OK send PASS\r\n-ERR [AUTH] Authentication failed.\r\n\
         +OK send PASS\r\n+OK Logged in.\r\n"
    );
}

#[test]
fn a_callers_user_cannot_inject_commands() {
    let mut r = Replay::new(ReplayConfig::default(), "a\r\nDELE 1", &Secret::new("p\r\nw"));
    let mut out = Vec::new();
    r.feed(b"+OK\r\n+OK\r\n", &mut out);
    assert_eq!(text(&out), "USER aDELE 1\r\nPASS pw\r\n");
}
