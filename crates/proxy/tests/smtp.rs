//! The SMTP listener with a real client (Python's smtplib, or raw bytes) and scripted or
//! aiosmtpd servers on loopback: mail routed by recipient domain, a sender denied,
//! recipients split across servers (the later one deferred with 451), recipients the server
//! refuses answered with its own reply at RCPT time while the others are delivered at once,
//! a server that is down, RSET after the server was chosen, and two transactions in one
//! session.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use proxy::Switch;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::{Arc, Mutex};

/// A message a scripted server accepted: sender, recipients, body.
#[derive(Clone, Debug)]
struct Received {
    from: String,
    rcpts: Vec<String>,
    body: String,
    /// The XCLIENT line of the session, if any.
    xclient: String,
}

type Inbox = Arc<Mutex<Vec<Received>>>;
/// The command lines a scripted server received, per session.
type Log = Arc<Mutex<Vec<Vec<String>>>>;

/// A scripted SMTP server: refuses recipients whose local part starts with "reject" (and
/// with a two-line reply those starting with "multi"); a name ending in "-x" offers XCLIENT
/// (and answers it with a new greeting, as Postfix does).
fn smtp_server(name: &'static str) -> (SocketAddr, Inbox) {
    let (addr, inbox, _) = logged_smtp_server(name);
    (addr, inbox)
}

fn logged_smtp_server(name: &'static str) -> (SocketAddr, Inbox, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (inbox, log): (Inbox, Log) = (Arc::default(), Arc::default());
    let (keep, keep_log) = (Arc::clone(&inbox), Arc::clone(&log));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (keep, keep_log) = (Arc::clone(&keep), Arc::clone(&keep_log));
            std::thread::spawn(move || session(name, stream, &keep, &keep_log));
        }
    });
    (addr, inbox, log)
}

fn session(name: &str, stream: TcpStream, inbox: &Inbox, log: &Log) {
    let mut w = stream.try_clone().unwrap();
    let _ = write!(w, "220 {name} ESMTP\r\n");
    let mut lines = BufReader::new(stream).lines().map_while(Result::ok);
    let mut msg =
        Received { from: String::new(), rcpts: Vec::new(), body: String::new(), xclient: String::new() };
    let mut xclient = String::new();
    let index = {
        let mut log = log.lock().unwrap();
        log.push(Vec::new());
        log.len() - 1
    };
    while let Some(line) = lines.next() {
        log.lock().unwrap()[index].push(line.clone());
        let upper = line.to_ascii_uppercase();
        let reply = if upper.starts_with("EHLO") && name.ends_with("-x") {
            format!("250-{name}\r\n250-PIPELINING\r\n250-XCLIENT ADDR NAME HELO\r\n250 8BITMIME")
        } else if upper.starts_with("XCLIENT") {
            xclient = line.clone();
            format!("220 {name} ESMTP")
        } else if upper.starts_with("EHLO") {
            format!("250-{name}\r\n250-PIPELINING\r\n250 8BITMIME")
        } else if upper.starts_with("HELO") || upper.starts_with("RSET") || upper.starts_with("NOOP") {
            "250 ok".to_string()
        } else if upper.starts_with("MAIL FROM:") {
            msg = Received {
                from: line[10..].trim().to_string(),
                rcpts: Vec::new(),
                body: String::new(),
                xclient: xclient.clone(),
            };
            "250 2.1.0 ok".to_string()
        } else if upper.starts_with("RCPT TO:") {
            let rcpt = line[8..].trim().to_string();
            if rcpt.trim_start_matches('<').starts_with("reject") {
                "550 5.1.1 no such user here".to_string()
            } else if rcpt.trim_start_matches('<').starts_with("multi") {
                "550-5.1.1 first line\r\n550 5.2.1 second line".to_string()
            } else {
                msg.rcpts.push(rcpt);
                "250 2.1.5 ok".to_string()
            }
        } else if upper == "DATA" {
            let _ = write!(w, "354 go ahead\r\n");
            for l in lines.by_ref() {
                if l == "." {
                    break;
                }
                msg.body.push_str(&l);
                msg.body.push('\n');
            }
            inbox.lock().unwrap().push(msg.clone());
            format!("250 2.0.0 queued at {name}")
        } else if upper == "QUIT" {
            let _ = write!(w, "221 bye\r\n");
            return;
        } else {
            "502 5.5.2 unknown".to_string()
        };
        if write!(w, "{reply}\r\n").is_err() {
            return;
        }
    }
}

