//! Load metrics: pure parsers over `/proc` text, and the [`Meter`] that reads the files.
//!
//! The parsers take text rather than paths so fixtures can test them on any machine; only
//! [`Meter`] touches the file system.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// What the agent counts as the host's load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Metric {
    /// TCP sockets in TIME_WAIT: connections closed in the last minute or two (the
    /// paper's choice; a smoothed measure of recent request rate).
    TimeWait,
    /// TCP sockets in ESTABLISHED: connections open right now.
    Established,
    /// The 1-minute load average, first field of `/proc/loadavg`.
    LoadAvg,
    /// CPU use in percent (0–100) since the previous measurement.
    Cpu,
    /// A file holding one number, written by the operator's own probe.
    File(PathBuf),
}

impl Metric {
    /// The name sent on the wire (`file` without its path, which is nobody else's business).
    pub fn name(&self) -> &'static str {
        match self {
            Metric::TimeWait => "timewait",
            Metric::Established => "established",
            Metric::LoadAvg => "loadavg",
            Metric::Cpu => "cpu",
            Metric::File(_) => "file",
        }
    }

    /// Whether the metric counts TCP sockets, so that a local-port filter applies.
    pub fn counts_sockets(&self) -> bool {
        matches!(self, Metric::TimeWait | Metric::Established)
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Metric::File(path) => write!(f, "file:{}", path.display()),
            other => f.write_str(other.name()),
        }
    }
}

/// A metric name that is none of the known ones.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown metric {0:?}: expected timewait, established, loadavg, cpu or file:<path>")]
pub struct UnknownMetric(pub String);

impl FromStr for Metric {
    type Err = UnknownMetric;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "timewait" => Ok(Metric::TimeWait),
            "established" => Ok(Metric::Established),
            "loadavg" => Ok(Metric::LoadAvg),
            "cpu" => Ok(Metric::Cpu),
            _ => match s.strip_prefix("file:") {
                Some(path) if !path.is_empty() => Ok(Metric::File(PathBuf::from(path))),
                _ => Err(UnknownMetric(s.to_string())),
            },
        }
    }
}

/// A TCP state as `/proc/net/tcp` writes it in its `st` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpState {
    /// `01`.
    Established,
    /// `06`.
    TimeWait,
}

impl TcpState {
    /// The kernel's code for the state (`include/net/tcp_states.h`).
    pub fn code(self) -> u8 {
        match self {
            TcpState::Established => 0x01,
            TcpState::TimeWait => 0x06,
        }
    }
}

/// How many sockets in `/proc/net/tcp` or `/proc/net/tcp6` text are in `state`, counting
/// only those whose local port is `local_port` when given. The header and malformed
/// lines are skipped.
pub fn count_tcp(text: &str, state: TcpState, local_port: Option<u16>) -> u64 {
    let matches = |&(port, st): &(u16, u8)| st == state.code() && port_matches(local_port, port);
    text.lines().filter_map(tcp_line).filter(matches).count() as u64
}

/// `(local port, state)` of one socket line: `sl: local rem st ...`, addresses as
/// `HEX_IP:HEX_PORT`. The header's first field is `sl`, without the colon.
fn tcp_line(line: &str) -> Option<(u16, u8)> {
    let mut fields = line.split_whitespace();
    fields.next().filter(|sl| sl.ends_with(':'))?;
    let local = fields.next()?;
    let _remote = fields.next()?;
    let state = fields.next()?;
    let (_, port) = local.rsplit_once(':')?;
    Some((u16::from_str_radix(port, 16).ok()?, u8::from_str_radix(state, 16).ok()?))
}

/// No filter matches every port; `Some(p)` only `p`.
fn port_matches(filter: Option<u16>, port: u16) -> bool {
    filter.is_none() || filter == Some(port)
}

/// The 1-minute load average: the first field of `/proc/loadavg`.
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok().filter(|x: &f64| x.is_finite())
}

