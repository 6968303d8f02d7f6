//! gRPC through the switch (issue 15), with a real gRPC server and client (Python's
//! `grpcio`, tests/support/grpc_peer.py): unary, server-streaming, client-streaming and
//! bidirectional calls pass intact, trailers (`grpc-status`, custom metadata) included,
//! routed by `grpc.method` to two servers spoken to over HTTP/2 (`server_protocol = "h2"`),
//! from a plain (h2c) and a TLS (ALPN h2) listener; the switch's refusals (a rule's deny, a
//! server that cannot be reached) reach the client as gRPC statuses, not HTML pages. Needs `python3 -c "import grpc"`: skipped without it
//! unless `CSWITCH_REQUIRE_GRPCIO` is set (CI sets it; `.ci/run` installs grpcio).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

use proxy::{Counter, Switch};
use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use testkit::Origin;

fn peer_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/grpc_peer.py")
}

/// Whether grpcio is there; panics without it when CI requires it.
fn grpcio() -> bool {
    let ok = Command::new("python3").args(["-c", "import grpc"]).output().is_ok_and(|o| o.status.success());
    if !ok && std::env::var_os("CSWITCH_REQUIRE_GRPCIO").is_some() {
        panic!("CSWITCH_REQUIRE_GRPCIO is set and python3 cannot import grpc (pip install grpcio)");
    }
    if !ok {
        eprintln!("skipped: python3 cannot import grpc (pip install grpcio)");
    }
    ok
}

/// A gRPC server process; ended (by its own PID) when dropped.
struct GrpcServer {
    child: Child,
    port: u16,
}

impl GrpcServer {
    fn start(name: &str) -> GrpcServer {
        let mut child = Command::new("python3")
            .arg(peer_script())
            .args(["serve", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().parse().unwrap_or_else(|_| panic!("grpc server said {line:?}"));
        GrpcServer { child, port }
    }
}

impl Drop for GrpcServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const RULES: &str = r#"
Denied: if (grpc.method == "Denied") { deny(403); }
Gone: if (grpc.service == "demo.Gone") { routeTo(ggone); }
Alpha: if (grpc.method == "Unary" || grpc.method == "ServerStream" || grpc.method == "Fail") { routeTo(galpha); }
Beta: if (grpc.method == "ClientStream" || grpc.method == "Bidi") { routeTo(gbeta); }
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_of_every_kind_pass_through_routed_by_method() {
    if !grpcio() {
        return;
    }
    let (alpha, beta) = (GrpcServer::start("alpha"), GrpcServer::start("beta"));
    let web = Origin::start("w").await;
    // A port nothing listens on: bound, then let go.
    let gone = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let dir = std::env::temp_dir().join(format!("cswitch-grpc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("web.rules"), RULES).unwrap();
    let made = rcgen::generate_simple_self_signed(vec!["grpc.example".to_string()]).unwrap();
    std::fs::write(dir.join("grpc.example.pem"), made.cert.pem()).unwrap();
    std::fs::write(dir.join("grpc.example.key"), made.signing_key.serialize_pem()).unwrap();
    let group = |name: &str, server: &str, addr: String| {
        format!("[[group]]\nname = \"{name}\"\nserver_protocol = \"h2\"\nservers = [ {{ name = \"{server}\", addr = \"{addr}\" }} ]\n")
    };
    let text = format!(
        "[global]\nworkers = 1\ngrace_period = \"2s\"\n[access_log]\nenabled = false\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\nrules = \"web.rules\"\n\
         [[listener]]\nname = \"tls\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\nrules = \"web.rules\"\n\
         tls = {{ cert = \"grpc.example.pem\", key = \"grpc.example.key\" }}\n\
         [[group]]\nname = \"web\"\nservers = [ {{ name = \"w\", addr = \"{}\" }} ]\n{}{}{}",
        web.addr(),
        group("galpha", "alpha", format!("127.0.0.1:{}", alpha.port)),
        group("gbeta", "beta", format!("127.0.0.1:{}", beta.port)),
        group("ggone", "gone", gone.to_string()),
    );
    let path = dir.join("cswitch.toml");
    std::fs::write(&path, &text).unwrap();
    let switch = Switch::start(config::load(&path).unwrap_or_else(|d| panic!("{d}\n{text}"))).unwrap();

    // The same calls over a plain (h2c) and a TLS (ALPN h2) listener.
    check(&call(switch.local_addr("web").unwrap(), None).await);
    let ca = dir.join("grpc.example.pem");
    check(&call(switch.local_addr("tls").unwrap(), Some((&ca, "grpc.example"))).await);
    let stats = switch.stats();
    assert_eq!(stats.get(Counter::GrpcStatusAnswers), 4);
    assert_eq!(stats.get(Counter::H2ServerConnections), 2, "one connection to each server, shared");
    assert_eq!(web.requests().len(), 0, "no call fell to the HTTP/1.1 group");
}

/// The client's report of every call through `addr` (over TLS, trusting `tls`'s
/// certificate for its name, when given).
async fn call(addr: std::net::SocketAddr, tls: Option<(&std::path::Path, &str)>) -> serde_json::Value {
    let mut args = vec!["60".to_string(), "python3".into(), peer_script().to_str().unwrap().into()];
    args.extend(["call".to_string(), addr.to_string()]);
    if let Some((ca, name)) = tls {
        args.extend([ca.to_str().unwrap().to_string(), name.to_string()]);
    }
    let out = tokio::task::spawn_blocking(move || Command::new("timeout").args(args).output().unwrap())
        .await
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "client failed: {report}\n{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(&report).unwrap()
}

/// Every kind of call whole, from the server its method is routed to; statuses intact;
/// the switch's refusals as gRPC statuses.
fn check(r: &serde_json::Value) {
    assert_eq!(r["unary"], "alpha:unary:hi");
    assert_eq!(r["unary_code"], "OK");
    assert_eq!(r["unary_trailers"]["x-served-by"], "alpha", "the server's trailers: {r}");
    assert_eq!(r["server_stream"], serde_json::json!(["alpha:ss0:s", "alpha:ss1:s", "alpha:ss2:s"]));
    assert_eq!(r["client_stream"], "beta:cs:a+b+c");
    assert_eq!(r["bidi"], serde_json::json!(["beta:bidi:m0", "beta:bidi:m1", "beta:bidi:m2"]));
    // A server's own status passes intact.
    assert_eq!(r["fail"], serde_json::json!({"code": "NOT_FOUND", "details": "alpha has no thing"}));
    // The switch's refusals, as gRPC statuses.
    assert_eq!(r["denied"]["code"], "PERMISSION_DENIED", "{r}");
    assert_eq!(r["denied"]["details"], "cswitch: 403 denied by rule");
    assert_eq!(r["gone"]["code"], "UNAVAILABLE", "{r}");
    assert!(r["gone"]["details"].as_str().unwrap().starts_with("cswitch: 502"), "{r}");
}
