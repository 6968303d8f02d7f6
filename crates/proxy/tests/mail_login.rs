//! POP3 and IMAP listeners with real clients (Python's poplib and imaplib) and scripted
//! servers on loopback: logins routed on the user's domain, replayed to the chosen server,
//! the rest of the session tunnelled; a refused login and a server that is down reach the
//! client as the protocol's refusals.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use proxy::Switch;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::{Arc, Mutex};

/// Logins a scripted server saw: (user, password).
type Seen = Arc<Mutex<Vec<(String, String)>>>;

fn unquote(s: &str) -> String {
    s.trim_matches('"').to_string()
}

/// A scripted server on 127.0.0.1:0 running `session` per connection (a thread each).
fn scripted(name: &'static str, session: fn(&str, TcpStream, &Seen)) -> (SocketAddr, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = Arc::clone(&log);
            std::thread::spawn(move || session(name, stream, &log));
        }
    });
    (addr, seen)
}

/// A scripted POP3 server named `name`: accepts password "good", serves one message.
fn pop3_server(name: &'static str) -> (SocketAddr, Seen) {
    scripted(name, pop3_session)
}

fn pop3_session(name: &str, stream: TcpStream, log: &Seen) {
    let mut w = stream.try_clone().unwrap();
    let _ = write!(w, "+OK {name} POP3 ready\r\n");
    let mut user = String::new();
    for line in BufReader::new(stream).lines().map_while(Result::ok) {
        let (verb, arg) = line.split_once(' ').unwrap_or((&line, ""));
        let reply = match verb.to_ascii_uppercase().as_str() {
            "USER" => {
                user = arg.to_string();
                "+OK send PASS".to_string()
            }
            "PASS" => {
                log.lock().unwrap().push((user.clone(), arg.to_string()));
                if arg == "good" {
                    "+OK logged in".to_string()
                } else {
                    "-ERR [AUTH] invalid password".to_string()
                }
            }
            "STAT" => "+OK 1 42".to_string(),
            "RETR" => format!("+OK 42 octets\r\nFrom: {name}\r\n\r\nhello from {name}\r\n."),
            "QUIT" => {
                let _ = write!(w, "+OK bye\r\n");
                return;
            }
            _ => "-ERR unknown".to_string(),
        };
        if write!(w, "{reply}\r\n").is_err() {
            return;
        }
    }
}

/// A scripted IMAP server named `name`: accepts password "good".
fn imap_server(name: &'static str) -> (SocketAddr, Seen) {
    scripted(name, imap_session)
}

fn imap_session(name: &str, stream: TcpStream, log: &Seen) {
    let mut w = stream.try_clone().unwrap();
    let _ = write!(w, "* OK [CAPABILITY IMAP4rev1] {name} IMAP ready\r\n");
    for line in BufReader::new(stream).lines().map_while(Result::ok) {
        let mut parts = line.splitn(3, ' ');
        let (tag, verb, rest) =
            (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let reply = match verb.to_ascii_uppercase().as_str() {
            "LOGIN" => {
                let (user, pass) = rest.split_once(' ').unwrap_or((rest, ""));
                let (user, pass) = (unquote(user), unquote(pass));
                log.lock().unwrap().push((user, pass.clone()));
                if pass == "good" {
                    format!("{tag} OK [CAPABILITY IMAP4rev1] {name} logged in")
                } else {
                    format!("{tag} NO [AUTHENTICATIONFAILED] invalid credentials")
                }
            }
            "CAPABILITY" => format!("* CAPABILITY IMAP4rev1\r\n{tag} OK done"),
            "SELECT" => {
                format!("* 3 EXISTS\r\n* OK [UIDVALIDITY 1] {name}\r\n{tag} OK [READ-WRITE] SELECT completed")
            }
            "LOGOUT" => {
                let _ = write!(w, "* BYE {name}\r\n{tag} OK LOGOUT completed\r\n");
                return;
            }
            _ => format!("{tag} BAD unknown"),
        };
        if write!(w, "{reply}\r\n").is_err() {
            return;
        }
    }
}

fn python(script: &str) -> String {
    let out = Command::new("python3").arg("-c").arg(script).output().expect("python3 runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{script}\n{text}{}", String::from_utf8_lossy(&out.stderr));
    text
}

fn start(protocol: &str, eu: SocketAddr, us: SocketAddr, field: &str) -> (Switch, SocketAddr) {
    start_with(protocol, eu, us, field, "")
}

fn dir_for(protocol: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("cswitch-mail-{protocol}-{}", std::process::id()))
}

