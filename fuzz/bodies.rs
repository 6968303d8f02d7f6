//! The body of every fuzz target, one function each, with no libFuzzer in sight: the
//! targets in `fuzz_targets/` call them, and `crates/cswitch/tests/fuzz_corpus.rs` replays
//! the seed corpora in `seeds/` through the same functions on stable Rust (CI), so a body
//! is written once. Every reader of network input is here: HTTP heads and chunked bodies,
//! rule sources, JSON bodies under rules, TLS hellos, the SMTP / POP3 / IMAP fronts and replays, the agents' UDP
//! reports, and config files. Each must never panic; where cheap, an invariant is checked.
#![allow(dead_code)] // each target uses one function

use http1::{
    write_request_head, write_response_head, BodyError, BodyKind, BodyScanner, HeadLimits, Parse,
    RequestHead, RequestRewrite, ResponseHead, ResponseRewrite, Scan, Version,
};
use rules::{Action, EvalState, Outcome, OwnedRequest, RuleSet, Trace};
use std::net::{IpAddr, Ipv6Addr};
use std::path::Path;
use std::sync::OnceLock;

/// A target's body.
pub type Body = fn(&[u8]);

/// Every target by name, for the corpus replay.
pub const TARGETS: &[(&str, Body)] = &[
    ("request_head", request_head),
    ("response_head", response_head),
    ("chunked", chunked),
    ("rules_parse", rules_parse),
    ("json_body", json_body),
    ("tls_client_hello", tls_client_hello),
    ("tls_server_hello", tls_server_hello),
    ("smtp_front", smtp_front),
    ("smtp_replay", smtp_replay),
    ("login_front", login_front),
    ("login_replay", login_replay),
    ("agent_report", agent_report),
    ("config_load", config_load),
];

/// Request heads: a head that parses has every strict prefix `Partial`, and its rewrite
/// parses again with the same start line, Host and body framing.
pub fn request_head(data: &[u8]) {
    let limits = HeadLimits { max_head_bytes: 8 * 1024, max_headers: 64 };
    let mut head = RequestHead::new();
    if head.parse(data, &limits) != Ok(Parse::Complete) {
        return;
    }
    let mut prefix = RequestHead::new();
    assert_eq!(prefix.parse(&data[..head.head_len - 1], &limits), Ok(Parse::Partial));

    let rw = RequestRewrite {
        forwarded_for: Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        forwarded_proto: Some("https"),
        upgrade: head.upgrade,
        set_headers: &[],
    };
    let mut out = Vec::new();
    write_request_head(data, &head, &rw, &mut out);
    // The rewrite adds at most three fields and some bytes.
    let roomy = HeadLimits { max_head_bytes: out.len(), max_headers: 64 + 3 };
    let mut again = RequestHead::new();
    assert_eq!(again.parse(&out, &roomy), Ok(Parse::Complete));
    assert_eq!(again.head_len, out.len());
    assert_eq!(again.body, head.body);
    assert_eq!(again.version, head.version);
    assert_eq!(again.method.slice(&out), head.method.slice(data));
    assert_eq!(again.target.slice(&out), head.target.slice(data));
    assert_eq!(again.host.map(|h| h.slice(&out)), head.host.map(|h| h.slice(data)));
}

/// Response heads: prefixes `Partial`, the rewrite parses again with the same status line.
/// The first byte chooses the flags (HEAD request, rewrite options).
pub fn response_head(input: &[u8]) {
    let Some((&flags, data)) = input.split_first() else { return };
    let limits = HeadLimits { max_head_bytes: 8 * 1024, max_headers: 64 };
    let was_head = flags & 1 != 0;
    let mut head = ResponseHead::new();
    if head.parse(data, &limits, was_head) != Ok(Parse::Complete) {
        return;
    }
    let mut prefix = ResponseHead::new();
    assert_eq!(prefix.parse(&data[..head.head_len - 1], &limits, was_head), Ok(Parse::Partial));

    let rw = ResponseRewrite {
        client_version: if flags & 2 != 0 { Version::Http10 } else { Version::Http11 },
        keep_alive: flags & 4 != 0,
        upgrade: flags & 8 != 0,
        dechunk: flags & 16 != 0,
    };
    let mut out = Vec::new();
    write_response_head(data, &head, &rw, &mut out);
    let roomy = HeadLimits { max_head_bytes: out.len(), max_headers: 64 + 1 };
    let mut again = ResponseHead::new();
    assert_eq!(again.parse(&out, &roomy, was_head), Ok(Parse::Complete));
    assert_eq!(again.head_len, out.len());
    assert_eq!((again.version, again.status), (head.version, head.status));
    assert_eq!(again.reason.slice(&out), head.reason.slice(data));
    if !(rw.dechunk && head.body == BodyKind::Chunked) {
        assert_eq!(again.body, head.body);
    }
}

