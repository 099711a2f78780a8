//! run_code in javascript through the SDK on the local backend: served by
//! node when it is on the host, and `Unimplemented` naming what is missing
//! when it is not (produced by giving the sandbox a PATH without node).

use crate::skip_support;

use rayito::{RunCodeOptions, Sandbox, SandboxError};

fn node_on_sandbox_path() -> bool {
    std::process::Command::new("node")
        .arg("--version")
        .env(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_runs_through_node_with_state() {
    if !node_on_sandbox_path() {
        skip_support::skip("node not on the sandbox PATH (.ci/install-test-deps installs it)");
        return;
    }
    let sbx = Sandbox::builder().local().create().await.unwrap();
    let js = || RunCodeOptions::new().language("js");
    let first = sbx
        .run_code_with("let n = 20; console.log('from node'); n + 1", js())
        .await
        .unwrap();
    assert_eq!(first.logs.stdout.concat(), "from node\n");
    assert_eq!(first.text(), Some("21"));
    let second = sbx.run_code_with("n * 2", js()).await.unwrap();
    assert_eq!(second.text(), Some("40"));
    let failed = sbx.run_code_with("undefinedThing", js()).await.unwrap();
    let error = failed.error.expect("an exception is data");
    assert_eq!(error.name, "ReferenceError");
    assert_eq!(error.value, "undefinedThing is not defined");
    assert!(sbx.kill().await.unwrap());
}

/// A directory holding only `python3` (the default kernel needs it), to
/// serve as a PATH without node; outside /tmp, which the sandbox's mount
/// namespace replaces.
fn path_without_node() -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("path-without-node-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let python = ["/usr/local/bin/python3", "/usr/bin/python3"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("python3 on the host");
    let link = dir.join("python3");
    if !link.exists() {
        std::os::unix::fs::symlink(python, &link).unwrap();
    }
    dir.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_without_node_is_unimplemented() {
    let sbx = Sandbox::builder()
        .local()
        .env("PATH", path_without_node())
        .create()
        .await
        .unwrap();
    let err = sbx
        .run_code_with("1", RunCodeOptions::new().language("javascript"))
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::Unimplemented { .. }), "{err:?}");
    assert_eq!(
        err.meta().server_message(),
        Some("language javascript needs node, which is not installed on this host")
    );
    assert_eq!(
        err.to_string(),
        "feature run_code is not available: language javascript needs node, which is not installed on this host"
    );
    assert!(sbx.kill().await.unwrap());
}
