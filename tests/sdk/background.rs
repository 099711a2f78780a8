//! Background commands on the local backend (a real agent behind the
//! emulated proxy): spawn, output as numbered events, disconnect and
//! connect again with every line exactly once, stdin, list, kill, timeout,
//! and the failures each call maps, asserted by variant and exact message.

use crate::sdk_support;

use std::time::Duration;

use futures_util::StreamExt as _;
use rayito::error::TimeoutScope;
use rayito::{CommandEvent, CommandHandle, CommandOptions, ProcessKind, SandboxError};
use sdk_support::{emulator, sandbox};

/// Generous: a loaded 2-core CI machine.
const PATIENCE: Duration = Duration::from_secs(60);

fn assert_send<T: Send>(_: &T) {}

/// Reads stdout events until `enough` says stop; returns the text.
async fn read_until(handle: &mut CommandHandle, enough: impl Fn(&str) -> bool) -> String {
    let mut text = String::new();
    while !enough(&text) {
        let event = tokio::time::timeout(PATIENCE, handle.next())
            .await
            .expect("output in time")
            .expect("the process is still running")
            .expect("an event");
        if let CommandEvent::Stdout { data, .. } = event {
            text.push_str(std::str::from_utf8(&data).unwrap());
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_survives_disconnect_and_connect_with_every_line_exactly_once() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let script = "for i in $(seq 1 60); do echo line-$i; sleep 0.02; done";
    let commands = sbx.commands();
    let spawning = commands.spawn(script, CommandOptions::new().no_timeout());
    assert_send(&spawning);
    let mut handle = spawning.await.expect("spawn");
    assert_send(&handle);
    let pid = handle.pid();
    assert!(pid > 0);

    let mut seqs = Vec::new();
    let mut first = String::new();
    while !first.contains("line-10\n") {
        let event = tokio::time::timeout(PATIENCE, handle.next())
            .await
            .expect("output in time")
            .expect("still running")
            .expect("an event");
        seqs.push(event.seq());
        match event {
            CommandEvent::Stdout { data, .. } => {
                first.push_str(std::str::from_utf8(&data).unwrap())
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let last = handle.disconnect().expect("a sequence number");
    assert_eq!(Some(&last), seqs.last());

    // The process ran on while nobody listened; read on after `last`.
    let again = commands.connect_from(pid, last + 1);
    assert_send(&again);
    let again = again.await.expect("connect_from");
    assert_eq!(again.pid(), pid);
    let rest = tokio::time::timeout(PATIENCE, again.wait())
        .await
        .expect("the loop ends")
        .expect("exit 0");
    assert_eq!(rest.exit_code, 0);

    let all = format!("{first}{}", rest.stdout);
    let expected: String = (1..=60).map(|i| format!("line-{i}\n")).collect();
    assert_eq!(all, expected, "every line exactly once, in order");

    // An ended process replays its output from the start within 30 s.
    let replay = sbx.commands().connect_from(pid, 1).await.expect("replay");
    let replayed = replay.wait().await.expect("exit 0");
    assert_eq!(replayed.stdout, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_kill_and_connect_to_new_output() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let handle = sbx
        .commands()
        .spawn(
            "echo started; sleep 600",
            CommandOptions::new().no_timeout().env("MARK", "x"),
        )
        .await
        .expect("spawn");
    let pid = handle.pid();

    let commands = sbx.commands();
    let listing = commands.list();
    assert_send(&listing);
    let listed = listing.await.expect("list");
    let info = listed.iter().find(|p| p.pid == pid).expect("listed");
    assert_eq!(info.cmd, "/bin/bash");
    assert_eq!(info.args, vec!["-l", "-c", "echo started; sleep 600"]);
    // Names only: a listing never carries an environment value.
    assert_eq!(info.envs.get("MARK").map(String::as_str), Some(""));
    assert_eq!(info.kind, ProcessKind::Command);
    assert!(!format!("{info:?}").contains("sleep 600"), "{info:?}");

    // A second subscriber with only new output: it sees the end.
    let watcher = sbx.commands().connect(pid).await.expect("connect");
    assert_eq!(watcher.pid(), pid);

    let killing = commands.kill(pid);
    assert_send(&killing);
    assert!(killing.await.expect("kill"));
    for waited in [handle.wait().await, watcher.wait().await] {
        match waited.unwrap_err() {
            SandboxError::CommandExit { exit_code, .. } => assert_eq!(exit_code, 137),
            other => panic!("{other:?}"),
        }
    }
    assert!(!sbx.commands().kill(pid).await.expect("second kill"));
    let listed = sbx.commands().list().await.expect("list");
    assert!(listed.iter().all(|p| p.pid != pid));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_is_sent_and_closed_and_its_failures_are_mapped() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let cat = sbx
        .commands()
        .spawn("cat", CommandOptions::new().open_stdin())
        .await
        .expect("spawn");
    let sending = cat.send_stdin("hello ");
    assert_send(&sending);
    sending.await.expect("send");
    cat.send_stdin(b"world\n".to_vec()).await.expect("send");
    cat.close_stdin().await.expect("close");
    let pid = cat.pid();
    let out = cat.wait().await.expect("cat exits 0");
    assert_eq!(out.stdout, "hello world\n");

    // Stdin given up front: written, then closed.
    let fed = sbx
        .commands()
        .spawn("tr a-z A-Z", CommandOptions::new().stdin("shout\n"))
        .await
        .expect("spawn");
    assert_eq!(fed.wait().await.unwrap().stdout, "SHOUT\n");

    // Stdin not opened: the agent refuses.
    let mut sleeper = sbx
        .commands()
        .spawn("echo up; sleep 600", CommandOptions::new().no_timeout())
        .await
        .expect("spawn");
    read_until(&mut sleeper, |t| t.contains("up\n")).await;
    let err = sleeper.send_stdin("x").await.unwrap_err();
    assert!(
        matches!(err, SandboxError::InvalidArgument { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the agent refused an argument of commands.send_stdin: stdin is not open; fix the value before retrying"
    );
    assert!(sleeper.kill().await.unwrap());

    // The process has ended: not found.
    let err = sbx
        .commands()
        .spawn("true", CommandOptions::new())
        .await
        .unwrap();
    let ended_pid = err.pid();
    err.wait().await.unwrap();
    let handle = sbx.commands().connect_from(ended_pid, 1).await.unwrap();
    let err = handle.close_stdin().await.unwrap_err();
    assert!(matches!(err, SandboxError::NotFound { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "not found (commands.close_stdin): process not found; the process, context or execution no longer exists"
    );
    let _ = pid;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawned_command_reports_its_timeout_from_wait() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let handle = sbx
        .commands()
        .spawn(
            "sleep 600",
            CommandOptions::new().timeout(Duration::from_secs(1)),
        )
        .await
        .expect("spawn");
    let waiting = handle.wait();
    assert_send(&waiting);
    let err = tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("the agent stops it")
        .unwrap_err();
    assert!(
        matches!(
            err,
            SandboxError::Timeout {
                scope: TimeoutScope::Command,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "command sleep reached its timeout and was stopped; raise the command timeout, or pass 0 for no limit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_failures_are_not_found() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;

    let err = sbx.commands().connect(999_999).await.unwrap_err();
    assert!(matches!(err, SandboxError::NotFound { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "not found (commands.connect): process not found; the process, context or execution no longer exists"
    );

    // More than the agent's 1 MiB ring: the first chunks are gone.
    let mut chatty = sbx
        .commands()
        .spawn(
            "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo done; sleep 600",
            CommandOptions::new().no_timeout(),
        )
        .await
        .expect("spawn");
    read_until(&mut chatty, |t| t.ends_with("done\n")).await;
    let err = sbx
        .commands()
        .connect_from(chatty.pid(), 1)
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::NotFound { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the requested output is no longer kept by the agent (commands.connect); connect again from sequence 0"
    );
    assert!(chatty.kill().await.unwrap());
}

/// Stdin given to `spawn` is part of the command, as for `run`: more than a
/// pipe holds, to a process that exits without reading it, still starts
/// the process, and `wait()` reports the process's own exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawn_with_stdin_the_process_never_reads_ends_with_its_own_exit() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let handle = sbx
        .commands()
        .spawn(
            "exit 3",
            CommandOptions::new().stdin(vec![b'x'; 3 * 1024 * 1024]),
        )
        .await
        .expect("the process started; unread stdin is not an error");
    let err = handle.wait().await.expect_err("exit 3");
    assert!(
        matches!(err, SandboxError::CommandExit { exit_code: 3, .. }),
        "{err:?}"
    );
    assert!(sbx.kill().await.unwrap());
}

/// `Commands::signal`, `send_stdin` and `close_stdin` act on a command by
/// its pid while its handle is read elsewhere: SIGTERM ends it with 143
/// (a command that traps SIGINT first says so), stdin sent by pid reaches
/// it, a signal out of 1..=64 is refused naming `signal` before any I/O,
/// and a process that has ended takes no signal (`false`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signal_and_stdin_by_pid() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let commands = sbx.commands();
    let mut handle = commands
        .spawn(
            "trap 'echo got-int' INT; echo ready; read line; echo \"read $line\"; while :; do sleep 0.1; done",
            CommandOptions::new().no_timeout().open_stdin(),
        )
        .await
        .expect("spawn");
    let pid = handle.pid();
    read_until(&mut handle, |t| t.contains("ready")).await;
    let sending = commands.send_stdin(pid, b"by-pid\n".to_vec());
    assert_send(&sending);
    sending.await.expect("send_stdin");
    read_until(&mut handle, |t| t.contains("read by-pid")).await;
    let closing = commands.close_stdin(pid);
    assert_send(&closing);
    closing.await.expect("close_stdin");
    let signalling = commands.signal(pid, 2);
    assert_send(&signalling);
    assert!(signalling.await.expect("SIGINT"));
    read_until(&mut handle, |t| t.contains("got-int")).await;
    assert!(commands.signal(pid, 15).await.expect("SIGTERM"));
    match handle.wait().await.unwrap_err() {
        SandboxError::CommandExit { exit_code, .. } => assert_eq!(exit_code, 143),
        other => panic!("{other:?}"),
    }
    assert!(!commands.signal(pid, 15).await.expect("no such process"));
    for bad in [0, 65, -1] {
        let err = commands.signal(pid, bad).await.unwrap_err();
        assert!(
            matches!(&err, SandboxError::InvalidArgument { .. }),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "invalid signal: must be between 1 and 64");
    }
}

/// A tag comes back with the process in `list()`, and `list_tagged` finds
/// exactly the processes that carry it; a bad tag is refused before any
/// call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_comes_back_in_listings_and_finds_its_processes() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let mut tagged = Vec::new();
    for _ in 0..2 {
        let handle = sbx
            .commands()
            .spawn(
                "sleep 600",
                CommandOptions::new().no_timeout().tag("worker"),
            )
            .await
            .expect("spawn");
        tagged.push(handle.pid());
    }
    let other = sbx
        .commands()
        .spawn("sleep 600", CommandOptions::new().no_timeout())
        .await
        .expect("spawn");

    let commands = sbx.commands();
    let listing = commands.list_tagged("worker");
    assert_send(&listing);
    let mut found: Vec<u32> = listing.await.unwrap().iter().map(|p| p.pid).collect();
    found.sort_unstable();
    tagged.sort_unstable();
    assert_eq!(found, tagged);
    let all = sbx.commands().list().await.unwrap();
    let untagged = all.iter().find(|p| p.pid == other.pid()).expect("listed");
    assert_eq!(untagged.tag, None);
    assert!(
        all.iter()
            .filter(|p| tagged.contains(&p.pid))
            .all(|p| p.tag.as_deref() == Some("worker"))
    );
    assert!(
        sbx.commands()
            .list_tagged("nobody")
            .await
            .unwrap()
            .is_empty()
    );

    for bad in [String::new(), "x".repeat(257), "a\nb".to_owned()] {
        let err = sbx
            .commands()
            .spawn("true", CommandOptions::new().tag(bad))
            .await
            .expect_err("a bad tag");
        assert_eq!(
            err.to_string(),
            "invalid tag: a tag is 1 to 256 characters, none of them a control character"
        );
    }
    assert!(sbx.kill().await.unwrap());
}
