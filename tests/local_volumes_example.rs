//! `examples/volumes.rs` run as a new user would: on the local emulator's
//! EFS, one sandbox writes through a volume, a second reads it through a
//! read-only mount and is refused a write, a third finds the file after
//! both are gone.
//!
//! Needs root (the local agent's idmapped binds); prints `SKIPPED: ...`
//! without it.

#[path = "example_support/mod.rs"]
mod example_support;
use example_support::example_binary;

#[path = "skip_support/mod.rs"]
mod skip_support;

use std::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_volumes_example_shares_a_volume_that_outlives_its_sandboxes() {
    if !rustix::process::geteuid().is_root() {
        skip_support::skip("needs root (mount namespaces and idmapped mounts)");
        return;
    }
    let binary = tokio::task::spawn_blocking(|| example_binary("volumes"))
        .await
        .expect("the build task");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(binary)
            .env_remove("RAYITO_BACKEND")
            .env("RUST_LOG", "rayito=warn")
            .output()
            .expect("the example runs")
    })
    .await
    .expect("the run task");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the example failed:\n{stdout}\n{stderr}"
    );
    for line in [
        "writer: /mnt/notes is mounted",
        "the reader read: hello from the writer",
        "a write through the read-only volume: refused (command_exit)",
        "after both sandboxes: hello from the writer",
    ] {
        assert!(stdout.contains(line), "no {line:?} in:\n{stdout}");
    }
}
