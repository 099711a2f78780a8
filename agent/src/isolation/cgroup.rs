//! One cgroup v2 per sandbox, so that no process of a sandbox escapes its
//! end: a process cannot leave its cgroup without write access to another
//! cgroup's `cgroup.procs` (root-owned; sandbox code does not run as root
//! where the agent is root), whatever it does with its session, process
//! group or environment, and `cgroup.kill` SIGKILLs every member at once.
//!
//! Layout: `<the agent's own cgroup>/rayito-<pid>-<random>/<sandbox>`, and
//! `<sandbox>/command-<random>` for each command the process service starts,
//! so that killing one command ends everything it started, wherever that
//! moved itself (the sandbox's `cgroup.kill` still reaches them all). The
//! per-process parent is handed to the exit cleanup, which kills and removes
//! it when the process ends in any way (see [`super::exit_cleanup`]).
//!
//! Limits ([`SandboxLimits`]): `pids.max` and `memory.max` (with
//! `memory.swap.max` 0) on the sandbox's cgroup where the v2 tree has the
//! `pids` and `memory` controllers (the agent enables them for its parent
//! when it may). On a hybrid host, whose v2 tree has no controllers (they
//! are bound to v1 hierarchies), the sandbox also gets a cgroup of the same
//! name in the v1 `pids` and `memory` hierarchies (below the agent's own
//! cgroup there), carrying `pids.max` and `memory.limit_in_bytes` /
//! `memory.memsw.limit_in_bytes`; every child joins all of them. A limit
//! neither tree can carry is not applied (one warning).
//!
//! A command's cgroup exists in the v2 tree only: it is there for its
//! `cgroup.kill` (v1 has none), and the limits are the sandbox's, whose
//! cgroups contain it (v2 counts a child's processes and memory in its
//! parent's). A command joins its own v2 cgroup and the sandbox's v1 ones.

use std::io::Write as _;
use std::os::unix::fs::FileExt as _;

use super::command_dirs::CommandDirs;
use crate::sandbox::SandboxLimits;
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

/// The name of this process's parent cgroup, the same in every tree.
fn process_parent_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        format!(
            "rayito-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        )
    })
}

fn create_process_parent() -> std::io::Result<PathBuf> {
    let own = own_cgroup_dir()?;
    sweep_stale(&own);
    let dir = own.join(process_parent_name());
    std::fs::create_dir(&dir)?;
    if !dir.join("cgroup.kill").exists() {
        let _ = std::fs::remove_dir(&dir);
        return Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "cgroup.kill is missing (Linux older than 5.14)",
        ));
    }
    super::exit_cleanup::kill_cgroup_at_exit(&dir);
    // Controllers for the sandboxes' limits: the own cgroup hands them to
    // the parent (refused when it holds processes and is not the root:
    // then whatever it already hands down is used), the parent to the
    // sandboxes.
    for controller in ["+pids", "+memory"] {
        let _ = std::fs::write(own.join("cgroup.subtree_control"), controller);
        let _ = std::fs::write(dir.join("cgroup.subtree_control"), controller);
    }
    Ok(dir)
}

/// The v2 controllers the sandboxes' cgroups have.
fn v2_controllers(parent: &Path) -> Vec<String> {
    std::fs::read_to_string(parent.join("cgroup.subtree_control"))
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// This process's parent cgroup in the v1 hierarchy of `controller`
/// (`pids` or `memory`), created on first use, if the host has one.
fn v1_process_parent(controller: &'static str) -> Option<&'static Path> {
    static PIDS: OnceLock<Option<PathBuf>> = OnceLock::new();
    static MEMORY: OnceLock<Option<PathBuf>> = OnceLock::new();
    let cell = match controller {
        "pids" => &PIDS,
        _ => &MEMORY,
    };
    cell.get_or_init(|| {
        let own = own_v1_cgroup_dir(controller).ok()?;
        sweep_stale(&own);
        let dir = own.join(process_parent_name());
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(_) => return None,
        }
        super::exit_cleanup::remove_v1_cgroup_at_exit(&dir);
        Some(dir)
    })
    .as_deref()
}

/// The host directory of this process's cgroup in the v1 hierarchy of
/// `controller`.
fn own_v1_cgroup_dir(controller: &str) -> std::io::Result<PathBuf> {
    let not_found = || std::io::Error::from(std::io::ErrorKind::NotFound);
    let cgroups = std::fs::read_to_string("/proc/self/cgroup")?;
    // `id:controller,controller:path`
    let own = cgroups
        .lines()
        .find_map(|line| {
            let mut fields = line.splitn(3, ':');
            let _id = fields.next()?;
            let controllers = fields.next()?;
            let path = fields.next()?;
            controllers
                .split(',')
                .any(|c| c == controller)
                .then_some(path)
        })
        .ok_or_else(not_found)?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    let (mount_root, mount_point) = mountinfo
        .lines()
        .find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mut right = right.split_whitespace();
            if right.next()? != "cgroup" {
                return None;
            }
            let options = right.nth(1)?;
            if !options.split(',').any(|o| o == controller) {
                return None;
            }
            let mut fields = left.split_whitespace();
            Some((fields.nth(3)?.to_owned(), fields.next()?.to_owned()))
        })
        .ok_or_else(not_found)?;
    let relative = own
        .strip_prefix(mount_root.trim_end_matches('/'))
        .unwrap_or(own)
        .trim_start_matches('/');
    Ok(Path::new(&unescape_mount_path(&mount_point)).join(relative))
}

