//! The standard `process_*` figures Prometheus clients export (CPU time, resident memory,
//! file descriptors, start time), read from `/proc/self` by hand: a few lines of parsing,
//! where a crate for it would bring a whole system-information library.

/// One reading of the process's figures.
#[derive(Debug)]
pub(crate) struct Process {
    /// User and system CPU time.
    pub(crate) cpu_seconds: f64,
    pub(crate) resident_bytes: u64,
    pub(crate) open_fds: u64,
    /// The soft limit; `None` when unlimited.
    pub(crate) max_fds: Option<u64>,
    /// Seconds since the Unix epoch.
    pub(crate) start_time_seconds: f64,
}

/// `/proc` counts CPU time in USER_HZ ticks, which the kernel fixes at 100 on every
/// architecture (`sysconf(_SC_CLK_TCK)` would need libc for a constant).
const TICKS_PER_SECOND: f64 = 100.0;

/// The figures now; `None` where `/proc/self` cannot be read (not Linux, no procfs).
pub(crate) fn read() -> Option<Process> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) is in parentheses and may hold spaces: count from the
    // last `)`. `fields[0]` is then field 3 of proc(5).
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    let (utime, stime, start_ticks) = (field(14)?, field(15)?, field(22)?);
    let boot_time = key_number(&std::fs::read_to_string("/proc/stat").ok()?, "btime")?;
    let resident_kib = key_number(&std::fs::read_to_string("/proc/self/status").ok()?, "VmRSS:")?;
    Some(Process {
        cpu_seconds: (utime + stime) as f64 / TICKS_PER_SECOND,
        resident_bytes: resident_kib * 1024,
        open_fds: std::fs::read_dir("/proc/self/fd").ok()?.count() as u64,
        max_fds: std::fs::read_to_string("/proc/self/limits").ok().as_deref().and_then(soft_open_files),
        start_time_seconds: boot_time as f64 + start_ticks as f64 / TICKS_PER_SECOND,
    })
}

/// The number after `key` on the line that starts with it (`btime 1700000000`,
/// `VmRSS:   1234 kB`).
fn key_number(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// The soft limit of `Max open files` in `/proc/self/limits` (`unlimited` is `None`).
fn soft_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..].split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_proc_lines() {
        assert_eq!(key_number("cpu 1 2\nbtime 1700000000\n", "btime"), Some(1_700_000_000));
        assert_eq!(key_number("Name:\tx\nVmRSS:\t   1234 kB\n", "VmRSS:"), Some(1234));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 1048576              files\n";
        assert_eq!(soft_open_files(limits), Some(1024));
        assert_eq!(soft_open_files("Max open files  unlimited  unlimited  files\n"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_process() {
        let p = read().expect("/proc/self is readable on Linux");
        assert!(p.resident_bytes > 1024 * 1024, "{p:?}");
        assert!(p.open_fds >= 3, "{p:?}");
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        assert!(p.start_time_seconds <= now.as_secs_f64() + 1.0 && p.start_time_seconds > 1.6e9, "{p:?}");
    }
}
