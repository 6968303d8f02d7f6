//! A whole SMTP session in memory: a scripted client, the front and replay as the switch
//! drives them (each recipient relayed to the server live), and a scripted server; checks
//! the bytes each side sees.

#![allow(clippy::unwrap_used)]

mod common;

use common::{chunks, text};
use mail::smtp::{ClientInfo, Event, Front, Mailbox, Outcome, Replay, ReplayConfig, Reply};

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
/// recipients of one transaction on one server, relays each of them to it live.
struct Switch {
    front: Option<Front>,
    server: Server,
    first_domain: Option<String>,
    /// The transaction's server conversation, once a recipient chose it.
    relay: Option<Replay>,
    /// The server could not be used: every later recipient's answer.
    failed: Option<Reply>,
    to_client: Vec<u8>,
    tunnelling: bool,
}

impl Switch {
    fn new(server: Server) -> Self {
        let cfg = mail::smtp::FrontConfig { hostname: "switch.example".into(), ..Default::default() };
        let front = Front::new(cfg);
        let mut to_client = Vec::new();
        front.greeting(&mut to_client);
        Switch {
            front: Some(front),
            server,
            first_domain: None,
            relay: None,
            failed: None,
            to_client,
            tunnelling: false,
        }
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
                let domain = to.domain_lowercase();
                if self.first_domain.as_ref().is_some_and(|first| *first != domain) {
                    return front.defer_rcpt(out);
                }
                self.first_domain = Some(domain);
                let reply = self.relay_rcpt(&to);
                self.front.as_mut().unwrap().answer_rcpt(&reply, &mut self.to_client);
            }
            Event::Helo { .. } | Event::Reset => self.end(),
            Event::Data => self.data(),
            Event::StartTls | Event::Quit | Event::Close { .. } => {}
        }
    }

    /// The first routed recipient opens the server conversation; later ones go to it live.
    fn relay_rcpt(&mut self, to: &Mailbox) -> Reply {
        if let Some(reply) = &self.failed {
            return reply.clone();
        }
        let (mut replay, first_bytes) = match self.relay.take() {
            Some(mut replay) => {
                let mut cmd = Vec::new();
                replay.rcpt(to, &mut cmd);
                let answer = self.server.receive(&cmd);
                (replay, answer)
            }
            None => {
                let env = self.front.as_ref().unwrap().envelope().unwrap();
                let client = ClientInfo { addr: "198.51.100.9:50000".parse().unwrap(), name: None };
                let replay = Replay::new(ReplayConfig::default(), env, to.clone(), Some(client));
                (replay, self.server.greeting.as_bytes().to_vec())
            }
        };
        match self.converse(&mut replay, first_bytes) {
            Outcome::Rcpt(reply) => {
                self.relay = Some(replay);
                reply
            }
            Outcome::Refused { reply, .. } => {
                self.failed = Some(reply.clone());
                reply
            }
            Outcome::Tunnel { .. } => panic!("354 to RCPT"),
        }
    }

    fn data(&mut self) {
        let mut replay = self.relay.take().unwrap();
        let mut cmd = Vec::new();
        replay.data(&mut cmd);
        let answer = self.server.receive(&cmd);
        match self.converse(&mut replay, answer) {
            Outcome::Tunnel { to_client } => {
                self.to_client.extend(to_client);
                let rest = self.front.take().unwrap().tunnel();
                self.tunnelling = true;
                self.client_sends(&rest);
            }
            Outcome::Refused { reply, .. } => {
                self.front.as_mut().unwrap().data_failed(&reply, &mut self.to_client);
                self.end();
            }
            Outcome::Rcpt(_) => panic!("a RCPT answer to DATA"),
        }
    }

    /// The server's bytes to the replay and the replay's commands to the server, until the
    /// replay has the answer it waits for.
    fn converse(&mut self, replay: &mut Replay, mut from_server: Vec<u8>) -> Outcome {
        loop {
            let mut to_server = Vec::new();
            let outcome = replay.feed(&from_server, &mut to_server);
            from_server = self.server.receive(&to_server);
            if let Some(outcome) = outcome {
                return outcome;
            }
        }
    }

    /// The transaction is over: QUIT to its server, if any.
    fn end(&mut self) {
        if let Some(mut replay) = self.relay.take() {
            let mut quit = Vec::new();
            replay.quit(&mut quit);
            self.server.receive(&quit);
        }
        self.first_domain = None;
        self.failed = None;
    }
}

