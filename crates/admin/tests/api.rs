//! The admin listener's read side over real sockets: every view, the token, HTTP limits and
//! errors, the Prometheus exposition and explain. Mutations are in `edits.rs`.
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod rig;

use cswitch_admin as admin;
use rig::{bounded, Rig, Spec, TOKEN};
use std::collections::HashMap;
use std::sync::Arc;

const RULES: &str = "Gifs: if (match(url, \"[.]gif$\")) { deny(403); }\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_view_answers_with_json() {
    bounded(async {
        let rig = Rig::start(Spec { origins: &["s1", "s2"], rules: Some(RULES), ..Spec::default() }).await;
        assert_ne!(rig.admin.local_addr().port(), 0, "port 0 is resolved");
        let status = rig.get_json("/api/status").await;
        assert_eq!(status["generation"], 0);
        assert_eq!(status["listeners"][0]["name"], "web");
        assert_eq!(status["listeners"][0]["bind"], rig.web.to_string());
        assert!(status["counters"]["requests"].is_u64(), "{status:#}");
        let groups = rig.get_json("/api/groups").await;
        assert_eq!(groups[0]["name"], "web");
        assert_eq!(groups[0]["servers"], 2);
        let servers = rig.get_json("/api/servers").await;
        assert_eq!(servers.as_array().unwrap().len(), 2);
        assert_eq!(servers[0]["addr"], rig.origin("s1").addr().to_string());
        assert_eq!(servers[0]["state"], "ready");
        let web = rig.get_json("/api/servers?group=web").await;
        assert_eq!(web.as_array().unwrap().len(), 2);
        let none = rig.call("GET", "/api/servers?group=nope", "").await;
        assert_eq!((none.status, none.error()), (404, "no group `nope`".to_string()));
        let tables = rig.get_json("/api/stick-tables").await;
        let names: Vec<&str> =
            tables.as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["sticky_ip", "tls_sessions"]);
        let rules = rig.get_json("/api/rules").await;
        assert_eq!(rules[0]["rules"][0]["label"], "Gifs");
        assert_eq!(rules[0]["rules"][0]["hits"], 0);
        assert_eq!(testkit::get(rig.web, "/a.gif").await.unwrap().status, 403);
        assert_eq!(rig.get_json("/api/rules").await[0]["rules"][0]["hits"], 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_paths_wrong_methods_and_the_page() {
    bounded(async {
        let rig = Rig::start(Spec { origins: &["s1"], ..Spec::default() }).await;
        let page = rig.call("GET", "/", "").await;
        assert_eq!(page.status, 200);
        assert_eq!(page.response.header("Content-Type"), Some("text/html; charset=utf-8"));
        assert_eq!(page.text(), include_str!("../assets/stats.html"));
        assert_eq!(rig.call("GET", "/favicon.ico", "").await.status, 404);
        let missing = rig.call("GET", "/api/nope", "").await;
        assert_eq!((missing.status, missing.error()), (404, "no such path: /api/nope".to_string()));
        let wrong = rig.call("DELETE", "/api/status", "").await;
        assert_eq!(wrong.status, 405);
        assert_eq!(wrong.response.header("Allow"), Some("GET"));
        assert!(wrong.error().contains("use GET"), "{}", wrong.error());
        let wrong = rig.call("GET", "/api/servers/web/s1", "").await;
        assert_eq!((wrong.status, wrong.response.header("Allow")), (405, Some("PATCH, DELETE")));
        assert_eq!(rig.call("GET", "/api/reload", "").await.status, 405);
        assert_eq!(rig.call("GET", "/api/cluster/drain", "").await.status, 405);
        // Draining out of an L4 tier needs a cluster to drain from.
        let alone = rig.call("POST", "/api/cluster/drain", "").await;
        assert_eq!(alone.status, 409, "{}", alone.text());
        assert!(alone.error().contains("no [cluster]"), "{}", alone.error());
        for r in [&missing, &wrong] {
            assert_eq!(r.response.header("Content-Type"), Some("application/json"));
            assert_eq!(r.response.header("Connection"), Some("close"));
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_required_everywhere_when_configured() {
    bounded(async {
        let admin = format!("token = \"{TOKEN}\"");
        let rig = Rig::start(Spec { origins: &["s1"], admin: &admin, ..Spec::default() }).await;
        for path in ["/api/status", "/api/servers", "/api/history", "/metrics", "/"] {
            let none = rig.raw("GET", path, "", b"").await;
            assert_eq!(none.status, 401, "{path}");
            // Only the page asks a browser for a password; the API answers a plain 401.
            let challenge = (path == "/").then_some("Basic realm=\"cswitch\"");
            assert_eq!(none.response.header("WWW-Authenticate"), challenge, "{path}");
            assert_eq!(none.error(), "missing or wrong admin token");
            let wrong = rig.raw("GET", path, "Authorization: Bearer test-token-0123456780\r\n", b"").await;
            assert_eq!(wrong.status, 401, "{path}");
            assert_eq!(rig.call("GET", path, "").await.status, 200, "{path}");
        }
        // A browser: Basic, any user, the token as password ("admin:" + TOKEN in base64).
        let basic = "Authorization: Basic YWRtaW46dGVzdC10b2tlbi0wMTIzNDU2Nzg5\r\n";
        assert_eq!(rig.raw("GET", "/", basic, b"").await.status, 200);
        // A mutation without the token changes nothing.
        let before = rig.generation().await;
        let refused = rig.raw("PATCH", "/api/servers/web/s1", "", br#"{"weight": 5}"#).await;
        assert_eq!(refused.status, 401);
        assert_eq!(rig.generation().await, before);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_can_change_the_token() {
    bounded(async {
        let mut rig = Rig::start(Spec { origins: &["s1"], ..Spec::default() }).await;
        assert_eq!(rig.raw("GET", "/api/status", "", b"").await.status, 200, "no token configured");
        let text = std::fs::read_to_string(&rig.path).unwrap();
        let with_token = text.replace(
            "bind = \"127.0.0.1:0\"\n\n",
            &format!("bind = \"127.0.0.1:0\"\ntoken = \"{TOKEN}\"\n\n"),
        );
        assert_ne!(text, with_token);
        std::fs::write(&rig.path, with_token).unwrap();
        assert_eq!(rig.call("POST", "/api/reload", "").await.status, 200);
        assert_eq!(rig.raw("GET", "/api/status", "", b"").await.status, 401);
        rig.token = Some(TOKEN.into());
        assert_eq!(rig.call("GET", "/api/status", "").await.status, 200);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_malformed_requests_are_refused() {
    bounded(async {
        let rig = Rig::start(Spec { origins: &["s1"], ..Spec::default() }).await;
        let big_head = format!("X-Big: {}\r\n", "a".repeat(17 * 1024));
        assert_eq!(rig.raw("GET", "/api/status", &big_head, b"").await.status, 431);
        let big_body = vec![b'x'; (1 << 20) + 1];
        let r = rig.raw("POST", "/api/explain", "", &big_body).await;
        assert_eq!((r.status, r.error()), (413, "request body larger than 1 MiB".to_string()));
        let chunked = rig.raw("POST", "/api/reload", "Transfer-Encoding: chunked\r\n", b"").await;
        assert_eq!(chunked.status, 501);
        let mut c = testkit::RawClient::connect(rig.admin.local_addr()).await.unwrap();
        c.send(b"NOT A REQUEST\r\n\r\n").await.unwrap();
        assert_eq!(c.read_response().await.unwrap().status, 400);
        // The listener still serves after all that.
        assert_eq!(rig.call("GET", "/api/status", "").await.status, 200);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_and_count_requests() {
    bounded(async {
        let rig = Rig::start(Spec { origins: &["s1"], rules: Some(RULES), ..Spec::default() }).await;
        for _ in 0..5 {
            rig.who("/").await;
        }
        assert_eq!(testkit::get(rig.web, "/x.gif").await.unwrap().status, 403);
        // A request is recorded just after its last byte leaves: wait until all six are.
        let mut r = rig.call("GET", "/metrics", "").await;
        for _ in 0..50 {
            if r.text().contains("cswitch_listener_requests_total{listener=\"web\"} 6\n") {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            r = rig.call("GET", "/metrics", "").await;
        }
        assert_eq!(r.status, 200);
        assert_eq!(
            r.response.header("Content-Type"),
            Some("application/openmetrics-text; version=1.0.0; charset=utf-8")
        );
        let text = r.text();
        let samples = parse_exposition(&text);
        let get = |k: &str| *samples.get(k).unwrap_or_else(|| panic!("no {k} in\n{text}"));
        let s1 = "group=\"web\",server=\"s1\"";
        assert_eq!(get(&format!("cswitch_server_requests_total{{{s1}}}")), 5.0);
        assert_eq!(get(&format!("cswitch_server_responses_total{{{s1},class=\"2xx\"}}")), 5.0);
        assert_eq!(get(&format!("cswitch_server_latency_seconds_count{{{s1}}}")), 5.0);
        assert_eq!(get(&format!("cswitch_server_latency_seconds_bucket{{le=\"+Inf\",{s1}}}")), 5.0);
        assert!(get(&format!("cswitch_server_latency_seconds_sum{{{s1}}}")) > 0.0);
        assert_eq!(get(&format!("cswitch_server_up{{{s1}}}")), 1.0);
        assert_eq!(get(&format!("cswitch_server_state{{{s1},state=\"ready\"}}")), 1.0);
        assert_eq!(get(&format!("cswitch_server_state{{{s1},state=\"drain\"}}")), 0.0);
        assert_eq!(get(&format!("cswitch_server_effective_weight{{{s1}}}")), 1.0);
        assert_eq!(get("cswitch_listener_requests_total{listener=\"web\"}"), 6.0);
        assert_eq!(get("cswitch_listener_responses_total{listener=\"web\",class=\"4xx\"}"), 1.0);
        assert_eq!(get("cswitch_group_servers_usable{group=\"web\"}"), 1.0);
        assert_eq!(get("cswitch_rule_hits_total{listener=\"web\",rule=\"Gifs\"}"), 1.0);
        assert_eq!(get("cswitch_listener_refusals_total{listener=\"web\",reason=\"rule_denied\"}"), 1.0);
        assert_eq!(get("cswitch_listener_refusals_total{listener=\"web\",reason=\"no_server\"}"), 0.0);
        assert_eq!(get("cswitch_connections_accepted_total"), 6.0);
        assert_eq!(get("cswitch_pool_reused_total"), 0.0);
        assert_eq!(get(&format!("cswitch_server_active_requests{{{s1}}}")), 0.0);
        assert!(get(&format!("cswitch_server_received_bytes_total{{{s1}}}")) > 0.0);
        assert!(get(&format!("cswitch_server_sent_bytes_total{{{s1}}}")) > 0.0);
        assert!(get("cswitch_listener_received_bytes_total{listener=\"web\"}") > 0.0);
        assert_eq!(get("cswitch_reloads_total"), 0.0);
        assert_eq!(get("cswitch_reloads_failed_total"), 0.0);
        assert_eq!(get("cswitch_config_generation"), 0.0);
        assert!(text.contains("# TYPE cswitch_server_latency_seconds histogram\n"), "{text}");
        assert!(text.contains("# UNIT cswitch_server_latency_seconds seconds\n"), "{text}");
        assert!(get("process_resident_memory_bytes") > 1e6);
        assert!(get("process_cpu_seconds_total") > 0.0);
        assert!(get("process_open_fds") >= 3.0);
        assert!(get("process_max_fds") >= get("process_open_fds"));
        assert!(get("process_start_time_seconds") > 1.6e9);
        // The old mixed families and names are gone.
        for old in
            ["cswitch_events", "cswitch_refusals_total", "cswitch_server_active{", "_receive_", "_transmit_"]
        {
            assert!(!text.contains(old), "{old} still exported:\n{text}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_check_failures_per_server_and_refusals_per_listener() {
    bounded(async {
        // s1 answers its health check with 503: it goes down, and requests find no server.
        let group = "health = { check = \"http\", path = \"/status/503\", interval = \"100ms\", \
                     timeout = \"50ms\", rise = 1, fall = 1 }";
        let rig = Rig::start(Spec { origins: &["s1"], group, ..Spec::default() }).await;
        rig.wait_servers("s1 down", |all| all[0]["health"] == "down").await;
        rig.wait_weight("s1", |w| w == 0).await;
        assert_eq!(testkit::get(rig.web, "/").await.unwrap().status, 503);
        let text = rig.call("GET", "/metrics", "").await.text();
        let samples = parse_exposition(&text);
        let get = |k: &str| *samples.get(k).unwrap_or_else(|| panic!("no {k} in\n{text}"));
        assert!(get("cswitch_server_health_check_failures_total{group=\"web\",server=\"s1\"}") >= 1.0);
        assert_eq!(get("cswitch_listener_refusals_total{listener=\"web\",reason=\"no_server\"}"), 1.0);
        assert_eq!(get("cswitch_servers_taken_out_total{by=\"active_check\"}"), 1.0);
        assert_eq!(get("cswitch_server_up{group=\"web\",server=\"s1\"}"), 0.0);
        let status = rig.get_json("/api/status").await;
        assert_eq!(status["listeners"][0]["refusals"]["no_server"], 1, "{status:#}");
        assert!(rig.server("s1").await.unwrap()["check_failures"].as_u64().unwrap() >= 1);
    })
    .await;
}

/// Checks every line's form (comments, `# EOF` once at the end, `name{labels} value`,
/// cumulative histogram buckets) and returns the samples by `name{labels}`.
fn parse_exposition(text: &str) -> HashMap<String, f64> {
    assert!(text.ends_with("# EOF\n"), "no final # EOF:\n{text}");
    assert_eq!(text.matches("# EOF").count(), 1);
    let mut samples = HashMap::new();
    let mut last_bucket: Option<(String, f64)> = None;
    for line in text.lines() {
        if let Some(comment) = line.strip_prefix("# ") {
            let kind = comment.split(' ').next().unwrap();
            assert!(["HELP", "TYPE", "UNIT", "EOF"].contains(&kind), "{line}");
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {line}"));
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value: {line}"));
        let name = series.split('{').next().unwrap();
        assert!(!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{line}");
        assert!(!series.contains('{') || series.ends_with('}'), "{line}");
        if name.ends_with("_bucket") {
            let le = series.find("le=\"").unwrap_or_else(|| panic!("no le: {line}"));
            let end = le + series[le + 4..].find('"').unwrap() + 5;
            let key = format!("{}{}", &series[..le], &series[end..]);
            if let Some((prev_key, prev)) = &last_bucket {
                assert!(*prev_key != key || value >= *prev, "buckets are cumulative: {line}");
            }
            last_bucket = Some((key, value));
        }
        assert!(samples.insert(series.to_string(), value).is_none(), "duplicate series: {line}");
    }
    samples
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_returns_the_decision() {
    bounded(async {
        let rig = Rig::start(Spec { origins: &["s1"], rules: Some(RULES), ..Spec::default() }).await;
        let plain = rig.call("POST", "/api/explain", "GET /index.html HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert_eq!(plain.status, 200, "{}", plain.text());
        assert_eq!(plain.json["action"], "default");
        assert_eq!(plain.json["group"], "web");
        assert_eq!(plain.json["server"], "s1");
        assert_eq!(plain.json["server_addr"], rig.origin("s1").addr().to_string());
        let gif = rig
            .call("POST", "/api/explain?listener=web&src=10.0.0.1:4000", "GET /a.gif HTTP/1.1\nHost: x\n\n")
            .await;
        assert_eq!(gif.status, 200, "{}", gif.text());
        assert_eq!((gif.json["action"].as_str(), gif.json["rule"].as_str()), (Some("deny"), Some("Gifs")));
        assert!(gif.json["trace"].as_str().unwrap().contains("Gifs"), "{}", gif.text());
        for (path, body, error) in [
            ("/api/explain", "", "the body must be the raw request to explain"),
            ("/api/explain?listener=nope", "GET / HTTP/1.1\r\n\r\n", "no listener `nope`"),
            ("/api/explain?src=nowhere", "GET / HTTP/1.1\r\n\r\n", "src `nowhere` is not IP:port"),
            ("/api/explain?listner=web", "GET / HTTP/1.1\r\n\r\n", "unknown query parameter `listner`"),
        ] {
            let r = rig.call("POST", path, body).await;
            assert_eq!(r.status, 400, "{path}");
            assert!(r.error().contains(error), "{path}: {}", r.error());
        }
        let garbage = rig.call("POST", "/api/explain", "not http at all").await;
        assert_eq!(garbage.status, 400, "{}", garbage.text());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_closes_the_listener_and_no_admin_section_starts_nothing() {
    bounded(async {
        let mut rig = Rig::start(Spec { origins: &["s1"], ..Spec::default() }).await;
        let addr = rig.admin.local_addr();
        rig.admin.stop();
        assert!(tokio::net::TcpStream::connect(addr).await.is_err(), "nothing listens after stop");
        let text =
            std::fs::read_to_string(&rig.path).unwrap().replace("[admin]\nbind = \"127.0.0.1:0\"\n", "");
        let config = config::parse(&text, std::path::Path::new("t.toml")).unwrap();
        assert!(config.admin.is_none());
        let switch = Arc::new(proxy::Switch::start(config).unwrap());
        assert!(admin::start(switch).unwrap().is_none());
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_keeps_a_point_a_second_per_server() {
    bounded(async {
        let rig = Rig::start(Spec { origins: &["s1", "s2"], ..Spec::default() }).await;
        for _ in 0..4 {
            rig.who("/").await;
        }
        let mut history = rig.get_json("/api/history").await;
        for _ in 0..50 {
            if history["servers"][0]["points"].as_array().is_some_and(|p| p.len() >= 3) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            history = rig.get_json("/api/history").await;
        }
        assert_eq!(history["interval_secs"], 1);
        assert_eq!(history["points_kept"], 300);
        let servers = history["servers"].as_array().unwrap();
        let names: Vec<&str> = servers.iter().map(|s| s["server"].as_str().unwrap()).collect();
        assert_eq!(names, ["s1", "s2"]);
        let points = servers[0]["points"].as_array().unwrap();
        assert!(points.len() >= 3, "{history:#}");
        // [uptime, req/s, p90 µs]: times a second apart, the first without a rate.
        let t: Vec<f64> = points.iter().map(|p| p[0].as_f64().unwrap()).collect();
        assert!(t.windows(2).all(|w| (0.5..1.5).contains(&(w[1] - w[0]))), "{t:?}");
        assert!(points[0][1].is_null());
        assert!(points[1..].iter().all(|p| p[1].as_f64().is_some_and(|r| r >= 0.0)), "{history:#}");
        assert!(t[t.len() - 1] <= rig.get_json("/api/status").await["uptime_secs"].as_f64().unwrap());
    })
    .await;
}
