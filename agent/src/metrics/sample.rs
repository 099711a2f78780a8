//! One metrics sample and where its numbers come from: the sandbox's
//! cgroup v2 where it has one (`cpu.stat`, `memory.current`, `memory.stat`),
//! else procfs (`/proc/stat`, `/proc/meminfo`); the disk from `statvfs` of
//! the sandbox root.

use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::pb;

/// One sample, as `MetricsResponse` carries it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Sample {
    pub cpu_used_pct: f64,
    pub mem_used_bytes: u64,
    pub mem_total_bytes: u64,
    pub mem_cache_bytes: u64,
    pub disk_used_bytes: u64,
    pub disk_total_bytes: u64,
    pub cpu_count: u32,
    pub timestamp_unix_ms: i64,
}

impl From<Sample> for pb::MetricsResponse {
    fn from(s: Sample) -> Self {
        pb::MetricsResponse {
            cpu_used_pct: s.cpu_used_pct,
            mem_used_bytes: s.mem_used_bytes,
            mem_total_bytes: s.mem_total_bytes,
            disk_used_bytes: s.disk_used_bytes,
            disk_total_bytes: s.disk_total_bytes,
            cpu_count: s.cpu_count,
            timestamp_unix_ms: s.timestamp_unix_ms,
            mem_cache_bytes: s.mem_cache_bytes,
        }
    }
}

/// Where a sample's numbers are read.
#[derive(Clone, Debug)]
pub(crate) struct Sources {
    /// The sandbox's cgroup v2 directory, when it has one.
    pub cgroup: Option<std::path::PathBuf>,
    /// The sandbox root (for `statvfs`).
    pub root: std::path::PathBuf,
}

/// A CPU counter reading: busy and elapsed time in one unit, so that
/// `busy / elapsed` of a difference is the share of all CPUs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CpuMark {
    /// `/proc/stat`'s first line: (busy, total) jiffies of all CPUs.
    Proc { busy: u64, total: u64 },
    /// The cgroup's `usage_usec` and the moment it was read.
    Cgroup { usage_usec: u64, at: Instant },
}

/// The number of CPUs this agent may use (at least 1).
pub(crate) fn cpu_count() -> u32 {
    std::thread::available_parallelism()
        .map(|n| u32::try_from(n.get()).unwrap_or(u32::MAX))
        .unwrap_or(1)
}

/// Now, in milliseconds since 1970 (0 for a clock before it).
pub(crate) fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Reads the CPU counter of `sources` (the cgroup's, else the host's).
pub(crate) fn cpu_mark(sources: &Sources) -> Option<CpuMark> {
    if let Some(dir) = &sources.cgroup
        && let Some(usage_usec) = std::fs::read_to_string(dir.join("cpu.stat"))
            .ok()
            .and_then(|t| keyed(&t, "usage_usec"))
    {
        return Some(CpuMark::Cgroup {
            usage_usec,
            at: Instant::now(),
        });
    }
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    proc_stat_mark(&text)
}

/// `/proc/stat`'s aggregate `cpu` line: busy = total - idle - iowait.
fn proc_stat_mark(text: &str) -> Option<CpuMark> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(10)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal (guest is in user).
    let total = fields
        .iter()
        .take(8)
        .fold(0u64, |acc, v| acc.saturating_add(*v));
    let idle = fields
        .get(3)
        .copied()
        .unwrap_or(0)
        .saturating_add(fields.get(4).copied().unwrap_or(0));
    Some(CpuMark::Proc {
        busy: total.saturating_sub(idle),
        total,
    })
}

/// The CPU use between two marks, in percent of all `cpus` (0..=100); 0
/// when they are of different kinds or no time passed.
pub(crate) fn cpu_between(a: CpuMark, b: CpuMark, cpus: u32) -> f64 {
    let pct = match (a, b) {
        (
            CpuMark::Proc {
                busy: b0,
                total: t0,
            },
            CpuMark::Proc {
                busy: b1,
                total: t1,
            },
        ) => {
            let total = t1.saturating_sub(t0);
            if total == 0 {
                return 0.0;
            }
            b1.saturating_sub(b0) as f64 / total as f64 * 100.0
        }
        (
            CpuMark::Cgroup {
                usage_usec: u0,
                at: a0,
            },
            CpuMark::Cgroup {
                usage_usec: u1,
                at: a1,
            },
        ) => {
            let wall = a1.saturating_duration_since(a0).as_micros() as f64 * f64::from(cpus.max(1));
            if wall <= 0.0 {
                return 0.0;
            }
            u1.saturating_sub(u0) as f64 / wall * 100.0
        }
        _ => 0.0,
    };
    pct.clamp(0.0, 100.0)
}

