//! HTTP/2 toward the servers (`server_protocol = "h2"`, issue 15) through the running
//! switch: HTTP/1.1 and HTTP/2 clients routed by the rules to a group whose server speaks
//! HTTP/2 only (an h2c origin on the `h2` crate, here), the streams of every client
//! multiplexed over one server connection; bodies with a length, chunked, and with
//! trailers reach it; its answers, trailers included, come back to both kinds of client.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use bytes::Bytes;
use proxy::{Counter, Switch};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use testkit::{Origin, RawClient};

/// What the HTTP/2 origin saw of one request.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    authority: String,
    version: http::Version,
    fields: http::HeaderMap,
    body: Vec<u8>,
    trailers: Option<http::HeaderMap>,
}

/// An HTTP/2-only (prior knowledge) origin: answers `h2 METHOD PATH\n` then the body it
/// got, with `x-origin: h2`, and the trailer `x-trailer: done` on paths with "trailers".
#[derive(Clone, Default)]
struct H2Origin {
    connections: Arc<AtomicUsize>,
    /// Connections not closed yet.
    open: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl H2Origin {
    async fn start() -> (H2Origin, SocketAddr) {
        let origin = H2Origin::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let o = origin.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                o.connections.fetch_add(1, Ordering::SeqCst);
                o.open.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(o.clone().serve(tcp));
            }
        });
        (origin, addr)
    }

    async fn serve(self, tcp: tokio::net::TcpStream) {
        if let Ok(mut conn) = h2::server::handshake(tcp).await {
            while let Some(Ok((req, respond))) = conn.accept().await {
                tokio::spawn(self.clone().answer(req, respond));
            }
        }
        self.open.fetch_sub(1, Ordering::SeqCst);
    }

    async fn answer(self, req: http::Request<h2::RecvStream>, mut respond: h2::server::SendResponse<Bytes>) {
        let (parts, mut body) = req.into_parts();
        let mut bytes = Vec::new();
        while let Some(Ok(d)) = body.data().await {
            let _ = body.flow_control().release_capacity(d.len());
            bytes.extend_from_slice(&d);
        }
        let trailers = body.trailers().await.ok().flatten();
        let path = parts.uri.path_and_query().map_or("", |p| p.as_str()).to_string();
        let authority = parts.uri.authority().map_or("", |a| a.as_str()).to_string();
        let mut out = format!("h2 {} {path}\n", parts.method).into_bytes();
        out.extend_from_slice(&bytes);
        self.seen.lock().unwrap().push(Seen {
            path: path.clone(),
            authority,
            version: parts.version,
            fields: parts.headers,
            body: bytes,
            trailers,
        });
        let response = http::Response::builder().status(200).header("x-origin", "h2").body(()).unwrap();
        let mut send = respond.send_response(response, false).unwrap();
        send.send_data(Bytes::from(out), false).unwrap();
        if path.contains("trailers") {
            let mut t = http::HeaderMap::new();
            t.insert("x-trailer", http::HeaderValue::from_static("done"));
            send.send_trailers(t).unwrap();
        } else {
            send.send_data(Bytes::new(), true).unwrap();
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

struct Rig {
    switch: Switch,
    addr: SocketAddr,
    h2: H2Origin,
    _web: Origin,
}

async fn rig(tag: &str) -> Rig {
    let (h2, h2_addr) = H2Origin::start().await;
    let web = Origin::start("w").await;
    let dir = std::env::temp_dir().join(format!("cswitch-h2up-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = "H: if (prefix(path, \"/h/\")) { setHeader(\"x-rule\", \"H\"); routeTo(gh); }\n\
                 Bad: if (prefix(path, \"/bad/\")) { routeTo(gbad); }\n\
                 Sticky: if (prefix(path, \"/p/\")) { routeTo(gp); }\n";
    std::fs::write(dir.join("web.rules"), rules).unwrap();
    let text = format!(
        "[global]\nworkers = 1\ngrace_period = \"2s\"\n[access_log]\nenabled = false\n\
         [limits]\nmax_body_bytes = 1000\n[timeouts]\npool_idle = \"1s\"\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\nrules = \"web.rules\"\n\
         [[group]]\nname = \"web\"\nservers = [ {{ name = \"w\", addr = \"{web}\" }} ]\n\
         [[group]]\nname = \"gh\"\nserver_protocol = \"h2\"\nservers = [ {{ name = \"h\", addr = \"{h2_addr}\" }} ]\n\
         [[group]]\nname = \"gbad\"\nserver_protocol = \"h2\"\nservers = [ {{ name = \"b\", addr = \"{web}\" }} ]\n\
         [[group]]\nname = \"gp\"\nserver_protocol = \"h2\"\npersistence = {{ mode = \"insert\", cookie = \"SRV\" }}\n\
         servers = [ {{ name = \"p\", addr = \"{h2_addr}\" }} ]\n",
        web = web.addr()
    );
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, &text).unwrap();
    let cfg = config::load(&path).unwrap_or_else(|d| panic!("{d}\n{text}"));
    let switch = Switch::start(cfg).unwrap();
    let addr = switch.local_addr("web").unwrap();
    Rig { switch, addr, h2, _web: web }
}

async fn h2_client(addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// Status, body and trailers of one HTTP/2 answer.
async fn h2_answer(response: h2::client::ResponseFuture) -> (u16, String, Option<http::HeaderMap>) {
    let response = tokio::time::timeout(Duration::from_secs(10), response).await.unwrap().unwrap();
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await.unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned(), trailers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http11_clients_reach_an_http2_server_with_bodies_and_trailers() {
    let r = rig("h1").await;
    // A GET: the answer comes back chunked, the server's fields on it.
    let got = testkit::get(r.addr, "/h/one").await.unwrap();
    assert_eq!((got.status, got.body_str().as_str()), (200, "h2 GET /h/one\n"));
    assert_eq!(got.header("x-origin"), Some("h2"));
    // Keep-alive: a body with a length, then a chunked one with a trailer, on one connection.
    let mut c = RawClient::connect(r.addr).await.unwrap();
    c.send(b"POST /h/len HTTP/1.1\r\nHost: shop.example\r\nContent-Length: 5\r\n\r\nhello").await.unwrap();
    let got = c.read_response().await.unwrap();
    assert_eq!(got.body_str(), "h2 POST /h/len\nhello");
    let chunked = "POST /h/trailers HTTP/1.1\r\nHost: shop.example\r\nTransfer-Encoding: chunked\r\n\r\n\
                   3\r\nabc\r\n2\r\nde\r\n0\r\nx-check: 42\r\n\r\n";
    c.send(chunked.as_bytes()).await.unwrap();
    let got = c.read_response().await.unwrap();
    assert_eq!(got.body_str(), "h2 POST /h/trailers\nabcde");
    assert_eq!(got.trailers, vec![("x-trailer".to_string(), "done".to_string())], "the server's trailers");
    let seen = r.h2.seen();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|s| s.version == http::Version::HTTP_2));
    assert_eq!(seen[1].authority, "shop.example", "Host became :authority");
    assert_eq!(seen[1].fields.get("content-length").unwrap(), "5");
    assert_eq!(seen[1].fields.get("x-rule").unwrap(), "H", "the rule's setHeader");
    assert!(seen[1].fields.get("x-forwarded-for").is_some());
    assert!(seen[2].fields.get("transfer-encoding").is_none(), "no connection-specific field");
    assert_eq!(seen[2].body, b"abcde", "de-chunked");
    assert_eq!(seen[2].trailers.as_ref().unwrap().get("x-check").unwrap(), "42", "the client's trailers");
    // A path the rules leave to the HTTP/1.1 group.
    let got = testkit::get(r.addr, "/x").await.unwrap();
    assert_eq!(got.status, 200);
    assert_ne!(got.header("x-origin"), Some("h2"));
    assert_eq!(r.h2.connections.load(Ordering::SeqCst), 1, "one server connection for every request");
    assert_eq!(r.switch.stats().get(Counter::H2ServerConnections), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_streams_are_multiplexed_over_one_server_connection() {
    let r = rig("h2").await;
    let mut send = h2_client(r.addr).await;
    let mut pending = Vec::new();
    for i in 0..40 {
        let path = if i % 4 == 0 { format!("/h/trailers/{i}") } else { format!("/h/{i}") };
        let req = http::Request::builder().uri(format!("http://{}{path}", r.addr)).body(()).unwrap();
        send = send.ready().await.unwrap();
        let (response, _) = send.send_request(req, true).unwrap();
        pending.push((path, tokio::spawn(h2_answer(response))));
    }
    for (path, answer) in pending {
        let (status, body, trailers) = answer.await.unwrap();
        assert_eq!((status, body), (200, format!("h2 GET {path}\n")), "each answer to its stream");
        let trailer = trailers.as_ref().and_then(|t| t.get("x-trailer"));
        assert_eq!(trailer.is_some(), path.contains("trailers"), "{path}: {trailers:?}");
    }
    // A POST whose body comes in pieces, without a length, then trailers.
    send = send.ready().await.unwrap();
    let req =
        http::Request::builder().method("POST").uri(format!("http://{}/h/up", r.addr)).body(()).unwrap();
    let (response, mut body) = send.send_request(req, false).unwrap();
    body.send_data(Bytes::from_static(b"one,"), false).unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    body.send_data(Bytes::from_static(b"two"), false).unwrap();
    let mut trailers = http::HeaderMap::new();
    trailers.insert("x-sum", http::HeaderValue::from_static("7"));
    body.send_trailers(trailers).unwrap();
    let (status, text, _) = h2_answer(response).await;
    assert_eq!((status, text.as_str()), (200, "h2 POST /h/up\none,two"));
    let up = r.h2.seen().into_iter().find(|s| s.path == "/h/up").unwrap();
    assert_eq!(up.trailers.unwrap().get("x-sum").unwrap(), "7", "the client's trailers reached the server");
    assert_eq!(r.h2.connections.load(Ordering::SeqCst), 1, "41 streams, one server connection");
    assert_eq!(r.switch.stats().get(Counter::H2ServerConnections), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_speak_http2_is_a_502() {
    let r = rig("not-h2").await;
    // `gbad` says h2, but its server is an HTTP/1.1 origin: the handshake fails.
    let got = testkit::get(r.addr, "/bad/x").await.unwrap();
    assert_eq!(got.status, 502, "{}", got.body_str());
    // The HTTP/2 group is not affected.
    let got = testkit::get(r.addr, "/h/b").await.unwrap();
    assert_eq!((got.status, got.body_str().as_str()), (200, "h2 GET /h/b\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_body_over_the_limit_is_a_413() {
    let r = rig("limit").await;
    let mut c = RawClient::connect(r.addr).await.unwrap();
    let big = "x".repeat(600);
    let chunked = format!(
        "POST /h/big HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n{big}\r\n258\r\n{big}\r\n0\r\n\r\n"
    );
    c.send(chunked.as_bytes()).await.unwrap();
    let got = c.read_response().await.unwrap();
    assert_eq!(got.status, 413, "{}", got.body_str());
    assert_eq!(r.switch.stats().get(Counter::BodyTooLarge), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_server_connection_is_let_go_after_pool_idle() {
    let r = rig("idle").await;
    assert_eq!(testkit::get(r.addr, "/h/1").await.unwrap().status, 200);
    assert_eq!(testkit::get(r.addr, "/h/2").await.unwrap().status, 200);
    assert_eq!(r.h2.connections.load(Ordering::SeqCst), 1);
    // `pool_idle` is 1 s here; the housekeeping looks every second.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(testkit::get(r.addr, "/h/3").await.unwrap().status, 200);
    assert_eq!(r.h2.connections.load(Ordering::SeqCst), 2, "a new connection after the idle one was let go");
    assert_eq!(r.h2.open.load(Ordering::SeqCst), 1, "the idle one closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_persistence_edits_the_answers_of_an_http2_server() {
    let r = rig("persist").await;
    let first = testkit::get(r.addr, "/p/one").await.unwrap();
    assert_eq!((first.status, first.body_str().as_str()), (200, "h2 GET /p/one\n"));
    assert_eq!(first.header("Set-Cookie"), Some("SRV=p; Path=/; HttpOnly"), "{:?}", first.headers);
    let mut c = RawClient::connect(r.addr).await.unwrap();
    c.send(b"GET /p/two HTTP/1.1\r\nHost: t\r\nCookie: SRV=p\r\n\r\n").await.unwrap();
    let again = c.read_response().await.unwrap();
    assert_eq!((again.status, again.body_str().as_str()), (200, "h2 GET /p/two\n"));
    assert_eq!(again.header("Set-Cookie"), None, "a valid cookie is not set again");
    assert!(r.switch.stats().get(Counter::PersistenceHits) >= 1);
}
