//! cswitch: a Layer-7 content switch.
//!
//! The binary owns the command line (`run`, `check`, `demo`, `explain`, `simulate`, `agent`, `ctl`), process signals (SIGTERM /
//! Ctrl-C: graceful stop; SIGHUP: validated reload; SIGUSR2: binary upgrade), binary
//! upgrades (`upgrade`: the new process, the sockets and connections handed to it) and the
//! wiring of config → data plane and admin listener.
//! It is the only crate that uses `anyhow`.

mod agent_cli;
mod check;
mod ctl;
mod demo;
mod explain;
mod signals;
mod simulate;
mod upgrade;

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(name = "cswitch", version, about = "A Layer-7 content switch")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the switch with a config file.
    Run {
        /// Config file (TOML).
        #[arg(short, long)]
        config: PathBuf,
    },
    /// Check a config file and what it names (rule files, TLS certificates and keys, the
    /// access log): every error `run` would refuse, with file:line:col, in one report; exit 1
    /// on error.
    Check {
        /// Config file (TOML), as `--config FILE` or just `FILE` (as `nginx -t -c` users
        /// expect).
        #[arg(short, long, required_unless_present = "file", conflicts_with = "file")]
        config: Option<PathBuf>,
        /// Config file, positional.
        #[arg(value_name = "CONFIG")]
        file: Option<PathBuf>,
    },
    /// Start three built-in origins and the switch in front of them on 127.0.0.1:8080.
    Demo,
    /// Show how a raw request would be routed: each rule tried, what its conditions saw,
    /// the rule that fired, and the group and server that would get the request.
    Explain {
        /// Config file (TOML).
        #[arg(short, long)]
        config: PathBuf,
        /// File holding a raw HTTP request (head and body; LF or CRLF line ends).
        #[arg(short, long)]
        request: PathBuf,
        /// Client address the request comes from.
        #[arg(long, default_value = "127.0.0.1:50000")]
        src: std::net::SocketAddr,
        /// Listener it arrives on (default: the first).
        #[arg(long)]
        listener: Option<String>,
    },
    /// Replay a URL trace through the schedulers, with an LRU cache per server: load
    /// imbalance, cache hit ratio, disk bytes and keys moved per algorithm and server count.
    Simulate(simulate::Args),
    /// Run on a server host: measure load every second, turn it into a capacity
    /// (g(x) = C·e^(−k·x)) and report it to the switches (their `[agents]` socket).
    Agent(agent_cli::Args),
    /// Talk to a running switch's admin API: status, servers, drain, ready, maint, weight,
    /// add, remove, reload, explain, cluster (`docs/admin.md`).
    Ctl(ctl::Args),
}

/// mimalloc, not glibc's malloc: freed memory goes back to the kernel within milliseconds,
/// so a burst of connections (or requests) leaves no resident memory behind; glibc keeps
/// freed chunks resident (ADR 0009: 730 against 290 bytes per idle connection).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    init_tracing();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { config } => run(&config),
        Command::Check { config, file } => {
            // clap makes exactly one of them present.
            let path = config.or(file).unwrap_or_default();
            return check::run(&path);
        }
        Command::Demo => demo::run(),
        Command::Explain { config, request, src, listener } => {
            explain::run(&config, &request, src, listener.as_deref())
        }
        Command::Simulate(args) => simulate::run(&args),
        Command::Agent(args) => agent_cli::run_blocking(args).map_err(anyhow::Error::msg),
        Command::Ctl(args) => ctl::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cswitch: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn init_tracing() {
    // `RUST_LOG` picks the level, up to `debug` in release builds: trace-level events are
    // compiled out of them (the workspace's `tracing` features, ADR 0023).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // A log write that fails (stderr's reader went away) is dropped: tracing-subscriber would
    // otherwise report it with eprintln!, which panics on the same broken stderr and takes
    // the switch down with it.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .log_internal_errors(false)
        .init();
}

/// `cswitch run`. Started by a binary upgrade (`upgrade`), it takes the old process's
/// sockets over, and tells it why if it cannot serve.
fn run(path: &Path) -> anyhow::Result<()> {
    let inheritance = upgrade::Inheritance::from_env()?;
    let (switch, admin, signals, upgrader) = match start(path, inheritance.as_ref()) {
        Ok(started) => started,
        Err(e) => {
            if let Some(inheritance) = &inheritance {
                inheritance.fail(&format!("{e:#}"));
            }
            return Err(e);
        }
    };
    if let Some(inheritance) = inheritance {
        inheritance.serving(
            Arc::clone(&switch),
            Arc::clone(&upgrader.inheriting),
            Arc::clone(&upgrader.adopted),
        )?;
    }
    signals.serve_until_stopped(&switch, Some(path), Some(&upgrader))?;
    drop(admin);
    Ok(())
}

type Started = (Arc<proxy::Switch>, Option<admin::AdminHandle>, signals::Signals, Arc<upgrade::Upgrader>);

fn start(path: &Path, inheritance: Option<&upgrade::Inheritance>) -> anyhow::Result<Started> {
    // The sockets first: the old process's messages are all read when this one says why it
    // cannot serve (unread ones would turn its goodbye into a reset).
    let sockets = inheritance.map(upgrade::Inheritance::sockets).transpose()?;
    let cfg = config::load(path).map_err(|d| anyhow::anyhow!("invalid config:\n{d}"))?;
    let signals = signals::Signals::install(&cfg)?;
    let (inherited, admin_socket, state) =
        sockets.map_or_else(Default::default, |s| (s.switch, s.admin, s.state));
    let switch = Arc::new(proxy::Switch::start_with(cfg, inherited).context("starting the switch")?);
    state.iter().for_each(|s| switch.import_upgrade_state(s));
    for l in &switch.config().listeners {
        if let Some(addr) = switch.local_addr(&l.name) {
            tracing::info!(listener = %l.name, %addr, "listening");
        }
    }
    let upgrader = Arc::new(upgrade::Upgrader::new(Arc::clone(&switch)));
    let admin = start_admin(&switch, admin_socket, Some(&upgrader))?;
    upgrader.set_admin(admin.as_ref())?;
    Ok((switch, admin, signals, upgrader))
}

/// Starts the admin listener when the config has `[admin]` (on the old process's socket
/// after an upgrade), and says where it is.
fn start_admin(
    switch: &Arc<proxy::Switch>,
    listener: Option<std::net::TcpListener>,
    upgrader: Option<&Arc<upgrade::Upgrader>>,
) -> anyhow::Result<Option<admin::AdminHandle>> {
    let hook = upgrader.map(|u| {
        let u = Arc::clone(u);
        Arc::new(move || u.run("admin: POST /api/upgrade")) as admin::UpgradeHook
    });
    let upgrade_status = upgrader.map(|u| {
        let u = Arc::clone(u);
        Arc::new(move || u.status()) as admin::UpgradeStatus
    });
    let options = admin::Options { listener, upgrade: hook, upgrade_status };
    let handle = admin::start_with(Arc::clone(switch), options).context("starting the admin listener")?;
    if let Some(h) = &handle {
        tracing::info!(addr = %h.local_addr(), "admin listener: JSON API, /metrics, stats page on /");
    }
    Ok(handle)
}
