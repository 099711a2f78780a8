//! `sandbox.commands()` through the SDK on the local backend: stdin given
//! with a command, the options (cwd, user, env), output decoding as the
//! callbacks see it.

use crate::sdk_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rayito::{CommandOptions, SandboxError};
use rayito_emulator::{Emulator, EmulatorConfig};
use sha2::{Digest as _, Sha256};

/// A command that exits before reading its stdin succeeds with its own
/// exit code (the stdin was sent after it ended).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_for_a_command_that_never_reads_it() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;

    let done = sbx
        .commands()
        .run_with("true", CommandOptions::new().stdin("hello\n"))
        .await
        .expect("`true` with stdin succeeds");
    assert_eq!(done.exit_code, 0);
    assert_eq!(done.stdout, "");

    // More stdin than a pipe holds, to a command that never reads it.
    let done = sbx
        .commands()
        .run_with(
            "sleep 0.1; echo slept",
            CommandOptions::new().stdin(vec![b'a'; 1 << 20]),
        )
        .await
        .expect("`sleep` with 1 MiB of stdin succeeds");
    assert_eq!(done.stdout, "slept\n");

    // Its own exit code, not a stdin error.
    let err = sbx
        .commands()
        .run_with("exit 3", CommandOptions::new().stdin(vec![b'b'; 1 << 20]))
        .await
        .expect_err("exit 3 fails");
    match err {
        SandboxError::CommandExit { exit_code, .. } => assert_eq!(exit_code, 3),
        other => panic!("expected CommandExit, got {other:?}"),
    }

    // A command that closes its stdin, then goes on.
    let done = sbx
        .commands()
        .run_with(
            "exec 0<&-; sleep 0.2; echo closed",
            CommandOptions::new().stdin(vec![b'c'; 4 << 20]),
        )
        .await
        .expect("a command that closes its stdin succeeds");
    assert_eq!(done.stdout, "closed\n");

    // A command that reads part of it.
    let done = sbx
        .commands()
        .run_with(
            "head -c 5",
            CommandOptions::new().stdin(vec![b'd'; 2 << 20]),
        )
        .await
        .expect("head reads five bytes");
    assert_eq!(done.stdout, "ddddd");
    sbx.kill().await.unwrap();
}

/// Stdin larger than a pipe is streamed while the output is read: a command
/// that writes a lot before it reads does not deadlock, and every byte
/// arrives in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_stdin_is_streamed_in_order() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;

    let data: Vec<u8> = (0..3 * 1024 * 1024 + 7)
        .map(|i: u32| (i % 251) as u8)
        .collect();
    let expected = format!("{:x}", Sha256::digest(&data));
    let done = sbx
        .commands()
        .run_with(
            // 2 MiB of output before stdin is read.
            "head -c 2097152 /dev/zero | wc -c; sha256sum | cut -d' ' -f1",
            CommandOptions::new()
                .stdin(data)
                .timeout(Duration::from_secs(300)),
        )
        .await
        .expect("output first, then stdin");
    assert_eq!(done.stdout, format!("2097152\n{expected}\n"));

    // An empty stdin is an immediate end of file.
    let done = sbx
        .commands()
        .run_with("wc -c", CommandOptions::new().stdin(Vec::new()))
        .await
        .unwrap();
    assert_eq!(done.stdout.trim(), "0");
    sbx.kill().await.unwrap();
}

/// Stdin above the 64 MiB gRPC message limit is sent whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_over_the_message_limit() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;

    let len = 64 * 1024 * 1024 + 3;
    let done = sbx
        .commands()
        .run_with(
            "wc -c",
            CommandOptions::new()
                .stdin(vec![b'x'; len])
                .timeout(Duration::from_secs(600)),
        )
        .await
        .expect("65 MiB of stdin");
    assert_eq!(done.stdout.trim(), len.to_string());
    sbx.kill().await.unwrap();
}

