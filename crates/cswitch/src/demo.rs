//! `cswitch demo`: three built-in origins (s1, s2, s3 on 127.0.0.1:9001–9003, each answering
//! with its own name) and the switch in front of them on 127.0.0.1:8080, with the embedded
//! example config `examples/demo.toml`.

use anyhow::Context;
use std::path::{Path, PathBuf};

const DEMO_CONFIG: &str = include_str!("../../../examples/demo.toml");
const DEMO_RULES: &str = include_str!("../../../examples/demo.rules");

/// The demo's directory, removed when the demo ends (however it ends).
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the demo until Ctrl-C.
pub fn run() -> anyhow::Result<()> {
    // The embedded files are written out so the demo loads them as an operator's would be,
    // and reloads its rule file when it is edited.
    let dir = TempDir(std::env::temp_dir().join(format!("cswitch-demo-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0)?;
    let (config_path, rules_path) = (dir.0.join("demo.toml"), dir.0.join("demo.rules"));
    std::fs::write(&config_path, DEMO_CONFIG)?;
    std::fs::write(&rules_path, DEMO_RULES)?;
    let cfg =
        config::load(&config_path).map_err(|d| anyhow::anyhow!("embedded demo config is invalid:\n{d}"))?;
    let signals = crate::signals::Signals::install(&cfg)?;
    let origins_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let origins = origins_rt.block_on(start_origins(&cfg))?;
    let switch = std::sync::Arc::new(proxy::Switch::start(cfg).context("starting the switch")?);
    let addr = switch.local_addr("web").context("demo config has no listener 'web'")?;
    let admin = crate::start_admin(&switch, None, None)?;
    print_banner(addr, &origins, admin.as_ref().map(|a| a.local_addr()), &rules_path);
    signals.serve_until_stopped(&switch, Some(&config_path), None)?;
    drop(admin);
    drop(origins);
    Ok(())
}

async fn start_origins(cfg: &config::Config) -> anyhow::Result<Vec<testkit::Origin>> {
    let mut origins: Vec<testkit::Origin> = Vec::new();
    for server in cfg.groups.iter().flat_map(|g| &g.servers) {
        if origins.iter().any(|o| o.addr() == server.addr) {
            continue; // a server in several groups is one origin
        }
        let origin = testkit::Origin::start_on(&server.name, server.addr)
            .await
            .with_context(|| format!("starting origin {} on {}", server.name, server.addr))?;
        origins.push(origin);
    }
    Ok(origins)
}

fn print_banner(
    addr: std::net::SocketAddr,
    origins: &[testkit::Origin],
    admin: Option<std::net::SocketAddr>,
    rules: &Path,
) {
    println!("cswitch demo: switch on http://{addr}/ in front of:");
    for o in origins {
        println!("  origin {} on {}", o.name(), o.addr());
    }
    println!("Rules: images → static = s3, XML purchases over 50000 → premium = s1, /admin denied.");
    println!(
        "  They are in {} (a copy of examples/demo.rules): edit it and the demo reloads it.",
        rules.display()
    );
    println!("Try:");
    println!("  curl -i http://{addr}/index.html        # no rule: the answer names s1, s2 or s3");
    println!("  curl -i http://{addr}/img/a.gif         # rule Images: always s3");
    println!("  curl -i -d '<purchase><totalAmount>60000</totalAmount></purchase>' -H 'Content-Type: text/xml' http://{addr}/cgi/xmlprocess.pl   # rule Premium: s1");
    println!("  curl -i -d '<purchase><totalAmount>600</totalAmount></purchase>' -H 'Content-Type: text/xml' http://{addr}/cgi/xmlprocess.pl     # default group");
    println!("  curl -i http://{addr}/admin/             # rule Admin: 403");
    println!("  curl -si http://{addr}/a http://{addr}/b http://{addr}/c | grep X-Origin   # one connection, per-request routing");
    if let Some(admin) = admin {
        println!("Stats page: http://{admin}/ (live per-server charts); metrics: http://{admin}/metrics");
        println!("  cswitch ctl --addr {admin} servers        # the servers as a table");
        println!(
            "  cswitch ctl --addr {admin} drain web/s2   # s2 takes no new requests (ready web/s2 undoes it)"
        );
    }
    println!("Access log below. Ctrl-C stops.");
}
