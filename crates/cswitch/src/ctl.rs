//! `cswitch ctl`: the admin API from a shell. Each subcommand is one request to a running
//! switch's admin listener (`docs/admin.md`); the answer is printed as a readable table or
//! summary, or as the API's own JSON with `--json`. A refused request (any non-2xx answer)
//! prints the API's error and exits 1.
//!
//! Layout: this file (arguments, one function per subcommand), `ctl/client.rs` (a small
//! blocking HTTP/1.1 client over `std::net`), `ctl/show.rs` (tables and summaries).

mod client;
mod show;

use anyhow::Context;
use client::{encode, Answer, Client};
use serde_json::{json, Value};
use std::path::PathBuf;

/// `cswitch ctl` arguments.
#[derive(clap::Args)]
pub struct Args {
    /// The admin listener (`[admin] bind`).
    #[arg(long, global = true, default_value = "127.0.0.1:9900")]
    addr: String,
    /// Admin token (default: --token-file, else the CSWITCH_ADMIN_TOKEN environment variable).
    #[arg(long, global = true)]
    token: Option<String>,
    /// File holding the admin token (trimmed).
    #[arg(long, global = true)]
    token_file: Option<PathBuf>,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Version, uptime, config generation and listeners.
    Status,
    /// Every server: state, health, weights, capacity, load, traffic, latency.
    Servers {
        /// Only the servers of this group.
        #[arg(long)]
        group: Option<String>,
    },
    /// GROUP/SERVER gets no new requests; in-flight and sticky traffic continue.
    Drain { server: String },
    /// GROUP/SERVER takes traffic again.
    Ready { server: String },
    /// GROUP/SERVER gets no traffic at all (sticky included); checks go on.
    Maint { server: String },
    /// Sets the weight of GROUP/SERVER.
    Weight { server: String, weight: u32 },
    /// Adds server NAME at ADDR (IP:port) to GROUP.
    Add {
        group: String,
        name: String,
        /// IP:port of the server (named apart from the global --addr, which it would shadow).
        #[arg(value_name = "ADDR")]
        server_addr: String,
        /// Weight (default 1).
        #[arg(long)]
        weight: Option<u32>,
        /// Requests in flight at once (default 0 = unlimited).
        #[arg(long)]
        maxconn: Option<u32>,
    },
    /// Drains GROUP/SERVER, then removes it once idle (or after the group's drain_timeout).
    Remove { server: String },
    /// Reloads the switch's config file (as SIGHUP does); admin edits not in the file are lost.
    Reload,
    /// The cluster's nodes as this switch sees them: liveness, config digest, lag, and
    /// whether the L4 tier sends them flows; `drain` / `ready` change this node's.
    Cluster {
        #[command(subcommand)]
        action: Option<ClusterCmd>,
    },
    /// Reopens the access log after it was rotated (as SIGUSR1 does).
    Reopen,
    /// Replaces the running binary with the one now at its path (as SIGUSR2 does): the new
    /// process takes the listening sockets and the idle connections over; answers once
    /// the old process is drained, or with why nothing changed.
    Upgrade,
    /// Shows how a raw request would be routed by the running switch.
    Explain {
        /// File holding a raw HTTP request (head and body).
        #[arg(long)]
        request: PathBuf,
        /// Listener it arrives on (default: the first).
        #[arg(long)]
        listener: Option<String>,
        /// Client address it comes from (default 127.0.0.1:50000).
        #[arg(long)]
        src: Option<String>,
    },
}

/// `cswitch ctl cluster …`.
#[derive(clap::Subcommand)]
enum ClusterCmd {
    /// The L4 tier sends this node no new flow; its open connections finish.
    Drain,
    /// The L4 tier sends this node new flows again.
    Ready,
}

