//! A whole SMTP session in memory: a scripted client, the front and replay as the switch
//! drives them, and a scripted server; checks the bytes each side sees.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{chunks, text};
use mail::smtp::{ClientInfo, Event, Front, Outcome, RefusalCache, Replay, ReplayConfig};

/// A mail server that refuses the recipients whose local part starts with "no".
struct Server {
    greeting: &'static str,
    ehlo: &'static str,
    received: Vec<u8>,
    pending: Vec<u8>,
    in_data: bool,
}

impl Server {
    fn new(greeting: &'static str, ehlo: &'static str) -> Self {
        Server { greeting, ehlo, received: Vec::new(), pending: Vec::new(), in_data: false }
    }

    fn receive(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.received.extend_from_slice(bytes);
        self.pending.extend_from_slice(bytes);
        let mut replies = String::new();
        while let Some(lf) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=lf).collect();
            let line = text(&line).trim_end().to_string();
            if self.in_data {
                if line == "." {
                    self.in_data = false;
                    replies.push_str("250 2.0.0 Ok: queued as 4711\r\n");
                }
                continue;
            }
            let verb = line.split(' ').next().unwrap().to_ascii_uppercase();
            replies.push_str(match verb.as_str() {
                "EHLO" => self.ehlo,
                "XCLIENT" => "220 mx.b.example ESMTP\r\n",
                "MAIL" | "RSET" => "250 2.1.0 Ok\r\n",
                "RCPT" if line.contains(":<no") => "550 5.1.1 User unknown\r\n",
                "RCPT" => "250 2.1.5 Ok\r\n",
                "DATA" => {
                    self.in_data = true;
                    "354 End data with <CR><LF>.<CR><LF>\r\n"
                }
                "QUIT" => "221 2.0.0 Bye\r\n",
                _ => "502 5.5.2 Error: command not recognized\r\n",
            });
        }
        replies.into_bytes()
    }
}

const EHLO: &str = "250-mx.b.example\r\n250-PIPELINING\r\n250-SIZE 10240000\r\n\
                    250-XCLIENT NAME ADDR HELO\r\n250 8BITMIME\r\n";

/// The switch: routes each recipient by domain, refuses spam.example senders, keeps
/// recipients of one transaction on one server, consults the refusal cache.
struct Switch<'a> {
    front: Option<Front>,
    server: Server,
    cache: &'a mut RefusalCache,
    first_domain: Option<String>,
    to_client: Vec<u8>,
    tunnelling: bool,
}

impl<'a> Switch<'a> {
    fn new(server: Server, cache: &'a mut RefusalCache) -> Self {
        let cfg = mail::smtp::FrontConfig { hostname: "switch.example".into(), ..Default::default() };
        let front = Front::new(cfg);
        let mut to_client = Vec::new();
        front.greeting(&mut to_client);
        Switch { front: Some(front), server, cache, first_domain: None, to_client, tunnelling: false }
    }

    fn client_sends(&mut self, bytes: &[u8]) {
        if self.tunnelling {
            let replies = self.server.receive(bytes);
            self.to_client.extend(replies);
            return;
        }
        let Some(front) = self.front.as_mut() else { return };
        front.feed(bytes);
        while let Some(event) = self.front.as_mut().and_then(|f| f.poll(&mut self.to_client)) {
            self.on_event(event);
        }
    }

    fn on_event(&mut self, event: Event) {
        let front = self.front.as_mut().unwrap();
        let out = &mut self.to_client;
        match event {
            Event::Mail { from: Some(from), .. } if from.domain_lowercase() == "spam.example" => {
                front.reject_mail(550, "5.7.1 Sender rejected by policy", out);
            }
            Event::Mail { .. } => front.accept_mail(out),
            Event::Rcpt { to } => {
                if let Some(refusal) = self.cache.check(&to, Instant::now()) {
                    front.reject_rcpt(refusal.code, &refusal.text(), out);
                    return;
                }
                let domain = to.domain_lowercase();
                match &self.first_domain {
                    Some(first) if *first != domain => front.defer_rcpt(out),
                    _ => {
                        self.first_domain = Some(domain);
                        front.accept_rcpt(out);
                    }
                }
            }
            Event::Helo { .. } | Event::Reset => self.first_domain = None,
            Event::Data => self.replay(),
            Event::StartTls | Event::Quit | Event::Close { .. } => {}
        }
    }

    fn replay(&mut self) {
        let env = self.front.as_ref().unwrap().envelope().unwrap();
        let client = ClientInfo { addr: "198.51.100.9:50000".parse().unwrap(), name: None };
        let mut replay = Replay::new(ReplayConfig::default(), env, Some(client));
        let mut from_server = self.server.greeting.as_bytes().to_vec();
        let outcome = loop {
            let mut to_server = Vec::new();
            let outcome = replay.feed(&from_server, &mut to_server);
            from_server = self.server.receive(&to_server);
            if let Some(outcome) = outcome {
                break outcome;
            }
        };
        self.first_domain = None;
        match outcome {
            Outcome::Tunnel { to_client } => {
                self.to_client.extend(to_client);
                let rest = self.front.take().unwrap().tunnel();
                self.tunnelling = true;
                self.client_sends(&rest);
            }
            Outcome::Refused { reply, refused, .. } => {
                self.cache.remember(&refused, Instant::now());
                self.front.as_mut().unwrap().data_failed(&reply, &mut self.to_client);
            }
        }
    }
}

