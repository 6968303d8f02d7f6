//! `insert` persistence (HAProxy's `cookie NAME insert`): the balancer sets a cookie
//! naming the server, and routes later requests carrying it there.
//!
//! Cookie value: the server's tag, and, when `max_idle` or `max_life` is set, two dates:
//! `TAG|LASTSEEN|FIRSTSEEN`, unix seconds in lowercase base 36 (`0-9a-z`; six digits
//! until 2038 and beyond). LASTSEEN is when the balancer last (re)set the cookie,
//! FIRSTSEEN when the session began on this server. The dates only bound honest
//! browsers' sessions: a client can forge any value, as it can forge the tag.
//!
//! Expiry (as HAProxy): a cookie is expired when `now - LASTSEEN > max_idle` or
//! `now - FIRSTSEEN > max_life` (whole seconds); an expired cookie counts as no cookie.
//! A live cookie is re-set (LASTSEEN moved to now) once LASTSEEN is `max_idle / 16`
//! old (at least a second), so a busy session is not answered with a Set-Cookie on
//! every response. Dates in the future (clock skew between balancers) count as now.
//! A cookie without dates when dates are configured (or with dates when they are not,
//! after a config change) is accepted and re-set in the current format, so a reload
//! does not break running sessions.

use std::time::Duration;

use super::cookie::{cookie_pairs, parse_set_cookie, rewrite_cookie_header, CookieEdit};

/// Separates the tag and the dates in a dated cookie value.
const DATE_SEPARATOR: u8 = b'|';

/// What [`InsertMode`] is built from: the `cookie` options of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InsertOptions {
    /// The cookie's name (a token, see [`super::is_cookie_name`]).
    pub name: String,
    /// Remove our cookie from requests before they reach the server.
    pub indirect: bool,
    /// Responses that get our Set-Cookie also get `Cache-Control: private`, so a shared
    /// cache does not hand one client's cookie to everyone.
    pub nocache: bool,
    /// Add `HttpOnly`.
    pub httponly: bool,
    /// Add `Secure`.
    pub secure: bool,
    /// `Domain=` attribute, if any.
    pub domain: Option<String>,
    /// `Path=` attribute; empty for none. Default `/`.
    pub path: String,
    /// A cookie unused this long is void (see the module header).
    pub max_idle: Option<Duration>,
    /// A cookie this old since its session began is void.
    pub max_life: Option<Duration>,
    /// Further attributes appended verbatim, each after `"; "` (e.g. `SameSite=Lax`).
    pub attrs: Vec<String>,
}

impl InsertOptions {
    /// Options for cookie `name` with every flag off and `Path=/`.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            indirect: false,
            nocache: false,
            httponly: false,
            secure: false,
            domain: None,
            path: "/".to_owned(),
            max_idle: None,
            max_life: None,
            attrs: Vec::new(),
        }
    }
}

/// A valid `insert` cookie found on a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InsertHit<'a> {
    /// The server tag the cookie names (the proxy maps it to a server).
    pub tag: &'a [u8],
    /// When the session began (unix seconds); `now` for a cookie without dates.
    pub first_seen: u64,
    /// When the cookie was last set (unix seconds); `now` for a cookie without dates.
    pub last_seen: u64,
    /// The cookie should be set again on the response (dates due or format changed).
    pub refresh: bool,
}

/// `insert` persistence for one group, built once per config snapshot.
#[derive(Clone, Debug)]
pub struct InsertMode {
    name: Box<[u8]>,
    /// `; Path=/; Domain=…; HttpOnly; Secure; …`, rendered once.
    attrs: Box<[u8]>,
    indirect: bool,
    nocache: bool,
    max_idle: Option<u64>,
    max_life: Option<u64>,
}

impl InsertMode {
    /// The mode `opts` describe.
    pub fn new(opts: &InsertOptions) -> Self {
        let mut attrs = Vec::new();
        let mut attr = |parts: &[&str]| {
            attrs.extend_from_slice(b"; ");
            parts.iter().for_each(|p| attrs.extend_from_slice(p.as_bytes()));
        };
        if !opts.path.is_empty() {
            attr(&["Path=", &opts.path]);
        }
        if let Some(domain) = &opts.domain {
            attr(&["Domain=", domain]);
        }
        if opts.httponly {
            attr(&["HttpOnly"]);
        }
        if opts.secure {
            attr(&["Secure"]);
        }
        opts.attrs.iter().for_each(|a| attr(&[a]));
        Self {
            name: opts.name.as_bytes().into(),
            attrs: attrs.into(),
            indirect: opts.indirect,
            nocache: opts.nocache,
            max_idle: opts.max_idle.map(|d| d.as_secs()),
            max_life: opts.max_life.map(|d| d.as_secs()),
        }
    }