/// Logs once that a limit cannot be applied on this host.
fn warn_unbounded(what: &'static str) {
    static PIDS: std::sync::Once = std::sync::Once::new();
    static MEMORY: std::sync::Once = std::sync::Once::new();
    let once = if what == "pids" { &PIDS } else { &MEMORY };
    once.call_once(|| {
        tracing::warn!(
            "neither the cgroup v2 tree nor a v1 hierarchy offers the {what} controller: \
             the sandboxes' {} is not bounded",
            if what == "pids" {
                "process count"
            } else {
                "memory"
            }
        );
    });
}

/// Kills and removes the parents left by processes that ended without their
/// exit cleanup (`rayito-<pid>-<hex>` whose pid no longer runs).
fn sweep_stale(own: &Path) {
    for parent in super::exit_cleanup::stale_entries(own, &["rayito-"]) {
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
                remove_children(child);
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
pub(super) fn own_cgroup_dir() -> std::io::Result<PathBuf> {
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

/// A sandbox's cgroup (and its v1 companions carrying the limits on a
/// hybrid host). Dropping it kills its processes and removes them all.
#[derive(Debug)]
pub struct SandboxCgroup {
    dir: PathBuf,
    /// The v1 cgroups of the same sandbox (`pids`, `memory`), if used.
    v1: Vec<PathBuf>,
    /// Where the out-of-memory kills are counted: `memory.events` (v2) or
    /// `memory.oom_control` (v1), when a memory limit is set.
    oom_counter: Option<PathBuf>,
    /// That file, kept open: each command reads it before its launch.
    oom_file: Option<std::fs::File>,
    /// `cgroup.procs` of each of `v1`, kept open (each child gets copies),
    /// or empty when one could not be opened (then opened per child).
    v1_procs: Vec<OwnedFd>,
    /// The command cgroups' directories, made ahead and removed behind.
    commands: std::sync::Arc<CommandDirs>,
    /// The limits in force.
    applied: SandboxLimits,
}

impl SandboxCgroup {
    /// A new cgroup named `name` under this process's parent, with `limits`
    /// where the host can carry them, or `None` where the host has no
    /// cgroup v2 (the warning was logged once).
    pub fn create(name: &str, limits: &SandboxLimits) -> Option<Self> {
        let parent = process_parent()?;
        let dir = parent.join(name);
        if let Err(err) = std::fs::create_dir(&dir) {
            tracing::warn!(error = %err, "cannot create a sandbox cgroup");
            return None;
        }
        let mut cgroup = Self {
            dir,
            v1: Vec::new(),
            oom_counter: None,
            oom_file: None,
            v1_procs: Vec::new(),
            commands: std::sync::Arc::default(),
            applied: SandboxLimits::unlimited(),
        };
        let v2 = v2_controllers(parent);
        if let Some(max) = limits.pids_max {
            let applied = if v2.iter().any(|c| c == "pids") {
                std::fs::write(cgroup.dir.join("pids.max"), max.to_string()).is_ok()
            } else {
                cgroup.limit_v1("pids", name, &[("pids.max", max)])
            };
            if applied {
                cgroup.applied.pids_max = Some(max);
            } else {
                warn_unbounded("pids");
            }
        }
        if let Some(max) = limits.memory_max_bytes {
            let applied = if v2.iter().any(|c| c == "memory") {
                let set = std::fs::write(cgroup.dir.join("memory.max"), max.to_string()).is_ok();
                // Nothing swapped out: the limit is the sandbox's memory.
                let _ = std::fs::write(cgroup.dir.join("memory.swap.max"), "0");
                if set {
                    cgroup.oom_counter = Some(cgroup.dir.join("memory.events"));
                }
                set
            } else {
                let set = cgroup.limit_v1(
                    "memory",
                    name,
                    &[
                        ("memory.limit_in_bytes", max),
                        ("memory.memsw.limit_in_bytes", max),
                    ],
                );
                if set && let Some(dir) = cgroup.v1.last() {
                    cgroup.oom_counter = Some(dir.join("memory.oom_control"));
                }
                set
            };
            if applied {
                cgroup.applied.memory_max_bytes = Some(max);
            } else {
                warn_unbounded("memory");
            }
        }
        cgroup.oom_file = cgroup
            .oom_counter
            .as_ref()
            .and_then(|path| std::fs::File::open(path).ok());
        cgroup.v1_procs = cgroup
            .v1
            .iter()
            .map(|dir| open_procs(dir))
            .collect::<std::io::Result<_>>()
            .unwrap_or_default();
        Some(cgroup)
    }

    /// Creates the sandbox's cgroup in the v1 hierarchy of `controller` and
    /// writes `files` there; `true` when the first file was written (the
    /// others, e.g. `memory.memsw.*` without swap accounting, are optional).
    fn limit_v1(&mut self, controller: &'static str, name: &str, files: &[(&str, u64)]) -> bool {
        let Some(parent) = v1_process_parent(controller) else {
            return false;
        };
        let dir = parent.join(name);
        if std::fs::create_dir(&dir).is_err() {
            return false;
        }
        let mut first = true;
        for (file, value) in files {
            let written = std::fs::write(dir.join(file), value.to_string()).is_ok();
            if first && !written {
                let _ = std::fs::remove_dir(&dir);
                return false;
            }
            first = false;
        }
        self.v1.push(dir);
        true
    }

    /// The cgroup v2 directory (what the metrics read).
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// The limits in force on this cgroup.
    pub(crate) fn limits(&self) -> SandboxLimits {
        self.applied
    }

    /// A cgroup of its own for one command, inside this one's v2 cgroup,
    /// or `None` (logged) when it cannot be created: the command then runs
    /// in the sandbox's cgroup.
    pub(crate) fn command(&self) -> Option<CommandCgroup> {
        match self.commands.take(&self.dir) {
            Ok(dir) => Some(CommandCgroup { dir }),
            Err(err) => {
                tracing::warn!(error = %err, "cannot create a command cgroup");
                None
            }
        }
    }

    /// The work a launch leaves for after its `clone3`: the ended
    /// commands' directories go, the next command's is made.
    pub(crate) fn after_launch(&self) {
        self.commands.tidy(&self.dir);
    }

    /// `command` has ended (and nothing waits on its tree): its directory
    /// is removed, if empty then, after the next launch or
    /// [`REMOVE_ENDED_AFTER`](super::command_dirs::REMOVE_ENDED_AFTER),
    /// whichever comes first.
    pub(crate) fn command_ended(&self, command: &CommandCgroup) {
        if !self.commands.ended(command.dir.clone()) {
            return;
        }
        let commands = self.commands.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    tokio::time::sleep(super::command_dirs::REMOVE_ENDED_AFTER).await;
                    commands.remove_ended();
                });
            }
            Err(_) => commands.remove_ended(),
        }
    }

    /// `cgroup.procs` of every cgroup of the sandbox, opened for a child to
    /// join them with (before fork); with `command`, its v2 cgroup instead
    /// of the sandbox's (the v1 ones stay the sandbox's).
    pub fn procs(&self, command: Option<&CommandCgroup>) -> std::io::Result<Vec<OwnedFd>> {
        let v2 = command.map_or(&self.dir, |c| &c.dir);
        let mut procs = vec![open_procs(v2)?];
        if self.v1_procs.len() == self.v1.len() {
            for fd in &self.v1_procs {
                procs.push(fd.try_clone()?);
            }
        } else {
            for dir in &self.v1 {
                procs.push(open_procs(dir)?);
            }
        }
        Ok(procs)
    }

    /// The directory of the v2 cgroup [`SandboxCgroup::procs`] gives
    /// first (`command`'s, else the sandbox's), opened for a child to be
    /// cloned into (`CLONE_INTO_CGROUP`).
    pub(crate) fn v2_dir(&self, command: Option<&CommandCgroup>) -> std::io::Result<OwnedFd> {
        let dir = command.map_or(&self.dir, |c| &c.dir);
        Ok(rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?)
    }

    /// How many processes of the sandbox the kernel ended for going over
    /// its memory limit so far (0 without a memory limit).
    pub(crate) fn oom_kills(&self) -> u64 {
        let Some(counter) = &self.oom_counter else {
            return 0;
        };
        // Both files are a few short lines (under 150 bytes).
        let mut buf = [0u8; 512];
        let read = match &self.oom_file {
            Some(file) => file.read_at(&mut buf, 0).ok(),
            None => std::fs::File::open(counter)
                .and_then(|f| f.read_at(&mut buf, 0))
                .ok(),
        };
        read.and_then(|n| std::str::from_utf8(&buf[..n]).ok())
            .and_then(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("oom_kill "))
                    .and_then(|n| n.trim().parse().ok())
            })
            .unwrap_or(0)
    }

    /// SIGKILLs every process in the cgroup and its command cgroups
    /// (returns at once; they die asynchronously).
    pub fn kill(&self) {
        if let Err(err) = kill_members(&self.dir) {
            tracing::warn!(error = %err, "cgroup.kill failed");
        }
    }

    /// Whether any process is still in the cgroup.
    pub fn populated(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.events"))
            .map(|events| events.lines().any(|l| l == "populated 1"))
            .unwrap_or(false)
    }
}