#[test]
fn pipelined_client_xclient_server_split_recipients() {
    let envelope = "EHLO client.example\r\nMAIL FROM:<alice@a.example> SIZE=200\r\n\
                    RCPT TO:<bob@b.example>\r\nRCPT TO:<dave@c.example>\r\n\
                    RCPT TO:<carol@B.example>\r\nDATA\r\n";
    let message = "Subject: hi\r\n\r\nHello\r\n.\r\nQUIT\r\n";
    for size in [0, 1, 5] {
        let mut switch = Switch::new(Server::new("220 mx.b.example ESMTP\r\n", EHLO));
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
fn a_refused_recipient_is_answered_at_rcpt_and_the_others_delivered_at_once() {
    let session = "EHLO client.example\r\nMAIL FROM:<alice@a.example>\r\nRCPT TO:<bob@b.example>\r\n\
                   RCPT TO:<nobody@b.example>\r\nDATA\r\n";
    for size in [0, 1, 7] {
        let mut switch = Switch::new(Server::new("220 mx\r\n", EHLO));
        for part in chunks(session.as_bytes(), size) {
            switch.client_sends(part);
        }
        switch.client_sends(b"Subject: x\r\n\r\nbody\r\n.\r\nQUIT\r\n");
        let seen = text(&switch.to_client);
        assert!(
            seen.ends_with(
                "250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n550 5.1.1 User unknown\r\n\
                 354 End data with <CR><LF>.<CR><LF>\r\n250 2.0.0 Ok: queued as 4711\r\n221 2.0.0 Bye\r\n"
            ),
            "{seen}"
        );
        let received = text(&switch.server.received);
        assert!(
            received.ends_with(
                "RCPT TO:<bob@b.example>\r\nRCPT TO:<nobody@b.example>\r\nDATA\r\n\
                 Subject: x\r\n\r\nbody\r\n.\r\nQUIT\r\n"
            ),
            "{received}"
        );
    }
}

#[test]
fn rset_after_the_server_was_chosen_quits_it_and_the_next_transaction_starts_afresh() {
    let mut switch = Switch::new(Server::new("220 mx\r\n", EHLO));
    switch.client_sends(
        b"EHLO c.example\r\nMAIL FROM:<a@a.example>\r\nRCPT TO:<nobody@b.example>\r\nDATA\r\nRSET\r\n\
          MAIL FROM:<a@a.example>\r\nRCPT TO:<x@c.example>\r\nDATA\r\n",
    );
    let seen = text(&switch.to_client);
    assert!(
        seen.ends_with(
            "250 2.1.0 Ok\r\n550 5.1.1 User unknown\r\n554 5.5.1 Error: no valid recipients\r\n\
             250 2.0.0 Ok\r\n250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n354 End data with <CR><LF>.<CR><LF>\r\n"
        ),
        "{seen}"
    );
    let received = text(&switch.server.received);
    assert!(
        received.contains("RCPT TO:<nobody@b.example>\r\nQUIT\r\nEHLO c.example\r\n"),
        "the first server conversation ended with QUIT before the second: {received}"
    );
}

#[test]
fn spam_sender_denied_and_server_down_then_rset() {
    let mut switch = Switch::new(Server::new("421 4.3.2 Service shutting down\r\n", EHLO));
    let session = "EHLO c.example\r\nMAIL FROM:<x@Spam.example>\r\nMAIL FROM:<a@a.example>\r\n\
                   RCPT TO:<b@b.example>\r\nRCPT TO:<c@b.example>\r\nDATA\r\nRSET\r\nQUIT\r\n";
    switch.client_sends(session.as_bytes());
    let seen = text(&switch.to_client);
    assert!(
        seen.ends_with(
            "550 5.7.1 Sender rejected by policy\r\n250 2.1.0 Ok\r\n\
             451 4.4.0 Mail server temporarily unavailable; try again later\r\n\
             451 4.4.0 Mail server temporarily unavailable; try again later\r\n\
             554 5.5.1 Error: no valid recipients\r\n250 2.0.0 Ok\r\n221 2.0.0 Bye\r\n"
        ),
        "{seen}"
    );
    assert_eq!(text(&switch.server.received), "QUIT\r\n", "the server was tried once");
}
