//! `rayito sandbox shell` on a real terminal: tmux gives it a
//! pseudo-terminal (its own server, on a socket of this test), keys go in
//! with `send-keys`, the screen comes out with `capture-pane`. This is what
//! a pipe cannot show: raw mode (keys reach the sandbox's terminal as they
//! are typed, Ctrl-C included, and are echoed by it), the size of the
//! window and its resize, and the terminal put back afterwards.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::skip_support;

/// A tmux server of this test's own, killed at the end, and a cache
/// directory whose local daemon is stopped at the end.
struct Tmux {
    socket: std::path::PathBuf,
    cache: tempfile::TempDir,
    tmp: tempfile::TempDir,
}

impl Tmux {
    fn new() -> Tmux {
        let tmp = tempfile::tempdir().unwrap();
        Tmux {
            socket: tmp.path().join("tmux.sock"),
            cache: tempfile::tempdir().unwrap(),
            tmp,
        }
    }

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux")
    }

    fn rayito(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_rayito"))
            .args(args)
            .env("RAYITO_CACHE_DIR", self.cache.path())
            .env("TMPDIR", self.tmp.path())
            .env("RAYITO_BACKEND", "local")
            .env_remove("RAYITO_TEMPLATE")
            .output()
            .expect("run rayito")
    }

    /// The visible screen of the test's window.
    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.tmux(&["capture-pane", "-p", "-t", "t"]).stdout).into_owned()
    }

    /// Waits (up to 60 s) until the screen shows `text`; returns it.
    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "the screen never showed {text:?}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        assert!(self.tmux(&args).status.success());
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
        let _ = self.rayito(&["local", "stop"]);
    }
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[test]
fn the_shell_on_a_real_terminal_types_resizes_and_restores() {
    if Command::new("tmux").arg("-V").output().is_err() {
        skip_support::skip("tmux is not installed (.ci/install-test-deps installs it)");
        return;
    }
    let t = Tmux::new();
    let created = t.rayito(&["sandbox", "create"]);
    assert!(created.status.success(), "{created:?}");
    let id = String::from_utf8(created.stdout).unwrap().trim().to_owned();

    // The window runs the shell, then says how rayito exited and whether
    // the terminal is back in canonical mode with echo.
    let status = t.tmp.path().join("status");
    let script = format!(
        "RAYITO_CACHE_DIR={cache} TMPDIR={tmp} RAYITO_BACKEND=local {bin} sandbox shell {id}; \
         echo \"rayito-exit=$?\" > {status}; stty -a >> {status}; sleep 60",
        cache = shell_quote(&t.cache.path().display().to_string()),
        tmp = shell_quote(&t.tmp.path().display().to_string()),
        bin = shell_quote(env!("CARGO_BIN_EXE_rayito")),
        status = shell_quote(&status.display().to_string()),
    );
    let started = t.tmux(&[
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        "100",
        "-y",
        "30",
        "sh",
        "-c",
        &script,
    ]);
    assert!(started.status.success(), "{started:?}");

    // Keys in, screen out: the sandbox's bash echoes what is typed.
    t.keys(&["echo ready-$((6 * 7))", "Enter"]);
    t.wait_for("ready-42");

    // The sandbox's terminal has the window's size, and follows a resize.
    t.keys(&["stty size", "Enter"]);
    t.wait_for("30 100");
    assert!(
        t.tmux(&["resize-window", "-t", "t", "-x", "120", "-y", "40"])
            .status
            .success()
    );
    // The resize reaches rayito as SIGWINCH; give it a moment to pass on.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        t.keys(&["clear; stty size", "Enter"]);
        std::thread::sleep(Duration::from_millis(300));
        if t.screen().contains("40 120") {
            break;
        }
        assert!(Instant::now() < deadline, "no resize:\n{}", t.screen());
    }

    // Ctrl-C goes to the sandbox (raw mode): it ends `sleep`, not rayito.
    t.keys(&["sleep 300", "Enter"]);
    std::thread::sleep(Duration::from_millis(500));
    t.keys(&["C-c"]);
    t.keys(&["echo after-$((1 + 1))", "Enter"]);
    t.wait_for("after-2");

    // `exit 3`: rayito exits 3, and the terminal is as it was (canonical
    // mode, echo on).
    t.keys(&["exit 3", "Enter"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !status_written(&status) {
        assert!(
            Instant::now() < deadline,
            "rayito did not end:\n{}",
            t.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let report = std::fs::read_to_string(&status).unwrap();
    assert!(report.starts_with("rayito-exit=3\n"), "{report}");
    let words: Vec<&str> = report.split_whitespace().collect();
    assert!(
        words.contains(&"icanon") && words.contains(&"echo"),
        "{report}"
    );

    let killed = t.rayito(&["sandbox", "kill", &id]);
    assert!(killed.status.success());
}

fn status_written(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|s| s.contains("speed") || s.lines().count() > 2)
}

#[test]
fn files_put_shows_a_progress_bar_on_a_terminal() {
    if Command::new("tmux").arg("-V").output().is_err() {
        skip_support::skip("tmux is not installed (.ci/install-test-deps installs it)");
        return;
    }
    let t = Tmux::new();
    let created = t.rayito(&["sandbox", "create"]);
    assert!(created.status.success(), "{created:?}");
    let id = String::from_utf8(created.stdout).unwrap().trim().to_owned();
    let file = t.tmp.path().join("big.bin");
    std::fs::write(&file, vec![7u8; 150 << 20]).unwrap();
    let script = format!(
        "RAYITO_CACHE_DIR={cache} TMPDIR={tmp} RAYITO_BACKEND=local {bin} sandbox files put {id} {file} /home/user/big.bin; sleep 60",
        cache = shell_quote(&t.cache.path().display().to_string()),
        tmp = shell_quote(&t.tmp.path().display().to_string()),
        bin = shell_quote(env!("CARGO_BIN_EXE_rayito")),
        file = shell_quote(&file.display().to_string()),
    );
    let started = t.tmux(&[
        "new-session",
        "-d",
        "-s",
        "t",
        "-x",
        "120",
        "-y",
        "10",
        "sh",
        "-c",
        &script,
    ]);
    assert!(started.status.success(), "{started:?}");
    // The bar: the file, bytes so far of the total, a rate; then, once
    // done, only the result line stays.
    // The rate's unit follows the speed (B/s, KiB/s, MiB/s...): a loaded
    // machine's first frame may show KiB/s, so the unit is not pinned.
    let bar = t.wait_for("/150.00 MiB");
    assert!(bar.contains("big.bin") && bar.contains("B/s"), "{bar}");
    let done = t.wait_for("/home/user/big.bin (157286400 bytes)");
    assert!(!done.contains("B/s"), "the bar was not cleared:\n{done}");
    assert!(t.rayito(&["sandbox", "kill", &id]).status.success());
}
