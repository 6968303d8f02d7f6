//! HTTP/2 from clients (issue 15) through the running switch: real clients (`curl
//! --http2-prior-knowledge`, `curl --http2` over TLS, `nghttp`), each stream routed by the
//! rules on its own (100 concurrent streams on one connection to three servers, each
//! answer matched to its stream), the switch's own answers (deny, redirect, drop), the
//! access-log version, and every request-smuggling shape of the h2→h1 translation sent as
//! raw frames: refused (stream reset or 400), never forwarded.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod h2support;

use h2support as support;
use proxy::Counter;
use std::time::Duration;
use support::{curl, raw, rig, Rig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_with_prior_knowledge_is_routed_by_the_rules_per_request() {
    let r = rig("curl-h2c", "").await;
    // One URL per curl: Debian's curl 7.88.1 cannot reuse a prior-knowledge connection
    // (curl issue 10634, fixed in 8.0); over TLS, below, it reuses one.
    let url = |p: &str| format!("http://{}{p}", r.addr);
    let out =
        curl(&["--http2-prior-knowledge", "-sS", "-w", "|%{http_version} %{http_code}\n", &url("/a/1")])
            .await;
    assert_eq!(out, "a GET /a/1\n|2 200\n");
    let out =
        curl(&["--http2-prior-knowledge", "-sS", "-w", "|%{http_version} %{http_code}\n", &url("/c/x?q=1")])
            .await;
    assert!(out.starts_with("c GET /c/x") && out.ends_with("|2 200\n"), "{out}");
    // A body, sent without a length (chunked toward the server) and with one.
    let out = curl(&["--http2-prior-knowledge", "-sS", "-d", "hello=h2", &url("/b/echo")]).await;
    assert_eq!(out, "b POST /b/echo\n");
    let seen = r.origin("b").requests();
    assert_eq!(seen[0].body, b"hello=h2", "the body reached the server");
    assert!(seen[0].header("host").is_some_and(|h| h == r.addr.to_string()), "{:?}", seen[0].headers);
    // The switch's own answers.
    let out = curl(&["--http2-prior-knowledge", "-sS", "-i", &url("/admin/x")]).await;
    assert!(out.starts_with("HTTP/2 403"), "{out}");
    let out = curl(&["--http2-prior-knowledge", "-sS", "-i", &url("/old")]).await;
    assert!(out.starts_with("HTTP/2 301") && out.contains("location: https://new.example/"), "{out}");
    let code = curl_code(&["--http2-prior-knowledge", "-sS", &url("/drop")]).await;
    assert_ne!(code, 0, "a dropped stream is reset");
    assert_eq!(r.count(Counter::H2Connections), 6, "one per curl");
    assert_eq!(r.count(Counter::H2Refused), 0);
    assert_eq!(r.switch.stats().refusals_on(0, Counter::RuleDenied), 1, "counted on its listener");
}

async fn curl_code(args: &[&str]) -> i32 {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new("curl").args(&args).output().unwrap().status.code().unwrap_or(-1)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_over_tls_negotiates_h2_by_alpn_and_http11_still_works() {
    let r = rig("curl-tls", "tls").await;
    let url = format!("https://a.example:{}/a/tls", r.addr.port());
    let resolve = format!("a.example:{}:127.0.0.1", r.addr.port());
    let ca = r.dir.join("a.example.pem");
    let ca = ca.to_str().unwrap();
    let common = ["-sS", "--cacert", ca, "--resolve", &resolve, "-w", "|%{http_version}\n"];
    let h2 = curl(&[&common[..], &["--http2", &url]].concat()).await;
    assert_eq!(h2, "a GET /a/tls\n|2\n");
    // Two requests on one connection (curl reuses it).
    let two = curl(&[&common[..], &["--http2", &url, &url.replace("/a/", "/b/")]].concat()).await;
    assert_eq!(two, "a GET /a/tls\n|2\nb GET /b/tls\n|2\n");
    let h1 = curl(&[&common[..], &["--http1.1", &url]].concat()).await;
    assert_eq!(h1, "a GET /a/tls\n|1.1\n");
    let headers =
        curl(&[&common[..], &["--http2", &format!("https://a.example:{}/headers", r.addr.port())]].concat())
            .await;
    assert!(headers.contains("X-Forwarded-Proto: https"), "{headers}");
    assert_eq!(r.count(Counter::H2Connections), 3);
    assert_eq!(r.count(Counter::H2Streams), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alpn_without_h2_keeps_tls_clients_on_http11() {
    let r = rig("curl-tls-h1", "tls-h1").await;
    let url = format!("https://a.example:{}/a/x", r.addr.port());
    let resolve = format!("a.example:{}:127.0.0.1", r.addr.port());
    let ca = r.dir.join("a.example.pem");
    let out = curl(&[
        "-sS",
        "--cacert",
        ca.to_str().unwrap(),
        "--resolve",
        &resolve,
        "-w",
        "|%{http_version}\n",
        "--http2",
        &url,
    ])
    .await;
    assert_eq!(out, "a GET /a/x\n|1.1\n");
    assert_eq!(r.count(Counter::H2Connections), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_off_answers_the_preface_as_http11_would() {
    let r = rig("h2c-off", "h2c-off").await;
    let code = curl(&[
        "--http2-prior-knowledge",
        "-s",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        &format!("http://{}/a/1", r.addr),
    ])
    .await;
    assert_ne!(code, "200");
    assert_eq!(r.count(Counter::H2Connections), 0);
    assert_eq!(r.count(Counter::BadVersion), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nghttp_fetches_streams_that_go_to_different_servers() {
    let r = rig("nghttp", "").await;
    let urls: Vec<String> =
        ["/a/n", "/b/n", "/c/n"].iter().map(|p| format!("http://{}{p}", r.addr)).collect();
    let mut args = vec!["-n", "-s"];
    args.extend(urls.iter().map(String::as_str));
    let out = support::run("nghttp", &args).await;
    assert!(out.status.success(), "nghttp: {}", String::from_utf8_lossy(&out.stderr));
    for name in ["a", "b", "c"] {
        assert_eq!(r.origin(name).requests().len(), 1, "one stream went to {name}");
    }
    assert_eq!(r.count(Counter::H2Connections), 1, "nghttp used one connection");
    assert_eq!(r.count(Counter::H2Streams), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_streams_on_one_connection_each_get_their_own_answer() {
    let r = rig("hundred", "").await;
    let answers = support::concurrent_gets(r.addr, 100).await;
    assert_eq!(answers.len(), 100);
    for (i, a) in answers.iter().enumerate() {
        let group = ["a", "b", "c"][i % 3];
        let path = format!("/{group}/{i}");
        assert_eq!(a.status, 200, "stream {i}");
        assert_eq!(a.origin, group, "stream {i} went where the rules say");
        assert_eq!(a.body, format!("{group} GET {path}\n"), "stream {i} got its own answer");
    }
    let total: usize = ["a", "b", "c"].iter().map(|n| r.origin(n).requests().len()).sum();
    assert_eq!(total, 100);
    assert_eq!(r.count(Counter::H2Connections), 1);
    assert_eq!(r.count(Counter::H2Streams), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_that_read_the_body_route_an_h2_stream() {
    let r = rig("json", "").await;
    let big = support::post(r.addr, "/order", "application/json", br#"{"order": {"total": 250}}"#).await;
    assert_eq!((big.status, big.origin.as_str()), (200, "b"));
    let small = support::post(r.addr, "/order", "application/json", br#"{"order": {"total": 5}}"#).await;
    assert_eq!((small.status, small.origin.as_str()), (200, "w"));
    assert_eq!(r.origin("b").requests()[0].body, br#"{"order": {"total": 250}}"#);
}

/// A smuggling shape: what it is, its fields, the DATA that follows them, and the answer:
/// the `h2` crate ends the connection for fields HPACK must not carry (GOAWAY
/// PROTOCOL_ERROR) and resets a malformed stream (RST_STREAM PROTOCOL_ERROR); the
/// translation answers 400.
type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Option<&'a [u8]>, raw::Seen);

fn base<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![(":method", "POST"), (":scheme", "http"), (":path", "/a/s"), (":authority", "a.test")];
    h.extend_from_slice(extra);
    h
}

/// Each smuggling shape on its own connection: refused, counted, never forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smuggling_shapes_are_refused_and_never_forwarded() {
    use raw::Seen::{GoAway, Reset, Status};
    let r = rig("smuggle", "").await;
    let smuggled: &[u8] = b"0\r\n\r\nGET /b/x HTTP/1.1\r\nhost: b\r\n\r\n";
    let cases: Vec<Case> = vec![
        ("CR LF in a value", base(&[("x-a", "1\r\nx-injected: 1")]), None, GoAway(1)),
        ("LF in a value", base(&[("x-a", "1\nGET /b/ HTTP/1.1")]), None, GoAway(1)),
        ("NUL in a value", base(&[("x-a", "a\0b")]), None, GoAway(1)),
        ("uppercase name", base(&[("X-Upper", "1")]), None, GoAway(1)),
        ("transfer-encoding", base(&[("transfer-encoding", "chunked")]), Some(smuggled), Reset(1)),
        ("connection", base(&[("connection", "keep-alive")]), None, Reset(1)),
        ("upgrade", base(&[("upgrade", "h2c")]), None, Reset(1)),
        ("te: gzip", base(&[("te", "gzip")]), None, Reset(1)),
        ("host disagrees", base(&[("host", "b.test")]), None, Status(400)),
        ("content-length longer than DATA", base(&[("content-length", "100")]), Some(b"short"), Reset(1)),
        ("DATA longer than content-length", base(&[("content-length", "2")]), Some(smuggled), Reset(1)),
    ];
    for (what, headers, data, expected) in cases {
        let answer = raw::request(r.addr, &headers, data).await;
        assert_eq!(answer, expected, "{what}");
    }
    let refused = support::wait_until(Duration::from_secs(2), || r.count(Counter::H2Refused) == 3).await;
    assert!(refused, "h2_refused = {} (host, two lengths)", r.count(Counter::H2Refused));
    assert_eq!(r.switch.stats().refusals_on(0, Counter::H2Refused), 3, "counted on the listener");
    assert_eq!(r.count(Counter::H2ConnectionErrors), 4, "the four HPACK-level refusals");
    tokio::time::sleep(Duration::from_millis(200)).await;
    for name in ["w", "a", "b", "c"] {
        assert!(r.origin(name).requests().is_empty(), "{name} got {:?}", r.origin(name).requests());
    }
    // The same shape, well formed, is forwarded (the raw client is right).
    let answer = raw::request(r.addr, &base(&[("content-length", "5")]), Some(b"hello")).await;
    assert_eq!(answer, Status(200));
    assert_eq!(r.origin("a").requests()[0].body, b"hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_lists_over_the_limit_get_431_like_http11() {
    let r = rig("431", "").await;
    let big = "x".repeat(20_000);
    let a = support::get_with(r.addr, "/a/big", &[("x-big", big.as_str())]).await;
    assert_eq!(a.status, 431);
    let many: Vec<(String, String)> = (0..150).map(|i| (format!("x-h{i}"), "v".to_string())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let a = support::get_with(r.addr, "/a/many", &many).await;
    assert_eq!(a.status, 431);
    assert!(r.origin("a").requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_access_log_names_the_protocol() {
    let r = rig("log", "log").await;
    let a = support::get_with(r.addr, "/a/logged", &[]).await;
    assert_eq!(a.status, 200);
    let log = r.dir.join("access.log");
    let found = support::wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("\"GET /a/logged HTTP/2.0\" 200"))
    })
    .await;
    assert!(found, "{}", std::fs::read_to_string(&log).unwrap_or_default());
    // A stream refused in the translation has its line too.
    let a = support::get_with(r.addr, "/a/refused", &[("host", "other.test")]).await;
    assert_eq!(a.status, 400);
    let found = support::wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("\"GET /a/refused HTTP/2.0\" 400"))
    })
    .await;
    assert!(found, "{}", std::fs::read_to_string(&log).unwrap_or_default());
}

impl Rig {
    fn count(&self, c: Counter) -> u64 {
        self.switch.stats().get(c)
    }
}

/// Rapid reset (CVE-2023-44487): streams opened and reset in batches, each batch accepted
/// (its requests under way) before it is reset, so the client never has more than 50 open
/// while the switch would carry on with them all. Past 200 running the connection ends
/// with ENHANCE_YOUR_CALM; the servers saw a bounded number of requests; another
/// connection is served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rapid_reset_ends_the_connection_and_bounds_the_servers_work() {
    use raw::Raw;
    let r = rig("rapid-reset", "").await;
    let mut raw = Raw::open(r.addr).await;
    let mut stream = 1u32;
    'batches: for _ in 0..10 {
        let first = stream;
        let mut batch = Vec::new();
        for _ in 0..50 {
            batch.extend(Raw::get(stream, "/slow/3000"));
            stream += 2;
        }
        if !raw.send(&batch).await {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        let resets: Vec<u8> = (first..stream).step_by(2).flat_map(Raw::cancel).collect();
        if !raw.send(&resets).await {
            break 'batches;
        }
    }
    assert_eq!(raw.goaway().await, Some(0xb), "GOAWAY ENHANCE_YOUR_CALM");
    assert_eq!(r.count(Counter::H2ConnectionErrors), 1);
    let seen = r.origin("w").requests().len();
    assert!(seen <= 250, "the server got {seen} requests of 500");
    let a = support::get_with(r.addr, "/a/after", &[]).await;
    assert_eq!(a.status, 200, "other connections are served");
}

/// More streams than SETTINGS_MAX_CONCURRENT_STREAMS: the one over is refused, the others
/// are answered; the default (100) and a configured limit (10).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_over_the_concurrency_limit_are_refused() {
    for (kind, limit) in [("", 100u32), ("few-streams", 10)] {
        let r = rig(&format!("max-streams{limit}"), kind).await;
        let (refused, answered) = open_streams(r.addr, limit + 1).await;
        assert_eq!(refused, [(2 * limit + 1, 7)], "stream {} refused with REFUSED_STREAM", 2 * limit + 1);
        assert_eq!(answered, limit);
    }
}

/// Opens `n` streams at once; the (stream, code) of each reset, and how many were answered.
async fn open_streams(addr: std::net::SocketAddr, n: u32) -> (Vec<(u32, u32)>, u32) {
    use raw::Raw;
    let mut raw = Raw::open(addr).await;
    // Wait for the switch's SETTINGS (the limit) to be acknowledged before exceeding it.
    let _ = raw.next().await;
    let frames: Vec<u8> = (0..n).flat_map(|i| Raw::get(2 * i + 1, "/slow/300")).collect();
    assert!(raw.send(&frames).await);
    let (mut refused, mut answered) = (Vec::new(), 0);
    while let Some((kind, _, stream, payload)) = raw.next().await {
        match kind {
            3 => refused.push((stream, u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]))),
            1 => answered += 1,
            _ => {}
        }
        if answered + refused.len() as u32 == n {
            break;
        }
    }
    (refused, answered)
}

/// h2spec, the HTTP/2 conformance suite, against a TLS listener (every case passes) and a
/// plain one. On the plain listener one case is answered differently by design: bytes
/// that are not the HTTP/2 preface are an HTTP/1.1 request there (the listener speaks
/// both), so "Sends invalid connection preface" gets an HTTP/1.1 `400` rather than a close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2spec_passes_on_tls_and_h2c_listeners() {
    let Some(h2spec) = support::h2spec() else { return };
    let h2spec = h2spec.to_str().unwrap().to_string();
    let tls = rig("h2spec-tls", "tls").await;
    let port = tls.addr.port().to_string();
    let out = support::run(&h2spec, &["-h", "127.0.0.1", "-p", &port, "-t", "-k", "-o", "2"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("145 tests, 145 passed, 0 skipped, 0 failed"), "{text}");
    let plain = rig("h2spec-h2c", "").await;
    let port = plain.addr.port().to_string();
    let out = support::run(&h2spec, &["-h", "127.0.0.1", "-p", &port, "-o", "2"]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("145 tests, 144 passed, 0 skipped, 1 failed"), "{text}");
    let failures = text.split("Failures:").nth(1).unwrap_or_default();
    assert!(failures.contains("× 2: Sends invalid connection preface"), "{failures}");
}

/// A client that never opens its flow-control window (SETTINGS_INITIAL_WINDOW_SIZE 0, no
/// WINDOW_UPDATE): the answer's head goes out, its body cannot, and after `client_io` the
/// stream is reset and counted, not held forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_window_stall_is_reset_after_client_io() {
    use raw::Raw;
    let r = rig("stall", "short-io").await;
    let mut raw = Raw::open_with(r.addr, &[(4, 0)]).await;
    assert!(raw.send(&Raw::get(1, "/big/100000")).await);
    let started = std::time::Instant::now();
    let mut reset = None;
    while let Some((kind, _, stream, payload)) = raw.next().await {
        if kind == 3 && stream == 1 {
            reset = Some(u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]));
            break;
        }
    }
    assert_eq!(reset, Some(8), "RST_STREAM CANCEL");
    assert!(started.elapsed() >= Duration::from_millis(900), "{:?}", started.elapsed());
    assert_eq!(r.count(Counter::ClientTimeout), 1);
}

/// A connection whose streams have all ended is idle: after `client_idle` it gets GOAWAY.
/// The idle clock starts when its last stream ends (the stream's end notes the time; the
/// connection's one idle timer looks when it fires).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_whose_streams_ended_gets_goaway_after_client_idle() {
    use raw::Raw;
    let r = rig("idle", "short-idle").await;
    let mut raw = Raw::open(r.addr).await;
    assert!(raw.send(&Raw::get(1, "/a/1")).await);
    assert_eq!(raw.next_for(1).await.map(|(kind, _)| kind), Some(1), "the answer's HEADERS");
    let answered = std::time::Instant::now();
    assert_eq!(raw.goaway().await, Some(0), "GOAWAY NO_ERROR");
    let waited = answered.elapsed();
    assert!(waited >= Duration::from_millis(600) && waited < Duration::from_secs(3), "{waited:?}");
}

/// A client that goes away with a stream in flight: the stream is abandoned with its
/// connection (its exchange with the server is not carried on for an answer nobody can
/// read), so no access-log line comes when the server answers; another connection is
/// served and logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_of_a_connection_that_went_away_are_abandoned() {
    use raw::Raw;
    let r = rig("gone", "log").await;
    let log = r.dir.join("access.log");
    let mut raw = Raw::open(r.addr).await;
    assert!(raw.send(&Raw::get(1, "/slow/1000")).await);
    let seen = support::wait_until(Duration::from_secs(5), || r.origin("w").requests().len() == 1).await;
    assert!(seen, "the server got the request");
    drop(raw);
    let a = support::get_with(r.addr, "/a/after", &[]).await;
    assert_eq!(a.status, 200, "other connections are served");
    tokio::time::sleep(Duration::from_millis(1800)).await; // the server answered at 1 s
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(text.contains("\"GET /a/after HTTP/2.0\" 200"), "{text}");
    assert!(!text.contains("/slow/1000"), "{text}");
}

/// Shutdown with a stream in flight: the stream is answered whole, then the connection
/// gets GOAWAY and the switch stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_streams_in_flight_finish() {
    let r = rig("shutdown", "").await;
    let addr = r.addr;
    let in_flight = tokio::spawn(async move { support::get_with(addr, "/slow/500", &[]).await });
    tokio::time::sleep(Duration::from_millis(150)).await;
    let started = std::time::Instant::now();
    let switch = r.switch;
    tokio::task::spawn_blocking(move || switch.shutdown()).await.unwrap();
    let answer = in_flight.await.unwrap();
    assert_eq!((answer.status, answer.body.as_str()), (200, "w GET /slow/500\n"));
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "no longer accepting");
}