fn start(eu: SocketAddr, us: SocketAddr) -> (Switch, SocketAddr) {
    start_with(eu, us, "")
}

/// A self-signed certificate for mail.example in `dir` (`mail.pem`, `mail.key`).
fn cert_files(dir: &std::path::Path) {
    let made = rcgen::generate_simple_self_signed(vec!["mail.example".to_string()]).unwrap();
    std::fs::write(dir.join("mail.pem"), made.cert.pem()).unwrap();
    std::fs::write(dir.join("mail.key"), made.signing_key.serialize_pem()).unwrap();
}

fn dir_for(eu: SocketAddr) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("cswitch-smtp-{}-{}", std::process::id(), eu.port()))
}

fn start_with(eu: SocketAddr, us: SocketAddr, listener_extra: &str) -> (Switch, SocketAddr) {
    let dir = dir_for(eu);
    std::fs::create_dir_all(&dir).unwrap();
    let rules = "Spam: if (smtp.mail_from_domain == \"spam.example\") { deny(); }\n\
                 EU: if (smtp.rcpt_to_domain == \"eu.example\") { routeTo(eu); }\n";
    std::fs::write(dir.join("mail.rules"), rules).unwrap();
    let text = format!(
        "[global]\nworkers = 1\n[access_log]\nenabled = false\n\
         [[listener]]\nname = \"mx\"\nprotocol = \"smtp\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"us\"\nrules = \"mail.rules\"\n{listener_extra}\n\
         [[group]]\nname = \"eu\"\nservers = [ {{ name = \"eu1\", addr = \"{eu}\" }} ]\n\
         [[group]]\nname = \"us\"\nservers = [ {{ name = \"us1\", addr = \"{us}\" }} ]\n"
    );
    let cfg = config::parse(&text, &dir.join("c.toml")).unwrap_or_else(|d| panic!("{d}"));
    let switch = Switch::start(cfg).unwrap();
    let addr = switch.local_addr("mx").unwrap();
    (switch, addr)
}

/// Runs a Python snippet with `s`, an `smtplib.SMTP` connected to the switch.
fn smtp_client(addr: SocketAddr, body: &str) -> String {
    let script = format!(
        "import smtplib\n\
         s = smtplib.SMTP('127.0.0.1', {}, timeout=5)\n\
         def send(frm, to, text):\n\
         \x20   try:\n\
         \x20       print('REFUSED-RCPTS', s.sendmail(frm, to, 'Subject: t\\r\\n\\r\\n' + text))\n\
         \x20   except smtplib.SMTPSenderRefused as e:\n\
         \x20       print('SENDER-REFUSED', e.smtp_code, e.smtp_error.decode()); s.rset()\n\
         \x20   except smtplib.SMTPRecipientsRefused as e:\n\
         \x20       print('ALL-RCPTS-REFUSED', sorted((k, v[0]) for k, v in e.recipients.items())); s.rset()\n\
         \x20   except smtplib.SMTPDataError as e:\n\
         \x20       print('DATA-ERROR', e.smtp_code, e.smtp_error.decode()); s.rset()\n\
         {body}\n\
         s.quit()\n",
        addr.port()
    );
    let out = Command::new("python3").arg("-c").arg(&script).output().expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{script}\n{text}{}", String::from_utf8_lossy(&out.stderr));
    text
}

fn dead_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

