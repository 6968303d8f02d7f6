//! A group's cookie persistence done by the agent (issue 12 part 6; seed 001 §IV): on a
//! one-way connection the answers never pass the switch, so the agent sets or rewrites the
//! cookie that brings the client's next connections back to this server, and gives the
//! server the cookies as it expects them. The switch reads the cookie on new connections
//! as it does for two-way; the cookie syntax and the modes are `balance::persist`'s.
//!
//! - `insert`: our cookie naming this server is set on answers (unless the request carried
//!   a valid one for this server); under `indirect` it is taken out of requests.
//! - `prefix`: the application's session cookie gets this server's tag as a prefix on the
//!   way out and loses it on the way in.
//! - `rename`: the application's session cookie's name is rewritten (same length) to carry
//!   this server's code on the way out, and given back on the way in.
//! - `learn`: each session cookie the server sets is reported to the switch (`Learned`),
//!   whose table then sends the client's next connections carrying it here.

use balance::persist::{
    parse_set_cookie, rename_code, InsertMode, InsertOptions, PrefixMode, RenameMode, DEFAULT_CLASS,
    DEFAULT_KEYWORD,
};
use oneway::{CookieMode, CookieRule};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Where `learn` reports a session cookie the server set (the Set-Cookie value).
pub(super) type Report = Box<dyn Fn(&[u8]) + Send + Sync>;

/// One connection's cookie persistence, for the server it was handed to.
pub(super) struct Cookies {
    mode: Mode,
    tag: String,
    /// `rename`'s code for this server.
    code: Option<[u8; 3]>,
    /// `learn`'s reports.
    report: Option<Report>,
}

enum Mode {
    Insert(InsertMode),
    Prefix(PrefixMode),
    Rename(RenameMode),
    /// The session cookie's name.
    Learn(Vec<u8>),
}

/// What a request carried that its answer depends on (`insert`: the cookie's dates).
#[derive(Clone, Debug, Default)]
pub(super) struct Seen {
    /// Our valid cookie for this server: (first seen, refresh due).
    insert_hit: Option<(u64, bool)>,
}

impl Cookies {
    /// `None` when the rule cannot be applied (a `rename` name the mode refuses: logged).
    pub(super) fn new(rule: &CookieRule) -> Option<Cookies> {
        let mode = match &rule.mode {
            CookieMode::Insert(i) => {
                let secs = |s: u64| (s > 0).then(|| Duration::from_secs(s));
                Mode::Insert(InsertMode::new(&InsertOptions {
                    indirect: i.indirect,
                    nocache: i.nocache,
                    httponly: i.httponly,
                    secure: i.secure,
                    domain: (!i.domain.is_empty()).then(|| i.domain.clone()),
                    max_idle: secs(i.max_idle),
                    max_life: secs(i.max_life),
                    ..InsertOptions::new(&rule.name)
                }))
            }
            CookieMode::Prefix => Mode::Prefix(PrefixMode::new(&rule.name)),
            CookieMode::Learn => Mode::Learn(rule.name.as_bytes().to_vec()),
            CookieMode::Rename => match RenameMode::new(&rule.name, DEFAULT_KEYWORD) {
                Some(m) => Mode::Rename(m),
                None => {
                    tracing::warn!(cookie = %rule.name, "cookie cannot be renamed; not applied");
                    return None;
                }
            },
        };
        Some(Cookies {
            mode,
            tag: rule.tag.clone(),
            code: rename_code(usize::from(rule.index)),
            report: None,
        })
    }

    /// Whether it reports learned cookies (then give it [`Cookies::reporting`]).
    pub(super) fn learns(&self) -> bool {
        matches!(self.mode, Mode::Learn(_))
    }

    /// `learn` reports the session cookies it sees to `report`.
    pub(super) fn reporting(mut self, report: Report) -> Cookies {
        self.report = Some(report);
        self
    }

    /// The request's joined Cookie fields: what it carried for the answer, and in `out`
    /// the value the server must see instead (true), or false to forward them as sent.
    pub(super) fn on_request(&self, cookies: &[u8], seen: &mut Seen, out: &mut Vec<u8>) -> bool {
        out.clear();
        *seen = Seen::default();
        match &self.mode {
            Mode::Insert(m) => {
                let hit = m.on_request(cookies, unix_now());
                seen.insert_hit =
                    hit.filter(|h| h.tag == self.tag.as_bytes()).map(|h| (h.first_seen, h.refresh));
                m.indirect() && m.strip(cookies, out)
            }
            Mode::Prefix(m) => m.strip(cookies, out),
            Mode::Rename(m) => {
                out.extend_from_slice(cookies);
                m.restore_all(out) > 0
            }
            Mode::Learn(_) => false,
        }
    }

    /// One Set-Cookie value of an answer: its replacement in `out` (true), or false.
    pub(super) fn on_set_cookie(&self, value: &[u8], out: &mut Vec<u8>) -> bool {
        out.clear();
        match &self.mode {
            Mode::Insert(_) => false,
            Mode::Prefix(m) => m.on_set_cookie(value, &self.tag, out),
            Mode::Rename(m) => {
                let Some(code) = self.code else { return false };
                out.extend_from_slice(value);
                m.rewrite_set_cookie(out, DEFAULT_CLASS, code)
            }
            Mode::Learn(name) => {
                let ours = parse_set_cookie(value).is_some_and(|c| c.name == name.as_slice());
                if let (true, Some(report)) = (ours, &self.report) {
                    report(value);
                }
                false
            }
        }
    }

