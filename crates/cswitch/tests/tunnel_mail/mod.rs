//! Mail sessions for `upgrade_tunnels.rs`: scripted POP3, IMAP and SMTP servers that count
//! the `NOOP`s of a session (a session cut and opened again would count from 1 again), and
//! clients that log in (or get past DATA) and then send a `NOOP` per round.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use crate::{connect, serve_each};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};

/// A POP3 server: any login, then `NOOP` answered with a count.
pub fn pop3_origin() -> SocketAddr {
    serve_each(|stream| {
        let mut w = stream.try_clone().unwrap();
        let _ = w.write_all(b"+OK ready\r\n");
        let mut noops = 0;
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let reply = match line.split(' ').next().unwrap_or("").to_ascii_uppercase().as_str() {
                "USER" => "+OK send PASS".to_string(),
                "PASS" => "+OK logged in".to_string(),
                "NOOP" => {
                    noops += 1;
                    format!("+OK noop {noops}")
                }
                _ => "-ERR unknown".to_string(),
            };
            // One write per answer (`write!` would send the line end as a second segment,
            // and Nagle's algorithm would hold it for the client's delayed ACK).
            if w.write_all(format!("{reply}\r\n").as_bytes()).is_err() {
                return;
            }
        }
    })
}

/// A POP3 session through the `pop` listener, logged in: a NOOP per round, counted by the
/// server (so a session that was cut and opened again would count from 1 again).
pub fn pop3_session(pop: SocketAddr) -> impl FnMut(u64) -> std::io::Result<()> {
    let stream = connect(pop);
    let mut w = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    let mut expect = |r: &mut BufReader<TcpStream>, prefix: &str| {
        line.clear();
        r.read_line(&mut line).unwrap();
        assert!(line.starts_with(prefix), "POP3 answered {line:?}, wanted {prefix:?}");
    };
    expect(&mut r, "+OK");
    w.write_all(b"USER alice\r\n").unwrap();
    expect(&mut r, "+OK");
    w.write_all(b"PASS secret\r\n").unwrap();
    expect(&mut r, "+OK logged in");
    move |round| {
        w.write_all(b"NOOP\r\n")?;
        let mut answer = String::new();
        r.read_line(&mut answer)?;
        if answer != format!("+OK noop {}\r\n", round + 1) {
            return Err(std::io::Error::other(format!("answered {answer:?} in round {round}")));
        }
        Ok(())
    }
}

/// An IMAP server: any login, then `NOOP` answered with a count.
pub fn imap_origin() -> SocketAddr {
    serve_each(|stream| {
        let mut w = stream.try_clone().unwrap();
        let _ = w.write_all(b"* OK [CAPABILITY IMAP4rev1] ready\r\n");
        let mut noops = 0;
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let mut parts = line.splitn(3, ' ');
            let (tag, verb) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            let reply = match verb.to_ascii_uppercase().as_str() {
                "LOGIN" => format!("{tag} OK [CAPABILITY IMAP4rev1] logged in"),
                "NOOP" => {
                    noops += 1;
                    format!("{tag} OK noop {noops}")
                }
                _ => format!("{tag} BAD unknown"),
            };
            if w.write_all(format!("{reply}\r\n").as_bytes()).is_err() {
                return;
            }
        }
    })
}

/// An IMAP session through the `imap` listener, logged in: a tagged NOOP per round,
/// counted by the server.
pub fn imap_session(imap: SocketAddr) -> impl FnMut(u64) -> std::io::Result<()> {
    let stream = connect(imap);
    let mut w = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("* OK"), "IMAP greeted {line:?}");
    w.write_all(b"a1 LOGIN alice secret\r\n").unwrap();
    loop {
        line.clear();
        r.read_line(&mut line).unwrap();
        if line.starts_with("a1 ") {
            assert!(line.starts_with("a1 OK"), "IMAP login answered {line:?}");
            break;
        }
    }
    move |round| {
        w.write_all(format!("n{round} NOOP\r\n").as_bytes())?;
        let mut answer = String::new();
        r.read_line(&mut answer)?;
        if answer != format!("n{round} OK noop {}\r\n", round + 1) {
            return Err(std::io::Error::other(format!("answered {answer:?} in round {round}")));
        }
        Ok(())
    }
}

/// An SMTP server: takes one message, then answers `NOOP` with a count.
pub fn smtp_origin() -> SocketAddr {
    serve_each(|stream| {
        let mut w = stream.try_clone().unwrap();
        let _ = w.write_all(b"220 origin ESMTP\r\n");
        let (mut in_data, mut noops) = (false, 0);
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            let reply = if in_data {
                if line != "." {
                    continue;
                }
                in_data = false;
                "250 queued".to_string()
            } else {
                match line.split([' ', ':']).next().unwrap_or("").to_ascii_uppercase().as_str() {
                    "EHLO" | "HELO" => "250 origin".to_string(),
                    "MAIL" | "RCPT" | "RSET" => "250 ok".to_string(),
                    "DATA" => {
                        in_data = true;
                        "354 go ahead".to_string()
                    }
                    "NOOP" => {
                        noops += 1;
                        format!("250 noop {noops}")
                    }
                    _ => "500 unknown".to_string(),
                }
            };
            if w.write_all(format!("{reply}\r\n").as_bytes()).is_err() {
                return;
            }
        }
    })
}

/// An SMTP session through the `smtp` listener, past DATA (the switch tunnels from there):
/// the message, then a NOOP per round, counted by the server.
pub fn smtp_session(smtp: SocketAddr) -> impl FnMut(u64) -> std::io::Result<()> {
    let stream = connect(smtp);
    let mut w = stream.try_clone().unwrap();
    let mut r = BufReader::new(stream);
    // Reads one reply (the last line of a multi-line one); panics unless it has `code`.
    let expect = move |r: &mut BufReader<TcpStream>, code: &str| loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(line.starts_with(code), "SMTP answered {line:?}, wanted {code}");
        if line.as_bytes().get(3) != Some(&b'-') {
            return;
        }
    };
    expect(&mut r, "220");
    for (command, code) in [
        ("EHLO client.example", "250"),
        ("MAIL FROM:<alice@client.example>", "250"),
        ("RCPT TO:<bob@origin.example>", "250"),
        ("DATA", "354"),
        ("Subject: upgrade\r\n\r\nhello\r\n.", "250"),
    ] {
        w.write_all(format!("{command}\r\n").as_bytes()).unwrap();
        expect(&mut r, code);
    }
    move |round| {
        w.write_all(b"NOOP\r\n")?;
        let mut answer = String::new();
        r.read_line(&mut answer)?;
        if answer != format!("250 noop {}\r\n", round + 1) {
            return Err(std::io::Error::other(format!("answered {answer:?} in round {round}")));
        }
        Ok(())
    }
}
