//! `cswitch agent`: its arguments (clap), their checks, and the blocking entry point. The
//! agent itself — measuring, the capacity function, the reports and the reporting thread —
//! is the `agent` library crate; this is only its command line.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use agent::capacity::DEFAULT_X_MAX;
use agent::wire::MAX_TOKEN_LEN;
use agent::{spawn, AgentConfig, CapacityFn, HandoffConfig, HandoffServer, Metric};

/// Arguments of `cswitch agent`: report this host's capacity to the switches.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// The address the switches know this server by (its `addr` in their config).
    #[arg(long, value_name = "ADDR", required_unless_present = "handoff_listen")]
    pub server: Option<SocketAddr>,

    /// Where a switch listens for agent reports; repeat for several switches.
    #[arg(long = "switch", value_name = "ADDR", required_unless_present = "handoff_listen")]
    pub switches: Vec<SocketAddr>,

    /// One-way switching: take hand-offs from switches on this address (the server's
    /// `agent` in their config). Needs CAP_NET_ADMIN.
    #[arg(long = "handoff-listen", value_name = "ADDR", requires = "local")]
    pub handoff_listen: Option<SocketAddr>,

    /// The local server handed-off connections are relayed to (unless --local-port names
    /// one for their VIP port).
    #[arg(long, value_name = "ADDR")]
    pub local: Option<SocketAddr>,

    /// The local server for the hand-offs of one VIP port, e.g. 443=127.0.0.1:8443 (the
    /// host's TLS server, for a one-way TLS listener on port 443); repeat for more ports.
    #[arg(
        long = "local-port",
        value_name = "PORT=ADDR",
        value_parser = parse_local_port,
        requires = "handoff_listen"
    )]
    pub local_ports: Vec<(u16, SocketAddr)>,

    /// Give handed-off connections to the local server as descriptors (SCM_RIGHTS) over
    /// this Unix socket instead of relaying them (`pin` connections without cookie
    /// persistence; relayed to --local when the server cannot take one).
    #[arg(long = "pass-fd", value_name = "PATH", requires = "handoff_listen")]
    pub pass_fd: Option<PathBuf>,

    /// File holding the hand-off token (`[oneway] token` on the switches).
    #[arg(long = "handoff-token-file", value_name = "PATH")]
    pub handoff_token_file: Option<PathBuf>,

    /// Load metric: timewait, established, loadavg, cpu or file:PATH.
    #[arg(long, value_name = "METRIC", default_value = "timewait")]
    pub metric: Metric,

    /// Count only sockets whose local port is PORT (timewait and established).
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,

    /// Capacity C at zero load.
    #[arg(long, value_name = "C", default_value_t = 1_048_576)]
    pub capacity: u32,

    /// Load at which the capacity falls to 1 (sets k = ln(C) / max-load).
    #[arg(long = "max-load", value_name = "X", allow_negative_numbers = true, default_value_t = DEFAULT_X_MAX)]
    pub max_load: f64,

    /// Decay constant k of C·e^(−k·load); overrides --max-load.
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    pub k: Option<f64>,

    /// Time between reports: e.g. 500ms, 1s, 2m.
    #[arg(long, value_name = "DUR", default_value = "1s", value_parser = parse_interval)]
    pub interval: Duration,

    /// Shared secret sent with each report (prefer --token-file: argv is visible to all).
    #[arg(long, value_name = "TOKEN", conflicts_with = "token_file")]
    pub token: Option<String>,

    /// File holding the shared secret (surrounding whitespace is ignored).
    #[arg(long = "token-file", value_name = "PATH")]
    pub token_file: Option<PathBuf>,

    /// Send this many rounds of reports, then exit.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
}

impl Args {
    /// The hand-off server's configuration, when `--handoff-listen` is given.
    pub fn handoff_config(&self) -> Result<Option<HandoffConfig>, String> {
        let Some(listen) = self.handoff_listen else { return Ok(None) };
        let local = self.local.ok_or("--handoff-listen needs --local (the web server to relay to)")?;
        let path = self.handoff_token_file.as_ref().ok_or("--handoff-listen needs --handoff-token-file")?;
        let token = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read --handoff-token-file {}: {e}", path.display()))?
            .trim()
            .to_string();
        if token.len() < 16 {
            return Err("the hand-off token must have at least 16 characters".into());
        }
        let mut local_ports = BTreeMap::new();
        for &(port, addr) in &self.local_ports {
            if local_ports.insert(port, addr).is_some() {
                return Err(format!("--local-port {port} is given twice"));
            }
        }
        Ok(Some(HandoffConfig {
            listen,
            token,
            local,
            local_ports,
            go_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(300),
            pass_fd: self.pass_fd.clone(),
        }))
    }

