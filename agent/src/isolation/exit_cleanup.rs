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
//! The watcher's list is kept to what is live, so that its state does not
//! grow with every sandbox a long-lived process ever made (a list of every
//! path cost quadratic time in the shell and, past ~20,000 paths, failed
//! the final `rm` with "Argument list too long"): a directory under one
//! already registered is not sent (the removal of its ancestor covers it:
//! the emulator's sandbox roots are all under its own root), and one its
//! owner removed is withdrawn (`u <dir>`). A directory removed earlier by
//! its owner and not withdrawn is simply absent by then. Paths with a
//! newline are never registered (they could not be sent as a line).
//!
//! Should a watcher itself have been killed, the next process that starts
//! one sweeps what it left: temp-dir entries named `rayito-agent-<pid>-<hex>`
//! or `rayito-emulator-<pid>-<hex>` whose `<pid>` no longer runs (and
//! [`super::cgroup`] does the same for its cgroups).

use std::collections::BTreeSet;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// The watcher: collects `c <cgroup>`, `v <cgroup v1 dir>`, `d <dir>`
/// and `u <dir>` (withdraws a `d`) lines until EOF, then cleans up. Waits
/// at most ~5 s for the cgroup to empty (its processes are also those of
/// the v1 cgroups, which have no `cgroup.kill`: they are removed once
/// empty). The directories are a newline-framed list (`\n<dir>\n...`);
/// a withdrawal cuts its entry out with literal (quoted) patterns.
const WATCHER: &str = r#"trap '' INT TERM HUP QUIT
nl='
'
cg=
v1=
dirs=$nl
while IFS= read -r line; do
  case "$line" in
    "c "*) cg=${line#c } ;;
    "v "*) v1="$v1
${line#v }" ;;
    "d "*) dirs="$dirs${line#d }$nl" ;;
    "u "*)
      entry="$nl${line#u }$nl"
      case "$dirs" in
        *"$entry"*)
          before=${dirs%%"$entry"*}
          dirs="$before$nl${dirs#"$before$entry"}" ;;
      esac ;;
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
printf '%s' "$dirs" | while IFS= read -r dir; do
  [ -n "$dir" ] && rm -rf -- "$dir"
done
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

/// The directories the watcher will remove: what was sent as `d` and not
/// withdrawn since.
#[derive(Debug, Default)]
struct Registered(BTreeSet<PathBuf>);

impl Registered {
    /// Whether `dir` must be sent: not when it, or a directory above it,
    /// is registered already.
    fn add(&mut self, dir: &Path) -> bool {
        if dir.ancestors().any(|a| self.0.contains(a)) {
            return false;
        }
        self.0.insert(dir.to_path_buf())
    }

    /// Whether `dir` was registered (its withdrawal must then be sent).
    fn remove(&mut self, dir: &Path) -> bool {
        self.0.remove(dir)
    }
}

fn registered() -> &'static Mutex<Registered> {
    static REGISTERED: Mutex<Registered> = Mutex::new(Registered(BTreeSet::new()));
    &REGISTERED
}

/// Whether `path` can be sent as one line.
fn sendable(path: &Path) -> bool {
    !path.as_os_str().as_bytes().contains(&b'\n') && path.is_absolute()
}

fn send(kind: char, path: &Path) {
    let bytes = path.as_os_str().as_bytes();
    if !sendable(path) {
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

/// Removes `dir` (recursively) when this process ends, if it still exists
/// (nothing to send when a directory above it is registered already).
pub(crate) fn remove_dir_at_exit(dir: &Path) {
    if !sendable(dir) {
        return;
    }
    // Held while sending: a withdrawal never overtakes its registration.
    let mut registered = registered().lock().unwrap_or_else(|p| p.into_inner());
    if registered.add(dir) {
        send('d', dir);
    }
}

/// Withdraws `dir` from the exit cleanup: its owner removed it (or handed
/// it over). Keeps the watcher's list to the live directories.
pub(crate) fn forget_dir_at_exit(dir: &Path) {
    let mut registered = registered().lock().unwrap_or_else(|p| p.into_inner());
    if registered.remove(dir) {
        send('u', dir);
    }
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
    fn a_directory_under_a_registered_one_is_not_sent_and_a_removed_one_is_withdrawn() {
        let mut registered = Registered::default();
        assert!(registered.add(Path::new("/tmp/emu")));
        assert!(!registered.add(Path::new("/tmp/emu")), "sent once");
        assert!(!registered.add(Path::new("/tmp/emu/microvm-1")), "covered");
        assert!(
            registered.add(Path::new("/tmp/emu2")),
            "a sibling, not a child"
        );
        assert!(registered.remove(Path::new("/tmp/emu2")));
        assert!(!registered.remove(Path::new("/tmp/emu2")), "withdrawn once");
        assert!(
            !registered.remove(Path::new("/tmp/emu/microvm-1")),
            "never sent"
        );
        assert_eq!(registered.0.len(), 1);
    }

    /// The watcher script itself, fed as this process feeds it: 3,000
    /// directories registered, all but a few withdrawn (their owners
    /// removed them; here they stay on disk to show that the watcher
    /// forgot them), names with spaces, glob characters and one that is a
    /// prefix of another. At EOF it removes exactly the live ones (the old
    /// watcher kept every path and, past ~20,000, removed none).
    #[test]
    fn the_watcher_removes_the_live_directories_and_forgets_withdrawn_ones() {
        use std::io::Write as _;
        let temp = tempfile::tempdir().unwrap();
        let mut names: Vec<String> = (0..3_000).map(|i| format!("d{i}")).collect();
        names.extend(["a", "a b", "a b c", "x*y", "[q]", "-n"].map(str::to_owned));
        let live = ["a", "x*y", "d2999", "d17", "-n"];
        let mut input = Vec::new();
        for name in &names {
            std::fs::create_dir(temp.path().join(name)).unwrap();
            writeln!(input, "d {}", temp.path().join(name).display()).unwrap();
        }
        for name in names.iter().filter(|n| !live.contains(&n.as_str())) {
            writeln!(input, "u {}", temp.path().join(name).display()).unwrap();
        }
        let mut child = Command::new("/bin/sh")
            .args(["-c", WATCHER])
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(&input).unwrap();
        assert!(child.wait().unwrap().success());
        for name in &names {
            let kept = temp.path().join(name).exists();
            assert_eq!(kept, !live.contains(&name.as_str()), "{name}");
        }
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