#[test]
fn mail_is_routed_by_recipient_and_a_spam_sender_is_denied() {
    let ((eu, eu_inbox), (us, us_inbox)) = (smtp_server("eu"), smtp_server("us"));
    let (switch, addr) = start_with(eu, us, "hostname = \"mx.example\"\ndeny_text = \"5.7.1 no spam here\"");
    let out = smtp_client(addr, "send('alice@x.example', ['bob@eu.example'], 'to eu')");
    assert!(out.contains("REFUSED-RCPTS {}"), "{out}");
    let out = smtp_client(addr, "send('alice@x.example', ['carol@us.example'], 'to us')");
    assert!(out.contains("REFUSED-RCPTS {}"), "{out}");
    let out = smtp_client(addr, "send('bulk@spam.example', ['bob@eu.example'], 'spam')");
    assert!(out.contains("SENDER-REFUSED 550 5.7.1 no spam here"), "{out}");
    let eu_mail = eu_inbox.lock().unwrap().clone();
    let us_mail = us_inbox.lock().unwrap().clone();
    assert_eq!((eu_mail.len(), us_mail.len()), (1, 1), "{eu_mail:?} {us_mail:?}");
    assert_eq!(
        (eu_mail[0].from.as_str(), eu_mail[0].rcpts[0].as_str()),
        ("<alice@x.example>", "<bob@eu.example>")
    );
    assert!(eu_mail[0].body.contains("to eu") && us_mail[0].body.contains("to us"));
    assert_eq!(switch.rules()[0].rules[0].hits, 1, "the spam rule fired once");
}

#[test]
fn recipients_of_another_server_are_deferred_to_a_separate_transaction() {
    let ((eu, eu_inbox), (us, us_inbox)) = (smtp_server("eu"), smtp_server("us"));
    let (_switch, addr) = start(eu, us);
    let out = smtp_client(addr, "send('alice@x.example', ['bob@eu.example', 'carol@us.example'], 'split')");
    assert!(out.contains("REFUSED-RCPTS {'carol@us.example': (451"), "{out}");
    let eu_mail = eu_inbox.lock().unwrap().clone();
    assert_eq!(eu_mail.len(), 1);
    assert_eq!(eu_mail[0].rcpts, ["<bob@eu.example>"]);
    assert!(us_inbox.lock().unwrap().is_empty());
}

#[test]
fn a_recipient_the_server_rejects_gets_its_answer_at_rcpt_and_the_other_is_delivered_at_once() {
    let ((eu, eu_inbox), (us, _)) = (smtp_server("eu"), smtp_server("us"));
    let (_switch, addr) = start(eu, us);
    let out = smtp_client(addr, "send('alice@x.example', ['ok@eu.example', 'reject-me@eu.example'], 'once')");
    assert!(
        out.contains("REFUSED-RCPTS {'reject-me@eu.example': (550, b'5.1.1 no such user here')}"),
        "{out}"
    );
    let eu_mail = eu_inbox.lock().unwrap().clone();
    assert_eq!(eu_mail.len(), 1, "delivered on the first attempt");
    assert_eq!(eu_mail[0].rcpts, ["<ok@eu.example>"]);
    assert!(eu_mail[0].body.contains("once"));
}

#[test]
fn a_server_that_is_down_gets_a_temporary_failure_at_rcpt_and_loses_nothing() {
    let (eu, _) = smtp_server("eu");
    let (switch, addr) = start(eu, dead_addr());
    let out = smtp_client(addr, "send('alice@x.example', ['carol@us.example', 'dave@us.example'], 'lost?')");
    assert!(out.contains("ALL-RCPTS-REFUSED [('carol@us.example', 451), ('dave@us.example', 451)]"), "{out}");
    assert_eq!(switch.stats().get(proxy::Counter::ConnectFailed), 1, "counted, and tried once");
}