    /// The cookie's name.
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// True when our cookie must be removed from requests ([`InsertMode::strip`]).
    pub fn indirect(&self) -> bool {
        self.indirect
    }

    /// True when cookie values carry dates (`max_idle` or `max_life` set).
    pub fn dated(&self) -> bool {
        self.max_idle.is_some() || self.max_life.is_some()
    }

    /// The header to add to a response that gets our Set-Cookie: `Cache-Control:
    /// private` with `nocache`.
    pub fn extra_header(&self) -> Option<(&'static str, &'static str)> {
        self.nocache.then_some(("Cache-Control", "private"))
    }

    /// The first valid cookie of ours in a `Cookie:` header value; `None` when there is
    /// none (absent, malformed or expired).
    pub fn on_request<'h>(&self, cookie_header: &'h [u8], now_unix: u64) -> Option<InsertHit<'h>> {
        cookie_pairs(cookie_header)
            .filter(|&(name, _)| name == &*self.name)
            .find_map(|(_, value)| self.check_value(value, now_unix))
    }

    /// Reads one value of our cookie: the tag and dates, or `None` when it is malformed
    /// or expired.
    pub fn check_value<'v>(&self, value: &'v [u8], now_unix: u64) -> Option<InsertHit<'v>> {
        let (tag, dates) = split_dates(value);
        if tag.is_empty() {
            return None;
        }
        let undated = InsertHit { tag, first_seen: now_unix, last_seen: now_unix, refresh: true };
        let Some((last, first)) = dates else {
            return Some(InsertHit { refresh: self.dated(), ..undated });
        };
        if !self.dated() {
            return Some(undated);
        }
        let last = last.min(now_unix);
        let first = first.min(last);
        let (idle, life) = (now_unix - last, now_unix - first);
        if self.max_idle.is_some_and(|m| idle > m) || self.max_life.is_some_and(|m| life > m) {
            return None;
        }
        let refresh = self.max_idle.is_some_and(|m| idle >= (m / 16).max(1));
        Some(InsertHit { tag, first_seen: first, last_seen: last, refresh })
    }

    /// Appends to `out` the `Cookie:` header value without our cookie (for `indirect`);
    /// `false` when it had none (forward the original). Expired cookies go too.
    pub fn strip(&self, cookie_header: &[u8], out: &mut Vec<u8>) -> bool {
        rewrite_cookie_header(cookie_header, out, |name, _| {
            if name == &*self.name {
                CookieEdit::Remove
            } else {
                CookieEdit::Keep
            }
        })
    }

    /// Whether the response from the server tagged `tag` must set our cookie, given what
    /// the request carried: `Some(first_seen)` to pass to [`InsertMode::set_cookie`], or
    /// `None` (the request's cookie is valid, names this server and is not due).
    ///
    /// The proxy skips the Set-Cookie anyway when the server set our cookie itself
    /// ([`InsertMode::is_ours`]).
    pub fn plan(&self, hit: Option<&InsertHit<'_>>, tag: &str, now_unix: u64) -> Option<u64> {
        match hit {
            Some(hit) if hit.tag == tag.as_bytes() => hit.refresh.then_some(hit.first_seen),
            _ => Some(now_unix),
        }
    }

    /// Appends a whole `Set-Cookie:` header value naming server `tag` to `out`.
    ///
    /// `tag` is written as is: it must be a non-empty cookie value ([`super::is_cookie_value`])
    /// without `|` (the config layer checks server tags once).
    pub fn set_cookie(&self, tag: &str, first_seen: u64, now_unix: u64, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.name);
        out.push(b'=');
        out.extend_from_slice(tag.as_bytes());
        if self.dated() {
            out.push(DATE_SEPARATOR);
            push_base36(now_unix, out);
            out.push(DATE_SEPARATOR);
            push_base36(first_seen.min(now_unix), out);
        }
        out.extend_from_slice(&self.attrs);
    }

    /// True when a `Set-Cookie:` value from the server sets our cookie: then ours is not
    /// added a second time.
    pub fn is_ours(&self, set_cookie_value: &[u8]) -> bool {
        parse_set_cookie(set_cookie_value).is_some_and(|c| c.name == &*self.name)
    }
}

