//! Hostile input and injected faults, produced for real through the
//! emulator and a real agent: no input panics, arguments are refused where
//! they are passed and before any I/O, and errors say what happened.

use crate::sdk_support;

use std::time::Duration;

use rayito::error::{RetryPolicy, SandboxCode};
use rayito::{
    AwsOptions, CodeContextOptions, CommandOptions, ErrorKind, IdlePolicy, OnTimeout,
    RunCodeOptions, Sandbox, SandboxError, WriteEntry,
};
use rayito_emulator::Operation;
use sdk_support::{aws, builder, emulator, sandbox};

fn argument(err: &SandboxError) -> Option<&str> {
    match err {
        SandboxError::InvalidArgument { argument, .. } => argument.as_deref(),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_durations_never_panic() {
    let emu = emulator().await;

    // Sandbox durations are checked against the platform cap before any I/O.
    let err = builder(&emu)
        .timeout(Duration::MAX)
        .create()
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::SandboxLifetime { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "sandbox timeout of 18,446,744,073,709,551,615 s is above the platform cap of 28,800 s; pass a smaller timeout"
    );
    let err = builder(&emu)
        .max_lifetime(Duration::MAX)
        .create()
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::SandboxLifetime { .. }),
        "{err:?}"
    );
    let err = builder(&emu)
        .timeout(Duration::from_secs(600))
        .on_timeout(OnTimeout::Kill)
        .max_lifetime(Duration::new(u64::MAX, 1))
        .create()
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::SandboxLifetime { .. }),
        "{err:?}"
    );
    let err = builder(&emu)
        .idle_policy(IdlePolicy::new(Duration::MAX))
        .create()
        .await
        .unwrap_err();
    assert_eq!(argument(&err), Some("idle_policy"), "{err:?}");
    assert_eq!(emu.calls(Operation::RunMicrovm), 0);

    // Operation deadlines saturate: Duration::MAX means no limit. Before,
    // ready_timeout panicked after RunMicrovm and leaked the MicroVM.
    let sbx = builder(&emu)
        .ready_timeout(Duration::MAX)
        .request_timeout(Duration::MAX)
        .create()
        .await
        .expect("Duration::MAX deadlines are no limit");
    let out = sbx
        .commands()
        .run_with(
            "echo ok",
            CommandOptions::new().timeout(Duration::new(u64::MAX, 999_999_999)),
        )
        .await
        .unwrap();
    assert_eq!(out.stdout, "ok\n");
    let execution = sbx
        .run_code_with("1 + 1", RunCodeOptions::new().timeout(Duration::MAX))
        .await
        .unwrap();
    assert_eq!(execution.text(), Some("2"));
    sbx.files()
        .write("big.txt", vec![b'x'; 3 << 20])
        .await
        .unwrap();
    assert_eq!(sbx.files().read("big.txt").await.unwrap().len(), 3 << 20);
    let err = sbx.set_timeout(Duration::MAX).await.unwrap_err();
    assert!(
        matches!(err, SandboxError::SandboxLifetime { .. }),
        "{err:?}"
    );
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_are_refused_where_they_are_passed() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let commands = sbx.commands();

    let cases: Vec<(SandboxError, &str, &str)> = vec![
        (
            commands.run("echo a\0b").await.unwrap_err(),
            "cmd",
            "invalid cmd: the command contains a NUL character; pass a command without NUL",
        ),
        (
            commands.run(&"x".repeat(128 * 1024)).await.unwrap_err(),
            "cmd",
            "invalid cmd: the command is longer than the kernel's limit of 131,071 bytes for one argument; write the script to a file and run the file",
        ),
        (
            commands
                .run_with("env", CommandOptions::new().env("A=B", "v"))
                .await
                .unwrap_err(),
            "envs",
            "invalid envs: an env name is empty, too long or contains a control character or '='; pass names of 1 to 256 printable characters",
        ),
        (
            commands
                .run_with("env", CommandOptions::new().env("", "v"))
                .await
                .unwrap_err(),
            "envs",
            "invalid envs: an env name is empty, too long or contains a control character or '='; pass names of 1 to 256 printable characters",
        ),
        (
            commands
                .run_with("env", CommandOptions::new().env("A", "secret\0value"))
                .await
                .unwrap_err(),
            "envs",
            "invalid envs: an env value contains a NUL character; pass values without NUL",
        ),
        (
            commands
                .run_with("pwd", CommandOptions::new().cwd("/tmp\0x"))
                .await
                .unwrap_err(),
            "cwd",
            "invalid cwd: the working directory contains a NUL character; pass a path without NUL",
        ),
        (
            commands
                .run_with("pwd", CommandOptions::new().user("us\0er"))
                .await
                .unwrap_err(),
            "user",
            "invalid user: the user name is empty or contains a NUL character; pass a user name, or none for the default user",
        ),
        (
            sbx.run_code(&"1\n".repeat(600 * 1024)).await.unwrap_err(),
            "code",
            "invalid code: the code is larger than the agent's limit of 1 MiB for one cell; split it into smaller cells",
        ),
        (
            sbx.run_code_with("1", RunCodeOptions::new().env("A=B", "v"))
                .await
                .unwrap_err(),
            "envs",
            "invalid envs: an env name is empty, too long or contains a control character or '='; pass names of 1 to 256 printable characters",
        ),
        (
            sbx.files().read("a\0b").await.unwrap_err(),
            "path",
            "invalid path: the path contains a NUL character; pass a path without NUL",
        ),
        (
            sbx.files().write("dir/", "data").await.unwrap_err(),
            "path",
            "invalid path: the path ends with '/', which names a directory; pass the path of the file to write",
        ),
        (
            sbx.files()
                .write_files(vec![
                    WriteEntry::new("ok.txt", "a"),
                    WriteEntry::new("", "b"),
                ])
                .await
                .unwrap_err(),
            "path",
            "invalid path: the path is empty; pass a path, absolute or relative to /home/user",
        ),
        (
            sbx.files().rename("a", "b\0").await.unwrap_err(),
            "destination",
            "invalid destination: the destination path is empty or contains a NUL character; pass a path, absolute or relative to /home/user",
        ),
        (
            sbx.create_code_context(CodeContextOptions::new().cwd(""))
                .await
                .unwrap_err(),
            "cwd",
            "invalid cwd: the working directory is empty; pass a path, absolute or relative to /home/user",
        ),
    ];
    for (err, arg, message) in &cases {
        assert_eq!(argument(err), Some(*arg), "{err:?}");
        assert_eq!(err.to_string(), *message);
        assert!(!format!("{err:?}").contains("secret"));
    }
    // Nothing was written: a refused "dir/" did not become a file "dir".
    assert!(!sbx.files().exists("dir").await.unwrap());
    assert!(!sbx.files().exists("ok.txt").await.unwrap());

    // A relative cwd is relative to /home/user, like relative file paths.
    sbx.files().make_dir("work/sub").await.unwrap();
    let out = commands
        .run_with("pwd", CommandOptions::new().cwd("work/sub"))
        .await
        .unwrap();
    assert_eq!(out.stdout, "/home/user/work/sub\n");
    let ctx = sbx
        .create_code_context(CodeContextOptions::new().language("python").cwd("work"))
        .await
        .unwrap();
    assert_eq!(ctx.cwd.as_deref(), Some("/home/user/work"));
    let execution = sbx
        .run_code_with(
            "import os; os.getcwd()",
            RunCodeOptions::new().context(ctx.id.clone()),
        )
        .await
        .unwrap();
    assert_eq!(execution.text(), Some("'/home/user/work'"));

    // A path the sandbox user may not touch is not an authentication
    // failure: the caller's credentials are fine.
    let err = sbx.files().write("/etc/rayito.txt", "x").await.unwrap_err();
    assert_eq!(
        err.sandbox_code(),
        Some(&SandboxCode::PermissionDenied),
        "{err:?}"
    );
    assert_eq!(err.kind(), ErrorKind::Sandbox);
    assert!(!err.is_retryable());
    assert_eq!(
        err.to_string(),
        "the sandbox's user may not use the path given to files.write: path not allowed; pass a path that user may use (its home is /home/user)"
    );
    let err = sbx.files().list("/proc").await.unwrap_err();
    assert_eq!(err.sandbox_code(), Some(&SandboxCode::PermissionDenied));
    let err = sbx
        .files()
        .rename("/home/user/work", "/etc/work")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the sandbox's user may not use the source or destination path given to files.rename: path not allowed; pass a source or destination path that user may use (its home is /home/user)"
    );
    let err = commands
        .run_with("true", CommandOptions::new().user("root"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the sandbox's user may not use the cwd or user given to commands.run: running as root is not allowed; pass a cwd or user that user may use (its home is /home/user)"
    );
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_says_whether_it_killed_and_a_failed_kill_keeps_the_handle() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let other = builder(&emu)
        .connect(sbx.id(), sbx.access_token().clone())
        .await
        .unwrap();

    // TerminateMicrovm throttled past the retry budget (5 attempts).
    emu.faults().throttle(Operation::TerminateMicrovm, 5, 0);
    let err = sbx.kill().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::RateLimit, "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "kill of sandbox {} failed and its MicroVM may still be running: control plane call TerminateMicrovm was throttled: Rate exceeded; retry after 0 s; this handle stays usable, call kill again",
            sbx.id()
        )
    );
    // The handle is still usable, and the MicroVM still runs.
    assert_eq!(sbx.commands().run("echo up").await.unwrap().stdout, "up\n");

    assert!(sbx.kill().await.unwrap(), "this kill terminated it");
    assert!(!sbx.kill().await.unwrap(), "this handle already killed it");
    assert!(!other.kill().await.unwrap(), "it was already gone");
    let err = other.commands().run("true").await.unwrap_err();
    assert_eq!(err.sandbox_code(), Some(&SandboxCode::Closed));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_timeout_without_a_managed_lifecycle_names_the_builder_call() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let err = sbx.set_timeout(Duration::from_secs(600)).await.unwrap_err();
    assert!(
        matches!(err, SandboxError::LifecycleUnsupported { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "this sandbox cannot set_timeout: it was created without a managed lifecycle; create it with Sandbox::builder().max_lifetime(..) or .on_timeout(..) to make its timeout movable"
    );
    assert!(sbx.kill().await.unwrap());

    let managed = builder(&emu)
        .timeout(Duration::from_secs(300))
        .max_lifetime(Duration::from_secs(900))
        .create()
        .await
        .unwrap();
    managed.set_timeout(Duration::from_secs(600)).await.unwrap();
    assert!(managed.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_403_without_a_re_mint_does_not_claim_one() {
    let emu = emulator().await;
    let mut policy = RetryPolicy::default();
    policy.proxy_remint_retries = 0;
    let sbx = builder(&emu).retry_policy(policy).create().await.unwrap();
    let minted = emu.calls(Operation::CreateMicrovmAuthToken);
    emu.faults().proxy_status(1, 403);
    let err = sbx.commands().run("true").await.unwrap_err();
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
    assert_eq!(
        err.to_string(),
        "the AWS proxy refused the sandbox's token for commands.run, which was not retried with a fresh token (it cannot be replayed, or the retry policy allows no re-mint); retry the call, or check the IAM permission to create MicroVM auth tokens"
    );
    assert_eq!(emu.calls(Operation::CreateMicrovmAuthToken), minted);

    // The default policy re-mints once; two 403s in a row then say so.
    let sbx2 = sandbox(&emu).await;
    emu.faults().proxy_status(2, 403);
    let err = sbx2.commands().run("true").await.unwrap_err();
    assert!(err.to_string().contains("even after a fresh one"), "{err}");
    assert!(sbx.kill().await.unwrap());
    assert!(sbx2.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_aws_profile_says_so() {
    let emu = emulator().await;
    let err = Sandbox::builder()
        .aws(
            AwsOptions::new()
                .endpoint_url(emu.endpoint_url())
                .profile("rayito-no-such-profile"),
        )
        .template(emu.image_arn("rayito-base"))
        .create()
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::Authentication { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the AWS profile rayito-no-such-profile is not in the AWS config or credentials file; fix the profile name (AwsOptions::profile or AWS_PROFILE) or add the profile"
    );
    // The same options with a region and credentials but no profile work.
    let sbx = Sandbox::builder()
        .aws(aws(&emu))
        .template(emu.image_arn("rayito-base"))
        .create()
        .await
        .unwrap();
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_that_cannot_start_fails_create_at_once() {
    let emu = emulator().await;
    let started = std::time::Instant::now();
    let err = builder(&emu)
        .env("PATH", "/nonexistent")
        .ready_timeout(Duration::from_secs(120))
        .create()
        .await
        .unwrap_err();
    assert_eq!(
        err.sandbox_code(),
        Some(&SandboxCode::KernelFailed),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    assert_eq!(
        err.to_string(),
        "the code kernel of the sandbox could not start: python3 was not found on the sandbox's PATH; check the image and the envs given to the builder (a PATH override can hide the interpreter)"
    );
    // Not after the whole ready_timeout.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    // The useless MicroVM was terminated.
    assert_eq!(emu.calls(Operation::TerminateMicrovm), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_stdin_is_sent_in_pieces() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    // Above the 64 MiB gRPC message limit: one message used to fail with
    // OUT_OF_RANGE, read as "the requested output is no longer kept".
    let out = sbx
        .commands()
        .run_with("wc -c", CommandOptions::new().stdin(vec![b'x'; 65 << 20]))
        .await
        .unwrap();
    assert_eq!(out.stdout.trim(), "68157440");
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_endpoint_url_is_an_error_not_a_panic() {
    // An empty one panicked inside the AWS SDK ("URL was unset").
    for url in ["not a url", "", "http://[::1", "ftp://x", "/path"] {
        let err = Sandbox::builder()
            .aws(
                AwsOptions::new()
                    .endpoint_url(url)
                    .region("us-east-1")
                    .static_credentials("AKIDTEST", "secret"),
            )
            .template("arn:aws:lambda:us-east-1:0:microvm-image:x")
            .create()
            .await
            .unwrap_err();
        assert_eq!(argument(&err), Some("endpoint_url"), "{url}: {err:?}");
        assert_eq!(
            err.to_string(),
            "invalid endpoint_url: the endpoint URL must be an absolute http:// or https:// URL with a host; pass the endpoint's URL"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_s3_endpoint_is_refused_before_any_call() {
    for url in ["", "not a url", "ftp://127.0.0.1:1", "/relative"] {
        let err = Sandbox::builder()
            .aws(
                AwsOptions::new()
                    .endpoint_url("http://127.0.0.1:1")
                    .s3_endpoint_url(url)
                    .region("us-east-1")
                    .static_credentials("AKIDTEST", "secret"),
            )
            .template("arn:aws:lambda:us-east-1:0:microvm-image:x")
            .create()
            .await
            .unwrap_err();
        assert_eq!(argument(&err), Some("s3_endpoint_url"), "{url}: {err:?}");
        assert_eq!(
            err.to_string(),
            "invalid s3_endpoint_url: the S3 endpoint URL must be an absolute http:// or https:// URL with a host; pass the S3 endpoint's URL"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_region_is_refused_before_any_call() {
    // The AWS SDK fails such a region while building the request, which
    // used to read as "got no response from the service; retry it".
    let emu = emulator().await;
    for region in ["", "us east 1", "-us-east-1", "us-east-1.", "é", "a\0b"] {
        let err = Sandbox::builder()
            .aws(aws(&emu).region(region))
            .template(emu.image_arn("rayito-base"))
            .create()
            .await
            .unwrap_err();
        assert_eq!(argument(&err), Some("region"), "{region:?}: {err:?}");
        assert!(!err.is_retryable());
        assert_eq!(
            err.to_string(),
            "invalid region: the AWS region must be labels of 1 to 63 letters, digits or '-' separated by '.', not starting with '-' (like us-east-1); pass a region name"
        );
    }
    assert_eq!(emu.calls(Operation::RunMicrovm), 0);
    // A valid region still works.
    let sbx = Sandbox::builder()
        .aws(aws(&emu).region("us-east-1"))
        .template(emu.image_arn("rayito-base"))
        .create()
        .await
        .unwrap();
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_surface_checks_its_arguments_and_takes_any_duration() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    // `timeout + slack` panicked on Duration::MAX in commands().spawn.
    let handle = sbx
        .commands()
        .spawn("echo spawned", CommandOptions::new().timeout(Duration::MAX))
        .await
        .unwrap();
    assert_eq!(handle.wait().await.unwrap().stdout, "spawned\n");
    let cases = [
        (
            sbx.commands()
                .spawn("a\0b", CommandOptions::new())
                .await
                .map(|_| ())
                .unwrap_err(),
            "cmd",
        ),
        (
            sbx.commands()
                .spawn("true", CommandOptions::new().env("A=B", "v"))
                .await
                .map(|_| ())
                .unwrap_err(),
            "envs",
        ),
        (
            sbx.pty()
                .create(
                    rayito::PtySize::new(80, 24),
                    rayito::PtyOptions::new().cwd("a\0b"),
                )
                .await
                .map(|_| ())
                .unwrap_err(),
            "cwd",
        ),
        (
            sbx.files()
                .watch_dir("", false)
                .await
                .map(|_| ())
                .unwrap_err(),
            "path",
        ),
        (
            sbx.create_code_context(CodeContextOptions::new().env("", "v"))
                .await
                .map(|_| ())
                .unwrap_err(),
            "envs",
        ),
        (
            sbx.restart_code_context("").await.unwrap_err(),
            "context_id",
        ),
    ];
    for (err, arg) in &cases {
        assert_eq!(argument(err), Some(*arg), "{err:?}");
    }
    assert!(sbx.kill().await.unwrap());
}

/// A sparse file far larger than memory (issue 22: `truncate -s 8T` then
/// `files().read` aborted the host program with "memory allocation of
/// 8796093022208 bytes failed"): refused with the size, the stream offered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_larger_than_memory_is_refused_with_its_size_never_an_abort() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    // The largest size the filesystem under the sandbox takes.
    let made = sbx
        .commands()
        .run("for s in 8T 4T 1T 256G; do truncate -s $s /home/user/huge 2>/dev/null && echo $s && break; done")
        .await
        .unwrap();
    let size = match made.stdout.trim() {
        "8T" => 8u64 << 40,
        "4T" => 4 << 40,
        "1T" => 1 << 40,
        "256G" => 256 << 30,
        other => panic!("no sparse file could be made: {other:?}"),
    };
    let err = sbx.files().read("/home/user/huge").await.unwrap_err();
    assert_eq!(argument(&err), Some("path"), "{err:?}");
    let grouped = size
        .to_string()
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(
        err.to_string(),
        format!(
            "invalid path: the file is {grouped} bytes, more than this process can hold in memory; read it with files().read_stream"
        )
    );
    // The stream still reads it, chunk by chunk.
    use futures_util::StreamExt as _;
    let mut chunks = sbx.files().read_stream("/home/user/huge").await.unwrap();
    let first = chunks.next().await.unwrap().unwrap();
    assert!(!first.is_empty() && first.iter().all(|b| *b == 0));
    drop(chunks);
    sbx.kill().await.unwrap();
}

/// A cell writing more than the SDK keeps: the tail of its output, and
/// `truncated` says so (issue 22: 256 MiB of stdout grew the SDK's peak RSS
/// by 467 MiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_writing_more_than_the_budget_keeps_the_tail_and_says_truncated() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let cell = "import sys\nblock = 'x' * (1 << 20) + '\\n'\nfor i in range(72):\n    sys.stdout.write(block)\nsys.stdout.write('the end\\n')\nsys.stdout.flush()\n42";
    let execution = sbx
        .run_code_with(
            cell,
            RunCodeOptions::new().timeout(Duration::from_secs(240)),
        )
        .await
        .unwrap();
    assert!(execution.truncated);
    let kept: usize = execution.logs.stdout.iter().map(String::len).sum();
    assert!(kept <= 64 << 20, "{kept}");
    assert!(kept >= 60 << 20, "the tail is kept, not dropped: {kept}");
    assert!(execution.logs.stdout.concat().ends_with("the end\n"));
    assert_eq!(execution.text(), Some("42"));
    // Under the budget nothing is dropped.
    let small = sbx.run_code("print('hi')").await.unwrap();
    assert!(!small.truncated);
    sbx.kill().await.unwrap();
}

/// A state wait given `Duration::MAX` (through `ready_timeout`) waits
/// without a limit instead of overflowing the clock (`Instant + Duration`
/// panicked in `wait_for_state`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_and_resume_with_an_unbounded_ready_timeout_never_panic() {
    let emu = emulator().await;
    let sbx = builder(&emu)
        .ready_timeout(Duration::MAX)
        .create()
        .await
        .unwrap();
    assert!(sbx.pause().await.unwrap());
    sbx.resume().await.unwrap();
    sbx.client()
        .resume_by_id_within(sbx.id(), Duration::MAX)
        .await
        .unwrap();
    assert_eq!(sbx.commands().run("echo ok").await.unwrap().stdout, "ok\n");
    sbx.kill().await.unwrap();
}