#[test]
fn pipelined_recipients_get_the_servers_own_answers_in_order() {
    let ((eu, eu_inbox), (us, us_inbox)) = (smtp_server("eu"), smtp_server("us"));
    let (_switch, addr) = start(eu, us);
    let (mut c, mut r) = raw_client(addr);
    c.write_all(
        b"EHLO client.example\r\nMAIL FROM:<a@x.example>\r\nRCPT TO:<b@eu.example>\r\n\
          RCPT TO:<multi@eu.example>\r\nRCPT TO:<c@us.example>\r\nRCPT TO:<reject@eu.example>\r\nDATA\r\n",
    )
    .unwrap();
    let lines = read_until(&mut r, "354");
    assert_eq!(
        lines[lines.len() - 7..],
        [
            "250 2.1.0 Ok",
            "250 2.1.5 ok",
            "550-5.1.1 first line",
            "550 5.2.1 second line",
            "451 4.3.0 send this recipient in a separate transaction",
            "550 5.1.1 no such user here",
            "354 go ahead",
        ]
    );
    c.write_all(b"Subject: p\r\n\r\npipelined\r\n.\r\nQUIT\r\n").unwrap();
    let rest = read_until(&mut r, "221");
    assert_eq!(rest, ["250 2.0.0 queued at eu", "221 bye"]);
    assert_eq!(eu_inbox.lock().unwrap()[0].rcpts, ["<b@eu.example>"]);
    assert!(us_inbox.lock().unwrap().is_empty());
}

#[test]
fn rset_after_the_server_was_chosen_ends_that_server_session_with_quit() {
    let (eu, eu_inbox, log) = logged_smtp_server("eu");
    let (us, _) = smtp_server("us");
    let (_switch, addr) = start(eu, us);
    let (mut c, mut r) = raw_client(addr);
    c.write_all(b"EHLO client.example\r\nMAIL FROM:<a@x.example>\r\nRCPT TO:<b@eu.example>\r\nRSET\r\n")
        .unwrap();
    let lines = read_until(&mut r, "250 2.0.0");
    assert_eq!(lines[lines.len() - 3..], ["250 2.1.0 Ok", "250 2.1.5 ok", "250 2.0.0 Ok"]);
    c.write_all(b"MAIL FROM:<a@x.example>\r\nRCPT TO:<d@eu.example>\r\nDATA\r\n").unwrap();
    assert_eq!(read_until(&mut r, "354"), ["250 2.1.0 Ok", "250 2.1.5 ok", "354 go ahead"]);
    c.write_all(b"Subject: again\r\n\r\nsecond\r\n.\r\nQUIT\r\n").unwrap();
    read_until(&mut r, "221");
    assert_eq!(eu_inbox.lock().unwrap()[0].rcpts, ["<d@eu.example>"]);
    // The server thread logs what it reads on its own time: wait a little for it.
    let first_session = ["EHLO client.example", "MAIL FROM:<a@x.example>", "RCPT TO:<b@eu.example>", "QUIT"];
    for _ in 0..100 {
        if log.lock().unwrap()[0] == first_session {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let log = log.lock().unwrap().clone();
    assert_eq!(log.len(), 2, "a second server session for the second transaction: {log:?}");
    assert_eq!(log[0], first_session, "the first server session ended with QUIT");
    assert!(log[1].contains(&"RCPT TO:<d@eu.example>".to_string()), "{log:?}");
}

#[test]
fn two_transactions_in_one_session_are_both_delivered() {
    let ((eu, eu_inbox), (us, _)) = (smtp_server("eu"), smtp_server("us"));
    let (_switch, addr) = start(eu, us);
    let out = smtp_client(
        addr,
        "send('alice@x.example', ['bob@eu.example'], 'first')\nsend('alice@x.example', ['dave@eu.example'], 'second')",
    );
    assert_eq!(out.matches("REFUSED-RCPTS {}").count(), 2, "{out}");
    let eu_mail = eu_inbox.lock().unwrap().clone();
    assert_eq!(eu_mail.len(), 2, "{eu_mail:?}");
    assert!(eu_mail[1].body.contains("second"));
}

/// A raw connection to the switch, its greeting read.
fn raw_client(addr: SocketAddr) -> (TcpStream, BufReader<TcpStream>) {
    let c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("220 "), "{line}");
    (c, r)
}

/// Reply lines (without CRLF) up to and including the first that starts with `last `.
fn read_until(r: &mut BufReader<TcpStream>, last: &str) -> Vec<String> {
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "closed after {lines:?}");
        let line = line.trim_end().to_string();
        let done = line.starts_with(last) && line.as_bytes().get(3) == Some(&b' ');
        lines.push(line);
        if done {
            return lines;
        }
    }
}

