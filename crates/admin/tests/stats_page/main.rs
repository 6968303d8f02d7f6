//! The stats page (`GET /` of the admin listener) in headless Chromium: it renders a table
//! per group with a row per server, and its numbers move under load.
//!
//! Chromium is driven over the DevTools protocol (a WebSocket on `--remote-debugging-port`)
//! rather than with `--dump-dom`: in today's headless mode `--dump-dom` dumps at the load
//! event (`--timeout` only caps that wait), and `--virtual-time-budget` runs the page's
//! timers on a virtual clock, so a page that polls every second would see a few
//! milliseconds of real traffic, not seconds. Over the protocol the page runs in real time
//! while the test sends load, and the test takes the DOM (`outerHTML`) when it wants it.
//!
//! Chromium is Debian's `chromium` package, found on `PATH`; `.ci/run` installs it, so CI
//! runs this test. Elsewhere, without chromium, the test says why and passes, unless
//! `CSWITCH_REQUIRE_CHROMIUM` is set: then a missing chromium is a failure.
//!
//! Looks at the DOM: just opened (the charts already hold the admin listener's history), at
//! rest (a row per server, numbers equal to the API's), under load (counters up, req/s and
//! windowed p90 shown), after clicking the row controls (the server's state and weight
//! changed in the switch, the maint badge shown), and with the admin listener stopped (the
//! error banner, the last data kept). `CSWITCH_SCREENSHOT=path` also writes a PNG of
//! the whole page (1280 px wide) under load, after 40 s more of traffic so that the charts
//! have a history (`docs/stats-page.png` was made that way).
#![allow(clippy::unwrap_used)] // tests: a failed unwrap is a failed test

mod browser;
mod dom;

use base64::Engine;
use browser::{chromium, Browser, Cdp};
use cswitch_admin as admin;
use dom::{Dom, Row};
use proxy::Switch;
use serde_json::json;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit::{Origin, RawClient};
use tokio::task::JoinHandle;

/// Every field a server row shows as a `td[data-field]`.
const SERVER_FIELDS: &str =
    "state health weight effective_weight capacity active queued maxconn requests rps \
     p50 p90 p99 errors bytes_in bytes_out";

/// Images go to the `static` group; `/admin` is refused — so both rules get hits.
const RULES: &str = "Images: if (match(url, \"[.](gif|png|jpg)$\")) { routeTo(static); }\n\
                     Admin: if (prefix(path, \"/admin\")) { deny(403); }\n";

/// What the load clients ask for, in turn: pages, images, slower pages, a refused path and
/// a server error now and then.
const PATHS: &str = "/ /img/a.gif /index.html /slow/2 /img/b.png / /slow/6 /img/c.jpg /index.html / \
                     /slow/1 /img/a.gif / /admin/users /slow/12 /index.html /img/d.gif / /slow/3 /status/503";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stats_page_renders_every_server_and_its_numbers_move_under_load() {
    let Some(chromium) = chromium() else { return };
    let dir = TempDir::new();
    let outcome = tokio::time::timeout(Duration::from_secs(150), run(&chromium, &dir.0)).await;
    outcome.expect("the stats page test took over 150 s");
}

