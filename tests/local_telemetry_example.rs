//! `examples/telemetry.rs` run as a new user would, on the embedded local
//! backend: the sandbox's agent posts its gauges to the example's own
//! collector, and the status counts the seven points.

use crate::example_support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_telemetry_example_exports_to_its_collector() {
    example_support::run_local_example(
        "telemetry",
        &[
            "the collector got an export of ",
            "telemetry status: exported 7 points, dropped 0, last error none",
        ],
    )
    .await;
}