impl Drop for SandboxCgroup {
    fn drop(&mut self) {
        self.kill();
        // The killed processes leave within milliseconds; wait a little for
        // the directories to become removable, and otherwise leave them to
        // the exit cleanup (which removes the whole parents).
        for _ in 0..20 {
            self.v1.retain(|dir| std::fs::remove_dir(dir).is_err());
            remove_children(&self.dir);
            if std::fs::remove_dir(&self.dir).is_ok() {
                self.v1.retain(|dir| std::fs::remove_dir(dir).is_err());
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// One command's v2 cgroup inside its sandbox's: killing it ends every
/// process the command started, whatever it did to its session, process
/// group or environment. Dropping it does not kill: what the command left
/// running in the background lives as long as the sandbox, as elsewhere;
/// the directory is removed when it is empty (see
/// [`CommandCgroup::remove_if_empty`]), else with the sandbox's.
#[derive(Debug)]
pub struct CommandCgroup {
    dir: PathBuf,
}

impl CommandCgroup {
    /// SIGKILLs every process of the command (returns at once; they die
    /// asynchronously).
    pub(crate) fn kill(&self) {
        match kill_members(&self.dir) {
            // Removed once empty: nothing of the command is left to kill.
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => tracing::warn!(error = %err, "cgroup.kill of a command failed"),
            Ok(()) => {}
        }
    }

    /// Sends `signal` to every process of the command (its `kill_tree`
    /// timeout's SIGTERM): the cgroup is frozen first, so that the list
    /// read is every member and none of its pids can be reused before the
    /// signal (a frozen process neither forks nor exits), then thawed,
    /// which delivers the signal. Returns at once.
    pub(crate) fn signal_all(&self, signal: rustix::process::Signal) {
        if let Err(err) = self.freeze(true) {
            tracing::warn!(error = %err, "cannot freeze a command's cgroup to signal it");
        }
        for pid in self.members() {
            let _ = rustix::process::kill_process(pid, signal);
        }
        let _ = self.freeze(false);
    }

    /// Freezes what is left of the command and SIGKILLs it (the end of
    /// `kill_tree`'s grace, and its `kill()`): frozen, nothing forks away
    /// while `cgroup.kill` runs. Returns at once.
    pub(crate) fn freeze_and_kill(&self) {
        match self.freeze(true) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return,
            Err(err) => tracing::warn!(error = %err, "cannot freeze a command's cgroup"),
            Ok(()) => {}
        }
        self.kill();
    }

    /// Waits until no process is left in the command's cgroup (or it is
    /// gone), polling `cgroup.events`, for at most `limit`; `false` when
    /// some are still there then.
    pub(crate) async fn wait_empty(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let populated = std::fs::read_to_string(self.dir.join("cgroup.events"))
                .map(|events| events.lines().any(|l| l == "populated 1"))
                .unwrap_or(false);
            if !populated {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Writes `cgroup.freeze` and, when freezing, waits (briefly, bounded)
    /// until the kernel reports the cgroup frozen.
    fn freeze(&self, frozen: bool) -> std::io::Result<()> {
        std::fs::write(
            self.dir.join("cgroup.freeze"),
            if frozen { "1" } else { "0" },
        )?;
        if frozen {
            for _ in 0..200 {
                let events = std::fs::read_to_string(self.dir.join("cgroup.events"))?;
                if events.lines().any(|l| l == "frozen 1") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        Ok(())
    }

    /// The pids in the cgroup now.
    fn members(&self) -> Vec<rustix::process::Pid> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse::<i32>().ok())
            .filter_map(rustix::process::Pid::from_raw)
            .collect()
    }

    /// Removes the directory if no process is left in it (the kernel
    /// refuses otherwise); a later [`CommandCgroup::kill`] then has nothing
    /// to do.
    pub(crate) fn remove_if_empty(&self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

impl Drop for CommandCgroup {
    fn drop(&mut self) {
        self.remove_if_empty();
    }
}

/// `cgroup.procs` of `dir`, opened for a child to join with (before fork).
fn open_procs(dir: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        dir.join("cgroup.procs"),
        OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Writes `cgroup.kill` of `dir` (the kernel kills its descendants too).
fn kill_members(dir: &Path) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.kill"))
        .and_then(|mut f| f.write_all(b"1"))
}

/// Removes the child cgroups of `dir` that are empty (the command cgroups
/// of a sandbox).
fn remove_children(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir(entry.path());
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
