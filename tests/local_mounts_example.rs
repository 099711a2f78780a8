//! `examples/mounts.rs` run as a new user would, on the embedded local
//! backend: one sandbox writes through a writable S3 mount and is refused a
//! delete, a second reads the object through a read-only mount of the same
//! prefix and is refused a write.
//!
//! Needs root and /dev/fuse (the local agent's FUSE mounts); prints
//! `SKIPPED: ...` without them.

#[path = "example_support/mod.rs"]
mod example_support;
use example_support::example_binary;

#[path = "skip_support/mod.rs"]
mod skip_support;

use std::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mounts_example_writes_and_reads_the_bucket_through_mounts() {
    if !rustix::process::geteuid().is_root() || !std::path::Path::new("/dev/fuse").exists() {
        skip_support::skip("needs root and /dev/fuse (FUSE mounts in the sandbox's namespace)");
        return;
    }
    let binary = tokio::task::spawn_blocking(|| example_binary("mounts"))
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
        "writer: /home/user/shared is mounted",
        "a delete without allow_delete: refused",
        "the reader read: hello from the writer",
        "a write through the read-only mount: refused",
    ] {
        assert!(stdout.contains(line), "no {line:?} in:\n{stdout}");
    }
}
