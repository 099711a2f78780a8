//! The build quota, both ways it shows: the service's 10 concurrent builds
//! per account (ServiceQuotaExceededException on the 11th submission) and
//! this process's 10-slot guard (the 11th `build` refused before it
//! submits). Through the AWS path against an emulator of its own: STS for
//! the account, its S3 endpoint, its held builds. A test binary of its own,
//! since the guard is process-wide: in the `sdk` binary, another test's
//! builds held slots of it (`cargo test` runs a binary's tests in one
//! process).

use crate::sdk_support;

use std::time::{Duration, Instant};

use rayito::error::BuildReason;
use rayito::template::{BuildOptions, BuildStatus, Template, Templates};
use rayito::{Client, SandboxError};
use rayito_emulator::{Emulator, Operation};

fn options(emu: &Emulator, dir: &std::path::Path) -> BuildOptions {
    BuildOptions {
        bucket: Some(emu.artifact_bucket()),
        context_dir: Some(dir.to_path_buf()),
        poll_interval: Some(Duration::from_millis(50)),
        ..BuildOptions::default()
    }
}

fn is_quota(err: &SandboxError) -> bool {
    matches!(
        err,
        SandboxError::Build {
            reason: Some(BuildReason::BuildQuota),
            ..
        }
    ) && err.to_string()
        == "too many template builds are running at once (at most 10); wait for one to finish, then build again"
}

/// Waits until the emulator has seen `n` CreateMicrovmImage calls.
async fn creates_reach(emu: &Emulator, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while emu.calls(Operation::CreateMicrovmImage) < n {
        assert!(Instant::now() < deadline, "the builds were not submitted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_eleventh_concurrent_build_gets_build_quota_from_the_service_and_from_the_guard() {
    if let Some(reason) = sdk_support::skip::local_builds_unavailable() {
        sdk_support::skip::skip(reason);
        return;
    }
    let emu = sdk_support::emulator().await;
    let dir = tempfile::tempdir().unwrap();
    let client = Client::builder()
        .aws(sdk_support::aws(&emu).s3_endpoint_url(emu.s3_endpoint_url()))
        .build()
        .await
        .expect("a client on the AWS path");
    let templates: Templates = client.templates();
    let numbered = |i: usize| Template::new().run_cmd(format!("echo {i} > /opt/n"));

    // The service's quota: ten background builds held in flight (each
    // holds this process's slot only through its submission).
    emu.faults().hold_builds(true);
    let mut handles = Vec::new();
    for i in 0..10 {
        let handle = templates
            .build_in_background(
                &numbered(i),
                &format!("quota-{i}"),
                options(&emu, dir.path()),
            )
            .await
            .expect("a submission within the quota");
        assert_eq!(handle.version, "1");
        assert!(
            handle
                .template_id
                .ends_with(&format!(":{}:microvm-image:quota-{i}", emu.account_id())),
            "the name resolved in the account STS names: {}",
            handle.template_id
        );
        handles.push(handle);
    }
    for handle in &handles {
        assert_eq!(
            templates.status(handle).await.unwrap(),
            BuildStatus::InProgress
        );
    }
    let err = templates
        .build_in_background(&numbered(10), "quota-10", options(&emu, dir.path()))
        .await
        .expect_err("the 11th build in flight");
    assert!(is_quota(&err), "{err:?}");
    emu.faults().hold_builds(false);
    for handle in &handles {
        let info = templates
            .wait(handle, options(&emu, dir.path()))
            .await
            .expect("released builds finish");
        assert_eq!(info.version, "1");
    }

    // This process's guard: ten builds waiting here hold every slot, so
    // the 11th is refused before it submits anything.
    emu.faults().hold_builds(true);
    let before = emu.calls(Operation::CreateMicrovmImage);
    let mut waiting = Vec::new();
    for i in 0..10 {
        let templates = templates.clone();
        let options = options(&emu, dir.path());
        waiting.push(tokio::spawn(async move {
            templates
                .build(&numbered(100 + i), &format!("guard-{i}"), options)
                .await
        }));
    }
    creates_reach(&emu, before + 10).await;
    let err = templates
        .build(&numbered(110), "guard-10", options(&emu, dir.path()))
        .await
        .expect_err("no slot left in this process");
    assert!(is_quota(&err), "{err:?}");
    assert_eq!(
        emu.calls(Operation::CreateMicrovmImage),
        before + 10,
        "refused before any submission"
    );
    emu.faults().hold_builds(false);
    for task in waiting {
        task.await.unwrap().expect("the held builds finish");
    }
    emu.shutdown().await;
}