#[test]
fn a_pipelining_client_gets_every_answer_in_order_and_the_server_sees_xclient() {
    let ((eu, eu_inbox), (us, _)) = (smtp_server("eu-x"), smtp_server("us"));
    let (_switch, addr) = start(eu, us);
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("220 "), "{line}");
    // One write: EHLO, MAIL, two RCPTs and DATA (RFC 2920).
    c.write_all(b"EHLO client.example\r\nMAIL FROM:<a@x.example>\r\nRCPT TO:<b@eu.example>\r\nRCPT TO:<c@eu.example>\r\nDATA\r\n")
        .unwrap();
    let mut codes = Vec::new();
    while codes.last().map(String::as_str) != Some("354") {
        line.clear();
        r.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "closed after {codes:?}");
        if line.as_bytes().get(3) == Some(&b' ') {
            codes.push(line[..3].to_string());
        }
    }
    assert_eq!(codes, ["250", "250", "250", "250", "354"], "EHLO, MAIL, RCPT, RCPT, then the server's 354");
    c.write_all(b"Subject: p\r\n\r\npipelined\r\n.\r\nQUIT\r\n").unwrap();
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut r, &mut rest);
    assert!(rest.contains("250 2.0.0 queued at eu-x") && rest.contains("221"), "{rest}");
    let mail = eu_inbox.lock().unwrap().clone();
    assert_eq!(mail[0].rcpts, ["<b@eu.example>", "<c@eu.example>"]);
    assert!(mail[0].body.contains("pipelined"));
    assert!(
        mail[0].xclient.contains("ADDR=127.0.0.1") && mail[0].xclient.contains("HELO=client.example"),
        "{}",
        mail[0].xclient
    );
}

#[test]
fn starttls_upgrades_the_session_and_mail_still_flows() {
    let ((eu, eu_inbox), (us, _)) = (smtp_server("eu"), smtp_server("us"));
    let dir = dir_for(eu);
    std::fs::create_dir_all(&dir).unwrap();
    cert_files(&dir);
    let (_switch, addr) = start_with(eu, us, "tls = { cert = \"mail.pem\", key = \"mail.key\" }");
    let script = format!(
        "import smtplib, ssl\n\
         ctx = ssl.create_default_context(cafile='{}')\n\
         ctx.check_hostname = False\n\
         s = smtplib.SMTP('127.0.0.1', {}, timeout=5)\n\
         s.ehlo()\n\
         print('OFFERED', s.has_extn('starttls'))\n\
         s.starttls(context=ctx)\n\
         s.ehlo()\n\
         print('TLS', s.sock.version(), 'STILL-OFFERED', s.has_extn('starttls'))\n\
         print('REFUSED-RCPTS', s.sendmail('alice@x.example', ['bob@eu.example'], 'Subject: t\\r\\n\\r\\nover tls'))\n\
         s.quit()\n",
        dir.join("mail.pem").display(),
        addr.port()
    );
    let out = Command::new("python3").arg("-c").arg(&script).output().expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("OFFERED True"), "{text}");
    assert!(
        text.contains("TLS TLSv1.3 STILL-OFFERED False") || text.contains("TLS TLSv1.2 STILL-OFFERED False"),
        "{text}"
    );
    assert!(text.contains("REFUSED-RCPTS {}"), "{text}");
    let mail = eu_inbox.lock().unwrap().clone();
    assert!(mail[0].body.contains("over tls"), "{mail:?}");
}