/// The config, the rule file, chromium's profile and log; removed when dropped, even after
/// a failed assertion (chromium, dropped first, is dead by then).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let dir = std::env::temp_dir().join(format!("cswitch-stats-page-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn run(chromium: &Path, dir: &Path) {
    let started = Instant::now();
    let mut rig = Rig::start(dir).await;
    let checked = wait_for(Duration::from_secs(5), || {
        let servers = rig.switch.servers();
        servers.iter().any(|s| s.name == "s4" && s.health == "down")
            && servers.iter().filter(|s| s.group == "web" && s.health == "up").count() == 3
    })
    .await;
    assert!(checked, "health checks did not settle: {:?}", rig.switch.servers());
    warm_up(rig.web, 25).await;
    // A few seconds of history for the page to find when it opens.
    let admin_addr = rig.admin.local_addr();
    let mut history = 0;
    for _ in 0..100 {
        history = history_points(admin_addr, "s1").await;
        if history >= 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(history >= 4, "/api/history holds {history} points for s1 after 10 s");

    let mut browser = Browser::launch(chromium, dir);
    let mut page = browser.page().await;
    let url = format!("http://{}/", rig.admin.local_addr());
    page.call(
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
    )
    .await;
    page.call("Page.navigate", json!({ "url": url })).await;

    // Just opened: one poll, yet the req/s chart has the history's points (a page on its
    // own would have none: a rate needs two polls).
    let opened = page.dom_after_polls(1).await;
    let drawn = opened.chart_points("chart-rps");
    assert!(drawn >= 3 * 5, "the req/s chart drew {drawn} points after one poll: no history");

    // At rest: every server has its row, with the numbers the API gives.
    let first = page.dom_after_polls(2).await;
    let api = rig.switch.servers();
    check_at_rest(&first, &api);

    // Under load: the page keeps polling; its counters grow and req/s is not zero.
    let load = Load::start(rig.web, 4, Duration::from_millis(8), 40_000);
    let deadline = Instant::now() + Duration::from_secs(30);
    while load.sent() < 300 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(load.sent() >= 300, "the load clients sent only {} requests in 30 s", load.sent());
    let second = page.dom_after_polls(first.polls() + 3).await;
    check_under_load(&first, &second);
    check_controls(&mut page, &rig.switch).await;

    if let Some(path) = std::env::var_os("CSWITCH_SCREENSHOT") {
        screenshot(&mut page, &load, Path::new(&path)).await;
    }
    let sent = load.stop().await;

    // The admin listener gone: the page's next fetches fail; it says so and keeps its data.
    // (Not a 401 from a token set by reload: the server's Basic challenge makes headless
    // Chromium wait for a login dialog that never comes, so the fetch only times out.)
    rig.admin.stop();
    let refused = page.dom_when("failedPolls", 1).await;
    check_failed_poll(&second, &refused);

    browser.close(page).await;
    eprintln!(
        "stats page: {} poll rounds seen, {sent} requests of load, {:.1} s",
        second.polls(),
        started.elapsed().as_secs_f64()
    );
}

/// The first of the DOM's checks: structure, and numbers equal to the API's.
fn check_at_rest(dom: &Dom, api: &[proxy::view::ServerView]) {
    assert!(!dom.banner_shown(), "error banner shown: {}", dom.banner_text());
    // No one-way listener, no steering table: the one-way table stays hidden.
    assert!(dom.0.contains("<section id=\"oneway\" hidden=\"\">"), "one-way table shown");
    for (group, scheduler) in [("web", "wrr"), ("static", "rr")] {
        assert!(
            dom.0.contains(&format!("<section class=\"group\" data-group=\"{group}\"")),
            "no table for group {group}"
        );
        assert!(
            dom.0.contains(&format!("data-scheduler=\"{scheduler}\"")),
            "group {group}: scheduler not shown"
        );
    }
    let rows = dom.rows();
    let shown: Vec<(&str, &str)> = rows.iter().map(|r| (r.group.as_str(), r.server.as_str())).collect();
    let expected: Vec<(&str, &str)> = api.iter().map(|s| (s.group.as_str(), s.name.as_str())).collect();
    assert_eq!(shown, expected, "server rows");
    for (row, s) in rows.iter().zip(api) {
        for field in SERVER_FIELDS.split_whitespace() {
            assert!(row.cells.contains_key(field), "{}/{}: no `{field}` cell", row.group, row.server);
        }
        assert_eq!(row.num("requests"), Some(s.requests as f64), "{}: requests", s.name);
        assert_eq!(row.text("requests"), s.requests.to_string(), "{}: requests text", s.name);
        assert_eq!(row.num("weight"), Some(f64::from(s.weight)), "{}: weight", s.name);
        assert_eq!(
            row.num("effective_weight"),
            Some(f64::from(s.effective_weight)),
            "{}: effective weight",
            s.name
        );
        assert_eq!(row.value("state"), s.state, "{}: state", s.name);
        assert_eq!(row.value("health"), s.health, "{}: health", s.name);
        if s.requests > 0 {
            let p50 = row.num("p50").unwrap_or(0.0);
            assert!(p50 > 0.0, "{}: no p50 after {} requests", s.name, s.requests);
            assert!(row.text("p50").ends_with('s'), "{}: p50 has no unit: {:?}", s.name, row.text("p50"));
        }
    }
    let s4 = rows.iter().find(|r| r.server == "s4").unwrap();
    assert!(s4.title("health").contains("last check:"), "a down server's reason: {:?}", s4.title("health"));
    assert_eq!(s4.num("requests"), Some(0.0));
}

