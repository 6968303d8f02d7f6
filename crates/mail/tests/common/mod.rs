//! Drivers shared by the integration tests: feed a transcript in chunks of any size and
//! let a closure play the caller.

#![allow(dead_code, clippy::unwrap_used)]

use mail::{imap, pop3, smtp};

/// What the test's caller does after an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// Stop polling (the switch point); the rest of the input is still fed.
    Stop,
}

/// Splits `input` into chunks of `size` (0: whole).
pub fn chunks(input: &[u8], size: usize) -> Vec<&[u8]> {
    if size == 0 || input.is_empty() {
        vec![input]
    } else {
        input.chunks(size).collect()
    }
}

macro_rules! driver {
    ($name:ident, $front:ty, $event:ty) => {
        /// Feeds `input` in `size` chunks, polling after each; returns the bytes written to
        /// the client and the events, in order.
        pub fn $name(
            front: &mut $front,
            input: &[u8],
            size: usize,
            mut on: impl FnMut(&$event, &mut $front, &mut Vec<u8>) -> Flow,
        ) -> (Vec<u8>, Vec<$event>) {
            let (mut out, mut events) = (Vec::new(), Vec::new());
            let parts = chunks(input, size);
            for (i, part) in parts.iter().enumerate() {
                front.feed(part);
                while let Some(event) = front.poll(&mut out) {
                    let flow = on(&event, front, &mut out);
                    events.push(event);
                    if flow == Flow::Stop {
                        for rest in &parts[i + 1..] {
                            front.feed(rest);
                        }
                        return (out, events);
                    }
                }
            }
            (out, events)
        }
    };
}

driver!(run_smtp, smtp::Front, smtp::Event);
driver!(run_pop3, pop3::Front, pop3::Event);
driver!(run_imap, imap::Front, imap::Event);

/// The plain caller: accepts every MAIL, answers every RCPT as a server that takes it,
/// stops at DATA.
pub fn accept_all(event: &smtp::Event, front: &mut smtp::Front, out: &mut Vec<u8>) -> Flow {
    match event {
        smtp::Event::Mail { .. } => front.accept_mail(out),
        smtp::Event::Rcpt { .. } => front.answer_rcpt(&smtp::Reply::new(250, "2.1.5 Ok"), out),
        smtp::Event::Data => return Flow::Stop,
        _ => {}
    }
    Flow::Continue
}

/// Stops at every login.
pub fn stop_at_login<E, F>(_: &E, _: &mut F, _: &mut Vec<u8>) -> Flow {
    Flow::Stop
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn smtp_config() -> smtp::FrontConfig {
    smtp::FrontConfig {
        hostname: "mx.switch.example".to_string(),
        max_size: 1000,
        max_recipients: 3,
        starttls: false,
        max_line: 512,
        max_errors: 20,
    }
}
