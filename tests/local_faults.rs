//! `LocalFaults`, the public fault injection of the embedded local backend:
//! each fault produces, for real, the `SandboxError` its doc and
//! docs/testing.md name (kind, fields, message), `clear` restores, and the
//! refusals are pinned. Then `examples/fault_injection.rs` runs as a user
//! would.
//!
//! A binary of its own: the counted faults apply to the whole process's
//! local backend (that is their contract), so no other test may share it;
//! and it builds an example with cargo while it runs. The table runs its
//! rows one after the other because each row's fault is the process's.

use crate::example_support;

use std::process::Command;
use std::time::Duration;

use rayito::error::{RetryPolicy, TimeoutScope};
use rayito::{Client, ErrorKind, LocalFaults, Sandbox, SandboxError};

/// The default policy with capacity retries that end in a second.
fn quick_policy() -> RetryPolicy {
    let mut policy = RetryPolicy::default();
    policy.capacity.initial = Duration::from_millis(10);
    policy.capacity.max_delay = Duration::from_millis(20);
    policy.capacity.total_budget = Some(Duration::from_secs(1));
    policy
}

async fn local() -> (Client, LocalFaults) {
    let client = Client::builder()
        .local()
        .retry_policy(quick_policy())
        .pacing(rayito::Pacing::unlimited())
        .build()
        .await
        .expect("the local backend starts");
    let faults = client.local_faults().expect("a local client has faults");
    (client, faults)
}

async fn sandbox(client: &Client) -> Sandbox {
    client.sandbox().create().await.expect("a sandbox")
}

/// `err` is of `kind`, says `message`, and is retryable or not.
fn pin(row: &str, err: &SandboxError, kind: ErrorKind, retryable: bool, message: &str) {
    assert_eq!(err.kind(), kind, "{row}: {err:?}");
    assert_eq!(err.is_retryable(), retryable, "{row}: {err:?}");
    assert_eq!(err.to_string(), message, "{row}");
}

