//! One cgroup v2 per sandbox, so that no process of a sandbox escapes its
//! end: a process cannot leave its cgroup without write access to another
//! cgroup's `cgroup.procs` (root-owned; sandbox code does not run as root
//! where the agent is root), whatever it does with its session, process
//! group or environment, and `cgroup.kill` SIGKILLs every member at once.
//!
//! Layout: `<the agent's own cgroup>/rayito-<pid>-<random>/<sandbox>`. The
//! per-process parent is handed to the exit cleanup, which kills and removes
//! it when the process ends in any way (see [`super::exit_cleanup`]).

use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use rustix::fs::{Mode, OFlags};

/// This process's parent cgroup of all its sandboxes, if the host has a
/// writable cgroup v2 with `cgroup.kill` (Linux 5.14+). Logs one warning
/// when it does not.
fn process_parent() -> Option<&'static Path> {
    static PARENT: OnceLock<Option<PathBuf>> = OnceLock::new();
    PARENT
        .get_or_init(|| match create_process_parent() {
            Ok(dir) => Some(dir),
            Err(err) => {
                tracing::warn!(
                    error = %err,
                    "no writable cgroup v2 with cgroup.kill: a sandbox process that leaves \
                     its process group and clears RAYITO_SANDBOX from its environment can \
                     survive the sandbox"
                );
                None
            }
        })
        .as_deref()
}

fn create_process_parent() -> std::io::Result<PathBuf> {
    let own = own_cgroup_dir()?;
    sweep_stale(&own);
    let dir = own.join(format!(
        "rayito-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir(&dir)?;
    if !dir.join("cgroup.kill").exists() {
        let _ = std::fs::remove_dir(&dir);
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "cgroup.kill is missing (Linux older than 5.14)",
        ));
    }
    super::exit_cleanup::kill_cgroup_at_exit(&dir);
    Ok(dir)
}

/// Kills and removes the parents left by processes that ended without their
/// exit cleanup (`rayito-<pid>-<hex>` whose pid no longer runs).
fn sweep_stale(own: &Path) {
    let Ok(entries) = std::fs::read_dir(own) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !super::exit_cleanup::owner_is_gone(name, "rayito-") {
            continue;
        }
        let parent = entry.path();
        let _ = std::fs::write(parent.join("cgroup.kill"), b"1");
        for _ in 0..100 {
            let children: Vec<PathBuf> = std::fs::read_dir(&parent)
                .map(|d| {
                    d.flatten()
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .map(|e| e.path())
                        .collect()
                })
                .unwrap_or_default();
            for child in &children {
                let _ = std::fs::remove_dir(child);
            }
            if std::fs::remove_dir(&parent).is_ok() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The host directory of this process's cgroup v2: the `cgroup2` mount
/// point joined with the `0::` path of `/proc/self/cgroup`.
fn own_cgroup_dir() -> std::io::Result<PathBuf> {
    let not_found = |what: &str| std::io::Error::new(std::io::ErrorKind::NotFound, what.to_owned());
    let cgroups = std::fs::read_to_string("/proc/self/cgroup")?;
    let own = cgroups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| not_found("not in a cgroup v2"))?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    // `id parent major:minor root mount-point options... - fstype source super`
    let (mount_root, mount_point) = mountinfo
        .lines()
        .find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            if right.split_whitespace().next()? != "cgroup2" {
                return None;
            }
            let mut fields = left.split_whitespace();
            Some((fields.nth(3)?.to_owned(), fields.next()?.to_owned()))
        })
        .ok_or_else(|| not_found("no cgroup2 mount"))?;
    let relative = own
        .strip_prefix(mount_root.trim_end_matches('/'))
        .unwrap_or(own)
        .trim_start_matches('/');
    Ok(Path::new(&unescape_mount_path(&mount_point)).join(relative))
}

/// Mount points escape space, tab, newline and backslash as `\ooo`.
fn unescape_mount_path(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        if bytes[i] == b'\\'
            && let Some(v) = octal
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A sandbox's cgroup. Dropping it kills its processes and removes it.
#[derive(Debug)]
pub(crate) struct SandboxCgroup {
    dir: PathBuf,
}

impl SandboxCgroup {
    /// A new cgroup named `name` under this process's parent, or `None`
    /// where the host has none (the warning was logged once).
    pub(crate) fn create(name: &str) -> Option<Self> {
        let dir = process_parent()?.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => Some(Self { dir }),
            Err(err) => {
                tracing::warn!(error = %err, "cannot create a sandbox cgroup");
                None
            }
        }
    }

    /// `cgroup.procs`, opened for a child to join with (before fork).
    pub(crate) fn procs(&self) -> std::io::Result<OwnedFd> {
        let fd = rustix::fs::open(
            self.dir.join("cgroup.procs"),
            OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(fd)
    }

    /// SIGKILLs every process in the cgroup (returns at once; they die
    /// asynchronously).
    pub(crate) fn kill(&self) {
        let written = std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.kill"))
            .and_then(|mut f| f.write_all(b"1"));
        if let Err(err) = written {
            tracing::warn!(error = %err, "cgroup.kill failed");
        }
    }

    /// Whether any process is still in the cgroup.
    pub(crate) fn populated(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.events"))
            .map(|events| events.lines().any(|l| l == "populated 1"))
            .unwrap_or(false)
    }
}

impl Drop for SandboxCgroup {
    fn drop(&mut self) {
        self.kill();
        // The killed processes leave within milliseconds; wait a little for
        // the directory to become removable, and otherwise leave it to the
        // exit cleanup (which removes the whole parent).
        for _ in 0..20 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::unescape_mount_path;

    #[test]
    fn mount_paths_are_unescaped() {
        assert_eq!(unescape_mount_path("/sys/fs/cgroup"), "/sys/fs/cgroup");
        assert_eq!(unescape_mount_path("/a\\040b"), "/a b");
        assert_eq!(unescape_mount_path("/a\\"), "/a\\");
    }
}