fn cache() -> RefusalCache {
    RefusalCache::new(100, Duration::from_secs(3600), Duration::from_secs(300))
}

#[test]
fn pipelined_client_xclient_server_split_recipients() {
    let envelope = "EHLO client.example\r\nMAIL FROM:<alice@a.example> SIZE=200\r\n\
                    RCPT TO:<bob@b.example>\r\nRCPT TO:<dave@c.example>\r\n\
                    RCPT TO:<carol@B.example>\r\nDATA\r\n";
    let message = "Subject: hi\r\n\r\nHello\r\n.\r\nQUIT\r\n";
    for size in [0, 1, 5] {
        let mut cache = cache();
        let mut switch = Switch::new(Server::new("220 mx.b.example ESMTP\r\n", EHLO), &mut cache);
        for part in chunks(envelope.as_bytes(), size) {
            switch.client_sends(part);
        }
        for part in chunks(message.as_bytes(), size) {
            switch.client_sends(part);
        }
        assert_eq!(
            text(&switch.server.received),
            "EHLO client.example\r\n\
             XCLIENT NAME=[UNAVAILABLE] ADDR=198.51.100.9 HELO=client.example\r\n\
             EHLO client.example\r\n\
             MAIL FROM:<alice@a.example> SIZE=200\r\nRCPT TO:<bob@b.example>\r\nRCPT TO:<carol@B.example>\r\n\
             DATA\r\nSubject: hi\r\n\r\nHello\r\n.\r\nQUIT\r\n",
            "chunk size {size}"
        );
        assert_eq!(
            text(&switch.to_client),
            "220 switch.example ESMTP ready\r\n\
             250-switch.example\r\n250-PIPELINING\r\n250-SIZE 10485760\r\n250-8BITMIME\r\n\
             250 ENHANCEDSTATUSCODES\r\n\
             250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n\
             451 4.3.0 send this recipient in a separate transaction\r\n250 2.1.5 Ok\r\n\
             354 End data with <CR><LF>.<CR><LF>\r\n250 2.0.0 Ok: queued as 4711\r\n221 2.0.0 Bye\r\n",
            "chunk size {size}"
        );
    }
}

#[test]
fn a_refused_recipient_is_retried_and_learnt() {
    let mut cache = cache();
    let session = "EHLO client.example\r\nMAIL FROM:<alice@a.example>\r\nRCPT TO:<bob@b.example>\r\n\
                   RCPT TO:<nobody@b.example>\r\nDATA\r\n";
    let mut switch = Switch::new(Server::new("220 mx\r\n", EHLO), &mut cache);
    switch.client_sends(session.as_bytes());
    switch.client_sends(b"QUIT\r\n");
    let seen = text(&switch.to_client);
    assert!(
        seen.ends_with(
            "250 2.1.5 Ok\r\n250 2.1.5 Ok\r\n\
             451-4.3.0 <nobody@b.example> refused: 550 5.1.1 User unknown\r\n\
             451 4.3.0 the mail server refused some recipients; send the message again\r\n221 2.0.0 Bye\r\n"
        ),
        "{seen}"
    );
    assert!(!text(&switch.server.received).contains("DATA"), "nothing was delivered");
    drop(switch);
    assert_eq!(cache.len(), 1);

    // The client's retry: the refused recipient now gets the server's answer at RCPT.
    let mut switch = Switch::new(Server::new("220 mx\r\n", EHLO), &mut cache);
    switch.client_sends(session.as_bytes());
    switch.client_sends(b".\r\n");
    let seen = text(&switch.to_client);
    assert!(seen.contains("250 2.1.5 Ok\r\n550 5.1.1 User unknown\r\n354 End data"), "{seen}");
    assert!(seen.ends_with("250 2.0.0 Ok: queued as 4711\r\n"), "{seen}");
    let received = text(&switch.server.received);
    assert!(
        received.contains("RCPT TO:<bob@b.example>\r\nDATA\r\n.\r\n") && !received.contains("nobody"),
        "{received}"
    );
}

#[test]
fn spam_sender_denied_and_server_down_then_rset() {
    let mut cache = cache();
    let mut switch = Switch::new(Server::new("421 4.3.2 Service shutting down\r\n", EHLO), &mut cache);
    let session = "EHLO c.example\r\nMAIL FROM:<x@Spam.example>\r\nMAIL FROM:<a@a.example>\r\n\
                   RCPT TO:<b@b.example>\r\nDATA\r\nRSET\r\nQUIT\r\n";
    switch.client_sends(session.as_bytes());
    let seen = text(&switch.to_client);
    assert!(
        seen.ends_with(
            "550 5.7.1 Sender rejected by policy\r\n250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n\
             451 4.4.0 Mail server temporarily unavailable; try again later\r\n\
             250 2.0.0 Ok\r\n221 2.0.0 Bye\r\n"
        ),
        "{seen}"
    );
    assert_eq!(text(&switch.server.received), "QUIT\r\n");
}
