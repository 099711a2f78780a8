//! `examples/e2b_migration.rs`, E2B's quickstart moved to rayito, runs on
//! the local backend and prints what E2B's prints: the logs of a cell, a
//! chart as PNG bytes, a command's output, a file read back, a listing.

use std::path::PathBuf;
use std::process::Command;

/// `<target>/<profile>/examples/e2b_migration`, built now if needed, as
/// `cargo test --workspace` builds it (`--workspace`: the same features, so
/// a no-op after that command rather than rayito compiled once more).
fn example_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("profile dir");
    let target = profile_dir.parent().expect("target dir");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut build = Command::new(cargo);
    build
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--quiet",
            "--workspace",
            "--example",
            "e2b_migration",
        ])
        .arg("--target-dir")
        .arg(target);
    if profile_dir.file_name().and_then(|n| n.to_str()) == Some("release") {
        build.arg("--release");
    }
    let status = build.status().expect("cargo runs");
    assert!(
        status.success(),
        "cargo build --example e2b_migration: {status}"
    );
    profile_dir.join("examples").join("e2b_migration")
}

#[test]
fn the_quickstart_runs_on_the_local_backend() {
    let tmp = std::env::temp_dir().join(format!("e2b-migration-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("a temp dir");
    let out = Command::new(example_binary())
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