/// The second check: every server taking traffic shows more requests, and rates.
fn check_under_load(before: &Dom, after: &Dom) {
    assert!(!after.banner_shown(), "error banner shown: {}", after.banner_text());
    let old: HashMap<String, Row> = before.rows().into_iter().map(|r| (r.server.clone(), r)).collect();
    let mut total_rps = 0.0;
    for row in after.rows() {
        let was = old[&row.server].num("requests").unwrap();
        let now = row.num("requests").unwrap();
        let rps = row.num("rps").unwrap_or(0.0);
        total_rps += rps;
        if row.server == "s4" {
            assert_eq!(now, 0.0, "the down server got requests");
            continue;
        }
        assert!(now > was, "{}: requests did not move under load ({was} → {now})", row.server);
        if rps > 0.0 {
            assert!(
                row.title("p90").contains("last 10 s"),
                "{}: p90 not windowed: {:?}",
                row.server,
                row.title("p90")
            );
            assert!(row.num("p90").unwrap_or(0.0) > 0.0, "{}: no p90 under load", row.server);
        }
    }
    assert!(total_rps > 0.0, "req/s is zero under load");
    let header = after.field_value("rps").unwrap_or_default().parse::<f64>().unwrap_or(0.0);
    assert!(header > 0.0, "the header's req/s is zero under load");
    let hits = after.rule_hits("Images");
    assert!(hits > 0.0, "rule Images: no hits shown");
}

/// The third check: a failed poll shows the banner and leaves the last data in place.
fn check_failed_poll(before: &Dom, after: &Dom) {
    assert!(after.banner_shown(), "no error banner after a failed poll");
    let banner = after.banner_text();
    assert!(banner.contains("unreachable") && banner.contains("showing data from"), "banner: {banner}");
    let old: HashMap<String, Row> = before.rows().into_iter().map(|r| (r.server.clone(), r)).collect();
    let rows = after.rows();
    assert_eq!(rows.len(), old.len(), "server rows after a failed poll");
    for row in rows {
        assert!(row.num("requests") >= old[&row.server].num("requests"), "{}: numbers lost", row.server);
    }
}

