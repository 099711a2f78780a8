//! In-stream agent failures: every `StreamError` code and every `EndEvent`
//! status (docs/errors.md, "In-stream `StreamError.code`"; docs/errors.md,
//! "Process `EndEvent.status`"), through the `test-util`
//! entry points, each with variant, fields and the
//! exact message.

use rayito::error::{CommandExitStatus, ErrorKind, SandboxCode, SandboxError, TimeoutScope};
use rayito::test_util::{
    Call as CallContext, CommandOutput, EndEvent, EndOutcome, end_event as from_end_event,
    stream_error as from_stream_error,
};

const RUN: CallContext = CallContext::new("commands.run");
const WATCH: CallContext = CallContext::filesystem("files.watch_dir");

fn output() -> CommandOutput {
    CommandOutput::new("out", "err", true)
}

fn end(status: &str, exit_code: i32) -> EndEvent {
    EndEvent::new(status, exit_code)
}

#[test]
fn stream_error_codes() {
    let cases: Vec<(&str, &str, CallContext, ErrorKind, &str)> = vec![
        (
            "not_found",
            "watched root deleted",
            WATCH,
            ErrorKind::FileNotFound,
            "file not found (files.watch_dir): watched root deleted; check the path",
        ),
        (
            "not_found",
            "",
            RUN,
            ErrorKind::NotFound,
            "not found (commands.run); the process, context or execution no longer exists",
        ),
        (
            "permission_denied",
            "",
            RUN,
            ErrorKind::Authentication,
            "the agent denied permission for commands.run; use an allowed user or path",
        ),
        (
            "deadline_exceeded",
            "deadline",
            RUN,
            ErrorKind::Timeout,
            "the call commands.run did not finish; raise request_timeout or retry",
        ),
        (
            "sandbox_timeout",
            "sandbox_timeout",
            RUN,
            ErrorKind::Timeout,
            "the sandbox reached its timeout (commands.run); extend it with set_timeout before it expires, or create a new sandbox",
        ),
        (
            "invalid_argument",
            "bad",
            RUN,
            ErrorKind::InvalidArgument,
            "the agent refused an argument of commands.run: bad; fix the value before retrying",
        ),
        (
            "failed_precondition",
            "stdin closed",
            RUN,
            ErrorKind::InvalidArgument,
            "the agent refused an argument of commands.run: stdin closed; fix the value before retrying",
        ),
        (
            "unimplemented",
            "",
            RUN,
            ErrorKind::Unimplemented,
            "feature commands.run is not available: the agent in this image does not implement it; publish an image with a newer agent",
        ),
        (
            "unimplemented",
            "language typescript needs node, which is not installed on this host",
            RUN,
            ErrorKind::Unimplemented,
            "feature commands.run is not available: language typescript needs node, which is not installed on this host",
        ),
        (
            "resource_exhausted",
            "disk_reserve",
            RUN,
            ErrorKind::DiskFull,
            "the sandbox has less than 256 MiB of free disk (commands.run); free space or use a larger disk",
        ),
        (
            "resource_exhausted",
            "disk_full",
            RUN,
            ErrorKind::DiskFull,
            "the sandbox disk is full (commands.run); free space or use a larger disk",
        ),
        (
            "resource_exhausted",
            "disk_full: ENOSPC",
            RUN,
            ErrorKind::RateLimit,
            "the agent refused commands.run at one of its limits: disk_full: ENOSPC; wait for running work to finish, then retry",
        ),
        (
            "suspending",
            "suspending",
            RUN,
            ErrorKind::SandboxState,
            "the sandbox is suspending (commands.run); retry once it has resumed",
        ),
        (
            "output_truncated",
            "",
            RUN,
            ErrorKind::Sandbox,
            "the agent stopped sending the output of commands.run because it was not read fast enough; the process keeps running, reconnect to it to read on",
        ),
        (
            "weird_new_code",
            "details",
            RUN,
            ErrorKind::Sandbox,
            "the agent ended commands.run with error code weird_new_code: details; the SDK does not retry this failure",
        ),
        (
            "bad code\n<x>",
            "",
            RUN,
            ErrorKind::Sandbox,
            "the agent ended commands.run with error code bad?code??x?; the SDK does not retry this failure",
        ),
    ];
    for (code, message, call, kind, text) in cases {
        let e = from_stream_error(code, message, call);
        assert_eq!(e.kind(), kind, "{code} {message}");
        assert_eq!(e.to_string(), text, "{code} {message}");
        assert_eq!(e.meta().attempts(), 1);
        assert_eq!(e.meta().grpc_code(), None);
    }
}