/// Runs one `cswitch ctl` command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let client = Client::new(args.addr.clone(), token(&args)?);
    let (answer, show): (Answer, fn(&Value)) = match args.command {
        Cmd::Status => (client.get("/api/status")?, show::status),
        Cmd::Servers { group } => {
            let path = match group {
                Some(g) => format!("/api/servers?group={}", encode(&g)),
                None => "/api/servers".into(),
            };
            (client.get(&path)?, show::servers)
        }
        Cmd::Drain { server } => (patch(&client, &server, json!({ "state": "drain" }))?, show::applied),
        Cmd::Ready { server } => (patch(&client, &server, json!({ "state": "ready" }))?, show::applied),
        Cmd::Maint { server } => (patch(&client, &server, json!({ "state": "maint" }))?, show::applied),
        Cmd::Weight { server, weight } => {
            (patch(&client, &server, json!({ "weight": weight }))?, show::applied)
        }
        Cmd::Add { group, name, server_addr, weight, maxconn } => {
            let mut body = json!({ "group": group, "name": name, "addr": server_addr });
            if let Some(w) = weight {
                body["weight"] = w.into();
            }
            if let Some(m) = maxconn {
                body["maxconn"] = m.into();
            }
            (client.send("POST", "/api/servers", body.to_string().as_bytes())?, show::applied)
        }
        Cmd::Remove { server } => (client.send("DELETE", &server_path(&server)?, b"")?, show::removal),
        Cmd::Reload => (client.send("POST", "/api/reload", b"")?, show::applied),
        Cmd::Reopen => (client.send("POST", "/api/reopen", b"")?, show::reopened),
        Cmd::Upgrade => (client.send("POST", "/api/upgrade", b"")?, show::upgraded),
        Cmd::Cluster { action: None } => (client.get("/api/cluster")?, show::cluster),
        Cmd::Cluster { action: Some(ClusterCmd::Drain) } => {
            (client.send("POST", "/api/cluster/drain", b"")?, show::serving)
        }
        Cmd::Cluster { action: Some(ClusterCmd::Ready) } => {
            (client.send("POST", "/api/cluster/ready", b"")?, show::serving)
        }
        Cmd::Explain { request, listener, src } => {
            (explain(&client, &request, listener, src)?, show::explanation)
        }
    };
    if args.json {
        print!("{}", answer.raw);
    } else {
        show(&answer.json);
    }
    Ok(())
}

fn patch(client: &Client, server: &str, body: Value) -> anyhow::Result<Answer> {
    client.send("PATCH", &server_path(server)?, body.to_string().as_bytes())
}

fn explain(
    client: &Client,
    request: &std::path::Path,
    listener: Option<String>,
    src: Option<String>,
) -> anyhow::Result<Answer> {
    let raw = std::fs::read(request).with_context(|| format!("reading {}", request.display()))?;
    let query: Vec<String> = [("listener", listener), ("src", src)]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}={}", encode(&v))))
        .collect();
    let path = match query.is_empty() {
        true => "/api/explain".to_string(),
        false => format!("/api/explain?{}", query.join("&")),
    };
    client.send("POST", &path, &raw)
}

/// `GROUP/SERVER` → `/api/servers/GROUP/SERVER`.
fn server_path(server: &str) -> anyhow::Result<String> {
    match server.split_once('/') {
        Some((g, s)) if !g.is_empty() && !s.is_empty() && !s.contains('/') => {
            Ok(format!("/api/servers/{}/{}", encode(g), encode(s)))
        }
        _ => anyhow::bail!("`{server}`: name a server as GROUP/SERVER, e.g. web/s1"),
    }
}

/// --token, else --token-file, else $CSWITCH_ADMIN_TOKEN, else none.
fn token(args: &Args) -> anyhow::Result<Option<String>> {
    if let Some(t) = &args.token {
        return Ok(Some(t.clone()));
    }
    if let Some(path) = &args.token_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the token file {}", path.display()))?;
        return Ok(Some(text.trim().to_string()));
    }
    Ok(std::env::var("CSWITCH_ADMIN_TOKEN").ok().filter(|t| !t.is_empty()))
}