/// cwd, env and user reach the command; a bad cwd and an unknown user are
/// refused with the agent's reasons.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_options_reach_the_command() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;

    sbx.files().make_dir("/home/user/work").await.unwrap();
    let done = sbx
        .commands()
        .run_with(
            "pwd; printf '%s|%s\\n' \"$ONE\" \"$TWO\"; whoami",
            CommandOptions::new()
                .cwd("/home/user/work")
                .env("ONE", "first value")
                .env("TWO", "é")
                .user("user"),
        )
        .await
        .unwrap();
    assert_eq!(done.stdout, "/home/user/work\nfirst value|é\nuser\n");

    // Without options: the sandbox's working directory, and no such env.
    let done = sbx
        .commands()
        .run("pwd; echo \"[${ONE-unset}]\"")
        .await
        .unwrap();
    assert_eq!(done.stdout, "/home/user\n[unset]\n");

    let err = sbx
        .commands()
        .run_with("pwd", CommandOptions::new().cwd("/home/user/missing"))
        .await
        .expect_err("a missing cwd is refused");
    assert!(
        matches!(err, SandboxError::InvalidArgument { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.meta().server_message(),
        Some("invalid working directory")
    );

    let err = sbx
        .commands()
        .run_with("true", CommandOptions::new().user("nobody-here"))
        .await
        .expect_err("an unknown user is refused");
    assert!(
        matches!(err, SandboxError::InvalidArgument { .. }),
        "{err:?}"
    );
    assert_eq!(err.meta().server_message(), Some("unknown user"));
    sbx.kill().await.unwrap();
}

/// A command is a login shell unless asked otherwise, for commands run to
/// their end and background ones alike, and the process list shows how it
/// was started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_is_a_login_shell_unless_asked_otherwise() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    let probe = "shopt -q login_shell && echo login || echo plain";
    let login = sbx.commands().run(probe).await.unwrap();
    assert_eq!(login.stdout, "login\n");
    let plain = sbx
        .commands()
        .run_with(probe, CommandOptions::new().login_shell(false))
        .await
        .unwrap();
    assert_eq!(plain.stdout, "plain\n");
    let handle = sbx
        .commands()
        .spawn("sleep 30", CommandOptions::new().login_shell(false))
        .await
        .unwrap();
    let listed = sbx.commands().list().await.unwrap();
    let info = listed
        .iter()
        .find(|p| p.pid == handle.pid())
        .expect("the background command is listed");
    assert_eq!(info.cmd, "/bin/bash");
    assert_eq!(info.args, ["-c", "sleep 30"]);
    assert!(handle.kill().await.unwrap());
    sbx.kill().await.unwrap();
}

/// A multi-byte character split across output chunks reaches `on_stdout`
/// whole: no callback sees a replacement character.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn split_utf8_reaches_on_stdout_whole() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;

    let pieces = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = pieces.clone();
    // One byte per write, with a pause, so that chunks end inside
    // characters (each is 2, 3 or 4 bytes).
    let script = "import os, sys, time\n\
                  for b in 'é€😀'.encode() * 3:\n    \
                  os.write(1, bytes([b])); time.sleep(0.02)\n";
    let done = sbx
        .commands()
        .run_with(
            &format!("python3 -c \"{script}\""),
            CommandOptions::new().on_stdout(move |text| seen.lock().unwrap().push(text.to_owned())),
        )
        .await
        .unwrap();
    let pieces = pieces.lock().unwrap().clone();
    assert_eq!(done.stdout, "é€😀".repeat(3));
    assert_eq!(pieces.concat(), done.stdout);
    assert!(pieces.iter().all(|p| !p.contains('\u{fffd}')), "{pieces:?}");
    // The bytes did arrive in several chunks (else this test proves nothing).
    assert!(pieces.len() > 3, "{pieces:?}");
    sbx.kill().await.unwrap();
}

/// A command that ignores SIGTERM at its timeout is killed 5 s later, and
/// the SDK reports the agent's `Timeout { Command }`, not its own stream
/// deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_ignores_sigterm_is_a_command_timeout() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    let err = sbx
        .commands()
        .run_with(
            "trap '' TERM; echo trapped; sleep 600",
            CommandOptions::new().timeout(Duration::from_secs(2)),
        )
        .await
        .expect_err("the timeout ends it");
    assert!(
        matches!(
            err,
            SandboxError::Timeout {
                scope: rayito::error::TimeoutScope::Command,
                ..
            }
        ),
        "{err:?}"
    );
    sbx.kill().await.unwrap();
}