/// The row controls: each state in the menu and the weight field change the server in the
/// switch, and the page then shows it; maint gets a badge of its own colour.
async fn check_controls(page: &mut Cdp, switch: &Switch) {
    let server =
        |name: &str| switch.servers().into_iter().find(|s| s.group == "web" && s.name == name).unwrap();
    for state in ["drain", "ready", "maint"] {
        let menu = "document.querySelector('tr[data-group=\"web\"][data-server=\"s3\"] select[data-action=\"state\"]')";
        page.eval(&format!(
            "(() => {{ const m = {menu}; m.value = '{state}'; m.dispatchEvent(new Event('change')); }})()"
        ))
        .await;
        let changed = wait_for(Duration::from_secs(5), || server("s3").state == state).await;
        assert!(changed, "choosing {state} left s3 {}", server("s3").state);
        let cell = "tr[data-server=\"s3\"] td[data-field=\"state\"]";
        wait_page(page, &format!("document.querySelector('{cell}').dataset.value === '{state}'")).await;
    }
    let action = page.eval("document.getElementById('action').textContent").await;
    assert!(action.as_str().unwrap_or("").contains("maint"), "the action line: {action}");
    let badge = page
        .eval(
            "(() => { const b = document.querySelector('tr[data-server=\"s3\"] td[data-field=\"state\"] span');\
              const off = document.body.appendChild(document.createElement('span')); off.className = 'badge b-off';\
              const r = [b.className, getComputedStyle(b).backgroundColor, getComputedStyle(off).backgroundColor];\
              off.remove(); return r; })()",
        )
        .await;
    assert_eq!(badge[0], "badge b-maint", "{badge}");
    assert_ne!(badge[1], badge[2], "the maint badge is as muted as an unchecked one: {badge}");

    let weight = "document.querySelector('tr[data-server=\"s2\"] input[data-action=\"weight\"]')";
    page.eval(&format!(
        "(() => {{ const i = {weight}; i.value = '5'; i.form.requestSubmit(); return true; }})()"
    ))
    .await;
    let changed = wait_for(Duration::from_secs(5), || server("s2").weight == 5).await;
    assert!(changed, "the weight form left s2 at weight {}", server("s2").weight);
    // The controls take room: every table still fits the 1280 px page.
    let cut = page
        .eval(
            "[...document.querySelectorAll('.panel')].filter((p) => p.scrollWidth > p.clientWidth)\
               .map((p) => p.scrollWidth + ' > ' + p.clientWidth + ' px')",
        )
        .await;
    assert_eq!(cut, json!([]), "panels wider than the page");
}

