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

use std::io::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// The watcher: collects `c <cgroup>` and `d <dir>` lines until EOF, then
/// cleans up. Waits at most ~5 s for the cgroup to empty.
const WATCHER: &str = r#"trap '' INT TERM HUP QUIT
cg=
set --
while IFS= read -r line; do
  case "$line" in
    "c "*) cg=${line#c } ;;
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
  for sub in "$cg"/*/; do
    [ -d "$sub" ] && rmdir "$sub" 2>/dev/null
  done
  rmdir "$cg" 2>/dev/null
fi
if [ $# -gt 0 ]; then
  rm -rf -- "$@"
fi
exit 0
"#;

fn watcher() -> &'static Mutex<Option<ChildStdin>> {
    static WATCHER_STDIN: OnceLock<Mutex<Option<ChildStdin>>> = OnceLock::new();
    WATCHER_STDIN.get_or_init(|| {
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

/// Removes `dir` (recursively) when this process ends, if it still exists.
pub(crate) fn remove_dir_at_exit(dir: &Path) {
    send('d', dir);
}

/// Kills every process in the cgroup `dir` and its children and removes
/// them when this process ends.
pub(crate) fn kill_cgroup_at_exit(dir: &Path) {
    send('c', dir);
}
