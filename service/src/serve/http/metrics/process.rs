//! The standard Prometheus process metrics of the running service, read from `/proc/self` at
//! each scrape (Linux; elsewhere nothing is reported).
//!
//! | family | type |
//! |---|---|
//! | `process_cpu_seconds_total` | counter (user + system CPU time) |
//! | `process_resident_memory_bytes`, `process_virtual_memory_bytes` | gauge |
//! | `process_open_fds`, `process_max_fds` | gauge |
//! | `process_start_time_seconds` | gauge (Unix time) |
//!
//! The names are the ones every Prometheus client library exports, so the usual Grafana
//! panels and alerts work unchanged.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// What `/proc/self` says of the process at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ProcessSample {
    pub cpu_seconds: f64,
    pub resident_bytes: Option<f64>,
    pub virtual_bytes: Option<f64>,
    pub open_fds: Option<f64>,
    pub max_fds: Option<f64>,
    pub start_time_seconds: Option<f64>,
}

impl ProcessSample {
    /// The current process, or None where `/proc/self/stat` cannot be read.
    pub fn now() -> Option<ProcessSample> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let mut s = parse_stat(&stat, USER_HZ)?;
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let (rss, vsize) = parse_status_memory(&status);
        s.resident_bytes = rss;
        s.virtual_bytes = vsize;
        s.open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as f64);
        s.max_fds = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|l| parse_max_open_files(&l));
        let boot = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| parse_boot_time(&t));
        s.start_time_seconds = s.start_time_seconds.zip(boot).map(|(since, b)| b + since);
        Some(s)
    }
}

/// Reads utime, stime (fields 14, 15) and starttime (22) of `/proc/self/stat`; the command
/// name (field 2) may hold spaces and parentheses, so fields are counted after its last `)`.
/// `start_time_seconds` is left as seconds since boot.
fn parse_stat(stat: &str, ticks: f64) -> Option<ProcessSample> {
    let after = &stat[stat.rfind(')')? + 1..];
    // `after` starts with field 3 (state)
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| -> Option<f64> { fields.get(n - 3)?.parse::<f64>().ok() };
    Some(ProcessSample {
        cpu_seconds: (field(14)? + field(15)?) / ticks,
        start_time_seconds: Some(field(22)? / ticks),
        ..ProcessSample::default()
    })
}

/// The soft limit of "Max open files" in `/proc/self/limits` (None when unlimited).
fn parse_max_open_files(limits: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// `btime` of `/proc/stat`: the boot time, Unix seconds.
fn parse_boot_time(stat: &str) -> Option<f64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

/// Clock ticks per second of `/proc` times: the kernel's USER_HZ, 100 on every architecture
/// Augur builds for (reading `sysconf(_SC_CLK_TCK)` would need `unsafe`).
const USER_HZ: f64 = 100.0;

/// `VmRSS` and `VmSize` of `/proc/self/status`, bytes (the kernel writes them in kB).
fn parse_status_memory(status: &str) -> (Option<f64>, Option<f64>) {
    let kb = |key: &str| -> Option<f64> {
        let v = status.lines().find_map(|l| l.strip_prefix(key))?;
        let n: f64 = v.split_whitespace().next()?.parse().ok()?;
        Some(n * 1024.0)
    };
    (kb("VmRSS:"), kb("VmSize:"))
}

/// Encodes a [`ProcessSample`] taken at each scrape (register on an unprefixed registry).
#[derive(Debug, Default)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(s) = ProcessSample::now() else {
            return Ok(());
        };
        let cpu = ConstCounter::new(s.cpu_seconds);
        cpu.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            cpu.metric_type(),
        )?)?;
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                s.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                s.virtual_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                s.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                s.max_fds,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch in seconds",
                s.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            let Some(v) = value else { continue };
            let g = ConstGauge::new(v);
            g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        // a command name with a space and a parenthesis, as the kernel writes it
        let stat = "4242 (augur (x) y) S 1 4242 4242 0 -1 4194560 5000 0 0 0 \
                    250 150 0 0 20 0 9 0 1000 123456789 3000 18446744073709551615";
        let s = parse_stat(stat, 100.0).unwrap();
        assert_eq!(s.cpu_seconds, 4.0);
        assert_eq!(s.start_time_seconds, Some(10.0));
        assert_eq!(parse_stat("garbage", 100.0), None);
        let status = "Name:\taugur\nVmSize:\t  123456 kB\nVmRSS:\t    2048 kB\n";
        assert_eq!(
            parse_status_memory(status),
            (Some(2048.0 * 1024.0), Some(123_456.0 * 1024.0))
        );
    }

    #[test]
    fn limits_and_boot_time_are_read() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(parse_max_open_files(limits), Some(1024.0));
        assert_eq!(
            parse_max_open_files("Max open files  unlimited unlimited files"),
            None
        );
        assert_eq!(
            parse_boot_time("cpu  1 2 3\nbtime 1763800000\nprocesses 5\n"),
            Some(1_763_800_000.0)
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_sampled() {
        let s = ProcessSample::now().unwrap();
        assert!(s.resident_bytes.unwrap() > 1e6, "{s:?}");
        assert!(s.open_fds.unwrap() >= 3.0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let started = s.start_time_seconds.unwrap();
        assert!(
            started <= now + 1.0 && started > now - 86_400.0,
            "{started} vs {now}"
        );
    }
}