/// Waits (at most 10 s) until a JavaScript expression is true in the page.
async fn wait_page(page: &mut Cdp, condition: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while page.eval(&format!("Boolean({condition})")).await != json!(true) {
        assert!(Instant::now() < deadline, "not true within 10 s: {condition}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Points `GET /api/history` holds for server `name` of group web.
async fn history_points(admin: SocketAddr, name: &str) -> usize {
    let Ok(response) = testkit::get(admin, "/api/history").await else { return 0 };
    let history: serde_json::Value = serde_json::from_slice(&response.body).unwrap_or_default();
    let servers = history["servers"].as_array().cloned().unwrap_or_default();
    let server = servers.iter().find(|s| s["group"] == "web" && s["server"] == name);
    server.and_then(|s| s["points"].as_array()).map_or(0, Vec::len)
}

/// An image of the page after 40 s more of load (a rate that swells and ebbs, so the
/// charts show something).
async fn screenshot(page: &mut Cdp, load: &Load, path: &Path) {
    let until = Instant::now() + Duration::from_secs(40);
    let calm = Instant::now();
    while Instant::now() < until {
        let phase = calm.elapsed().as_secs_f64() / 4.0;
        load.pause_ms.store((6.0 + 5.0 * phase.sin()).round() as u64, Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // The whole page, 1280 px wide (the rule hits are below the first 900 px).
    let height = page.eval("document.documentElement.scrollHeight").await.as_f64().unwrap_or(900.0);
    let clip = json!({"x": 0, "y": 0, "width": 1280, "height": height.max(900.0), "scale": 1});
    let shot = page
        .call("Page.captureScreenshot", json!({"format": "png", "captureBeyondViewport": true, "clip": clip}))
        .await;
    let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap();
    std::fs::write(path, png).unwrap();
    eprintln!("stats page: screenshot written to {}", path.display());
}

// ---------- the switch ----------

struct Rig {
    switch: Arc<Switch>,
    admin: admin::AdminHandle,
    web: SocketAddr,
    _origins: Vec<Origin>,
}

impl Rig {
    /// Origins s1–s3 (wrr, HTTP checks) plus s4 at a closed port, which goes down; img1 and
    /// img2 (rr, unchecked) get the images; the admin listener on port 0.
    async fn start(dir: &Path) -> Rig {
        let mut origins = Vec::new();
        for name in ["s1", "s2", "s3", "img1", "img2"] {
            origins.push(Origin::start(name).await);
        }
        // A port that was bound and closed again: connections to it are refused.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let server = |i: usize, weight: u32| {
            format!(
                "{{ name = \"{}\", addr = \"{}\", weight = {weight} }}",
                origins[i].name(),
                origins[i].addr()
            )
        };
        std::fs::write(dir.join("stats.rules"), RULES).unwrap();
        let text = format!(
            "[global]\nworkers = 1\ngrace_period = \"1s\"\n[access_log]\nenabled = false\n\
             [admin]\nbind = \"127.0.0.1:0\"\n\
             [[listener]]\nname = \"web\"\nbind = \"127.0.0.1:0\"\ndefault_group = \"web\"\n\
             rules = \"stats.rules\"\n\
             [[group]]\nname = \"web\"\nscheduler = \"wrr\"\n\
             health = {{ check = \"http\", path = \"/health\", interval = \"200ms\", timeout = \"100ms\", \
             rise = 1, fall = 1 }}\n\
             servers = [ {}, {}, {}, {{ name = \"s4\", addr = \"{closed}\" }} ]\n\
             [[group]]\nname = \"static\"\nscheduler = \"rr\"\nservers = [ {}, {} ]\n",
            server(0, 3),
            server(1, 2),
            server(2, 1),
            server(3, 1),
            server(4, 1),
        );
        let cfg = config::parse(&text, &dir.join("cswitch.toml")).unwrap_or_else(|d| panic!("{d}\n{text}"));
        let switch = Arc::new(Switch::start(cfg).expect("switch starts"));
        let web = switch.local_addr("web").expect("listener");
        let admin = admin::start(Arc::clone(&switch)).expect("admin starts").expect("[admin] is configured");
        Rig { switch, admin, web, _origins: origins }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.admin.stop();
        self.switch.shutdown();
    }
}

async fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// `n` requests on one connection, so that the page has numbers to show at rest.
async fn warm_up(addr: SocketAddr, n: usize) {
    let mut c = RawClient::connect(addr).await.unwrap();
    for path in PATHS
        .split_whitespace()
        .filter(|p| !p.starts_with("/admin") && !p.starts_with("/status"))
        .cycle()
        .take(n)
    {
        c.send(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes()).await.unwrap();
        assert_eq!(c.read_response().await.unwrap().status, 200, "{path}");
    }
}

/// Client tasks sending requests through the switch, each on a keep-alive connection (a
/// new one when the switch closes it), pausing between requests; at most `max` in all.
struct Load {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    pause_ms: Arc<AtomicU64>,
    tasks: Vec<JoinHandle<()>>,
}

impl Load {
    fn start(addr: SocketAddr, clients: usize, pause: Duration, max: u64) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let pause_ms = Arc::new(AtomicU64::new(pause.as_millis() as u64));
        let tasks = (0..clients)
            .map(|k| {
                let (stop, sent, pause_ms) = (Arc::clone(&stop), Arc::clone(&sent), Arc::clone(&pause_ms));
                tokio::spawn(async move {
                    let mut conn: Option<RawClient> = None;
                    let mut i = k * 7;
                    while !stop.load(Ordering::Relaxed) && sent.fetch_add(1, Ordering::Relaxed) < max {
                        i += 1;
                        if conn.is_none() {
                            conn = RawClient::connect(addr).await.ok();
                        }
                        if let Some(c) = conn.as_mut() {
                            let req = format!("GET {} HTTP/1.1\r\nHost: test\r\n\r\n", path(i));
                            let reusable = c.send(req.as_bytes()).await.is_ok()
                                && c.read_response().await.is_ok_and(|r| {
                                    !r.header("Connection").is_some_and(|v| v.eq_ignore_ascii_case("close"))
                                });
                            if !reusable {
                                conn = None;
                            }
                        }
                        tokio::time::sleep(Duration::from_millis(pause_ms.load(Ordering::Relaxed))).await;
                    }
                })
            })
            .collect();
        Load { stop, sent, pause_ms, tasks }
    }

    fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let sent = self.sent();
        for t in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
        sent
    }
}

/// The `i`th of [`PATHS`], round and round.
fn path(i: usize) -> &'static str {
    let paths: Vec<&'static str> = PATHS.split_whitespace().collect();
    paths[i % paths.len()]
}