    /// Lines to add to an answer (`insert`: our Set-Cookie, and `Cache-Control: private`
    /// under `nocache`), unless the server set our cookie itself (`set_cookies`: the
    /// answer's Set-Cookie values).
    pub(super) fn extra<'a>(
        &self,
        seen: &Seen,
        mut set_cookies: impl Iterator<Item = &'a [u8]>,
        out: &mut Vec<u8>,
    ) {
        out.clear();
        let Mode::Insert(m) = &self.mode else { return };
        let now = unix_now();
        let hit = seen.insert_hit.map(|(first_seen, refresh)| balance::persist::InsertHit {
            tag: self.tag.as_bytes(),
            first_seen,
            last_seen: first_seen,
            refresh,
        });
        let Some(first_seen) = m.plan(hit.as_ref(), &self.tag, now) else { return };
        if set_cookies.any(|v| m.is_ours(v)) {
            return;
        }
        out.extend_from_slice(b"Set-Cookie: ");
        m.set_cookie(&self.tag, first_seen, now, out);
        out.extend_from_slice(b"\r\n");
        if let Some((name, value)) = m.extra_header() {
            out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use oneway::InsertRule;

    fn rule(mode: CookieMode, name: &str) -> CookieRule {
        CookieRule { mode, name: name.into(), tag: "b1".into(), index: 1 }
    }

    #[test]
    fn insert_sets_our_cookie_unless_the_request_had_it_and_hides_it_from_the_server() {
        let insert =
            CookieMode::Insert(InsertRule { indirect: true, nocache: true, ..InsertRule::default() });
        let c = Cookies::new(&rule(insert, "SRV")).unwrap();
        let (mut seen, mut out) = (Seen::default(), Vec::new());
        assert!(!c.on_request(b"lang=en", &mut seen, &mut out), "nothing of ours: forwarded as sent");
        c.extra(&seen, std::iter::empty(), &mut out);
        assert_eq!(String::from_utf8_lossy(&out), "Set-Cookie: SRV=b1; Path=/\r\nCache-Control: private\r\n");
        assert!(c.on_request(b"SRV=b1; lang=en", &mut seen, &mut out));
        assert_eq!(out, b"lang=en", "indirect: the server never sees our cookie");
        c.extra(&seen, std::iter::empty(), &mut out);
        assert!(out.is_empty(), "the client already has it");
        // The server set our cookie itself: not a second one.
        c.on_request(b"lang=en", &mut seen, &mut out);
        c.extra(&seen, [&b"SRV=x"[..]].into_iter(), &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn rename_carries_the_server_in_the_name_and_gives_it_back() {
        let c = Cookies::new(&rule(CookieMode::Rename, "PHPSESSID")).unwrap();
        let mut out = Vec::new();
        assert!(c.on_set_cookie(b"PHPSESSID=abc; Path=/", &mut out));
        let renamed = String::from_utf8(out.clone()).unwrap();
        assert_eq!(renamed.len(), "PHPSESSID=abc; Path=/".len(), "same length");
        assert_eq!(renamed, "CS000001D=abc; Path=/", "keyword, content class, server code, then the rest");
        let cookie = renamed.split(';').next().unwrap().to_string();
        let mut seen = Seen::default();
        assert!(c.on_request(cookie.as_bytes(), &mut seen, &mut out));
        assert_eq!(out, b"PHPSESSID=abc");
    }

    #[test]
    fn learn_reports_the_session_cookie_and_changes_nothing() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&seen);
        let c = Cookies::new(&rule(CookieMode::Learn, "JSESSIONID"))
            .unwrap()
            .reporting(Box::new(move |v| sink.lock().unwrap().push(v.to_vec())));
        let mut out = Vec::new();
        assert!(!c.on_set_cookie(b"JSESSIONID=abc; Path=/", &mut out), "the answer goes as sent");
        assert!(!c.on_set_cookie(b"lang=en", &mut out));
        assert!(!c.on_request(b"JSESSIONID=abc", &mut Seen::default(), &mut out));
        assert_eq!(*seen.lock().unwrap(), vec![b"JSESSIONID=abc; Path=/".to_vec()]);
    }

    #[test]
    fn prefix_tags_the_value_and_takes_the_tag_off() {
        let c = Cookies::new(&rule(CookieMode::Prefix, "JSESSIONID")).unwrap();
        let mut out = Vec::new();
        assert!(c.on_set_cookie(b"JSESSIONID=xyz", &mut out));
        let tagged = String::from_utf8(out.clone()).unwrap();
        assert!(tagged.starts_with("JSESSIONID=b1"), "{tagged}");
        assert!(c.on_request(tagged.as_bytes(), &mut Seen::default(), &mut out));
        assert_eq!(out, b"JSESSIONID=xyz");
    }
}