/// Scans `pieces` in order as a proxy would: stop at `done` or at the first error.
fn scan_pieces(pieces: &[&[u8]], max: u64) -> (Result<Scan, BodyError>, Vec<u8>) {
    let mut scanner = BodyScanner::new(BodyKind::Chunked, max);
    let mut data = Vec::new();
    let mut total = 0;
    for piece in pieces {
        match scanner.scan_data(piece, |d| data.extend_from_slice(d)) {
            Err(e) => return (Err(e), data),
            Ok(s) if s.done => return (Ok(Scan { consumed: total + s.consumed, done: true }), data),
            Ok(s) => {
                assert_eq!(s.consumed, piece.len(), "a scan that is not done takes all its input");
                total += s.consumed;
            }
        }
    }
    (Ok(Scan { consumed: total, done: false }), data)
}

/// Chunked bodies: scanning the input cut at a point the first two bytes choose gives what
/// scanning it whole gives; the third byte chooses a body limit.
pub fn chunked(input: &[u8]) {
    let [a, b, limit, body @ ..] = input else { return };
    let cut = usize::from(u16::from_le_bytes([*a, *b])) % (body.len() + 1);
    let max = if *limit == 0 { u64::MAX } else { u64::from(*limit) * 16 };
    let whole = scan_pieces(&[body], max);
    let (head, tail) = body.split_at(cut);
    assert_eq!(scan_pieces(&[head, tail], max), whole);
    if let (Ok(s), _) = &whole {
        assert!(s.consumed <= body.len());
    }
}

const GROUPS: &[&str] = &["web", "api", "server1", "server2", "static"];

