//! The SMTP front's settings and the events it hands the caller.

use super::envelope::MailParams;
use super::path::Mailbox;
use crate::CloseReason;

/// The listener's SMTP settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrontConfig {
    /// The name in the greeting and the EHLO reply.
    pub hostname: String,
    /// Advertised as `SIZE n`; a MAIL with a larger `SIZE=` gets 552. 0: no limit.
    pub max_size: u64,
    /// Accepted recipients per transaction; more get 452 (RFC 5321 §4.5.3.1.8 asks ≥ 100).
    pub max_recipients: usize,
    /// Offer STARTTLS (the caller can do the handshake).
    pub starttls: bool,
    /// Longest command line, CRLF included (RFC 5321 §4.5.3.1.4: 512).
    pub max_line: usize,
    /// Protocol errors (5xx answers to bad commands) before the switch answers 421 and
    /// closes.
    pub max_errors: u32,
}

impl Default for FrontConfig {
    fn default() -> Self {
        FrontConfig {
            hostname: "localhost".to_string(),
            max_size: 10 * 1024 * 1024,
            max_recipients: 100,
            starttls: false,
            max_line: 512,
            max_errors: 10,
        }
    }
}

/// What the caller must act on, in command order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// EHLO / HELO, already answered. Ends any open transaction (RFC 5321 §4.1.4).
    Helo {
        /// The name the client gave.
        name: String,
        /// EHLO rather than HELO.
        extended: bool,
    },
    /// MAIL FROM, syntax checked: answer with [`Front::accept_mail`](super::Front::accept_mail) or
    /// [`Front::reject_mail`](super::Front::reject_mail) (a `deny` on the sender).
    Mail {
        /// The reverse-path; `None` is `<>`.
        from: Option<Mailbox>,
        /// Its parameters.
        params: MailParams,
    },
    /// RCPT TO, syntax checked and within `max_recipients`: answer with the server's reply
    /// ([`Front::answer_rcpt`](super::Front::answer_rcpt)),
    /// [`Front::reject_rcpt`](super::Front::reject_rcpt) (a rule's `deny`) or
    /// [`Front::defer_rcpt`](super::Front::defer_rcpt).
    Rcpt {
        /// The recipient.
        to: Mailbox,
    },
    /// DATA with at least one recipient the server accepted: send DATA on the transaction's
    /// [`Replay`](super::Replay), then either [`Front::tunnel`](super::Front::tunnel) or
    /// [`Front::data_failed`](super::Front::data_failed). (DATA without one is answered
    /// 554 5.5.1 by the front.)
    Data,
    /// RSET, already answered: the transaction (and any routing decision and server
    /// connection for it) is over.
    Reset,
    /// STARTTLS, answered 220: flush the output, run the TLS handshake, then feed the
    /// decrypted bytes. Buffered plaintext was discarded and the client must EHLO again.
    StartTls,
    /// QUIT, answered 221: flush the output and close.
    Quit,
    /// The switch gave up on the client (answered 421): flush the output and close.
    Close {
        /// Why.
        reason: CloseReason,
    },
}
