//! The gate's third outcome: a build that does not settle in time is
//! `build_timeout`, not a failure: the build goes on in the service, and
//! waiting again on its version later finds it launchable. Against an
//! emulator of its own, whose builds are held. A test binary of its own:
//! the 10-slot build guard is process-wide.

use crate::sdk_support;

use std::time::Duration;

use rayito::error::BuildReason;
use rayito::template::{BuildHandle, BuildOptions, BuildStatus, Template};
use rayito::{Client, SandboxError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_past_its_timeout_is_not_a_failure_and_can_be_waited_for_again() {
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
    let options = |timeout: Duration| BuildOptions {
        bucket: Some(emu.artifact_bucket()),
        context_dir: Some(dir.path().to_path_buf()),
        poll_interval: Some(Duration::from_millis(50)),
        timeout,
        ..BuildOptions::default()
    };
    let template = Template::new().run_cmd("echo late > /opt/late");

    emu.faults().hold_builds(true);
    let err = client
        .templates()
        .build(&template, "gate-late", options(Duration::from_millis(600)))
        .await
        .expect_err("held past its timeout");
    assert!(
        matches!(
            err,
            SandboxError::Build {
                reason: Some(BuildReason::BuildTimeout),
                step: None,
                exit_code: None,
                ..
            }
        ),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.starts_with("the template build did not settle within ")
            && message
                .ends_with("; it goes on in the service, read its status later or wait longer"),
        "{message}"
    );
    // Not a failure: the version is still being built.
    let status = client
        .templates()
        .version_status("gate-late", None)
        .await
        .unwrap();
    assert_eq!(status, ("1".to_owned(), BuildStatus::InProgress));

    emu.faults().hold_builds(false);
    let arn = emu.image_arn("gate-late");
    let handle = BuildHandle::new(&arn, "1", "gate-late");
    let info = client
        .templates()
        .wait(&handle, options(Duration::from_secs(120)))
        .await
        .expect("the build went on and finished");
    assert_eq!(info.version, "1");
    let sbx = client
        .sandbox()
        .template(arn)
        .ready_timeout(Duration::from_secs(60))
        .create()
        .await
        .unwrap();
    assert_eq!(
        sbx.commands().run("cat /opt/late").await.unwrap().stdout,
        "late\n"
    );
    sbx.kill().await.unwrap();
    emu.shutdown().await;
}