/// `key value` lines (`cpu.stat`, `memory.stat`): the value of `key`.
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// `/proc/meminfo`'s `key:` in bytes.
fn meminfo(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        kib.checked_mul(1024)
    })
}

/// (used, total, cache) memory in bytes: the cgroup's where there is one
/// (used = `memory.current` - page cache; total = its `memory.max`, capped
/// by the host's), else the host's (MemTotal - MemAvailable, Cached).
pub(crate) fn memory(sources: &Sources) -> (u64, u64, u64) {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let host_total = meminfo(&info, "MemTotal").unwrap_or(0);
    if let Some(dir) = &sources.cgroup
        && let Some(current) = read_u64(&dir.join("memory.current"))
    {
        let cache = std::fs::read_to_string(dir.join("memory.stat"))
            .ok()
            .and_then(|t| keyed(&t, "file"))
            .unwrap_or(0);
        // "max" (no limit) does not parse: the host's total.
        let total = read_u64(&dir.join("memory.max")).map_or(host_total, |m| m.min(host_total));
        return (current.saturating_sub(cache), total, cache);
    }
    let available = meminfo(&info, "MemAvailable").unwrap_or(0);
    let cache = meminfo(&info, "Cached").unwrap_or(0);
    (host_total.saturating_sub(available), host_total, cache)
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// (used, total) bytes of the filesystem holding the sandbox root (0, 0
/// where it cannot be read).
pub(crate) fn disk(root: &Path) -> (u64, u64) {
    let Ok(st) = rustix::fs::statvfs(root) else {
        return (0, 0);
    };
    let frsize = st.f_frsize;
    let total = st.f_blocks.saturating_mul(frsize);
    let used = st
        .f_blocks
        .saturating_sub(st.f_bfree)
        .saturating_mul(frsize);
    (used, total)
}

/// A sample whose CPU is `cpu_used_pct`, the rest read now.
pub(crate) fn sample_with_cpu(sources: &Sources, cpu_used_pct: f64) -> Sample {
    let (mem_used_bytes, mem_total_bytes, mem_cache_bytes) = memory(sources);
    let (disk_used_bytes, disk_total_bytes) = disk(&sources.root);
    Sample {
        cpu_used_pct,
        mem_used_bytes,
        mem_total_bytes,
        mem_cache_bytes,
        disk_used_bytes,
        disk_total_bytes,
        cpu_count: cpu_count(),
        timestamp_unix_ms: now_unix_ms(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_busy_excludes_idle_and_iowait() {
        let text = "cpu  10 0 10 70 10 0 0 0 5 0\ncpu0 1 1 1 1\n";
        let Some(CpuMark::Proc { busy, total }) = proc_stat_mark(text) else {
            panic!("parsed");
        };
        assert_eq!((busy, total), (20, 100));
    }

    #[test]
    fn cpu_between_is_a_clamped_share() {
        let a = CpuMark::Proc { busy: 0, total: 0 };
        let b = CpuMark::Proc {
            busy: 25,
            total: 100,
        };
        assert!((cpu_between(a, b, 4) - 25.0).abs() < 1e-9);
        assert_eq!(cpu_between(b, a, 4), 0.0);
        assert_eq!(cpu_between(a, a, 4), 0.0);
    }

    #[test]
    fn meminfo_and_keyed_lines_parse() {
        let info = "MemTotal:       1000 kB\nMemAvailable:    250 kB\n";
        assert_eq!(meminfo(info, "MemTotal"), Some(1_024_000));
        assert_eq!(meminfo(info, "MemAvail"), None);
        assert_eq!(keyed("anon 5\nfile 7\n", "file"), Some(7));
        assert_eq!(keyed("file_mapped 3\n", "file"), None);
    }

    #[test]
    fn a_host_sample_is_sane() {
        let dir = std::env::temp_dir();
        let s = sample_with_cpu(
            &Sources {
                cgroup: None,
                root: dir,
            },
            1.0,
        );
        assert!(s.cpu_count >= 1);
        assert!(s.mem_total_bytes > s.mem_used_bytes && s.mem_used_bytes > 0);
        assert!(s.disk_total_bytes >= s.disk_used_bytes && s.disk_total_bytes > 0);
        assert!(s.timestamp_unix_ms > 1_600_000_000_000);
    }
}
