//! Test rig for the admin API: testkit origins, a switch loaded from a config file in a
//! temporary directory (so `POST /api/reload` has a file to read), its admin listener on
//! 127.0.0.1:0, and a small client that speaks to both.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test
#![allow(dead_code)]

use cswitch_admin as admin;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit::{Origin, RawClient};

/// A token long enough for the config (16+ characters).
pub const TOKEN: &str = "test-token-0123456789";

/// What the config holds besides the defaults.
#[derive(Default)]
pub struct Spec<'a> {
    /// Origins started; the first `in_config` of them are the group's servers.
    pub origins: &'a [&'a str],
    /// How many of `origins` are in the config (all when 0).
    pub in_config: usize,
    /// Keys of `[[group]]` (besides name and servers).
    pub group: &'a str,
    /// Keys of `[admin]` (besides bind).
    pub admin: &'a str,
    /// A rule file for the listener.
    pub rules: Option<&'a str>,
}

pub struct Rig {
    pub switch: Arc<proxy::Switch>,
    pub admin: admin::AdminHandle,
    /// The listener `web`.
    pub web: SocketAddr,
    pub origins: Vec<Origin>,
    /// The config file.
    pub path: PathBuf,
    /// Sent as a Bearer token by [`Rig::call`].
    pub token: Option<String>,
}

/// A reply from the admin listener.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub response: testkit::Response,
    pub json: Value,
}

impl Reply {
    pub fn text(&self) -> String {
        self.response.body_str()
    }
    pub fn error(&self) -> String {
        self.json["error"].as_str().unwrap_or_default().to_string()
    }
}

pub fn tempdir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("cswitch-admin-test-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The config text for `servers` (name, addr).
pub fn config_text(spec: &Spec, servers: &[(String, SocketAddr)]) -> String {
    let servers: Vec<String> =
        servers.iter().map(|(n, a)| format!("{{ name = \"{n}\", addr = \"{a}\" }}")).collect();
    let rules = if spec.rules.is_some() { "rules = \"web.rules\"\n" } else { "" };
    format!(
        "[global]\nworkers = 1\ngrace_period = \"2s\"\n\n[access_log]\nenabled = false\n\n\
         [admin]\nbind = \"127.0.0.1:0\"\n{}\n\n\
         [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n{rules}\n\
         [[group]]\nname = \"web\"\nscheduler = \"rr\"\n{}\nservers = [ {} ]\n",
        spec.admin,
        spec.group,
        servers.join(", ")
    )
}

impl Rig {
    pub async fn start(spec: Spec<'_>) -> Rig {
        let mut origins = Vec::new();
        for n in spec.origins {
            origins.push(Origin::start(n).await);
        }
        let count = if spec.in_config == 0 { origins.len() } else { spec.in_config };
        let servers: Vec<(String, SocketAddr)> =
            origins[..count].iter().map(|o| (o.name().to_string(), o.addr())).collect();
        let dir = tempdir();
        if let Some(rules) = spec.rules {
            std::fs::write(dir.join("web.rules"), rules).unwrap();
        }
        let path = dir.join("cswitch.toml");
        std::fs::write(&path, config_text(&spec, &servers)).unwrap();
        let config = config::load(&path).unwrap_or_else(|d| panic!("{d}"));
        let token = config.admin.as_ref().and_then(|a| a.token.clone());
        let switch = Arc::new(proxy::Switch::start(config).unwrap());
        let admin = admin::start(Arc::clone(&switch)).unwrap().expect("[admin] is configured");
        let web = switch.local_addr("web").unwrap();
        Rig { switch, admin, web, origins, path, token }
    }

    pub fn origin(&self, name: &str) -> &Origin {
        self.origins.iter().find(|o| o.name() == name).unwrap()
    }

    /// `method path` with `body` (JSON or raw), the rig's token as Bearer.
    pub async fn call(&self, method: &str, path: &str, body: &str) -> Reply {
        let auth = self.token.as_ref().map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
        self.raw(method, path, &auth, body.as_bytes()).await
    }

    /// As [`Rig::call`], with `headers` (each ending in CRLF) instead of the token.
    pub async fn raw(&self, method: &str, path: &str, headers: &str, body: &[u8]) -> Reply {
        let mut c = RawClient::connect(self.admin.local_addr()).await.unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: admin\r\n{headers}Content-Length: {}\r\n\r\n",
            body.len()
        );
        c.send(head.as_bytes()).await.unwrap();
        c.send(body).await.unwrap();
        let response = c.read_response().await.unwrap();
        let json = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
        Reply { status: response.status, response, json }
    }

    pub async fn get_json(&self, path: &str) -> Value {
        let r = self.call("GET", path, "").await;
        assert_eq!(r.status, 200, "GET {path}: {}", r.text());
        r.json
    }

    pub async fn generation(&self) -> u64 {
        self.get_json("/api/status").await["generation"].as_u64().unwrap()
    }

    /// Server `name` of group web as `/api/servers` shows it.
    pub async fn server(&self, name: &str) -> Option<Value> {
        let all = self.get_json("/api/servers").await;
        all.as_array().unwrap().iter().find(|s| s["group"] == "web" && s["name"] == name).cloned()
    }

    /// Polls `/api/servers` until `ok` holds (5 s at most).
    pub async fn wait_servers(&self, what: &str, ok: impl Fn(&[Value]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let all = self.get_json("/api/servers").await;
            if ok(all.as_array().unwrap()) {
                return;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}: {all:#}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until server `name`'s effective weight satisfies `ok`.
    pub async fn wait_weight(&self, name: &str, ok: impl Fn(u64) -> bool) {
        self.wait_servers(&format!("{name}'s effective weight"), |all| {
            all.iter().any(|s| s["name"] == name && s["effective_weight"].as_u64().is_some_and(&ok))
        })
        .await;
    }

    /// One request through the switch on a new connection: which origin answered.
    pub async fn who(&self, path: &str) -> String {
        let r = testkit::get(self.web, path).await.unwrap();
        assert_eq!(r.status, 200, "{}", r.body_str());
        r.header("X-Origin").unwrap().to_string()
    }

    /// `n` requests: the origins that answered them.
    pub async fn spread(&self, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(self.who("/").await);
        }
        out
    }
}

/// Runs `test` with a time limit, so a hang fails instead of blocking the suite.
pub async fn bounded<F: std::future::Future<Output = ()>>(test: F) {
    tokio::time::timeout(Duration::from_secs(60), test).await.expect("test timed out");
}