/// `tag` names the directory (config, rules, certificates): `<protocol>` or `<protocol>-tls`.
fn start_with(tag: &str, eu: SocketAddr, us: SocketAddr, field: &str, extra: &str) -> (Switch, SocketAddr) {
    let dir = dir_for(tag);
    let protocol = tag.trim_end_matches("-tls");
    std::fs::create_dir_all(&dir).unwrap();
    let rules = format!("EU: if ({field} == \"eu.example\") {{ routeTo(eu); }}\nSpam: if ({field} == \"spam.example\") {{ deny(); }}\n");
    std::fs::write(dir.join("mail.rules"), rules).unwrap();
    let text = format!(
        "[global]\nworkers = 1\n[access_log]\nenabled = false\n\
         [[listener]]\nname = \"mail\"\nprotocol = \"{protocol}\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"us\"\nrules = \"mail.rules\"\n{extra}\n\
         [[group]]\nname = \"eu\"\nservers = [ {{ name = \"eu1\", addr = \"{eu}\" }} ]\n\
         [[group]]\nname = \"us\"\nservers = [ {{ name = \"us1\", addr = \"{us}\" }} ]\n"
    );
    let cfg = config::parse(&text, &dir.join("c.toml")).unwrap_or_else(|d| panic!("{d}"));
    let switch = Switch::start(cfg).unwrap();
    let addr = switch.local_addr("mail").unwrap();
    (switch, addr)
}

/// A dead address: bound then released, so connecting to it is refused.
fn dead_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

#[test]
fn pop3_logins_route_by_domain_and_refusals_reach_the_client() {
    let ((eu, eu_seen), (us, us_seen)) = (pop3_server("eu"), pop3_server("us"));
    let (switch, addr) = start("pop3", eu, us, "pop.user_domain");
    let session = |user: &str, pass: &str| {
        python(&format!(
            "import poplib\n\
             p = poplib.POP3('127.0.0.1', {port}, timeout=5)\n\
             p.user('{user}')\n\
             try:\n    p.pass_('{pass}')\nexcept poplib.error_proto as e:\n    print('REFUSED', e.args[0].decode()); raise SystemExit(0)\n\
             print('STAT', p.stat())\n\
             print(b'|'.join(p.retr(1)[1]).decode())\n\
             p.quit()\n",
            port = addr.port()
        ))
    };
    let eu_out = session("alice@eu.example", "good");
    assert!(eu_out.contains("STAT (1, 42)") && eu_out.contains("hello from eu"), "{eu_out}");
    let us_out = session("bob@us.example", "good");
    assert!(us_out.contains("hello from us"), "{us_out}");
    assert_eq!(eu_seen.lock().unwrap().as_slice(), [("alice@eu.example".to_string(), "good".to_string())]);
    assert_eq!(us_seen.lock().unwrap()[0].0, "bob@us.example");
    // The server refuses: its -ERR reaches the client.
    let refused = session("carol@eu.example", "wrong");
    assert!(refused.contains("REFUSED -ERR [AUTH] invalid password"), "{refused}");
    // A rule refuses: no server sees the login.
    let denied = session("mallory@spam.example", "good");
    assert!(denied.contains("REFUSED -ERR [AUTH]"), "{denied}");
    assert_eq!(eu_seen.lock().unwrap().len() + us_seen.lock().unwrap().len(), 3);
    assert_eq!(switch.rules()[0].rules[1].hits, 1);
}

#[test]
fn pop3_server_down_gives_a_temporary_failure() {
    let (eu, _) = pop3_server("eu");
    let (_switch, addr) = start("pop3", eu, dead_addr(), "pop.user_domain");
    let out = python(&format!(
        "import poplib\n\
         p = poplib.POP3('127.0.0.1', {}, timeout=5)\n\
         p.user('bob@us.example')\n\
         try:\n    p.pass_('good')\nexcept poplib.error_proto as e:\n    print('REFUSED', e.args[0].decode())\n",
        addr.port()
    ));
    assert!(out.contains("REFUSED -ERR [SYS/TEMP]"), "{out}");
}