/// As [`pin`], and docs/testing.md transcribes `message` (a sandbox's id
/// written `ID` there), so the guide and the SDK stay in step.
fn pin_documented(
    row: &str,
    err: &SandboxError,
    kind: ErrorKind,
    retryable: bool,
    message: &str,
    sandbox_id: Option<&str>,
) {
    pin(row, err, kind, retryable, message);
    let guide = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/testing.md"))
        .expect("docs/testing.md");
    let written = match sandbox_id {
        Some(id) => message.replace(id, "ID"),
        None => message.to_owned(),
    };
    assert!(
        guide.contains(&format!("\"{written}\"")),
        "{row}: docs/testing.md does not quote \"{written}\""
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fault_is_its_documented_error() {
    let (client, faults) = local().await;

    // Throttled creates: a few are retried away, more are rate_limit.
    faults.throttle_creates(2, Duration::ZERO);
    let sbx = sandbox(&client).await;
    faults.throttle_creates(100, Duration::ZERO);
    let err = client.sandbox().create().await.unwrap_err();
    pin_documented(
        "throttle_creates",
        &err,
        ErrorKind::RateLimit,
        true,
        "control plane call RunMicrovm was throttled: Rate exceeded; retry after 0 s",
        None,
    );
    assert!(
        matches!(err, SandboxError::RateLimit { retry_after: Some(d), .. } if d.is_zero()),
        "{err:?}"
    );
    assert_eq!(err.meta().attempts(), 5);
    // clear restores.
    faults.clear();
    let second = sandbox(&client).await;
    assert!(second.kill().await.unwrap());

    // Another operation by its AWS name.
    faults
        .throttle("GetMicrovm", 100, Duration::ZERO)
        .expect("a known operation");
    let err = sbx.get_info().await.unwrap_err();
    pin(
        "throttle GetMicrovm",
        &err,
        ErrorKind::RateLimit,
        true,
        "control plane call GetMicrovm was throttled: Rate exceeded; retry after 0 s",
    );
    faults.clear();

    // No capacity, past the (here 1 s) capacity budget.
    faults.insufficient_capacity(1_000);
    let err = client.sandbox().create().await.unwrap_err();
    pin_documented(
        "insufficient_capacity",
        &err,
        ErrorKind::Capacity,
        true,
        "control plane call RunMicrovm found no capacity: Insufficient capacity to run the MicroVM. Retry later.; retry later or use another region",
        None,
    );
    assert!(
        matches!(err, SandboxError::Capacity { code: None, .. }),
        "{err:?}"
    );
    faults.clear();

    // A spent quota: never retried.
    faults.quota_exceeded(1);
    let err = client.sandbox().create().await.unwrap_err();
    pin_documented(
        "quota_exceeded",
        &err,
        ErrorKind::QuotaExceeded,
        false,
        "control plane call RunMicrovm hit an account quota: Concurrent MicroVMs quota exceeded.; free resources or ask AWS for a higher quota",
        None,
    );
    assert!(err.classify().retry_with_larger_limits, "{err:?}");
    assert_eq!(err.meta().attempts(), 1);

    // The proxy: one 403 is invisible (a fresh token), two are refused; a
    // 502 is waited out by a call that may be repeated, and is
    // connection_lost for a command's start, which is never sent twice.
    faults.proxy_status(1, 403).unwrap();
    let out = sbx.commands().run("echo fine").await.expect("retried");
    assert_eq!(out.stdout, "fine\n");
    faults.proxy_status(2, 502).unwrap();
    sbx.files().list("/tmp").await.expect("waited out");
    faults.proxy_status(1, 502).unwrap();
    let err = sbx.commands().run("echo never").await.unwrap_err();
    pin_documented(
        "proxy_status 502, a command's start",
        &err,
        ErrorKind::Sandbox,
        true,
        "the AWS proxy could not reach the sandbox for commands.run (http 502); retry, or check that the sandbox is still running",
        None,
    );
    assert_eq!(
        err.sandbox_code(),
        Some(&rayito::error::SandboxCode::ConnectionLost)
    );
    faults.proxy_status(2, 403).unwrap();
    let err = sbx.commands().run("echo never").await.unwrap_err();
    pin_documented(
        "proxy_status 403 x2",
        &err,
        ErrorKind::Authentication,
        false,
        "the AWS proxy refused the sandbox's token for commands.run even after a fresh one; check the IAM permission to create MicroVM auth tokens",
        None,
    );
    assert!(
        matches!(
            err,
            SandboxError::Authentication {
                proxy_rejected: true,
                ..
            }
        ),
        "{err:?}"
    );

    // A cut mid-command: the SDK reconnects, the caller sees the output.
    let running = run_started(&sbx, "echo started; sleep 1; echo done").await;
    faults.cut_connections(sbx.id()).unwrap();
    let out = running.await.unwrap().expect("reconnected");
    assert_eq!(out.stdout, "started\ndone\n");

    // A full disk.
    faults.fill_disk(sbx.id()).unwrap();
    let err = sbx.files().write("/home/user/x", "data").await.unwrap_err();
    pin_documented(
        "fill_disk",
        &err,
        ErrorKind::DiskFull,
        false,
        "the sandbox has less than 256 MiB of free disk (files.write); free space or use a larger disk",
        None,
    );
    assert!(err.classify().retry_with_larger_limits, "{err:?}");

    // The sandbox's deadline.
    faults.expire_deadline(sbx.id()).unwrap();
    let err = sbx.commands().run("true").await.unwrap_err();
    pin_documented(
        "expire_deadline",
        &err,
        ErrorKind::Timeout,
        false,
        "the sandbox reached its timeout (commands.run); extend it with set_timeout before it expires, or create a new sandbox",
        None,
    );
    assert!(
        matches!(
            err,
            SandboxError::Timeout {
                scope: TimeoutScope::Sandbox,
                ..
            }
        ),
        "{err:?}"
    );

    // A killed agent: the sandbox is gone, mid-command or after.
    let victim = sandbox(&client).await;
    let running = run_started(&victim, "echo started; sleep 30").await;
    faults.kill_agent(victim.id()).unwrap();
    let gone = format!(
        "the sandbox {} does not exist or has terminated; create a new sandbox",
        victim.id()
    );
    let err = running.await.unwrap().unwrap_err();
    pin(
        "kill_agent, mid-command",
        &err,
        ErrorKind::SandboxNotFound,
        false,
        &gone,
    );
    let err = victim.commands().run("true").await.unwrap_err();
    pin(
        "kill_agent, after",
        &err,
        ErrorKind::SandboxNotFound,
        false,
        &gone,
    );
    let _ = sbx.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_pinned() {
    let (_client, faults) = local().await;
    let err = faults.kill_agent("microvm-nope").unwrap_err();
    pin(
        "unknown sandbox",
        &err,
        ErrorKind::SandboxNotFound,
        false,
        "the sandbox microvm-nope does not exist or has terminated; create a new sandbox",
    );
    for call in [
        faults.cut_connections("microvm-nope"),
        faults.fill_disk("microvm-nope"),
        faults.expire_deadline("microvm-nope"),
    ] {
        assert_eq!(call.unwrap_err().to_string(), err.to_string());
    }
    let err = faults
        .throttle("runMicrovm", 1, Duration::ZERO)
        .unwrap_err();
    pin(
        "unknown operation",
        &err,
        ErrorKind::InvalidArgument,
        false,
        "invalid operation: not a control-plane operation of the local backend (an AWS name such as RunMicrovm or GetMicrovm)",
    );
    let err = faults.proxy_status(1, 200).unwrap_err();
    pin(
        "status 200",
        &err,
        ErrorKind::InvalidArgument,
        false,
        "invalid status: a proxy status must be an HTTP error, in 400..=599",
    );

    let aws = Client::builder()
        .aws(
            rayito::AwsOptions::new()
                .endpoint_url("http://127.0.0.1:9")
                .region("us-east-1")
                .static_credentials("AKIDFAULTTEST", "secret"),
        )
        .build()
        .await
        .expect("an AWS client needs no call to build");
    let err = aws.local_faults().unwrap_err();
    pin(
        "an AWS client",
        &err,
        ErrorKind::Unimplemented,
        false,
        "feature local_faults is not available: faults are injected on the local backend only; build the client with Client::local(); see docs/testing.md",
    );
}

/// `examples/fault_injection.rs`, run as a user would: every scenario it
/// tests passes, and it says so.
#[test]
fn the_fault_injection_example_passes() {
    let binary = example_support::example_binary("fault_injection");
    let out = Command::new(binary)
        .env_remove("RAYITO_BACKEND")
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.ends_with("all fault scenarios passed\n"), "{stdout}");
}

/// Runs `cmd` (which prints a line first) in a task; returns once that line
/// came, so a fault injected next lands mid-command, not before its start.
async fn run_started(
    sbx: &Sandbox,
    cmd: &'static str,
) -> tokio::task::JoinHandle<Result<rayito::CommandResult, SandboxError>> {
    let (started, is_started) = tokio::sync::oneshot::channel();
    let started = std::sync::Mutex::new(Some(started));
    let options = rayito::CommandOptions::new().on_stdout(move |_| {
        if let Some(started) = started.lock().unwrap().take() {
            let _ = started.send(());
        }
    });
    let sbx = sbx.clone();
    let task = tokio::spawn(async move { sbx.commands().run_with(cmd, options).await });
    is_started
        .await
        .expect("the command printed its first line");
    task
}
