//! `explain` tells the truth: requests sent to a running switch and the same requests
//! explained through its admin API must name the same server or the same refusal, row by
//! row — persistence cookies of each mode, learned cookies, stick-table modes, sticky-IP
//! entries from other source addresses, keyed schedulers, rules, and requests the switch
//! refuses before routing.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod rig;

use cswitch_admin as admin;
use rig::bounded;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;
use testkit::{Origin, RawClient};

const RULES: &str = "Denied: if (prefix(path, \"/admin\")) { deny(403); }\n\
Moved: if (prefix(path, \"/old\")) { redirect(301, \"http://example.com/new\"); }\n\
Sticky: if (prefix(path, \"/cart\")) { routeTo(sticky, STICKY_IP); }\n";

/// Listener name → (its group's scheduler, persistence and hash key).
const GROUPS: &[(&str, &str)] = &[
    ("insert", "scheduler = \"first\"\npersistence = { mode = \"insert\", cookie = \"SRV\" }"),
    ("prefix", "scheduler = \"first\"\npersistence = { mode = \"prefix\", cookie = \"JSESSIONID\" }"),
    ("learn", "scheduler = \"rr\"\npersistence = { mode = \"learn\", cookie = \"sid\" }"),
    ("rename", "scheduler = \"first\"\npersistence = { mode = \"rename\", cookie = \"PHPSESSID\" }"),
    ("source", "scheduler = \"rr\"\npersistence = { mode = \"source\" }"),
    ("header", "scheduler = \"rr\"\npersistence = { mode = \"header\", header = \"X-User\" }"),
    ("url", "scheduler = \"rr\"\npersistence = { mode = \"url_param\", param = \"user\" }"),
    ("hash", "scheduler = \"consistent\"\nhash_key = \"url\""),
    ("maglev", "scheduler = \"maglev\"\nhash_key = \"header:X-User\""),
    ("plain", "scheduler = \"first\""),
    ("sticky", "scheduler = \"rr\""),
];

struct Table {
    switch: Arc<proxy::Switch>,
    admin: admin::AdminHandle,
    _origins: Vec<Origin>,
}

impl Table {
    async fn start() -> Table {
        let mut origins = Vec::new();
        for name in ["a1", "a2", "a3"] {
            origins.push(Origin::start(name).await);
        }
        let servers: Vec<String> = origins
            .iter()
            .map(|o| format!("{{ name = \"{}\", addr = \"{}\" }}", o.name(), o.addr()))
            .collect();
        let mut text = String::from(
            "[global]\nworkers = 1\n[access_log]\nenabled = false\n[limits]\nmax_body_bytes = 1000\n\
             [admin]\nbind = \"127.0.0.1:0\"\n",
        );
        for (name, _) in GROUPS.iter().filter(|(n, _)| *n != "sticky" && *n != "plain") {
            text += &format!(
                "[[listener]]\nname = \"{name}\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"{name}\"\n"
            );
        }
        text += "[[listener]]\nname = \"rules\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"plain\"\nrules = \"web.rules\"\n";
        for (name, keys) in GROUPS {
            text += &format!("[[group]]\nname = \"{name}\"\n{keys}\nservers = [ {} ]\n", servers.join(", "));
        }
        let dir = rig::tempdir();
        std::fs::write(dir.join("web.rules"), RULES).unwrap();
        let path = dir.join("cswitch.toml");
        std::fs::write(&path, text).unwrap();
        let config = config::load(&path).unwrap_or_else(|d| panic!("{d}"));
        let switch = Arc::new(proxy::Switch::start(config).unwrap());
        let admin = admin::start(Arc::clone(&switch)).unwrap().unwrap();
        Table { switch, admin, _origins: origins }
    }

    /// Sends `raw` from `src` to `listener`: the origin that answered, else the status.
    async fn send(&self, listener: &str, src: &str, raw: &[u8]) -> String {
        let addr = self.switch.local_addr(listener).unwrap();
        let local: SocketAddr = format!("{src}:0").parse().unwrap();
        let mut c = RawClient::connect_from(local, addr).await.unwrap();
        let _ = c.send(raw).await; // a refused head may be cut short
        let r = c.read_response().await.unwrap();
        match r.header("X-Origin") {
            Some(origin) => origin.to_string(),
            None => r.status.to_string(),
        }
    }

    /// Explains `raw` from `src` on `listener` through the admin API: the server named,
    /// else the status of the switch's own answer.
    async fn explain(&self, listener: &str, src: &str, raw: &[u8]) -> (String, Value) {
        let mut c = RawClient::connect(self.admin.local_addr()).await.unwrap();
        let head = format!(
            "POST /api/explain?listener={listener}&src={src}:40000 HTTP/1.1\r\nHost: admin\r\nContent-Length: {}\r\n\r\n",
            raw.len()
        );
        c.send(head.as_bytes()).await.unwrap();
        c.send(raw).await.unwrap();
        let r = c.read_response().await.unwrap();
        let json: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(r.status, 200, "{json}");
        let named = match (json["server"].as_str(), json["status"].as_u64()) {
            (Some(server), _) => server.to_string(),
            (None, Some(status)) => status.to_string(),
            _ => format!("nothing: {json}"),
        };
        (named, json)
    }