/// Bodies larger than every window and buffer on the way, both directions: a 3 MB upload
/// echoed back byte for byte, and a 5 MB download.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_bodies_stream_both_ways_within_flow_control() {
    let r = rig("large", "").await;
    let body: Vec<u8> = (0..3_000_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let echoed = support::post(r.addr, "/echo", "application/octet-stream", &body).await;
    assert_eq!(echoed.status, 200);
    assert!(echoed.body.as_bytes() == body.as_slice(), "echo differs (len {})", echoed.body.len());
    let big = support::get_with(r.addr, "/big/5000000", &[]).await;
    assert_eq!((big.status, big.body.len()), (200, 5_000_000));
    assert!(big.body.bytes().enumerate().all(|(i, b)| b == testkit::big_byte(i as u64)));
}

/// An answer with a body ends its stream on its last DATA frame (END_STREAM set on the
/// frame that carries the last bytes), not on an empty DATA frame after it: one frame less
/// per answer (ADR 0023). Seen as raw frames.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_data_frame_ends_the_stream() {
    use raw::Raw;
    let r = rig("last-data", "").await;
    let mut raw = Raw::open(r.addr).await;
    assert!(raw.send(&Raw::get(1, "/a/last")).await);
    let mut frames = Vec::new();
    while let Some((kind, flags, stream, payload)) = raw.next().await {
        if stream != 1 {
            continue;
        }
        frames.push((kind, flags & 0x1 != 0, payload.len()));
        if flags & 0x1 != 0 || kind == 3 {
            break;
        }
    }
    let data: Vec<_> = frames.iter().filter(|f| f.0 == 0).collect();
    assert_eq!(frames.first().map(|f| (f.0, f.1)), Some((1, false)), "HEADERS first: {frames:?}");
    assert!(!data.is_empty() && data.iter().all(|f| f.2 > 0), "no empty DATA frame: {frames:?}");
    assert!(data.last().is_some_and(|f| f.1), "the last DATA frame ends the stream: {frames:?}");
}

