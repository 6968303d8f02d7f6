//! What the client's DATA is answered when the replay cannot reach DATA (the policy is
//! described in [`super`]).

use super::outcome::Refusal;
use super::reply::Reply;

/// Refused recipients listed one per line; the rest are counted.
const LISTED: usize = 10;
/// Room left for a server's text in one of our lines (RFC 5321 replies stay under 512).
const SERVER_TEXT: usize = 300;

/// The server could not be used at all (down, rude, or refusing us): nothing the switch
/// accepted is lost if the client tries again later, maybe to a healthier server.
pub(crate) fn unavailable() -> Reply {
    Reply::new(451, "4.4.0 Mail server temporarily unavailable; try again later")
}

/// A server's refusal of MAIL or DATA, as an answer to the client's DATA: its text, with a
/// code that RFC 5321 §4.3.2 allows after DATA (a 421 becomes 451: the switch's
/// connection to the client stays open).
pub(crate) fn for_data(server: &Reply) -> Reply {
    let code = match server.code {
        450 | 451 | 452 | 550 | 552 | 554 => server.code,
        400..=499 => 451,
        _ => 554,
    };
    let enhanced = server.enhanced().unwrap_or(if code < 500 { "4.0.0" } else { "5.0.0" });
    Reply::new(code, &format!("{enhanced} {}", clip(server.plain_text())))
}

/// The answer to DATA when the server refused some or all of the recipients the switch had
/// already accepted. One code and enhanced code for every line (RFC 2034 §4).
pub(crate) fn refused_recipients(refused: &[Refusal], total: usize) -> Reply {
    let all = refused.len() == total;
    let transient = refused.iter().find(|r| r.reply.is_transient());
    let (code, enhanced, summary) = match (all, transient) {
        (true, None) => (
            554,
            refused.first().and_then(|r| r.reply.enhanced()).unwrap_or("5.1.1"),
            "no valid recipients: the mail server refused them all",
        ),
        (true, Some(t)) => (
            451,
            t.reply.enhanced().unwrap_or("4.0.0"),
            "the mail server refused the recipients for now; try again later",
        ),
        (false, _) => (451, "4.3.0", "the mail server refused some recipients; send the message again"),
    };
    let mut lines: Vec<String> = refused
        .iter()
        .take(LISTED)
        .map(|r| {
            let text = clip(&r.reply.text()).to_string();
            format!("{enhanced} {} refused: {} {text}", r.rcpt.to_path(), r.reply.code)
        })
        .collect();
    if refused.len() > LISTED {
        lines.push(format!("{enhanced} and {} more", refused.len() - LISTED));
    }
    lines.push(format!("{enhanced} {summary}"));
    Reply { code, lines }
}

fn clip(text: &str) -> &str {
    match text.char_indices().nth(SERVER_TEXT) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::smtp::Mailbox;

    fn refusal(rcpt: &str, code: u16, text: &str) -> Refusal {
        Refusal { rcpt: Mailbox::parse(rcpt).unwrap(), reply: Reply::new(code, text) }
    }

    #[test]
    fn data_codes() {
        let code = |c, t| for_data(&Reply::new(c, t));
        assert_eq!(code(421, "4.3.2 shutting down").to_bytes(), b"451 4.3.2 shutting down\r\n");
        assert_eq!(code(553, "bad sender").to_bytes(), b"554 5.0.0 bad sender\r\n");
        assert_eq!(code(452, "4.3.1 full").code, 452);
        assert_eq!(code(550, "5.7.1 no").to_bytes(), b"550 5.7.1 no\r\n");
    }

    #[test]
    fn recipient_refusals() {
        let a = refusal("a@x.example", 550, "5.1.1 no such user");
        let b = refusal("b@x.example", 450, "4.2.1 try later");
        let all_perm = refused_recipients(std::slice::from_ref(&a), 1);
        assert_eq!(
            all_perm.to_bytes(),
            b"554-5.1.1 <a@x.example> refused: 550 5.1.1 no such user\r\n\
              554 5.1.1 no valid recipients: the mail server refused them all\r\n"
        );
        assert_eq!(refused_recipients(&[a.clone(), b.clone()], 2).code, 451);
        assert_eq!(refused_recipients(&[b], 2).lines[0].split(' ').next(), Some("4.3.0"));
        let many: Vec<Refusal> = (0..12).map(|_| a.clone()).collect();
        let r = refused_recipients(&many, 13);
        assert_eq!((r.code, r.lines.len()), (451, 12));
        assert_eq!(r.lines[10], "4.3.0 and 2 more");
    }
}