/// `TAG|LAST|FIRST` → (`TAG`, dates); anything else is all tag, without dates.
fn split_dates(value: &[u8]) -> (&[u8], Option<(u64, u64)>) {
    let mut parts = value.rsplitn(3, |&b| b == DATE_SEPARATOR);
    let (first, last, tag) = match (parts.next(), parts.next(), parts.next()) {
        (Some(first), Some(last), Some(tag)) => (first, last, tag),
        _ => return (value, None),
    };
    match (parse_base36(last), parse_base36(first)) {
        (Some(last), Some(first)) => (tag, Some((last, first))),
        _ => (value, None),
    }
}

const BASE36: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// Appends `n` in lowercase base 36.
pub(crate) fn push_base36(mut n: u64, out: &mut Vec<u8>) {
    let mut digits = [0u8; 13];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = BASE36[(n % 36) as usize];
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// A lowercase base-36 number of 1 to 13 digits that fits a `u64`.
pub(crate) fn parse_base36(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 13 {
        return None;
    }
    s.iter().try_fold(0u64, |n, &b| {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'z' => b - b'a' + 10,
            _ => return None,
        };
        n.checked_mul(36)?.checked_add(u64::from(d))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dated(idle: u64, life: u64) -> InsertMode {
        let mut o = InsertOptions::new("SRV");
        o.max_idle = Some(Duration::from_secs(idle));
        o.max_life = Some(Duration::from_secs(life));
        InsertMode::new(&o)
    }

    #[test]
    fn set_cookie_renders_attributes_once() {
        let mut o = InsertOptions::new("SRV");
        (o.httponly, o.secure, o.domain, o.attrs) =
            (true, true, Some("ex.com".into()), vec!["SameSite=Lax".into()]);
        let mut out = Vec::new();
        InsertMode::new(&o).set_cookie("s1", 0, 100, &mut out);
        assert_eq!(out, b"SRV=s1; Path=/; Domain=ex.com; HttpOnly; Secure; SameSite=Lax");
    }

    #[test]
    fn dated_cookie_round_trips_and_refreshes_after_a_sixteenth() {
        let m = dated(1600, 86_400);
        let mut out = Vec::new();
        m.set_cookie("s1", 1_000, 2_000, &mut out);
        assert_eq!(out, b"SRV=s1|1jk|rs; Path=/");
        let hit = m.on_request(b"x=1; SRV=s1|1jk|rs", 2_099).unwrap();
        assert_eq!((hit.tag, hit.first_seen, hit.last_seen, hit.refresh), (&b"s1"[..], 1_000, 2_000, false));
        assert_eq!(m.plan(Some(&hit), "s1", 2_099), None);
        assert_eq!(m.plan(Some(&hit), "s2", 2_099), Some(2_099));
        let hit = m.on_request(b"SRV=s1|1jk|rs", 2_100).unwrap();
        assert!(hit.refresh);
        assert_eq!(m.plan(Some(&hit), "s1", 2_100), Some(1_000));
        assert_eq!(m.on_request(b"SRV=s1|1jk|rs", 3_601), None);
    }

    #[test]
    fn format_changes_are_accepted_and_rewritten() {
        let m = dated(60, 600);
        let hit = m.on_request(b"SRV=s1", 50).unwrap();
        assert_eq!((hit.tag, hit.refresh), (&b"s1"[..], true));
        let plain = InsertMode::new(&InsertOptions::new("SRV"));
        let hit = plain.on_request(b"SRV=s1|1|2", 50).unwrap();
        assert_eq!((hit.tag, hit.refresh), (&b"s1"[..], true));
        assert_eq!(plain.on_request(b"SRV=s1", 50).map(|h| h.refresh), Some(false));
        assert_eq!(plain.on_request(b"SRV=; other=s1", 50), None);
    }

    #[test]
    fn strip_and_is_ours() {
        let mut o = InsertOptions::new("SRV");
        o.indirect = true;
        let m = InsertMode::new(&o);
        let mut out = Vec::new();
        assert!(m.strip(b"a=1; SRV=s1; b=2", &mut out));
        assert_eq!(out, b"a=1; b=2");
        assert!(!m.strip(b"a=1", &mut Vec::new()));
        assert!(m.is_ours(b"SRV=x; Path=/") && !m.is_ours(b"SRVX=x"));
    }

    #[test]
    fn base36() {
        for n in [0, 35, 36, 1_700_000_000, u64::MAX] {
            let mut s = Vec::new();
            push_base36(n, &mut s);
            assert_eq!(parse_base36(&s), Some(n));
        }
        assert_eq!(parse_base36(b"3w5e11264sgsg"), None); // u64::MAX + 1
        assert_eq!(parse_base36(b"A"), None);
    }
}
