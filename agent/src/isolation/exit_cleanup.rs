//! Nothing left behind when the process that hosts sandboxes ends without
//! stopping them: a return from `main` (statics are never dropped), a panic,
//! SIGINT, even SIGKILL.
//!
//! In-process hooks cannot cover a signal, so the cleanup lives in a small
//! watcher process (`/bin/sh`, started once per process, in its own process
//! group so that a Ctrl-C on the terminal does not reach it). This process
//! holds the write end of the watcher's stdin and sends it, one line each,
//! the cgroup to kill and the directories to remove. The kernel closes the
//! pipe when this process ends however it ends; the watcher then reads EOF,
//! kills the cgroup (every sandbox process), waits for it to empty, removes
//! it and removes the directories, and exits.
//!
//! A directory removed earlier by its owner is simply absent by then. Paths
//! with a newline are never registered (they could not be sent as a line).
//!
//! Should a watcher itself have been killed, the next process that starts
//! one sweeps what it left: temp-dir entries named `rayito-agent-<pid>-<hex>`
//! or `rayito-emulator-<pid>-<hex>` whose `<pid>` no longer runs (and
//! [`super::cgroup`] does the same for its cgroups).

use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// The watcher: collects `c <cgroup>`, `v <cgroup v1 dir>` and `d <dir>`
/// lines until EOF, then cleans up. Waits at most ~5 s for the cgroup to
/// empty (its processes are also those of the v1 cgroups, which have no
/// `cgroup.kill`: they are removed once empty).
const WATCHER: &str = r#"trap '' INT TERM HUP QUIT
cg=
v1=
set --
while IFS= read -r line; do
  case "$line" in
    "c "*) cg=${line#c } ;;
    "v "*) v1="$v1
${line#v }" ;;
    "d "*) set -- "$@" "${line#d }" ;;
  esac
done
if [ -n "$cg" ] && [ -d "$cg" ]; then
  echo 1 > "$cg/cgroup.kill" 2>/dev/null
  i=0
  while [ $i -lt 100 ] && grep -q '^populated 1' "$cg/cgroup.events" 2>/dev/null; do
    sleep 0.05
    i=$((i + 1))
  done
  for sub in "$cg"/*/*/ "$cg"/*/; do
    [ -d "$sub" ] && rmdir "$sub" 2>/dev/null
  done
  rmdir "$cg" 2>/dev/null
fi
printf '%s\n' "$v1" | while IFS= read -r dir; do
  [ -n "$dir" ] && [ -d "$dir" ] || continue
  for sub in "$dir"/*/; do
    [ -d "$sub" ] && rmdir "$sub" 2>/dev/null
  done
  rmdir "$dir" 2>/dev/null
done
if [ $# -gt 0 ]; then
  rm -rf -- "$@"
fi
exit 0
"#;

fn watcher() -> &'static Mutex<Option<ChildStdin>> {
    static WATCHER_STDIN: OnceLock<Mutex<Option<ChildStdin>>> = OnceLock::new();
    WATCHER_STDIN.get_or_init(|| {
        sweep_stale_dirs(&std::env::temp_dir());
        let spawned = Command::new("/bin/sh")
            .args(["-c", WATCHER])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .current_dir("/")
            .process_group(0)
            .spawn();
        match spawned {
            // The child is never waited for: it outlives this process.
            Ok(mut child) => Mutex::new(child.stdin.take()),
            Err(err) => {
                tracing::warn!(
                    error = %err,
                    "cannot start the exit cleanup: sandbox directories and processes may \
                     outlive a process that exits without stopping its sandboxes"
                );
                Mutex::new(None)
            }
        }
    })
}

fn send(kind: char, path: &Path) {
    let bytes = path.as_os_str().as_bytes();
    if bytes.contains(&b'\n') || !path.is_absolute() {
        return;
    }
    let mut line = Vec::with_capacity(bytes.len() + 3);
    line.push(kind as u8);
    line.push(b' ');
    line.extend_from_slice(bytes);
    line.push(b'\n');
    let mut guard = watcher().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(stdin) = guard.as_mut()
        && stdin.write_all(&line).is_err()
    {
        *guard = None;
    }
}

/// Whether `name` is `<prefix><pid>-<hex>` for a pid that no longer runs.
fn owner_is_gone(name: &str, prefix: &str) -> bool {
    let Some(rest) = name.strip_prefix(prefix) else {
        return false;
    };
    let Some((pid, suffix)) = rest.split_once('-') else {
        return false;
    };
    let valid = !pid.is_empty()
        && pid.bytes().all(|b| b.is_ascii_digit())
        && !suffix.is_empty()
        && suffix.bytes().all(|b| b.is_ascii_hexdigit());
    valid && pid != "0" && !Path::new("/proc").join(pid).exists()
}

/// Removes the sandbox directories of processes that ended without their
/// watcher's cleanup.
fn sweep_stale_dirs(temp: &Path) {
    for dir in stale_entries(temp, &["rayito-agent-", "rayito-emulator-"]) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The entries of `dir` named `<prefix><pid>-<hex>`, for one of
/// `prefixes`, whose pid no longer runs: what a process that ended without
/// its cleanup left.
pub(crate) fn stale_entries(dir: &Path, prefixes: &[&str]) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|name| prefixes.iter().any(|p| owner_is_gone(name, p)))
        })
        .map(|entry| entry.path())
        .collect()
}

/// Removes `dir` (recursively) when this process ends, if it still exists.
pub(crate) fn remove_dir_at_exit(dir: &Path) {
    send('d', dir);
}

/// Kills every process in the cgroup `dir` and its children and removes
/// them when this process ends.
pub(crate) fn kill_cgroup_at_exit(dir: &Path) {
    send('c', dir);
}

/// Removes the cgroup v1 directory `dir` and its children (emptied by the
/// kill of the v2 cgroup) when this process ends.
pub(crate) fn remove_v1_cgroup_at_exit(dir: &Path) {
    send('v', dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_names_of_dead_owners_are_stale() {
        // pid 0 never owns anything; a live pid is ours.
        let me = std::process::id();
        assert!(!owner_is_gone(
            &format!("rayito-agent-{me}-00ff"),
            "rayito-agent-"
        ));
        assert!(!owner_is_gone("rayito-agent-0-00ff", "rayito-agent-"));
        // A uuid (the emulator's default root) is never taken for a pid.
        assert!(!owner_is_gone(
            "rayito-emulator-12345678-aaaa-bbbb-cccc-dddddddddddd",
            "rayito-emulator-"
        ));
        assert!(!owner_is_gone("rayito-agent-x-00ff", "rayito-agent-"));
        // A pid above pid_max never runs.
        assert!(owner_is_gone("rayito-agent-99999999-00ff", "rayito-agent-"));
    }

    #[test]
    fn the_sweep_removes_only_stale_entries() {
        let temp = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let stale = temp.path().join("rayito-emulator-99999999-0a1b");
        let live = temp.path().join(format!("rayito-agent-{me}-0a1b"));
        let other = temp.path().join("rayito-agent-notes");
        for dir in [&stale, &live, &other] {
            std::fs::create_dir_all(dir.join("home/user")).unwrap();
        }
        sweep_stale_dirs(temp.path());
        assert!(!stale.exists());
        assert!(live.exists() && other.exists());
    }
}
