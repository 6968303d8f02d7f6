//! `cswitch demo`: three built-in origins (s1, s2, s3 on 127.0.0.1:9001–9003, each answering
//! with its own name) and the switch in front of them on 127.0.0.1:8080, with the embedded
//! example config `examples/demo.toml`.

use anyhow::Context;
use std::path::Path;

const DEMO_CONFIG: &str = include_str!("../../../examples/demo.toml");

/// Runs the demo until Ctrl-C.
pub fn run() -> anyhow::Result<()> {
    let cfg = config::parse(DEMO_CONFIG, Path::new("examples/demo.toml"))
        .map_err(|d| anyhow::anyhow!("embedded demo config is invalid:\n{d}"))?;
    let origins_rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
    let origins = origins_rt.block_on(start_origins(&cfg))?;
    let switch = proxy::Switch::start(cfg).context("starting the switch")?;
    let addr = switch.local_addr("web").context("demo config has no listener 'web'")?;
    print_banner(addr, &origins);
    crate::signals::serve_until_stopped(&switch, None)?;
    drop(origins);
    Ok(())
}

async fn start_origins(cfg: &config::Config) -> anyhow::Result<Vec<testkit::Origin>> {
    let mut origins = Vec::new();
    for server in cfg.groups.iter().flat_map(|g| &g.servers) {
        let origin = testkit::Origin::start_on(&server.name, server.addr)
            .await
            .with_context(|| format!("starting origin {} on {}", server.name, server.addr))?;
        origins.push(origin);
    }
    Ok(origins)
}

fn print_banner(addr: std::net::SocketAddr, origins: &[testkit::Origin]) {
    println!("cswitch demo: switch on http://{addr}/ in front of:");
    for o in origins {
        println!("  origin {} on {}", o.name(), o.addr());
    }
    println!("Try:");
    println!("  curl -i http://{addr}/index.html        # repeat: the answer names s1, s2 or s3");
    println!("  curl -i http://{addr}/img/a.gif");
    println!("  curl -i -d '<purchase><totalAmount>60000</totalAmount></purchase>' -H 'Content-Type: text/xml' http://{addr}/cgi/xmlprocess.pl");
    println!("  curl -si http://{addr}/a http://{addr}/b http://{addr}/c | grep X-Origin   # one connection, per-request routing");
    println!("Access log below. Ctrl-C stops.");
}
