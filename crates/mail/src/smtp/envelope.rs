//! What one transaction collects before its server is chosen: what the replay re-sends.

use super::path::{parse_params, Mailbox};
use super::reply::Reply;

/// The start of one transaction, as the switch accepted it: what precedes the first routed
/// recipient. The recipients are not in it: each is answered by the server itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// The client's EHLO / HELO name (rule field `smtp.helo`).
    pub helo: String,
    /// The client said EHLO (not HELO): XCLIENT's `PROTO=ESMTP`.
    pub esmtp: bool,
    /// The reverse-path; `None` is the null path `<>` of bounces.
    pub from: Option<Mailbox>,
    /// The MAIL parameters the switch accepted.
    pub params: MailParams,
}

/// The MAIL FROM parameters the switch offers (RFC 1870 SIZE, RFC 6152 8BITMIME).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MailParams {
    /// `SIZE=n`, the client's estimate of the message size.
    pub size: Option<u64>,
    /// `BODY=7BIT` or `BODY=8BITMIME`.
    pub body: Option<Body>,
}

/// The body type of `BODY=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// `BODY=7BIT`.
    SevenBit,
    /// `BODY=8BITMIME`.
    EightBitMime,
}

impl MailParams {
    /// Checks the parameter text of MAIL FROM; the error is the reply for the client.
    /// `max_size` 0 means no limit (RFC 1870 §4).
    pub(crate) fn parse(text: &str, esmtp: bool, max_size: u64) -> Result<MailParams, Reply> {
        let syntax = || Reply::new(501, "5.5.4 Syntax error in parameters");
        let params = parse_params(text).ok_or_else(syntax)?;
        if !esmtp && !params.is_empty() {
            return Err(Reply::new(555, "5.5.4 Parameters need EHLO"));
        }
        let mut out = MailParams::default();
        for (key, value) in params {
            let value = value.unwrap_or_default();
            match key.as_str() {
                "SIZE" if out.size.is_none() => {
                    let size: u64 = value.parse().map_err(|_| syntax())?;
                    if max_size > 0 && size > max_size {
                        return Err(Reply::new(552, "5.3.4 Message size exceeds fixed maximum message size"));
                    }
                    out.size = Some(size);
                }
                "BODY" if out.body.is_none() => {
                    out.body = Some(match value.to_ascii_uppercase().as_str() {
                        "7BIT" => Body::SevenBit,
                        "8BITMIME" => Body::EightBitMime,
                        _ => return Err(Reply::new(501, "5.5.4 Unsupported BODY type")),
                    });
                }
                "SIZE" | "BODY" => return Err(syntax()),
                _ => return Err(Reply::new(555, &format!("5.5.4 Unsupported option: {key}"))),
            }
        }
        Ok(out)
    }

    /// The parameters as they go to a server, keeping only what it offered.
    pub(crate) fn to_wire(self, size_ok: bool, eight_bit_ok: bool) -> String {
        let mut s = String::new();
        if let (Some(size), true) = (self.size, size_ok) {
            s.push_str(&format!(" SIZE={size}"));
        }
        match (self.body, eight_bit_ok) {
            (Some(Body::SevenBit), true) => s.push_str(" BODY=7BIT"),
            (Some(Body::EightBitMime), true) => s.push_str(" BODY=8BITMIME"),
            _ => {}
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::{Body, MailParams};

    #[test]
    fn mail_parameters() {
        let p = MailParams::parse("SIZE=100 BODY=8bitmime", true, 1000).unwrap();
        assert_eq!(p, MailParams { size: Some(100), body: Some(Body::EightBitMime) });
        assert_eq!(p.to_wire(true, true), " SIZE=100 BODY=8BITMIME");
        assert_eq!(p.to_wire(false, true), " BODY=8BITMIME");
        assert_eq!(MailParams::parse("SIZE=0", true, 0).unwrap().size, Some(0));
        let code = |t: &str, esmtp| MailParams::parse(t, esmtp, 1000).unwrap_err().code;
        assert_eq!(code("SIZE=1001", true), 552);
        assert_eq!(code("SIZE=x", true), 501);
        assert_eq!(code("SIZE=1 SIZE=2", true), 501);
        assert_eq!(code("BODY=BINARYMIME", true), 501);
        assert_eq!(code("SMTPUTF8", true), 555);
        assert_eq!(code("SIZE=1", false), 555);
    }
}