/// Cumulative CPU time from the first `cpu ` line of `/proc/stat`, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuSample {
    /// Time spent doing anything but idling or waiting for I/O.
    pub busy: u64,
    /// All time.
    pub total: u64,
}

/// The all-CPU line of `/proc/stat`: `cpu  user nice system idle iowait irq softirq steal
/// guest guest_nice`. Only the first eight columns are summed: guest time is already
/// counted in user and nice.
pub fn parse_cpu_sample(text: &str) -> Option<CpuSample> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let mut values = Vec::with_capacity(8);
    for field in line.split_whitespace().skip(1).take(8) {
        values.push(field.parse::<u64>().ok()?);
    }
    // user, nice, system, idle are in every kernel since 2.4; the rest may be absent.
    if values.len() < 4 {
        return None;
    }
    let total: u64 = values.iter().sum();
    let idle = values[3] + values.get(4).copied().unwrap_or(0);
    Some(CpuSample { busy: total.saturating_sub(idle), total })
}

/// CPU use in percent between two samples; 0 when no time passed. Saturating, because
/// the kernel's iowait counter is known to go backwards now and then.
pub fn cpu_percent(prev: CpuSample, now: CpuSample) -> f64 {
    let total = now.total.saturating_sub(prev.total);
    if total == 0 {
        return 0.0;
    }
    let busy = now.busy.saturating_sub(prev.busy).min(total);
    100.0 * busy as f64 / total as f64
}

/// Reads one metric, keeping what it needs between calls (the previous CPU sample).
#[derive(Debug)]
pub struct Meter {
    metric: Metric,
    port_filter: Option<u16>,
    // Starts at zero, so the first CPU figure is the average since boot rather than a
    // measurement that would need a sleep.
    prev_cpu: CpuSample,
}

impl Meter {
    /// A meter for `metric`; `port_filter` restricts socket counts to one local port.
    pub fn new(metric: Metric, port_filter: Option<u16>) -> Self {
        Meter { metric, port_filter, prev_cpu: CpuSample::default() }
    }

    /// The metric this meter reads.
    pub fn metric(&self) -> &Metric {
        &self.metric
    }

    /// The current load.
    pub fn measure(&mut self) -> io::Result<f64> {
        match &self.metric {
            Metric::TimeWait => self.sockets(TcpState::TimeWait),
            Metric::Established => self.sockets(TcpState::Established),
            Metric::LoadAvg => {
                let text = std::fs::read_to_string("/proc/loadavg")?;
                parse_loadavg(&text).ok_or_else(|| invalid("/proc/loadavg: no load average"))
            }
            Metric::Cpu => self.cpu(),
            Metric::File(path) => read_number(path),
        }
    }

    fn sockets(&self, state: TcpState) -> io::Result<f64> {
        let v4 = std::fs::read_to_string("/proc/net/tcp")?;
        // tcp6 is absent when IPv6 is disabled; that means no IPv6 sockets, not an error.
        let v6 = match std::fs::read_to_string("/proc/net/tcp6") {
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            other => other?,
        };
        let n = count_tcp(&v4, state, self.port_filter) + count_tcp(&v6, state, self.port_filter);
        Ok(n as f64)
    }

    fn cpu(&mut self) -> io::Result<f64> {
        let text = std::fs::read_to_string("/proc/stat")?;
        let now = parse_cpu_sample(&text).ok_or_else(|| invalid("/proc/stat: no cpu line"))?;
        let percent = cpu_percent(self.prev_cpu, now);
        self.prev_cpu = now;
        Ok(percent)
    }
}

/// The one finite number a metric file holds (surrounding whitespace allowed).
fn read_number(path: &Path) -> io::Result<f64> {
    let text = std::fs::read_to_string(path)?;
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(invalid(&format!("{}: not a number: {:?}", path.display(), text.trim()))),
    }
}

