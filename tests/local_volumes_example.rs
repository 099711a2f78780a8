//! `examples/volumes.rs` run as a new user would: on the local emulator's
//! EFS, one sandbox writes through a volume, a second reads it through a
//! read-only mount and is refused a write, a third finds the file after
//! both are gone.
//!
//! Needs root (the local agent's idmapped binds); prints `SKIPPED: ...`
//! without it.

use crate::example_support;
use example_support::run_local_example;

use crate::skip_support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_volumes_example_shares_a_volume_that_outlives_its_sandboxes() {
    if !rustix::process::geteuid().is_root() {
        skip_support::skip("needs root (mount namespaces and idmapped mounts)");
        return;
    }
    run_local_example(
        "volumes",
        &[
            "writer: /mnt/notes is mounted",
            "the reader read: hello from the writer",
            "a write through the read-only volume: refused (command_exit)",
            "after both sandboxes: hello from the writer",
        ],
    )
    .await;
}