fn requests() -> Vec<OwnedRequest> {
    let src = "192.0.2.7:40000".parse().unwrap();
    let dst = "198.51.100.1:80".parse().unwrap();
    let xml = "<purchase><customerName>CCL</customerName><item><subTotal>50000</subTotal></item>\
<totalAmount>52000</totalAmount></purchase><purchase><totalAmount>20000</totalAmount></purchase>";
    let form = "a=1&xml=%3Cpurchase%3E%3CtotalAmount%3E7%3C%2FtotalAmount%3E%3C%2Fpurchase%3E&b=2";
    let mut out = Vec::new();
    let json = r#"{"purchase": {"customerName": "CCL", "totalAmount": 52000, "items": [{"subTotal": 5e4}]}}"#;
    for (ct, body) in
        [("text/xml", xml), ("application/x-www-form-urlencoded", form), ("application/json", json)]
    {
        let raw = format!(
            "POST /cgi-bin/xmlprocess.pl?q=1&r=%41 HTTP/1.1\r\nHost: Shop.example:8080\r\nCookie: sid=9; a=b\r\n\
X-Tenant: blue\r\nContent-Type: {ct}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let whole = OwnedRequest::parse(raw.as_bytes(), src, dst).unwrap();
        out.push(whole.with_body_prefix(body.len() / 2));
        out.push(whole);
    }
    out.push(OwnedRequest::parse(b"GET /img/a.gif HTTP/1.0\r\n\r\n", src, dst).unwrap());
    out
}

fn summary(out: Outcome<'_>) -> String {
    match out {
        Outcome::NeedMore => "more".into(),
        Outcome::Decided(d) => {
            let action = match d.action {
                Action::Route { group, sticky } => format!("route {group} {sticky:?}"),
                other => format!("{other:?}"),
            };
            format!("{:?} {action} {:?}", d.rule, d.set_headers.iter().collect::<Vec<_>>())
        }
    }
}

/// Rule sources: compiling never panics; a program that compiles prints as canonical
/// source that compiles to the same print, and evaluates without panicking, the indexed
/// walk deciding as the traced walk does.
pub fn rules_parse(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(rs) = RuleSet::compile(text, Path::new("fuzz.rules"), GROUPS) else { return };
    let printed = rs.to_string();
    let again =
        RuleSet::compile(&printed, Path::new("printed.rules"), GROUPS).expect("canonical source compiles");
    assert_eq!(again.to_string(), printed);
    let (mut st, mut traced_st, mut trace) = (EvalState::new(), EvalState::new(), Trace::new());
    for req in requests() {
        let fast = summary(rs.evaluate(&req, &mut st, None));
        let traced = summary(rs.evaluate(&req, &mut traced_st, Some(&mut trace)));
        assert_eq!(fast, traced, "{trace}");
        let _ = trace.to_string();
        if req.body_complete {
            assert_ne!(fast, "more");
        }
    }
}

/// Rules reading JSON paths of every kind: keys, 0-based indexes, quoted keys, deep paths,
/// containers as values, numbers, strings and `exists`.
const JSON_RULES: &str = r#"
A: if (json.order.total > 100 && exists(json.order.items[1].sku)) { routeTo(api); }
B: if (json["a b"][0][1] == "x" || json.s == json.t) { routeTo(web); }
C: if (match(json.order.id, "^A") || json[2].k < 3 || json[0] == 1) { deny(); }
D: if (exists(json.d[0][0][0][0][0][0][0][0]) && !exists(json.order.coupon)) { drop(); }
E: if (contains(json.order, "vip") || json.order.items[0].qty >= 2.5) { setHeader("X-V", "1"); }
"#;

/// What the JSON rules decide for `body` sent as application/json, whole and cut to its
/// first `cut` bytes; the indexed and traced walks must agree on both.
pub fn json_outcomes(body: &[u8], cut: usize) -> (String, String) {
    static RULES: OnceLock<RuleSet> = OnceLock::new();
    let rs = RULES.get_or_init(|| RuleSet::compile(JSON_RULES, Path::new("json.rules"), GROUPS).unwrap());
    let head = b"POST /api HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n\r\n";
    let mut req =
        OwnedRequest::parse(head, "192.0.2.7:40000".parse().unwrap(), "198.51.100.1:80".parse().unwrap())
            .unwrap();
    req.body = body.to_vec();
    req.body_complete = true;
    let (mut st, mut traced_st, mut trace) = (EvalState::new(), EvalState::new(), Trace::new());
    let mut decide = |req: &OwnedRequest| {
        let fast = summary(rs.evaluate(req, &mut st, None));
        let traced = summary(rs.evaluate(req, &mut traced_st, Some(&mut trace)));
        assert_eq!(fast, traced, "{trace}");
        let _ = trace.to_string();
        fast
    };
    (decide(&req), decide(&req.with_body_prefix(cut)))
}

/// JSON bodies under rules that read JSON paths: never panics (deep nesting included), a
/// complete body always decides, and the body cut where the first byte says decides "need
/// more" or what the whole body decides.
pub fn json_body(input: &[u8]) {
    let Some((&at, body)) = input.split_first() else { return };
    let cut = usize::from(at) * body.len() / 255;
    let (whole, part) = json_outcomes(body, cut);
    assert_ne!(whole, "more");
    assert!(part == "more" || part == whole, "cut at {cut}: {part} vs {whole}");
}

/// Splits `input` at a point its first byte chooses (the rest is the data).
fn split_by_first(input: &[u8]) -> (&[u8], &[u8]) {
    let Some((&at, data)) = input.split_first() else { return (&[], &[]) };
    data.split_at(usize::from(at) % (data.len() + 1))
}

/// TLS ClientHello reader, fed in two pieces: never panics, and gives the same verdict
/// however the bytes are cut (done or not, the same SNI and session ID).
pub fn tls_client_hello(input: &[u8]) {
    let (a, b) = split_by_first(input);
    let whole = client_hello_of(&[&input[1.min(input.len())..]]);
    let cut = client_hello_of(&[a, b]);
    assert_eq!(whole, cut);
}

/// What a reader made of a hello: its SNI and session ID, or the error's text; `None`
/// when it still needs bytes.
type Verdict = Option<Result<(Option<String>, Vec<u8>), String>>;

fn client_hello_of(pieces: &[&[u8]]) -> Verdict {
    let mut reader = tls::ClientHelloReader::new(tls::DEFAULT_MAX_BYTES);
    for piece in pieces {
        match reader.push(piece) {
            tls::Progress::NeedMore => {}
            tls::Progress::Done(h) => return Some(Ok((h.sni, h.session_id))),
            tls::Progress::Malformed(e) => return Some(Err(e.to_string())),
        }
    }
    None
}

/// TLS ServerHello reader, fed in two pieces: never panics; the same verdict however cut.
pub fn tls_server_hello(input: &[u8]) {
    let (a, b) = split_by_first(input);
    let verdict = |pieces: &[&[u8]]| {
        let mut reader = tls::ServerHelloReader::new(tls::DEFAULT_MAX_BYTES);
        for piece in pieces {
            match reader.push(piece) {
                tls::Progress::NeedMore => {}
                tls::Progress::Done(h) => return Some(Ok(h.session_id)),
                tls::Progress::Malformed(e) => return Some(Err(e.to_string())),
            }
        }
        None
    };
    assert_eq!(verdict(&[&input[1.min(input.len())..]]), verdict(&[a, b]));
}

/// SMTP front: any client bytes, fed in two pieces, with every MAIL and RCPT accepted;
/// never panics, and its answers end in CRLF.
pub fn smtp_front(input: &[u8]) {
    use mail::smtp::{Event, Front, FrontConfig, Reply};
    let (a, b) = split_by_first(input);
    let mut front = Front::new(FrontConfig { starttls: true, ..FrontConfig::default() });
    let mut out = Vec::new();
    front.greeting(&mut out);
    for piece in [a, b] {
        front.feed(piece);
        while let Some(event) = front.poll(&mut out) {
            match event {
                Event::Mail { .. } => front.accept_mail(&mut out),
                Event::Rcpt { .. } => front.answer_rcpt(&Reply::new(250, "2.1.5 Ok"), &mut out),
                Event::Data => {
                    let _ = front.envelope();
                }
                _ => {}
            }
        }
    }
    assert!(out.is_empty() || out.ends_with(b"\r\n"));
}

/// SMTP replay: any server bytes after an envelope; never panics. Each answered RCPT is
/// followed by the next command the switch would relay: a second RCPT, then DATA.
pub fn smtp_replay(input: &[u8]) {
    use mail::smtp::{Envelope, MailParams, Mailbox, Outcome, Replay, ReplayConfig};
    let env = Envelope {
        helo: "c".to_string(),
        esmtp: true,
        from: Mailbox::parse("a@b.example").ok(),
        params: MailParams::default(),
    };
    let (Ok(first), Ok(second)) = (Mailbox::parse("x@y.example"), Mailbox::parse("z@y.example")) else {
        return;
    };
    let mut replay = Replay::new(ReplayConfig::default(), env, first, None);
    let (a, b) = split_by_first(input);
    let mut to_server = Vec::new();
    let mut answered = 0;
    for piece in [a, b] {
        match replay.feed(piece, &mut to_server) {
            Some(Outcome::Rcpt(_)) if answered == 0 => replay.rcpt(&second, &mut to_server),
            Some(Outcome::Rcpt(_)) => replay.data(&mut to_server),
            Some(_) => return,
            None => continue,
        }
        answered += 1;
    }
    let _ = replay.server_gone("fuzz", &mut to_server);
}

/// POP3 and IMAP fronts (the first byte picks one): any client bytes in two pieces; never
/// panics.
pub fn login_front(input: &[u8]) {
    use mail::login::{Event, Front, Protocol};
    let Some((&which, rest)) = input.split_first() else { return };
    let protocol = if which & 1 == 0 { Protocol::Pop3 } else { Protocol::Imap };
    let (a, b) = split_by_first(rest);
    let mut front = Front::new(protocol, "fuzz".into(), which & 2 != 0);
    let mut out = Vec::new();
    front.greeting(&mut out);
    for piece in [a, b] {
        front.feed(piece);
        while let Some(event) = front.poll(&mut out) {
            if let Event::Login { .. } = event {
                front.login_failed(b"-ERR no\r\n", &mut out);
            }
        }
    }
}

/// POP3 and IMAP replays (the first byte picks one): any server bytes after a login;
/// never panics.
pub fn login_replay(input: &[u8]) {
    use mail::login::{Event, Front, Protocol};
    let Some((&which, rest)) = input.split_first() else { return };
    let (protocol, login): (_, &[u8]) = if which & 1 == 0 {
        (Protocol::Pop3, b"USER tim\r\nPASS pw\r\n")
    } else {
        (Protocol::Imap, b"a1 LOGIN tim pw\r\n")
    };
    let mut front = Front::new(protocol, "fuzz".into(), false);
    front.feed(login);
    let Some(Event::Login { mut replay, .. }) = front.poll(&mut Vec::new()) else { return };
    let (a, b) = split_by_first(rest);
    let mut to_server = Vec::new();
    for piece in [a, b] {
        if replay.feed(piece, &mut to_server).is_some() {
            return;
        }
    }
    let _ = replay.server_gone("fuzz", &mut to_server);
}

/// Agent reports (UDP datagrams): never panics; a report that parses encodes to a line
/// that parses to the same report.
pub fn agent_report(data: &[u8]) {
    let Ok(report) = agent::wire::Report::parse(data) else { return };
    let mut line = Vec::new();
    report.encode(&mut line);
    let again = agent::wire::Report::parse(&line).expect("an encoded report parses");
    assert_eq!(format!("{again:?}"), format!("{report:?}"));
}

/// Config files: loading any text never panics (errors are diagnostics).
pub fn config_load(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Err(diags) = config::parse(&text, Path::new("fuzz.toml")) {
        let _ = diags.to_string();
    }
}
