//! The client commands the switch answers itself (RFC 5321 §4.1.1), recognised by verb.

/// One command line, its argument text trimmed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Command<'a> {
    Ehlo(&'a str),
    Helo(&'a str),
    /// The text after `FROM:`; `None` when `FROM:` is missing.
    Mail(Option<&'a str>),
    /// The text after `TO:`; `None` when `TO:` is missing.
    Rcpt(Option<&'a str>),
    Data(&'a str),
    Bdat(&'a str),
    Rset(&'a str),
    Noop,
    Quit,
    Help,
    Vrfy(&'a str),
    StartTls(&'a str),
    /// A command of SMTP or a common extension that the switch does not offer.
    NotImplemented,
    Unknown,
}

/// Verbs of RFC 5321 and well-known extensions that the switch knows but does not offer,
/// answered 502 rather than 500 so the client learns the difference.
const NOT_IMPLEMENTED: &[&str] =
    &["AUTH", "EXPN", "ETRN", "ATRN", "TURN", "SEND", "SOML", "SAML", "VERB", "XCLIENT", "XFORWARD"];

pub(crate) fn parse(line: &str) -> Command<'_> {
    let (verb, arg) = match line.split_once(' ') {
        Some((verb, arg)) => (verb, arg.trim()),
        None => (line, ""),
    };
    let is = |name: &str| verb.eq_ignore_ascii_case(name);
    match () {
        _ if is("EHLO") => Command::Ehlo(arg),
        _ if is("HELO") => Command::Helo(arg),
        _ if is("MAIL") => Command::Mail(strip_prefix_ci(arg, "FROM:")),
        _ if is("RCPT") => Command::Rcpt(strip_prefix_ci(arg, "TO:")),
        _ if is("DATA") => Command::Data(arg),
        _ if is("BDAT") => Command::Bdat(arg),
        _ if is("RSET") => Command::Rset(arg),
        _ if is("NOOP") => Command::Noop,
        _ if is("QUIT") => Command::Quit,
        _ if is("HELP") => Command::Help,
        _ if is("VRFY") => Command::Vrfy(arg),
        _ if is("STARTTLS") => Command::StartTls(arg),
        _ if NOT_IMPLEMENTED.iter().any(|v| is(v)) => Command::NotImplemented,
        _ => Command::Unknown,
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &s[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::{parse, Command};

    #[test]
    fn verbs_are_case_insensitive_and_arguments_trimmed() {
        assert_eq!(parse("ehlo client.example"), Command::Ehlo("client.example"));
        assert_eq!(parse("MAIL FROM:<a@b>"), Command::Mail(Some("<a@b>")));
        assert_eq!(parse("mail from: <a@b> SIZE=1"), Command::Mail(Some(" <a@b> SIZE=1")));
        assert_eq!(parse("MAIL <a@b>"), Command::Mail(None));
        assert_eq!(parse("Rcpt To:<c@d>  "), Command::Rcpt(Some("<c@d>")));
        assert_eq!(parse("DATA"), Command::Data(""));
        assert_eq!(parse("QUIT"), Command::Quit);
        assert_eq!(parse("auth plain xyz"), Command::NotImplemented);
        assert_eq!(parse("GET / HTTP/1.1"), Command::Unknown);
        assert_eq!(parse(""), Command::Unknown);
    }
}
