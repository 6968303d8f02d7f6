//! What the client's RCPT or DATA is answered when the server cannot be used as it is: the
//! server's own refusal re-coded for the command it answers, or "try again later".

use super::reply::Reply;

/// Room left for a server's text in one of our lines (RFC 5321 replies stay under 512).
const SERVER_TEXT: usize = 300;

/// The server could not be used at all (down, rude, or refusing us): nothing the switch
/// accepted is lost if the client tries again later, maybe to a healthier server.
pub(crate) fn unavailable() -> Reply {
    Reply::new(451, "4.4.0 Mail server temporarily unavailable; try again later")
}

/// A server's refusal of MAIL FROM (or the 8-bit check) as the answer to the client's RCPT,
/// which is what is pending when the replay meets it: its text, with a code RFC 5321
/// §4.3.2 allows after RCPT (a 421 becomes 451: the switch's connection to the client
/// stays open).
pub(crate) fn for_rcpt(server: &Reply) -> Reply {
    let code = match server.code {
        450 | 451 | 452 | 550 | 551 | 552 | 553 => server.code,
        400..=499 => 451,
        _ => 550,
    };
    recode(server, code)
}

/// A server's refusal of DATA as the answer to the client's DATA: its text, with a code that
/// RFC 5321 §4.3.2 allows after DATA (a 421 becomes 451).
pub(crate) fn for_data(server: &Reply) -> Reply {
    let code = match server.code {
        450 | 451 | 452 | 550 | 552 | 554 => server.code,
        400..=499 => 451,
        _ => 554,
    };
    recode(server, code)
}

fn recode(server: &Reply, code: u16) -> Reply {
    let enhanced = match server.enhanced() {
        Some(e) if e.as_bytes().first() == Some(&(b'0' + (code / 100) as u8)) => e,
        _ if code < 500 => "4.0.0",
        _ => "5.0.0",
    };
    Reply::new(code, &format!("{enhanced} {}", clip(server.plain_text())))
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

    #[test]
    fn data_codes() {
        let code = |c, t| for_data(&Reply::new(c, t));
        assert_eq!(code(421, "4.3.2 shutting down").to_bytes(), b"451 4.3.2 shutting down\r\n");
        assert_eq!(code(553, "bad sender").to_bytes(), b"554 5.0.0 bad sender\r\n");
        assert_eq!(code(452, "4.3.1 full").code, 452);
        assert_eq!(code(550, "5.7.1 no").to_bytes(), b"550 5.7.1 no\r\n");
    }

    #[test]
    fn rcpt_codes() {
        let code = |c, t| for_rcpt(&Reply::new(c, t));
        assert_eq!(code(553, "5.7.1 bad sender").to_bytes(), b"553 5.7.1 bad sender\r\n");
        assert_eq!(code(554, "5.6.3 no 8-bit").to_bytes(), b"550 5.6.3 no 8-bit\r\n");
        assert_eq!(code(421, "4.3.2 bye").to_bytes(), b"451 4.3.2 bye\r\n");
        assert_eq!(code(503, "bad sequence").to_bytes(), b"550 5.0.0 bad sequence\r\n");
    }
}