    /// Sends, then explains: both must name the same server or refusal.
    async fn row(&self, listener: &str, src: &str, raw: &str) -> String {
        let sent = self.send(listener, src, raw.as_bytes()).await;
        let (explained, json) = self.explain(listener, src, raw.as_bytes()).await;
        assert_eq!(sent, explained, "{listener} from {src}: {raw:?}\nexplained as {json:#}");
        sent
    }
}

fn get(path: &str, headers: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: shop\r\n{headers}\r\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_names_what_the_switch_does() {
    bounded(async {
        let t = Table::start().await;
        let mut rows = 0;
        // insert: our cookie names the server; none: the scheduler (`first`).
        t.row("insert", "127.0.0.1", &get("/", "Cookie: SRV=a2\r\n")).await;
        rows += 1;
        t.row("insert", "127.0.0.1", &get("/", "Cookie: lang=en; SRV=a3\r\n")).await;
        rows += 1;
        assert_eq!(t.row("insert", "127.0.0.1", &get("/", "")).await, "a1");
        rows += 1;
        // prefix: the server's session cookie carries the server.
        t.row("prefix", "127.0.0.1", &get("/", "Cookie: JSESSIONID=a3~abc\r\n")).await;
        rows += 1;
        // learn: the cookie each server set, learnt from its response.
        let mut learnt = Vec::new();
        for _ in 0..3 {
            learnt.push(t.send("learn", "127.0.0.1", get("/login/sid", "").as_bytes()).await);
        }
        for server in &learnt {
            let cookie = format!("Cookie: sid={server}-session\r\n");
            assert_eq!(&t.row("learn", "127.0.0.1", &get("/", &cookie)).await, server);
            rows += 1;
        }
        // rename: the renamed cookie's server code.
        assert_eq!(t.row("rename", "127.0.0.1", &get("/", "Cookie: CS000001D=abc\r\n")).await, "a2");
        rows += 1;
        // source: the client address in the stick table, from two addresses.
        for src in ["127.0.0.2", "127.0.0.3"] {
            let first = t.send("source", src, get("/", "").as_bytes()).await;
            assert_eq!(t.row("source", src, &get("/", "")).await, first);
            rows += 1;
        }
        // header and url_param stick tables.
        let first = t.send("header", "127.0.0.1", get("/", "X-User: alice\r\n").as_bytes()).await;
        assert_eq!(t.row("header", "127.0.0.1", &get("/", "X-User: alice\r\n")).await, first);
        let first = t.send("url", "127.0.0.1", get("/?user=bob", "").as_bytes()).await;
        assert_eq!(t.row("url", "127.0.0.1", &get("/?user=bob&x=1", "")).await, first);
        rows += 2;
        // keyed schedulers.
        for path in ["/a", "/b/c", "/d?e=f"] {
            t.row("hash", "127.0.0.1", &get(path, "")).await;
            rows += 1;
        }
        for user in ["carol", "dave"] {
            t.row("maglev", "127.0.0.1", &get("/", &format!("X-User: {user}\r\n"))).await;
            rows += 1;
        }
        // rules: deny, redirect, default; a sticky-IP entry from two source addresses,
        // followed by later requests that no rule would route.
        assert_eq!(t.row("rules", "127.0.0.1", &get("/admin/x", "")).await, "403");
        assert_eq!(t.row("rules", "127.0.0.1", &get("/old/page", "")).await, "301");
        assert_eq!(t.row("rules", "127.0.0.1", &get("/", "")).await, "a1");
        rows += 3;
        for src in ["127.0.0.4", "127.0.0.5"] {
            let pinned = t.row("rules", src, &get("/cart", "")).await;
            assert_eq!(t.row("rules", src, &get("/elsewhere", "")).await, pinned, "the sticky entry decides");
            rows += 2;
        }
        // refused before routing: the same checks, the same status.
        let refusals = [
            ("GET / HTTP/1.1\r\n\r\n".to_string(), "400"),
            (format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "b".repeat(20_000)), "431"),
            (
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                    .into(),
                "400",
            ),
            ("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: br\r\n\r\n".into(), "501"),
            ("GET / HTTP/2.0\r\nHost: x\r\n\r\n".into(), "505"),
            ("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n".into(), "413"),
        ];
        for (raw, status) in refusals {
            assert_eq!(t.row("insert", "127.0.0.1", &raw).await, status, "{raw:.60}");
            rows += 1;
        }
        assert!(rows >= 20, "{rows} rows");
    })
    .await;
}
