//! `examples/e2b_migration.rs`, E2B's quickstart moved to rayito, runs on
//! the local backend and prints what E2B's prints: the logs of a cell, a
//! chart as PNG bytes, a command's output, a file read back, a listing.

#[path = "../../../tests/example_support/mod.rs"]
mod example_support;
use example_support::example_binary;

use std::process::Command;

#[test]
fn the_quickstart_runs_on_the_local_backend() {
    let tmp = std::env::temp_dir().join(format!("e2b-migration-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("a temp dir");
    let out = Command::new(example_binary("e2b_migration"))
        .env_remove("RAYITO_BACKEND")
        .env("TMPDIR", &tmp)
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "status {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some(r#"Logs { stdout: ["hello world\n"], stderr: [] }"#)
    );
    let chart = lines
        .iter()
        .find(|l| l.starts_with("chart: "))
        .unwrap_or_else(|| panic!("no chart line in\n{stdout}"));
    let written = tmp.join("chart.png");
    assert!(
        chart.ends_with(&format!(" bytes of PNG in {}", written.display())),
        "{chart}"
    );
    let png = std::fs::read(&written).expect("the chart was written");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    assert!(lines.contains(&"hello from the host"), "{stdout}");
    assert_eq!(lines.last().copied(), Some("hello.txt"), "{stdout}");
    std::fs::remove_dir_all(&tmp).ok();
}
