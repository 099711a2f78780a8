//! The one way a test says it cannot run (or cannot check everything) on
//! this host: [`skip`] prints `SKIPPED: <test>: <reason>` and, with
//! `RAYITO_TEST_STRICT=1` (what `.ci/run` sets), fails the test instead.
//!
//! Shared by every test crate of the workspace (the agent's tests include
//! this file by path), so that the line has one format wherever it comes
//! from. The line reaches the console through the process's real stderr,
//! not libtest's captured output (which a passing test discards), and is
//! also appended to the file named by `RAYITO_SKIP_LOG` when that is set:
//! `.ci/run` counts and prints that file once every test binary has run.

#![allow(dead_code)]

use std::io::Write as _;

/// Environment variable that turns every skip into a failure when it is `1`.
pub const STRICT_ENV: &str = "RAYITO_TEST_STRICT";
/// Environment variable naming a file every skip line is appended to.
pub const LOG_ENV: &str = "RAYITO_SKIP_LOG";

/// Records that the calling test skips (all of it, or the part `reason`
/// names): prints one `SKIPPED: <test>: <reason>` line and appends it to
/// `$RAYITO_SKIP_LOG`. The caller then returns, or goes on with what this
/// host allows.
///
/// `<test>` is `<test binary>::<test name>`, the name libtest gives the
/// test's thread: call this from the test's own thread (the body of a
/// `#[test]`, or of a `#[tokio::test]`, which `block_on` runs there).
///
/// # Panics
/// With `RAYITO_TEST_STRICT=1`, always: the test fails with the same line.
pub fn skip(reason: impl std::fmt::Display) {
    let test = format!(
        "{}::{}",
        env!("CARGO_CRATE_NAME"),
        std::thread::current().name().unwrap_or("<unnamed thread>")
    );
    // One line whatever the reason holds, so that the lines can be counted.
    let reason = reason.to_string().replace(['\n', '\r'], " ");
    let line = format!("SKIPPED: {test}: {reason}");
    // `io::stderr()` is not captured by libtest (only the print macros are).
    let _ = std::io::stderr()
        .lock()
        .write_all(format!("{line}\n").as_bytes());
    if let Some(path) = std::env::var_os(LOG_ENV)
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
    {
        // O_APPEND and a single write: lines of concurrent tests never mix.
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut log| log.write_all(format!("{line}\n").as_bytes()));
        if let Err(err) = appended {
            panic!("cannot append to {LOG_ENV} ({}): {err}", path.display());
        }
    }
    if strict() {
        panic!("{line} ({STRICT_ENV}=1: a skip is a failure)");
    }
}

/// Whether `RAYITO_TEST_STRICT=1`.
pub fn strict() -> bool {
    std::env::var_os(STRICT_ENV).is_some_and(|v| v == "1")
}

/// Why this host cannot build templates on the local backend, if it cannot:
/// local builds mount overlayfs, which needs root and the filesystem.
pub fn local_builds_unavailable() -> Option<&'static str> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        == Some("0");
    if !root {
        return Some("local template builds need root (overlayfs mounts)");
    }
    let filesystems = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if !filesystems
        .lines()
        .any(|l| l.trim_end().ends_with("overlay"))
    {
        return Some("local template builds need overlayfs");
    }
    None
}
