//! What tests/http2.rs stands on: a switch with rules in front of four origins (`w` the
//! default group's, `a`, `b`, `c` chosen by path prefix), plain or TLS; real clients run as
//! processes (`curl`, `nghttp`); an HTTP/2 client on the `h2` crate for many streams at
//! once; and a raw-frame client (`raw`) for requests no conforming client would send.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![allow(dead_code)]

pub mod raw;

use bytes::Bytes;
use proxy::Switch;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use testkit::Origin;

pub struct Rig {
    pub switch: Switch,
    pub addr: SocketAddr,
    pub origins: Vec<Origin>,
    pub dir: PathBuf,
}

impl Rig {
    pub fn origin(&self, name: &str) -> &Origin {
        self.origins.iter().find(|o| o.name() == name).unwrap()
    }
}

const RULES: &str = r#"
A: if (prefix(path, "/a/")) { routeTo(ga); }
B: if (prefix(path, "/b/")) { routeTo(gb); }
C: if (prefix(path, "/c/")) { routeTo(gc); }
Admin: if (prefix(path, "/admin")) { deny(403); }
Moved: if (path == "/old") { redirect(301, "https://new.example/"); }
Drop: if (prefix(path, "/drop")) { drop(); }
Big: if (json.order.total > 100) { routeTo(gb); }
"#;

/// The switch and its origins. `kind`: "" (plain, h2c on), "h2c-off", "tls" (ALPN h2 and
/// http/1.1, certificate for a.example), "tls-h1" (ALPN http/1.1 only), "log" (plain,
/// access log to a file), "short-io" (plain, `client_io = "1s"`), "short-idle" (plain,
/// `client_idle = "1s"`), "few-streams" (plain, `h2_max_concurrent_streams = 10`).
pub async fn rig(tag: &str, kind: &str) -> Rig {
    let dir = std::env::temp_dir().join(format!("cswitch-h2-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("web.rules"), RULES).unwrap();
    let mut origins = Vec::new();
    let mut groups = String::new();
    for (group, name) in [("web", "w"), ("ga", "a"), ("gb", "b"), ("gc", "c")] {
        let o = Origin::start(name).await;
        groups.push_str(&format!(
            "[[group]]\nname = \"{group}\"\nservers = [ {{ name = \"{name}\", addr = \"{}\" }} ]\n",
            o.addr()
        ));
        origins.push(o);
    }
    let listener_extra = match kind {
        "h2c-off" => "h2c = false\n".to_string(),
        "short-io" => "[timeouts]\nclient_io = \"1s\"\n".to_string(),
        "short-idle" => "[timeouts]\nclient_idle = \"1s\"\n".to_string(),
        "few-streams" => "[limits]\nh2_max_concurrent_streams = 10\n".to_string(),
        "tls" | "tls-h1" => {
            let made = rcgen::generate_simple_self_signed(vec!["a.example".to_string()]).unwrap();
            std::fs::write(dir.join("a.example.pem"), made.cert.pem()).unwrap();
            std::fs::write(dir.join("a.example.key"), made.signing_key.serialize_pem()).unwrap();
            let alpn = if kind == "tls" { "" } else { "alpn = [\"http/1.1\"]\n" };
            format!("tls = {{ cert = \"a.example.pem\", key = \"a.example.key\" }}\n{alpn}")
        }
        _ => String::new(),
    };
    let log = if kind == "log" {
        format!("[access_log]\nenabled = true\npath = \"{}\"\n", dir.join("access.log").display())
    } else {
        "[access_log]\nenabled = false\n".to_string()
    };
    let text = format!(
        "[global]\nworkers = 1\ngrace_period = \"2s\"\n{log}\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\nrules = \"web.rules\"\n{listener_extra}\n{groups}"
    );
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, &text).unwrap();
    let cfg = config::load(&path).unwrap_or_else(|d| panic!("{d}\n{text}"));
    let switch = Switch::start(cfg).unwrap();
    let addr = switch.local_addr("web").unwrap();
    Rig { switch, addr, origins, dir }
}

/// Runs a client program (bounded: it is killed after 20 s).
pub async fn run(program: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["20".to_string(), program.to_string()];
    all.extend(args.iter().map(|s| s.to_string()));
    tokio::task::spawn_blocking(move || std::process::Command::new("timeout").args(&all).output().unwrap())
        .await
        .unwrap()
}

/// curl's standard output.
pub async fn curl(args: &[&str]) -> String {
    let out = run("curl", args).await;
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What a stream got.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub origin: String,
    pub body: String,
}

async fn connect(addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, conn) = h2::client::Builder::new().max_concurrent_streams(200).handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

async fn answer(response: h2::client::ResponseFuture) -> Answer {
    let response = tokio::time::timeout(Duration::from_secs(10), response).await.unwrap().unwrap();
    let status = response.status().as_u16();
    let origin = response.headers().get("x-origin").map_or("-", |v| v.to_str().unwrap()).to_string();
    let mut body = response.into_body();
    let mut bytes = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        bytes.extend_from_slice(&chunk);
    }
    Answer { status, origin, body: String::from_utf8_lossy(&bytes).into_owned() }
}