    /// Checks the arguments and builds the reporting agent's configuration.
    pub fn into_config(self) -> Result<AgentConfig, String> {
        let server = self.server.ok_or("--server is needed to send reports")?;
        check_switches(&self.switches)?;
        if self.port.is_some() && !self.metric.counts_sockets() {
            return Err(format!("--port only applies to timewait and established, not {}", self.metric));
        }
        if self.count == Some(0) {
            return Err("--count must be at least 1".into());
        }
        if self.interval.is_zero() {
            return Err("--interval must be more than zero".into());
        }
        let capacity = capacity_fn(self.capacity, self.max_load, self.k)?;
        let token = token(self.token, self.token_file)?;
        Ok(AgentConfig {
            server,
            switches: self.switches,
            metric: self.metric,
            port_filter: self.port,
            capacity,
            interval: self.interval,
            token,
            count: self.count,
        })
    }
}

fn check_switches(switches: &[SocketAddr]) -> Result<(), String> {
    let first = switches.first().ok_or("at least one --switch is needed")?;
    if switches.iter().any(|s| s.is_ipv4() != first.is_ipv4()) {
        return Err("--switch addresses must be all IPv4 or all IPv6".into());
    }
    Ok(())
}

fn capacity_fn(c: u32, max_load: f64, k: Option<f64>) -> Result<CapacityFn, String> {
    if c == 0 {
        return Err("--capacity must be at least 1".into());
    }
    let c = f64::from(c);
    match k {
        Some(k) if k.is_finite() && k >= 0.0 => Ok(CapacityFn::with_k(c, k)),
        Some(k) => Err(format!("--k must be a finite number ≥ 0, not {k}")),
        None if max_load.is_finite() && max_load > 0.0 => Ok(CapacityFn::new(c, max_load)),
        None => Err(format!("--max-load must be a finite number > 0, not {max_load}")),
    }
}

/// The token from `--token` or `--token-file`, checked to fit the wire format.
fn token(inline: Option<String>, file: Option<PathBuf>) -> Result<Option<String>, String> {
    let token = match (inline, file) {
        (Some(_), Some(_)) => return Err("give --token or --token-file, not both".into()),
        (Some(token), None) => token,
        (None, Some(path)) => std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read --token-file {}: {e}", path.display()))?
            .trim()
            .to_string(),
        (None, None) => return Ok(None),
    };
    if token.is_empty() {
        return Err("the token is empty".into());
    }
    if token.len() > MAX_TOKEN_LEN {
        return Err(format!("the token is longer than {MAX_TOKEN_LEN} bytes"));
    }
    // Reports are space-separated ASCII lines.
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("the token must be printable ASCII without spaces".into());
    }
    Ok(Some(token))
}

/// Parses `--local-port`'s `PORT=ADDR`: a VIP port (1–65535) and the local server for it.
pub fn parse_local_port(text: &str) -> Result<(u16, SocketAddr), String> {
    let (port, addr) =
        text.split_once('=').ok_or(format!("{text:?}: expected PORT=ADDR, e.g. 443=127.0.0.1:8443"))?;
    let port = port
        .parse::<u16>()
        .ok()
        .filter(|p| *p != 0)
        .ok_or(format!("{text:?}: {port:?} is not a port (1-65535)"))?;
    let addr = addr.parse().map_err(|_| format!("{text:?}: {addr:?} is not an address (IP:port)"))?;
    Ok((port, addr))
}

/// Parses `500ms`, `1s`, `2m`: a whole number and a unit, which is required.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().map_err(|_| format!("{text:?}: expected a whole number and ms, s or m"))?;
    let duration = match unit {
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        _ => return Err(format!("{text:?}: the unit must be ms, s or m")),
    };
    if duration.is_zero() {
        return Err(format!("{text:?}: the interval must be more than zero"));
    }
    Ok(duration)
}

