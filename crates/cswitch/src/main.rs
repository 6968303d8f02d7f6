//! cswitch: a Layer-7 content switch.
//!
//! The binary owns the command line (`run`, `check`, `demo`, `explain`, `simulate`, `agent`), process signals (SIGTERM /
//! Ctrl-C: graceful stop; SIGHUP: validated reload) and the wiring of config → data plane.
//! It is the only crate that uses `anyhow`.

mod demo;
mod explain;
mod signals;
mod simulate;

use anyhow::Context;
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
    /// Validate a config file; print every error with file:line:col; exit 1 on error.
    Check {
        /// Config file (TOML).
        #[arg(short, long)]
        config: PathBuf,
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
    Agent(agent::AgentArgs),
}

fn main() -> ExitCode {
    init_tracing();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { config } => run(&config),
        Command::Check { config } => return check(&config),
        Command::Demo => demo::run(),
        Command::Explain { config, request, src, listener } => {
            explain::run(&config, &request, src, listener.as_deref())
        }
        Command::Simulate(args) => simulate::run(&args),
        Command::Agent(args) => agent::run_blocking(args).map_err(anyhow::Error::msg),
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
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
}

fn check(path: &Path) -> ExitCode {
    match config::load(path) {
        Ok(cfg) => {
            if let Err(errors) = proxy::compile_rules(&cfg) {
                eprint!("{errors}");
                return ExitCode::FAILURE;
            }
            println!(
                "{}: ok ({} listener(s), {} group(s))",
                path.display(),
                cfg.listeners.len(),
                cfg.groups.len()
            );
            ExitCode::SUCCESS
        }
        Err(diags) => {
            eprint!("{diags}");
            ExitCode::FAILURE
        }
    }
}

fn run(path: &Path) -> anyhow::Result<()> {
    let cfg = config::load(path).map_err(|d| anyhow::anyhow!("invalid config:\n{d}"))?;
    let switch = proxy::Switch::start(cfg).context("starting the switch")?;
    for l in &switch.config().listeners {
        if let Some(addr) = switch.local_addr(&l.name) {
            tracing::info!(listener = %l.name, %addr, "listening");
        }
    }
    signals::serve_until_stopped(&switch, Some(path))
}
