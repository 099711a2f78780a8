//! The binary of one of the workspace's examples, for the tests that run
//! an example as a user would (a process of its own, its stdout read).

use std::path::PathBuf;
use std::process::Command;

/// `<target>/<profile>/examples/<name>`, built now if needed. The test
/// binary runs from `<target>/<profile>/deps`, which says where and which
/// profile. The example is built as `cargo test --workspace` builds it
/// (`--workspace`: the features every member asks for), so after that
/// command this is a no-op; built from one package or with `--features`, it
/// would compile rayito once more with another feature set inside the
/// test run.
pub fn example_binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("profile dir");
    let target = profile_dir.parent().expect("target dir");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_owned());
    let mut build = Command::new(cargo);
    build
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["build", "--quiet", "--workspace", "--example", name])
        .arg("--target-dir")
        .arg(target);
    if profile_dir.file_name().and_then(|n| n.to_str()) == Some("release") {
        build.arg("--release");
    }
    let status = build.status().expect("cargo runs");
    assert!(status.success(), "cargo build --example {name}: {status}");
    let binary = profile_dir.join("examples").join(name);
    assert!(binary.is_file(), "no example at {}", binary.display());
    binary
}

/// Runs the example `name` as a new user would on the embedded local
/// backend (no `RAYITO_BACKEND`, no AWS profile or general endpoint, only
/// the SDK's warnings logged), with `env` added; asserts that it
/// succeeded; its stdout and stderr.
#[allow(dead_code)]
pub async fn run_example(name: &'static str, env: Vec<(&'static str, String)>) -> (String, String) {
    let binary = tokio::task::spawn_blocking(move || example_binary(name))
        .await
        .expect("the build task");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(binary)
            .env_remove("RAYITO_BACKEND")
            .env_remove("AWS_PROFILE")
            .env_remove("AWS_ENDPOINT_URL")
            .env("RUST_LOG", "rayito=warn")
            .envs(env)
            .output()
            .expect("the example runs")
    })
    .await
    .expect("the run task");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "the example failed:\n{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

/// The environment of an example whose secrets live in Secrets Manager at
/// `endpoint` (a moto server, through the documented
/// `AWS_ENDPOINT_URL_SECRETS_MANAGER`), with test credentials.
#[allow(dead_code)]
pub fn secrets_manager_env(endpoint: String) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL_SECRETS_MANAGER", endpoint),
        ("AWS_REGION", "us-east-1".to_owned()),
        ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLETEST".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "dummy".to_owned()),
    ]
}

/// [`run_example`] with nothing added, asserting that its stdout holds
/// every line of `lines`.
// Used by the examples that need nothing but the local backend.
#[allow(dead_code)]
pub async fn run_local_example(name: &'static str, lines: &[&str]) {
    let (stdout, _) = run_example(name, Vec::new()).await;
    for line in lines {
        assert!(stdout.contains(line), "no {line:?} in:\n{stdout}");
    }
}