/// An interim answer reaches an HTTP/2 client: a POST with `expect: 100-continue` gets the
/// server's `100` (a HEADERS frame that leaves the stream open) before it sends its body,
/// then the final answer with the body echoed. Without the relay the client would wait for
/// its own timeout (the frame never comes: `next_for` gives up after 5 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_continue_reaches_the_client_before_its_body() {
    use raw::Raw;
    let r = rig("continue", "").await;
    let mut raw = Raw::open(r.addr).await;
    let fields = [
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/echo"),
        (":authority", "a.test"),
        ("content-length", "4"),
        ("expect", "100-continue"),
    ];
    assert!(raw.send(&Raw::headers(1, &fields, false)).await);
    let interim = raw.next_for(1).await;
    // A final status would be an indexed static-table field (0x88 = 200 … 0x8e = 500).
    assert!(
        matches!(&interim, Some((1, block)) if !(0x88..=0x8e).contains(&block[0])),
        "an interim HEADERS before the body: {interim:?}"
    );
    assert!(raw.send(&Raw::data(1, b"ping", true)).await);
    let answer = raw.next_for(1).await;
    assert!(matches!(&answer, Some((1, block)) if block[0] == 0x88), "then 200: {answer:?}");
    let mut body = Vec::new();
    while let Some((kind, flags, stream, payload)) = raw.next().await {
        if stream == 1 && kind == 0 {
            body.extend_from_slice(&payload);
            if flags & 0x1 != 0 {
                break;
            }
        }
    }
    assert_eq!(body, b"ping");
}