#[test]
fn stream_error_fields() {
    let e = from_stream_error("sandbox_timeout", "sandbox_timeout", RUN);
    assert!(matches!(
        e,
        SandboxError::Timeout {
            scope: TimeoutScope::Sandbox,
            ..
        }
    ));
    assert_eq!(e.meta().reason(), Some("sandbox_timeout"));
    assert_eq!(e.meta().server_message(), Some("sandbox_timeout"));
    let e = from_stream_error("output_truncated", "", RUN);
    assert_eq!(e.sandbox_code(), Some(&SandboxCode::OutputTruncated));
    assert!(e.classify().retry_with_larger_limits);
    let e = from_stream_error("weird", "x", RUN);
    assert!(matches!(e, SandboxError::Sandbox { code: None, .. }));
    assert_eq!(e.meta().reason(), Some("weird"));
    let e = from_stream_error("cancelled", "", RUN.cancelled_by_caller());
    assert_eq!(e.sandbox_code(), Some(&SandboxCode::Cancelled));
    let e = from_stream_error("cancelled", "", RUN);
    assert!(matches!(e, SandboxError::Sandbox { code: None, .. }));
}

#[test]
fn exit_zero_is_success_and_hands_the_output_back() {
    let out = from_end_event(end("exited", 0), output(), "python3 -c 'print(1)'");
    assert_eq!(out, Ok(EndOutcome::Exited));
}

#[test]
fn suspending_is_not_final() {
    let mut e = end("suspending", 0);
    e = e.error("suspending".to_owned(), "suspending".to_owned());
    let out = from_end_event(e, output(), "sleep 100");
    assert_eq!(out, Ok(EndOutcome::Suspended));
}

