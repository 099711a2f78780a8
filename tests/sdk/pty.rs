//! Terminals on the local backend (a real agent behind the emulated proxy):
//! a shell on a pty echoes what is typed, sees a resize, survives a
//! disconnect, is killed; the failures by variant and exact message.

use crate::sdk_support;

use std::time::Duration;

use futures_util::StreamExt as _;
use rayito::{ProcessKind, PtyHandle, PtyOptions, PtySize, SandboxError};
use sdk_support::{emulator, sandbox};

/// Generous: a loaded 2-core CI machine.
const PATIENCE: Duration = Duration::from_secs(60);

fn assert_send<T: Send>(_: &T) {}

/// Reads output until `needle` shows; returns everything read.
async fn read_until(pty: &mut PtyHandle, needle: &str) -> String {
    let mut seen = String::new();
    while !seen.contains(needle) {
        let chunk = tokio::time::timeout(PATIENCE, pty.next())
            .await
            .unwrap_or_else(|_| panic!("{needle:?} in time; saw {seen:?}"))
            .expect("the terminal is open")
            .expect("output");
        seen.push_str(&String::from_utf8_lossy(&chunk.data));
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shell_session_with_input_resize_reconnect_and_kill() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;

    let ptys = sbx.pty();
    let creating = ptys.create(PtySize::new(80, 24), PtyOptions::new().env("PS1", "$ "));
    assert_send(&creating);
    let mut pty = creating.await.expect("create");
    assert_send(&pty);
    assert!(pty.pid() > 0);

    // Listed with the commands, as a terminal.
    let listed = sbx.commands().list().await.expect("list");
    let info = listed.iter().find(|p| p.pid == pty.pid()).expect("listed");
    assert_eq!(info.kind, ProcessKind::Pty);
    assert_eq!(info.cmd, "/bin/bash");
    assert_eq!(info.args, ["-i", "-l"]);

    // What is typed is echoed by the terminal and run by the shell; the
    // marker is split so that only the command's output has it whole.
    pty.send_input("echo hello-$((40 + 2))\n")
        .await
        .expect("input");
    read_until(&mut pty, "hello-42").await;

    // The size is the terminal's: stty asks the pty.
    pty.send_input("stty size\n").await.unwrap();
    read_until(&mut pty, "24 80").await;
    let resizing = pty.resize(PtySize::new(120, 40));
    assert_send(&resizing);
    resizing.await.expect("resize");
    pty.send_input("stty size; echo size-$((1 + 1))\n")
        .await
        .unwrap();
    let seen = read_until(&mut pty, "size-2").await;
    assert!(seen.contains("40 120"), "{seen:?}");

    // It is a terminal with job control: the shell leads its session.
    pty.send_input("tty; echo tty-$((2 + 1))\n").await.unwrap();
    let seen = read_until(&mut pty, "tty-3").await;
    assert!(seen.contains("/dev/pts/"), "{seen:?}");

    // Disconnect, type, reconnect after the last seen chunk: the output
    // typed meanwhile is there.
    let pid = pty.pid();
    let last = pty.disconnect().expect("a sequence number");
    sbx.pty()
        .send_input(pid, "echo away-$((3 + 4))\n")
        .await
        .unwrap();
    let mut again = sbx
        .pty()
        .connect_from(pid, last + 1)
        .await
        .expect("connect");
    assert_eq!(again.pid(), pid);
    read_until(&mut again, "away-7").await;

    let killing = again.kill();
    assert_send(&killing);
    assert!(killing.await.expect("kill"));
    let exit = tokio::time::timeout(PATIENCE, again.wait())
        .await
        .expect("it ends")
        .expect("an exit");
    assert_eq!(exit.exit_code, 137);
    assert_eq!(exit.signal, Some(9));
    assert!(!sbx.pty().kill(pid).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_code_timeout_and_failures() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;

    let pty = sbx
        .pty()
        .create(PtySize::new(80, 24), PtyOptions::new())
        .await
        .unwrap();
    pty.send_input("exit 3\n").await.unwrap();
    let exit = tokio::time::timeout(PATIENCE, pty.wait())
        .await
        .expect("it ends")
        .unwrap();
    assert_eq!((exit.exit_code, exit.signal), (3, None));

    let pty = sbx
        .pty()
        .create(
            PtySize::new(80, 24),
            PtyOptions::new().timeout(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    let pid = pty.pid();
    let err = tokio::time::timeout(PATIENCE, pty.wait())
        .await
        .expect("it ends")
        .unwrap_err();
    assert!(matches!(err, SandboxError::Timeout { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "command (shell) reached its timeout and was stopped; raise the command timeout, or pass 0 for no limit"
    );

    // The session ended: input and resize are not found.
    let err = sbx.pty().send_input(pid, "x").await.unwrap_err();
    assert!(matches!(err, SandboxError::NotFound { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "not found (pty.send_input): pty not found; the process, context or execution no longer exists"
    );
    let err = sbx
        .pty()
        .resize(pid, PtySize::new(10, 10))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "not found (pty.resize): pty not found; the process, context or execution no longer exists"
    );
    let err = sbx.pty().connect(999_999).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "not found (pty.connect): pty not found; the process, context or execution no longer exists"
    );

    let err = sbx
        .pty()
        .create(PtySize::new(0, 24), PtyOptions::new())
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::InvalidArgument { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the agent refused an argument of pty.create: invalid pty size; fix the value before retrying"
    );
    let err = sbx
        .pty()
        .create(PtySize::new(80, 24), PtyOptions::new().user("root"))
        .await
        .unwrap_err();
    // The sandbox's user was refused, not the caller's credentials.
    assert_eq!(
        err.sandbox_code(),
        Some(&rayito::error::SandboxCode::PermissionDenied),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the sandbox's user may not use the cwd or user given to pty.create: running as root is not allowed; pass a cwd or user that user may use (its home is /home/user)"
    );
}
