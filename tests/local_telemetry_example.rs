//! `examples/telemetry.rs` run as a new user would, on the embedded local
//! backend: the sandbox's agent posts its gauges to the example's own
//! collector, and the status counts the seven points.

#[path = "example_support/mod.rs"]
mod example_support;
use example_support::example_binary;

use std::process::Command;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_telemetry_example_exports_to_its_collector() {
    let binary = tokio::task::spawn_blocking(|| example_binary("telemetry"))
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
        "the collector got an export of ",
        "telemetry status: exported 7 points, dropped 0, last error none",
    ] {
        assert!(stdout.contains(line), "no {line:?} in:\n{stdout}");
    }
}