#[test]
fn non_zero_exit_is_command_exit_with_output() {
    let err = from_end_event(end("exited", 2), output(), "FOO=secret ls /nope").unwrap_err();
    match &err {
        SandboxError::CommandExit {
            exit_code,
            stdout,
            stderr,
            status,
            truncated,
            ..
        } => {
            assert_eq!(*exit_code, 2);
            assert_eq!(stdout, "out");
            assert_eq!(stderr, "err");
            assert_eq!(status, &CommandExitStatus::Exited);
            assert!(*truncated);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "command ls exited with code 2; its stdout and stderr are in the error"
    );
    assert!(!format!("{err:?}").contains("secret"));
    assert!(!err.is_retryable());
}

#[test]
fn signaled_is_command_exit() {
    let mut e = end("signaled", 137);
    e = e.signal(9);
    let err = from_end_event(e, output(), "./run.sh").unwrap_err();
    assert!(matches!(
        err,
        SandboxError::CommandExit {
            exit_code: 137,
            status: CommandExitStatus::Signaled,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "command ./run.sh was killed by signal 9 (exit code 137); its stdout and stderr are in the error"
    );
    let err = from_end_event(end("signaled", 143), output(), "x").unwrap_err();
    assert_eq!(
        err.to_string(),
        "command x was killed by signal 15 (exit code 143); its stdout and stderr are in the error"
    );
}

/// The agent's OOM kill at the sandbox's memory limit: still
/// `CommandExit { Signaled }`, with a message that says which limit.
#[test]
fn a_kill_at_the_memory_limit_says_so() {
    let e = end("signaled", 137)
        .signal(9)
        .error("resource_exhausted", "the sandbox reached its memory limit");
    let err = from_end_event(e, output(), "python3 big.py").unwrap_err();
    assert!(matches!(
        err,
        SandboxError::CommandExit {
            exit_code: 137,
            status: CommandExitStatus::Signaled,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "command python3 was killed by signal 9 at the sandbox's memory limit (exit code 137); use less memory or give the sandbox a higher limit; its stdout and stderr are in the error"
    );
}

/// SIGXCPU: the sandbox's `cpu_time_limit` (RLIMIT_CPU) ended it.
#[test]
fn a_kill_at_the_cpu_time_limit_says_so() {
    let e = end("signaled", 152).signal(24);
    let err = from_end_event(e, output(), "python3 spin.py").unwrap_err();
    assert!(matches!(
        err,
        SandboxError::CommandExit {
            exit_code: 152,
            status: CommandExitStatus::Signaled,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "command python3 was killed by signal 24 at its CPU time limit (exit code 152); give the sandbox a higher cpu_time_limit or do less work per command; its stdout and stderr are in the error"
    );
}

#[test]
fn timeout_is_a_command_timeout() {
    let e = EndEvent::new("timeout", 137)
        .signal(9)
        .error("deadline_exceeded", "deadline");
    let err = from_end_event(e, output(), "sleep 10").unwrap_err();
    assert!(matches!(
        err,
        SandboxError::Timeout {
            scope: TimeoutScope::Command,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "command sleep reached its timeout and was stopped; raise the command timeout, or pass 0 for no limit"
    );
    assert_eq!(err.meta().reason(), Some("timeout"));
}

#[test]
fn sandbox_timeout_is_terminal() {
    let mut e = end("sandbox_timeout", 0);
    e = e.error("sandbox_timeout".to_owned(), "sandbox_timeout".to_owned());
    let err = from_end_event(e, output(), "sleep 10").unwrap_err();
    assert!(matches!(
        err,
        SandboxError::Timeout {
            scope: TimeoutScope::Sandbox,
            ..
        }
    ));
    assert_eq!(
        err.to_string(),
        "the sandbox reached its timeout (command sleep); extend it with set_timeout before it expires, or create a new sandbox"
    );
}

#[test]
fn output_truncated_is_a_sandbox_error() {
    let err = from_end_event(end("output_truncated", 0), output(), "yes").unwrap_err();
    assert_eq!(err.sandbox_code(), Some(&SandboxCode::OutputTruncated));
    assert_eq!(
        err.to_string(),
        "the agent stopped sending the output of yes because it was not read fast enough; the process keeps running, reconnect to it to read on"
    );
}

#[test]
fn other_statuses_go_through_the_stream_error_table() {
    let mut e = end("weird", 1);
    e = e.error("resource_exhausted".to_owned(), "disk_full".to_owned());
    let err = from_end_event(e, output(), "dd").unwrap_err();
    assert!(matches!(err, SandboxError::DiskFull { .. }));

    let err = from_end_event(end("weird", 3), output(), "dd").unwrap_err();
    match &err {
        SandboxError::CommandExit { status, .. } => {
            assert_eq!(status.as_str(), "weird");
            assert!(!status.is_known());
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "command dd ended with status weird and exit code 3; its stdout and stderr are in the error"
    );
    assert_eq!(
        from_end_event(end("weird", 0), output(), "dd"),
        Ok(EndOutcome::Exited)
    );
}

#[test]
fn the_message_never_quotes_arguments_or_odd_programs() {
    for (command, shown) in [
        ("python3 -c 'print(\"TOKEN=abc\")'", "python3"),
        ("API_KEY=hunter2 node app.js", "node"),
        ("\"$HOME/x.sh\" --password hunter2", "(shell)"),
        ("", "(shell)"),
        ("/tmp/0123456789abcdef0123/run.sh", "(shell)"),
        ("/opt/AKIAIOSFODNN7EXAMPLE", "(shell)"),
    ] {
        let err = from_end_event(end("exited", 1), output(), command).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("command {shown} exited with code 1; its stdout and stderr are in the error")
        );
        assert!(!err.to_string().contains("hunter2"));
    }
}
