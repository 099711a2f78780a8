//! `SandboxBuilder::workdir`: the default working directory of a sandbox's
//! processes, carried in the run payload to the agent (local backend), a
//! command's own cwd winning, and the refusals before any call.

use crate::sdk_support;

use rayito::{CommandOptions, SandboxError};
use rayito_emulator::Operation;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_starts_in_the_workdir_unless_it_gives_its_own() {
    let emu = sdk_support::emulator().await;
    let sbx = sdk_support::builder(&emu)
        .workdir("/tmp")
        .create()
        .await
        .unwrap();
    let here = sbx.commands().run("pwd").await.unwrap();
    assert_eq!(here.stdout, "/tmp\n");
    let own = sbx
        .commands()
        .run_with("pwd", CommandOptions::new().cwd("/home/user"))
        .await
        .unwrap();
    assert_eq!(own.stdout, "/home/user\n");
    assert!(sbx.kill().await.unwrap());

    // Without it: the home, as before.
    let sbx = sdk_support::builder(&emu).create().await.unwrap();
    assert_eq!(
        sbx.commands().run("pwd").await.unwrap().stdout,
        "/home/user\n"
    );
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workdir_that_is_not_an_absolute_clean_path_is_refused_before_any_call() {
    let emu = sdk_support::emulator().await;
    let long = format!("/{}", "d".repeat(4_096));
    for dir in ["", "tmp", "./tmp", "/tmp\nx", long.as_str()] {
        let err = sdk_support::builder(&emu)
            .workdir(dir)
            .create()
            .await
            .expect_err("refused");
        assert!(
            matches!(err, SandboxError::InvalidArgument { .. }),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "invalid workdir: a working directory is an absolute path (starting with /) of at most 4,096 bytes without control characters",
            "{dir:?}"
        );
    }
    assert_eq!(emu.calls(Operation::RunMicrovm), 0);
}