#[test]
fn xclient_can_be_turned_off_and_the_greeting_names_the_host() {
    let ((eu, eu_inbox), (us, _)) = (smtp_server("eu-x"), smtp_server("us"));
    let (_switch, addr) = start_with(eu, us, "hostname = \"mx.example\"\nxclient = false");
    let c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut greeting = String::new();
    r.read_line(&mut greeting).unwrap();
    assert!(greeting.starts_with("220 mx.example"), "{greeting}");
    drop((c, r));
    let out = smtp_client(addr, "send('alice@x.example', ['bob@eu.example'], 'no xclient')");
    assert!(out.contains("REFUSED-RCPTS {}"), "{out}");
    assert_eq!(eu_inbox.lock().unwrap()[0].xclient, "", "XCLIENT not sent");
}

/// aiosmtpd (a real SMTP server) on a free port, its accepted messages read from stdout.
struct Aiosmtpd {
    child: std::process::Child,
    addr: SocketAddr,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Aiosmtpd {
    /// `None` when aiosmtpd is not installed (the test then says so and passes, unless
    /// CSWITCH_REQUIRE_AIOSMTPD is set, as `.ci/run` does).
    fn start(name: &str) -> Option<Aiosmtpd> {
        let ok = Command::new("python3")
            .args(["-c", "import aiosmtpd"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            assert!(std::env::var_os("CSWITCH_REQUIRE_AIOSMTPD").is_none(), "aiosmtpd is required here");
            eprintln!(
                "skipped: python3 has no aiosmtpd (pip install aiosmtpd, or Debian's python3-aiosmtpd)"
            );
            return None;
        }
        let port = dead_addr().port();
        let script =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/aiosmtpd_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args([&port.to_string(), name])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        let ready = lines.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert_eq!(ready, "READY");
        Some(Aiosmtpd { child, addr: SocketAddr::from(([127, 0, 0, 1], port)), lines })
    }

    fn next_message(&self) -> String {
        self.lines.recv_timeout(std::time::Duration::from_secs(5)).unwrap()
    }
}

impl Drop for Aiosmtpd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn real_aiosmtpd_servers_receive_the_routed_mail() {
    let (Some(eu), Some(us)) = (Aiosmtpd::start("eu"), Aiosmtpd::start("us")) else { return };
    let (_switch, addr) = start(eu.addr, us.addr);
    let out = smtp_client(addr, "send('alice@x.example', ['bob@eu.example'], 'to a real eu server')");
    assert!(out.contains("REFUSED-RCPTS {}"), "{out}");
    let got = eu.next_message();
    assert!(got.contains("\"from\": \"alice@x.example\"") && got.contains("bob@eu.example"), "{got}");
    assert!(got.contains("to a real eu server"), "{got}");
    // A recipient aiosmtpd refuses (issue 18 item 10): the client learns each recipient's
    // fate at RCPT time, and the good one is delivered on the first attempt.
    let out = smtp_client(
        addr,
        "s.ehlo()\n\
         print('MAIL', s.mail('alice@x.example'))\n\
         print('RCPT1', s.rcpt('carol@us.example'))\n\
         print('RCPT2', s.rcpt('reject-x@us.example'))\n\
         print('DATA', s.data('Subject: t\\r\\n\\r\\nfirst attempt'))",
    );
    assert!(out.contains("MAIL (250, b'2.1.0 Ok')"), "{out}");
    assert!(out.contains("RCPT1 (250, b'2.1.5 OK')"), "{out}");
    assert!(out.contains("RCPT2 (550, b'5.1.1 no such user here')"), "{out}");
    assert!(out.contains("DATA (250, b'2.0.0 queued at us')"), "{out}");
    let got = us.next_message();
    assert!(got.contains("\"rcpts\": [\"carol@us.example\"]") && !got.contains("reject-x"), "{got}");
    assert!(got.contains("first attempt"), "{got}");
    // The same through sendmail: the refused recipient is reported, the other delivered.
    let out =
        smtp_client(addr, "send('alice@x.example', ['carol@us.example', 'reject-x@us.example'], 'again')");
    assert!(
        out.contains("REFUSED-RCPTS {'reject-x@us.example': (550, b'5.1.1 no such user here')}"),
        "{out}"
    );
    assert!(us.next_message().contains("again"));
}
