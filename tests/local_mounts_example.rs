//! `examples/mounts.rs` run as a new user would, on the embedded local
//! backend: one sandbox writes through a writable S3 mount and is refused a
//! delete, a second reads the object through a read-only mount of the same
//! prefix and is refused a write.
//!
//! Needs root and /dev/fuse (the local agent's FUSE mounts); prints
//! `SKIPPED: ...` without them.

use crate::example_support;
use example_support::run_local_example;

use crate::skip_support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mounts_example_writes_and_reads_the_bucket_through_mounts() {
    if !rustix::process::geteuid().is_root() || !std::path::Path::new("/dev/fuse").exists() {
        skip_support::skip("needs root and /dev/fuse (FUSE mounts in the sandbox's namespace)");
        return;
    }
    run_local_example(
        "mounts",
        &[
            "writer: /home/user/shared is mounted",
            "a delete without allow_delete: refused",
            "the reader read: hello from the writer",
            "a write through the read-only mount: refused",
        ],
    )
    .await;
}