fn request(addr: SocketAddr, method: &str, path: &str, fields: &[(&str, &str)]) -> http::Request<()> {
    let mut b = http::Request::builder().method(method).uri(format!("http://{addr}{path}"));
    for (n, v) in fields {
        b = b.header(*n, *v);
    }
    b.body(()).unwrap()
}

/// `n` GETs of `/{a|b|c}/{i}` opened at once on one connection; the answers in order.
pub async fn concurrent_gets(addr: SocketAddr, n: usize) -> Vec<Answer> {
    let mut send = connect(addr).await;
    let mut pending = Vec::new();
    for i in 0..n {
        let path = format!("/{}/{i}", ["a", "b", "c"][i % 3]);
        send = send.ready().await.unwrap();
        let (response, _) = send.send_request(request(addr, "GET", &path, &[]), true).unwrap();
        pending.push(tokio::spawn(answer(response)));
    }
    let mut answers = Vec::new();
    for p in pending {
        answers.push(p.await.unwrap());
    }
    answers
}

/// One GET with these fields, on its own connection.
pub async fn get_with(addr: SocketAddr, path: &str, fields: &[(&str, &str)]) -> Answer {
    let send = connect(addr).await;
    let mut send = send.ready().await.unwrap();
    let (response, _) = send.send_request(request(addr, "GET", path, fields), true).unwrap();
    answer(response).await
}

/// One POST of `body`, in two DATA frames, on its own connection.
pub async fn post(addr: SocketAddr, path: &str, content_type: &str, body: &[u8]) -> Answer {
    let send = connect(addr).await;
    let mut send = send.ready().await.unwrap();
    let (response, mut stream) =
        send.send_request(request(addr, "POST", path, &[("content-type", content_type)]), false).unwrap();
    let (first, second) = body.split_at(body.len() / 2);
    stream.send_data(Bytes::copy_from_slice(first), false).unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    stream.send_data(Bytes::copy_from_slice(second), true).unwrap();
    answer(response).await
}

/// Polls `cond` every 20 ms for at most `limit`.
pub async fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < end {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}

/// `h2spec` on PATH or in Go's bin directory (`go install` puts it there); `None` (the test
/// is skipped) when it is in neither and `CSWITCH_REQUIRE_H2SPEC` is unset.
pub fn h2spec() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).collect();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join("go/bin"));
    }
    if let Some(gopath) = std::env::var_os("GOPATH") {
        dirs.push(PathBuf::from(gopath).join("bin"));
    }
    let found = dirs.into_iter().map(|d| d.join("h2spec")).find(|p| p.is_file());
    if found.is_none() {
        assert!(
            std::env::var_os("CSWITCH_REQUIRE_H2SPEC").is_none(),
            "CSWITCH_REQUIRE_H2SPEC is set but h2spec is not installed \
             (go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible)"
        );
        eprintln!("SKIPPED h2spec: not installed (.ci/run installs it); CSWITCH_REQUIRE_H2SPEC=1 makes this a failure");
    }
    found
}
