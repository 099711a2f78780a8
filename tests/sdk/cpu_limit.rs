//! `cpu_time_limit` (issue 43): RLIMIT_CPU for each command of a sandbox on
//! the local backend, the error a command over it gets, code kernels left
//! unlimited, and the refusals before any call.

use crate::sdk_support;

use std::time::Duration;

use rayito::error::CommandExitStatus;
use rayito::{RunCodeOptions, SandboxError};
use rayito_emulator::Operation;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_past_its_cpu_time_is_ended_and_says_so_and_kernels_are_not_limited() {
    let emu = sdk_support::emulator().await;
    let sbx = sdk_support::builder(&emu)
        .cpu_time_limit(Duration::from_secs(1))
        .create()
        .await
        .unwrap();

    let err = sbx
        .commands()
        .run("python3 -c 'while True: pass'")
        .await
        .expect_err("ended at its CPU time");
    assert!(
        matches!(
            err,
            SandboxError::CommandExit {
                exit_code: 152,
                status: CommandExitStatus::Signaled,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "command python3 was killed by signal 24 at its CPU time limit (exit code 152); give the sandbox a higher cpu_time_limit or do less work per command; its stdout and stderr are in the error"
    );
    // The limits the command sees: soft 1 s, hard 5 s more.
    let limits = sbx
        .commands()
        .run("ulimit -S -t; ulimit -H -t")
        .await
        .unwrap();
    assert_eq!(limits.stdout, "1\n6\n");

    // A kernel's CPU time adds up across cells: it is not limited.
    let cell = sbx
        .code()
        .run_with(
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5:\n    pass\nprint('spun')",
            RunCodeOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(cell.logs.stdout.concat().trim(), "spun", "{cell:?}");
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cpu_time_limit_out_of_range_is_refused_before_any_call() {
    let emu = sdk_support::emulator().await;
    for limit in [
        Duration::ZERO,
        Duration::from_millis(1_500),
        Duration::from_secs(28_801),
    ] {
        let err = sdk_support::builder(&emu)
            .cpu_time_limit(limit)
            .create()
            .await
            .expect_err("out of range");
        assert_eq!(
            err.to_string(),
            "invalid cpu_time_limit: a CPU time limit is 1 to 28,800 whole seconds of CPU time per process",
            "{limit:?}"
        );
    }
    assert_eq!(emu.calls(Operation::RunMicrovm), 0);
}