fn invalid(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real lines from a Linux 6.x host: a listener on :8080 (0x1F90), an accepted
    /// connection on it, the client side of that connection, two TIME_WAIT sockets
    /// (one local :8080), and a listener on :22.
    const TCP4: &str = "\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 81234 1 0000000000000000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 17823 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F90 0100007F:A2C4 01 00000000:00000000 00:00000000 00000000  1000        0 81240 1 0000000000000000 20 4 30 10 -1
   3: 0100007F:A2C4 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 81239 1 0000000000000000 20 4 29 10 -1
   4: 0100007F:1F90 0100007F:A2B0 06 00000000:00000000 03:00001234 00000000     0        0 0 3 0000000000000000
   5: 0100007F:C001 5DB8D822:01BB 06 00000000:00000000 03:000005DC 00000000     0        0 0 3 0000000000000000
";

    /// IPv6: a listener on :80, an IPv4-mapped accepted connection on :80 (ESTABLISHED)
    /// and one on :80 in TIME_WAIT, and a native IPv6 TIME_WAIT on :443.
    const TCP6: &str = "\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 20000 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:0050 0000000000000000FFFF00000100007F:D431 01 00000000:00000000 00:00000000 00000000    33        0 20417 1 0000000000000000 20 4 30 10 -1
   2: 0000000000000000FFFF00000100007F:0050 0000000000000000FFFF00000100007F:D42F 06 00000000:00000000 03:00000F9E 00000000     0        0 0 3 0000000000000000
   3: B80D0120000000000000000001000000:01BB B80D0120000000000000000002000000:E29A 06 00000000:00000000 03:00000FA0 00000000     0        0 0 3 0000000000000000
";

    #[test]
    fn counts_ipv4_states() {
        assert_eq!(count_tcp(TCP4, TcpState::Established, None), 2);
        assert_eq!(count_tcp(TCP4, TcpState::TimeWait, None), 2);
    }

    #[test]
    fn ipv4_port_filter_is_on_the_local_port() {
        // Only the accepted side has local port 8080; the client side has it as remote.
        assert_eq!(count_tcp(TCP4, TcpState::Established, Some(8080)), 1);
        assert_eq!(count_tcp(TCP4, TcpState::TimeWait, Some(8080)), 1);
        assert_eq!(count_tcp(TCP4, TcpState::TimeWait, Some(0xA2C4)), 0);
        assert_eq!(count_tcp(TCP4, TcpState::Established, Some(0xA2C4)), 1);
    }

    #[test]
    fn counts_ipv6_states() {
        assert_eq!(count_tcp(TCP6, TcpState::Established, None), 1);
        assert_eq!(count_tcp(TCP6, TcpState::TimeWait, None), 2);
        assert_eq!(count_tcp(TCP6, TcpState::TimeWait, Some(80)), 1);
        assert_eq!(count_tcp(TCP6, TcpState::TimeWait, Some(443)), 1);
    }

    #[test]
    fn header_empty_and_garbage_lines_count_nothing() {
        assert_eq!(count_tcp("", TcpState::TimeWait, None), 0);
        let header = TCP4.lines().next().unwrap_or_default();
        assert_eq!(count_tcp(header, TcpState::Established, None), 0);
        let junk = "   7: nonsense\n   8: 0100007F:ZZZZ 00000000:0000 06\n   9: 0100007F:0050 x 06\n";
        assert_eq!(count_tcp(junk, TcpState::TimeWait, None), 1);
    }

    #[test]
    fn loadavg_first_field() {
        assert_eq!(parse_loadavg("0.52 0.58 0.59 2/1234 5678\n"), Some(0.52));
        assert_eq!(parse_loadavg("12.00 1.00 0.10 1/1 1\n"), Some(12.0));
        assert_eq!(parse_loadavg(""), None);
        assert_eq!(parse_loadavg("high 1 1\n"), None);
        assert_eq!(parse_loadavg("NaN 1 1\n"), None);
    }

    const STAT1: &str = "\
cpu  100 10 50 800 40 0 0 0 30 0
cpu0 50 5 25 400 20 0 0 0 15 0
intr 12345
";
    const STAT2: &str = "\
cpu  160 10 70 900 60 0 0 0 90 0
cpu0 80 5 35 450 30 0 0 0 45 0
";

    #[test]
    fn cpu_sample_excludes_idle_iowait_and_guest() {
        let s = parse_cpu_sample(STAT1);
        assert_eq!(s, Some(CpuSample { busy: 160, total: 1000 }));
        assert_eq!(parse_cpu_sample("cpu  1 2 3 4\n"), Some(CpuSample { busy: 6, total: 10 }));
    }

    #[test]
    fn cpu_percent_between_samples() {
        let (a, b) = (parse_cpu_sample(STAT1), parse_cpu_sample(STAT2));
        let (a, b) = (a.unwrap_or_default(), b.unwrap_or_default());
        // busy 160 -> 240 (+80) over total 1000 -> 1200 (+200).
        assert!((cpu_percent(a, b) - 40.0).abs() < 1e-9);
        assert_eq!(cpu_percent(b, b), 0.0);
        // Counters that go backwards give 0, not a wrap-around.
        assert_eq!(cpu_percent(b, a), 0.0);
        // First sample: average since boot.
        assert!((cpu_percent(CpuSample::default(), a) - 16.0).abs() < 1e-9);
    }

    #[test]
    fn cpu_sample_rejects_bad_text() {
        assert_eq!(parse_cpu_sample("cpu0 1 2 3 4\n"), None);
        assert_eq!(parse_cpu_sample("cpu  1 2 3\n"), None);
        assert_eq!(parse_cpu_sample("cpu  1 x 3 4\n"), None);
    }

    #[test]
    fn metric_names_parse() {
        assert_eq!("timewait".parse(), Ok(Metric::TimeWait));
        assert_eq!("established".parse(), Ok(Metric::Established));
        assert_eq!("loadavg".parse(), Ok(Metric::LoadAvg));
        assert_eq!("cpu".parse(), Ok(Metric::Cpu));
        assert_eq!("file:/run/load".parse(), Ok(Metric::File(PathBuf::from("/run/load"))));
        for bad in ["", "file:", "TIMEWAIT", "load", "file"] {
            assert_eq!(bad.parse::<Metric>(), Err(UnknownMetric(bad.into())), "{bad:?}");
        }
    }

    #[test]
    fn metric_display_round_trips() {
        for m in [Metric::TimeWait, Metric::Cpu, Metric::File(PathBuf::from("/x/y"))] {
            assert_eq!(m.to_string().parse(), Ok(m));
        }
        assert_eq!(Metric::File(PathBuf::from("/secret/path")).name(), "file");
    }

    #[test]
    fn file_metric_reads_one_number() {
        let path = std::env::temp_dir().join(format!("cswitch-agent-unit-{}", std::process::id()));
        let mut meter = Meter::new(Metric::File(path.clone()), None);
        assert!(meter.measure().is_err(), "missing file");
        std::fs::write(&path, " 42.5\n").unwrap();
        assert_eq!(meter.measure().unwrap(), 42.5);
        std::fs::write(&path, "lots").unwrap();
        assert_eq!(meter.measure().unwrap_err().kind(), io::ErrorKind::InvalidData);
        std::fs::write(&path, "inf").unwrap();
        assert!(meter.measure().is_err());
        let _ = std::fs::remove_file(&path);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn proc_metrics_read_on_this_host() {
        for metric in [Metric::TimeWait, Metric::Established, Metric::LoadAvg, Metric::Cpu] {
            let mut meter = Meter::new(metric.clone(), None);
            for _ in 0..2 {
                let load = meter.measure().unwrap();
                assert!(load.is_finite() && load >= 0.0, "{metric}: {load}");
            }
        }
    }
}