/// A cell past `RunCodeOptions::timeout` is interrupted and reports
/// `ExecutionTimeout`; the kernel keeps its state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cell_past_its_timeout_is_interrupted() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    sbx.run_code("kept = 1").await.unwrap();
    let execution = sbx
        .run_code_with(
            "import time\ntime.sleep(600)",
            rayito::RunCodeOptions::new().timeout(Duration::from_secs(1)),
        )
        .await
        .expect("the interrupted cell is an execution with an error");
    let error = execution.error.expect("ExecutionTimeout");
    assert_eq!(error.name, "ExecutionTimeout");
    assert_eq!(
        error.value,
        "execution did not finish within its timeout of 1,000 ms"
    );
    assert_eq!(sbx.run_code("kept + 1").await.unwrap().text(), Some("2"));
    sbx.kill().await.unwrap();
}

/// Output above 64 MiB keeps its tail and says it was cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_above_64_mib_keeps_the_tail() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    let done = sbx
        .commands()
        .run_with(
            "echo HEAD; head -c 68157440 /dev/zero | tr '\\0' a; echo TAIL",
            CommandOptions::new().timeout(Duration::from_secs(600)),
        )
        .await
        .expect("a large output");
    assert!(done.truncated);
    assert_eq!(done.stdout.len(), 64 * 1024 * 1024);
    assert!(done.stdout.ends_with("aaaaTAIL\n"));
    assert!(!done.stdout.contains("HEAD"));
    sbx.kill().await.unwrap();
}

/// `max_output_bytes` bounds what the result keeps of each stream (the
/// newest bytes, `truncated` set); 0 keeps nothing; callbacks see all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_output_bytes_keeps_the_newest_bytes_and_callbacks_see_all() {
    let emulator = sdk_support::emulator().await;
    let sbx = sdk_support::sandbox(&emulator).await;
    let done = sbx
        .commands()
        .run_with(
            "printf abcdefghij; printf XYZ >&2",
            CommandOptions::new().max_output_bytes(4),
        )
        .await
        .unwrap();
    assert_eq!(done.stdout, "ghij");
    assert_eq!(done.stderr, "XYZ");
    assert!(done.truncated);

    let seen = Arc::new(Mutex::new(String::new()));
    let sink = seen.clone();
    let done = sbx
        .commands()
        .run_with(
            "printf 'all of it'",
            CommandOptions::new()
                .max_output_bytes(0)
                .on_stdout(move |s: &str| sink.lock().unwrap().push_str(s)),
        )
        .await
        .unwrap();
    assert_eq!(done.stdout, "");
    assert!(done.truncated);
    assert_eq!(*seen.lock().unwrap(), "all of it");

    let done = sbx
        .commands()
        .run_with("printf abcd", CommandOptions::new().max_output_bytes(4))
        .await
        .unwrap();
    assert_eq!((done.stdout.as_str(), done.truncated), ("abcd", false));
    sbx.kill().await.unwrap();
}

/// A subscriber that stops reading for longer than the agent's grace (30 s
/// by default, 1 s here) loses output: the command ends with
/// `Sandbox { OutputTruncated }`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_reader_gets_output_truncated() {
    let emulator = Emulator::start(EmulatorConfig {
        agent_slow_subscriber_grace: Duration::from_secs(1),
        ..EmulatorConfig::default()
    })
    .await
    .unwrap();
    let sbx = sdk_support::sandbox(&emulator).await;
    let mut stalled = false;
    let outcome = sbx
        .commands()
        .run_with(
            "head -c 134217728 /dev/zero",
            CommandOptions::new()
                .timeout(Duration::from_secs(600))
                .on_stdout(move |_| {
                    if !stalled {
                        stalled = true;
                        // The slowness under test: past the agent's grace.
                        std::thread::sleep(Duration::from_secs(4));
                    }
                }),
        )
        .await;
    // Not the result's Debug: it holds the output, up to 128 MiB of it.
    let Err(err) = outcome else {
        panic!("the command ended without losing output");
    };
    assert_eq!(
        err.sandbox_code(),
        Some(&rayito::error::SandboxCode::OutputTruncated),
        "{err:?}"
    );
    sbx.kill().await.unwrap();
}