#[test]
fn imap_logins_route_by_domain_and_refusals_reach_the_client() {
    let ((eu, eu_seen), (us, us_seen)) = (imap_server("eu"), imap_server("us"));
    let (_switch, addr) = start("imap", eu, us, "imap.user_domain");
    let session = |user: &str, pass: &str| {
        python(&format!(
            "import imaplib\n\
             m = imaplib.IMAP4('127.0.0.1', {port}, timeout=5)\n\
             try:\n    print('LOGIN', m.login('{user}', '{pass}'))\nexcept imaplib.IMAP4.error as e:\n    print('REFUSED', e); raise SystemExit(0)\n\
             print('SELECT', m.select('INBOX'))\n\
             print('LOGOUT', m.logout())\n",
            port = addr.port()
        ))
    };
    let eu_out = session("alice@eu.example", "good");
    assert!(eu_out.contains("eu logged in") && eu_out.contains("SELECT ('OK', [b'3'])"), "{eu_out}");
    let us_out = session("bob@us.example", "good");
    assert!(us_out.contains("us logged in"), "{us_out}");
    assert_eq!(eu_seen.lock().unwrap()[0], ("alice@eu.example".to_string(), "good".to_string()));
    assert_eq!(us_seen.lock().unwrap()[0].0, "bob@us.example");
    let refused = session("carol@eu.example", "wrong");
    assert!(refused.contains("REFUSED") && refused.contains("invalid credentials"), "{refused}");
}

/// A self-signed certificate for mail.example in `dir` (`mail.pem`, `mail.key`).
fn cert_files(dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    let made = rcgen::generate_simple_self_signed(vec!["mail.example".to_string()]).unwrap();
    std::fs::write(dir.join("mail.pem"), made.cert.pem()).unwrap();
    std::fs::write(dir.join("mail.key"), made.signing_key.serialize_pem()).unwrap();
}

#[test]
fn stls_and_starttls_upgrade_before_the_login() {
    let tls = "tls = { cert = \"mail.pem\", key = \"mail.key\" }";
    let ((eu, eu_seen), (us, _)) = (pop3_server("eu"), pop3_server("us"));
    let dir = dir_for("pop3-tls");
    cert_files(&dir);
    let (_switch, addr) = start_with("pop3-tls", eu, us, "pop.user_domain", tls);
    let out = python(&format!(
        "import poplib, ssl\n\
         ctx = ssl.create_default_context(cafile='{}')\n\
         ctx.check_hostname = False\n\
         p = poplib.POP3('127.0.0.1', {}, timeout=5)\n\
         print('CAPA', sorted(p.capa()))\n\
         p.stls(context=ctx)\n\
         print('TLS', p.sock.version())\n\
         p.user('alice@eu.example'); p.pass_('good')\n\
         print(b'|'.join(p.retr(1)[1]).decode())\n\
         p.quit()\n",
        dir.join("mail.pem").display(),
        addr.port()
    ));
    assert!(out.contains("'STLS'") && out.contains("TLS TLSv1.") && out.contains("hello from eu"), "{out}");
    assert_eq!(eu_seen.lock().unwrap()[0].0, "alice@eu.example");

    let ((eu, eu_seen), (us, _)) = (imap_server("eu"), imap_server("us"));
    let dir = dir_for("imap-tls");
    cert_files(&dir);
    let (_switch, addr) = start_with("imap-tls", eu, us, "imap.user_domain", tls);
    let out = python(&format!(
        "import imaplib, ssl\n\
         ctx = ssl.create_default_context(cafile='{}')\n\
         ctx.check_hostname = False\n\
         m = imaplib.IMAP4('127.0.0.1', {}, timeout=5)\n\
         print('CAPS', m.capabilities)\n\
         m.starttls(ssl_context=ctx)\n\
         print('TLS', m.sock.version())\n\
         print('LOGIN', m.login('alice@eu.example', 'good'))\n\
         m.logout()\n",
        dir.join("mail.pem").display(),
        addr.port()
    ));
    assert!(
        out.contains("'STARTTLS'") && out.contains("TLS TLSv1.") && out.contains("eu logged in"),
        "{out}"
    );
    assert_eq!(eu_seen.lock().unwrap()[0].0, "alice@eu.example");
}