/// Runs the agent until it ends by itself (after `--count` rounds), or forever. `main`
/// calls this after setting up logging.
pub fn run_blocking(args: Args) -> Result<(), String> {
    let handoff = match args.handoff_config()? {
        Some(cfg) => {
            Some(HandoffServer::start(cfg).map_err(|e| format!("cannot start the hand-off server: {e}"))?)
        }
        None => None,
    };
    if args.switches.is_empty() {
        // Hand-offs only: serve until the process is stopped.
        if let Some(server) = handoff {
            server.wait();
        }
        return Ok(());
    }
    let cfg = args.into_config()?;
    let bounded = cfg.count.is_some();
    let handle = spawn(cfg).map_err(|e| format!("cannot start the agent: {e}"))?;
    let sent = handle.wait()?;
    // A one-shot run that reached no switch should fail, so scripts notice.
    if bounded && sent == 0 {
        return Err("no report was sent (see the warnings above)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn args(argv: &str) -> Result<Args, String> {
        let argv = std::iter::once("agent").chain(argv.split_whitespace());
        Cli::try_parse_from(argv).map(|c| c.args).map_err(|e| e.to_string())
    }

    fn config(argv: &str) -> Result<AgentConfig, String> {
        args(argv)?.into_config()
    }

    #[test]
    fn defaults() {
        let cfg = config("--server 10.0.0.5:80 --switch 10.0.0.1:9901").unwrap();
        assert_eq!(cfg.server, "10.0.0.5:80".parse().unwrap());
        assert_eq!(cfg.switches, vec!["10.0.0.1:9901".parse().unwrap()]);
        assert_eq!(cfg.metric, Metric::TimeWait);
        assert_eq!(cfg.capacity, CapacityFn::default());
        assert_eq!(cfg.interval, Duration::from_secs(1));
        assert_eq!((cfg.port_filter, cfg.token, cfg.count), (None, None, None));
    }

    #[test]
    fn every_option() {
        let cfg = config(
            "--server [::1]:8081 --switch [::1]:9901 --switch [fe80::1]:9901 --metric established \
             --port 8081 --capacity 1000 --max-load 50 --interval 250ms --token abc --count 3",
        )
        .unwrap();
        assert_eq!(cfg.switches.len(), 2);
        assert_eq!((cfg.metric, cfg.port_filter), (Metric::Established, Some(8081)));
        assert_eq!(cfg.capacity, CapacityFn::new(1000.0, 50.0));
        assert_eq!(cfg.interval, Duration::from_millis(250));
        assert_eq!((cfg.token.as_deref(), cfg.count), (Some("abc"), Some(3)));
    }

    #[test]
    fn k_overrides_max_load() {
        let cfg = config("--server 1.2.3.4:80 --switch 1.2.3.5:9 --max-load 50 --k 0.01").unwrap();
        assert_eq!(cfg.capacity, CapacityFn::with_k(1_048_576.0, 0.01));
    }

    #[test]
    fn token_file_is_trimmed() {
        let path = std::env::temp_dir().join(format!("cswitch-agent-token-{}", std::process::id()));
        std::fs::write(&path, "  s3cret\n").unwrap();
        let cfg = config(&format!("--server 1.2.3.4:80 --switch 1.2.3.5:9 --token-file {}", path.display()));
        let _ = std::fs::remove_file(&path);
        assert_eq!(cfg.unwrap().token.as_deref(), Some("s3cret"));
    }

    #[test]
    fn clear_refusals() {
        let base = "--server 1.2.3.4:80 --switch 1.2.3.5:9";
        let cases = [
            ("--port 80 --metric cpu", "--port only applies to timewait and established, not cpu"),
            ("--count 0", "--count must be at least 1"),
            ("--capacity 0", "--capacity must be at least 1"),
            ("--max-load 0", "--max-load must be a finite number > 0, not 0"),
            ("--k -1", "--k must be a finite number ≥ 0, not -1"),
            ("--token a\u{7f}b", "the token must be printable ASCII without spaces"),
            (
                "--token-file /nonexistent/cswitch-token",
                "cannot read --token-file /nonexistent/cswitch-token",
            ),
            ("--switch [::1]:9", "--switch addresses must be all IPv4 or all IPv6"),
        ];
        for (extra, want) in cases {
            let err = config(&format!("{base} {extra}")).unwrap_err();
            assert!(err.starts_with(want), "{extra}: {err}");
        }
        let long = format!("{base} --token {}", "x".repeat(MAX_TOKEN_LEN + 1));
        assert_eq!(config(&long).unwrap_err(), "the token is longer than 128 bytes");
    }

    #[test]
    fn handoff_flags() {
        assert!(args("--handoff-listen 127.0.0.1:9000").unwrap_err().contains("--local"));
        let only = args("--handoff-listen 127.0.0.1:9000 --local 127.0.0.1:8080").unwrap();
        assert_eq!(only.handoff_config().unwrap_err(), "--handoff-listen needs --handoff-token-file");
        let path = std::env::temp_dir().join(format!("cswitch-handoff-token-{}", std::process::id()));
        std::fs::write(&path, "  0123456789abcdef0123\n").unwrap();
        let a = args(&format!(
            "--handoff-listen 127.0.0.1:9000 --local 127.0.0.1:8080 --handoff-token-file {}",
            path.display()
        ))
        .unwrap();
        let cfg = a.handoff_config().unwrap().unwrap();
        assert_eq!((cfg.token.as_str(), cfg.local.port()), ("0123456789abcdef0123", 8080));
        std::fs::write(&path, "short").unwrap();
        assert!(a.handoff_config().unwrap_err().contains("at least 16"));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn local_servers_by_vip_port() {
        let path = std::env::temp_dir().join(format!("cswitch-local-port-token-{}", std::process::id()));
        std::fs::write(&path, "0123456789abcdef0123").unwrap();
        let base = format!(
            "--handoff-listen 127.0.0.1:9000 --local 127.0.0.1:8080 --handoff-token-file {}",
            path.display()
        );
        let cfg = args(&format!("{base} --local-port 443=127.0.0.1:8443 --local-port 8443=[::1]:9443"))
            .unwrap()
            .handoff_config()
            .unwrap()
            .unwrap();
        assert_eq!(cfg.local_for(443), "127.0.0.1:8443".parse().unwrap());
        assert_eq!(cfg.local_for(8443), "[::1]:9443".parse().unwrap());
        assert_eq!(cfg.local_for(80), "127.0.0.1:8080".parse().unwrap(), "other ports: --local");
        let twice = args(&format!("{base} --local-port 443=127.0.0.1:8443 --local-port 443=127.0.0.1:9443"));
        assert_eq!(twice.unwrap().handoff_config().unwrap_err(), "--local-port 443 is given twice");
        let _ = std::fs::remove_file(&path);
        for (bad, want) in [
            ("443", "expected PORT=ADDR"),
            ("0=127.0.0.1:8443", "is not a port"),
            ("https=127.0.0.1:8443", "is not a port"),
            ("443=localhost:8443", "is not an address"),
        ] {
            let err = args(&format!("{base} --local-port {bad}")).unwrap_err();
            assert!(err.contains(want), "{bad}: {err}");
        }
        // Only with a hand-off server.
        let err = args("--server 1.2.3.4:80 --switch 1.2.3.5:9 --local-port 443=127.0.0.1:8443").unwrap_err();
        assert!(err.contains("--handoff-listen"), "{err}");
    }

    #[test]
    fn clap_refusals() {
        assert!(args("--server 1.2.3.4:80").unwrap_err().contains("--switch"));
        assert!(args("--switch 1.2.3.4:80").unwrap_err().contains("--server"));
        assert!(args("--server x --switch 1.2.3.4:80").is_err());
        assert!(args("--server 1.2.3.4:80 --switch 1.2.3.4:9 --metric disk")
            .unwrap_err()
            .contains("unknown metric"));
        assert!(args("--server 1.2.3.4:80 --switch 1.2.3.4:9 --interval 5").unwrap_err().contains("unit"));
        let both = "--server 1.2.3.4:80 --switch 1.2.3.4:9 --token a --token-file b";
        assert!(args(both).unwrap_err().contains("cannot be used with"));
    }

    #[test]
    fn run_blocking_ends_after_count_and_fails_if_nothing_was_sent() {
        let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let path = std::env::temp_dir().join(format!("cswitch-agent-blocking-{}", std::process::id()));
        std::fs::write(&path, "3").unwrap();
        let argv = |path: &std::path::Path| {
            let sw = sink.local_addr().unwrap();
            format!(
                "--server 1.2.3.4:80 --switch {sw} --metric file:{} --count 2 --interval 10ms",
                path.display()
            )
        };
        assert_eq!(run_blocking(args(&argv(&path)).unwrap()), Ok(()));
        let _ = std::fs::remove_file(&path);
        let err = run_blocking(args(&argv(&path)).unwrap()).unwrap_err();
        assert_eq!(err, "no report was sent (see the warnings above)");
    }

    #[test]
    fn intervals() {
        assert_eq!(parse_interval("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_interval("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse_interval("2m"), Ok(Duration::from_secs(120)));
        for bad in ["", "1", "s", "1h", "1.5s", "-1s", "0ms", "1 s", "1S"] {
            assert!(parse_interval(bad).is_err(), "{bad:?}");
        }
    }
}
