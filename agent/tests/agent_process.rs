//! ProcessService through a real tonic client over loopback.

use crate::skip_support;
use crate::support;

use std::time::Duration;

use rayito_agent::pb;
use support::{
    Event, TestAgent, alive, assert_status, bash, collect_events, next_event, outcome, run_bash,
};
use tonic::Code;

#[tokio::test]
async fn start_streams_start_data_end_with_monotone_seq() {
    let t = TestAgent::start().await;
    let o = run_bash(&t, "echo out; echo err >&2; exit 3").await;
    assert!(o.pid > 0);
    assert_eq!(o.stdout, b"out\n");
    assert_eq!(o.stderr, b"err\n");
    assert!(o.seqs.windows(2).all(|w| w[0] < w[1]), "seqs {:?}", o.seqs);
    assert_eq!(o.seqs.first(), Some(&1));
    let end = o.end.expect("end");
    assert_eq!(
        (end.exit_code, end.exited, end.status.as_str()),
        (3, true, "exited")
    );
    assert_eq!(end.error, None);
    assert_eq!(end.signal, None);
}

#[tokio::test]
async fn stdout_chunks_arrive_in_order() {
    let t = TestAgent::start().await;
    let o = run_bash(&t, "for i in $(seq 1 3000); do echo line$i; done").await;
    let expected: String = (1..=3000).map(|i| format!("line{i}\n")).collect();
    assert_eq!(String::from_utf8(o.stdout).unwrap(), expected);
    assert!(o.seqs.windows(2).all(|w| w[0] + 1 == w[1]));
}

#[tokio::test]
async fn clean_environment_home_and_limits() {
    let t = TestAgent::start_with(serde_json::json!({"envs": {"FROM_PAYLOAD": "p"}})).await;
    let mut req =
        bash("echo \"$HOME|$LANG|$FROM_PAYLOAD|$CALL|${CARGO:-unset}\"; ulimit -n; ulimit -c; pwd");
    req.process
        .as_mut()
        .unwrap()
        .envs
        .insert("CALL".into(), "c".into());
    let stream = t.process().start(req).await.unwrap().into_inner();
    let o = outcome(&collect_events(stream).await);
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[1], "1024");
    assert_eq!(lines[2], "0");
    // /home/user exists for the command only inside its mount namespace
    // (root); elsewhere HOME and the cwd are the sandbox root's host paths.
    if !t.agent.env().containment().mount_namespace {
        skip_support::skip(
            "HOME and the cwd /home/user are not checked: no mount namespace (needs root), HOME is a host path",
        );
        assert_eq!(
            lines[0].split_once('|').map(|(_, rest)| rest),
            Some("C.UTF-8|p|c|unset")
        );
        return;
    }
    assert_eq!(lines[0], "/home/user|C.UTF-8|p|c|unset");
    assert_eq!(lines[3], "/home/user");
}

#[tokio::test]
async fn own_process_group() {
    let t = TestAgent::start().await;
    let o = run_bash(&t, "ps -o pgid= -p $$").await;
    let pgid: u32 = String::from_utf8(o.stdout).unwrap().trim().parse().unwrap();
    assert_eq!(pgid, o.pid);
}

#[tokio::test]
async fn timeout_sends_sigterm_to_the_group() {
    let t = TestAgent::start().await;
    // bash stays the parent (it waits), and its child is a second member
    // of the group: signalling the one pid would leave the sleep running.
    let mut req = bash("sleep 30 & echo $!; wait");
    // Long enough for bash to start its child on a loaded machine.
    req.timeout_ms = 3_000;
    let stream = t.process().start(req).await.unwrap().into_inner();
    let o = outcome(&collect_events(stream).await);
    let grandchild: u32 = String::from_utf8(o.stdout.clone())
        .unwrap()
        .trim()
        .parse()
        .expect("bash printed its child's pid before the timeout");
    assert_ne!(grandchild, o.pid);
    let end = o.end.unwrap();
    assert_eq!(
        (end.exit_code, end.exited, end.status.as_str(), end.signal),
        (143, false, "timeout", Some(15))
    );
    let err = end.error.unwrap();
    assert_eq!(
        (err.code.as_str(), err.message.as_str()),
        ("deadline_exceeded", "process timed out")
    );
    // The grandchild got the SIGTERM too (well before its 30 s).
    let gone_by = std::time::Instant::now() + Duration::from_secs(10);
    while alive(grandchild) {
        assert!(
            std::time::Instant::now() < gone_by,
            "the grandchild outlived the group's SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn timeout_escalates_to_sigkill_after_5_s() {
    let t = TestAgent::start().await;
    // The trap is installed long before the timeout, even on a loaded
    // machine; the marker line proves it was.
    let mut req = bash("trap '' TERM; echo trapped; sleep 30");
    req.timeout_ms = 2_000;
    let started = std::time::Instant::now();
    let stream = t.process().start(req).await.unwrap().into_inner();
    let o = outcome(&collect_events(stream).await);
    assert_eq!(o.stdout, b"trapped\n");
    let end = o.end.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(7));
    assert_eq!(
        (end.exit_code, end.exited, end.status.as_str(), end.signal),
        (137, false, "timeout", Some(9))
    );
    assert_eq!(end.error.unwrap().code, "deadline_exceeded");
}

#[tokio::test]
async fn connect_replays_from_seq_and_from_zero_only_new() {
    let t = TestAgent::start().await;
    let mut req = bash("echo first; read line; echo second");
    req.stdin = true;
    let mut start = t.process().start(req).await.unwrap().into_inner();
    let Event::Start(s) = next_event(&mut start).await else {
        panic!("no start")
    };
    let Event::Data(d) = next_event(&mut start).await else {
        panic!("no data")
    };
    assert_eq!(d.seq, 1);
    drop(start);

    // from_seq 0: only output produced from now on.
    let mut live = t
        .process()
        .connect(pb::ConnectRequest {
            pid: s.pid,
            from_seq: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(matches!(next_event(&mut live).await, Event::Start(x) if x.pid == s.pid));

    // from_seq 1: the replay includes "first".
    let replay = t
        .process()
        .connect(pb::ConnectRequest {
            pid: s.pid,
            from_seq: 1,
        })
        .await
        .unwrap()
        .into_inner();

    t.process()
        .send_input(pb::SendInputRequest {
            pid: s.pid,
            data: b"go\n".to_vec(),
        })
        .await
        .unwrap();
    let new_only = outcome(&collect_events_after_start(live).await);
    assert_eq!(new_only.stdout, b"second\n");
    let all = outcome(&collect_events(replay).await);
    assert_eq!(all.stdout, b"first\nsecond\n");
    assert_eq!(all.end.unwrap().exit_code, 0);
}

/// Collects the rest of a stream whose StartEvent was already read, putting
/// a synthetic StartEvent back in front so that `outcome` can check it.
async fn collect_events_after_start(stream: tonic::Streaming<pb::ProcessEvent>) -> Vec<Event> {
    let mut events = vec![Event::Start(pb::StartEvent { pid: 0 })];
    events.extend(collect_events(stream).await);
    events
}

#[tokio::test]
async fn connect_after_end_replays_start_and_end_and_out_of_range() {
    let t = TestAgent::start().await;
    let o = run_bash(&t, "head -c 3000000 /dev/zero").await;
    assert_eq!(o.stdout.len(), 3_000_000);
    let last = *o.seqs.last().unwrap();
    let err = t
        .process()
        .connect(pb::ConnectRequest {
            pid: o.pid,
            from_seq: 1,
        })
        .await
        .unwrap_err();
    assert_status(&err, Code::OutOfRange, "output already discarded");
    let events = collect_events(
        t.process()
            .connect(pb::ConnectRequest {
                pid: o.pid,
                from_seq: last + 1,
            })
            .await
            .unwrap()
            .into_inner(),
    )
    .await;
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(matches!(&events[0], Event::Start(s) if s.pid == o.pid));
    assert!(matches!(&events[1], Event::End(e) if e.exit_code == 0 && e.exited));
}

#[tokio::test]
async fn send_signal_rules() {
    let t = TestAgent::start().await;
    for bad in [0, 65, -1] {
        let err = t
            .process()
            .send_signal(pb::SendSignalRequest {
                pid: 1,
                signal: bad,
            })
            .await
            .unwrap_err();
        assert_status(
            &err,
            Code::InvalidArgument,
            "signal must be between 1 and 64",
        );
    }
    let err = t
        .process()
        .send_signal(pb::SendSignalRequest {
            pid: 999_999,
            signal: 9,
        })
        .await
        .unwrap_err();
    assert_status(&err, Code::NotFound, "process not found");

    let mut stream = t
        .process()
        .start(bash("sleep 30"))
        .await
        .unwrap()
        .into_inner();
    let Event::Start(s) = next_event(&mut stream).await else {
        panic!()
    };
    t.process()
        .send_signal(pb::SendSignalRequest {
            pid: s.pid,
            signal: 9,
        })
        .await
        .unwrap();
    let end = outcome(&collect_events_after_start(stream).await)
        .end
        .unwrap();
    assert_eq!(
        (end.exit_code, end.exited, end.status.as_str(), end.signal),
        (137, false, "signaled", Some(9))
    );
}

#[tokio::test]
async fn stdin_input_and_close() {
    let t = TestAgent::start().await;
    let mut req = bash("cat");
    req.stdin = true;
    let mut stream = t.process().start(req).await.unwrap().into_inner();
    let Event::Start(s) = next_event(&mut stream).await else {
        panic!()
    };
    t.process()
        .send_input(pb::SendInputRequest {
            pid: s.pid,
            data: b"hello\n".to_vec(),
        })
        .await
        .unwrap();
    let Event::Data(d) = next_event(&mut stream).await else {
        panic!()
    };
    assert_eq!(
        d.output,
        Some(pb::data_event::Output::Stdout(b"hello\n".to_vec()))
    );
    t.process()
        .close_stdin(pb::CloseStdinRequest { pid: s.pid })
        .await
        .unwrap();
    let end = outcome(&collect_events_after_start(stream).await)
        .end
        .unwrap();
    assert_eq!(end.exit_code, 0);
}

#[tokio::test]
async fn stdin_not_open_is_failed_precondition() {
    let t = TestAgent::start().await;
    let mut stream = t
        .process()
        .start(bash("sleep 30"))
        .await
        .unwrap()
        .into_inner();
    let Event::Start(s) = next_event(&mut stream).await else {
        panic!()
    };
    let err = t
        .process()
        .send_input(pb::SendInputRequest {
            pid: s.pid,
            data: b"x".to_vec(),
        })
        .await
        .unwrap_err();
    assert_status(&err, Code::FailedPrecondition, "stdin is not open");
    let err = t
        .process()
        .close_stdin(pb::CloseStdinRequest { pid: s.pid })
        .await
        .unwrap_err();
    assert_status(&err, Code::FailedPrecondition, "stdin is not open");
    let err = t
        .process()
        .close_stdin(pb::CloseStdinRequest { pid: 999_999 })
        .await
        .unwrap_err();
    assert_status(&err, Code::NotFound, "process not found");
}

#[tokio::test]
async fn list_shows_live_processes_with_tag() {
    let t = TestAgent::start().await;
    let mut req = bash("sleep 30");
    req.tag = Some("web".into());
    let mut stream = t.process().start(req).await.unwrap().into_inner();
    let Event::Start(s) = next_event(&mut stream).await else {
        panic!()
    };
    let list = t
        .process()
        .list(pb::ListRequest {})
        .await
        .unwrap()
        .into_inner();
    let info = list
        .processes
        .iter()
        .find(|p| p.pid == s.pid)
        .expect("listed");
    assert_eq!(info.tag.as_deref(), Some("web"));
    assert_eq!(info.kind, pb::ProcessKind::Process as i32);
    assert_eq!(info.config.as_ref().unwrap().cmd, "/bin/bash");
}

/// A listing names a process's environment variables but never carries
/// their values (one may be an injected secret), while the process itself
/// sees the value.
#[tokio::test]
async fn list_names_envs_without_their_values() {
    const VALUE: &str = "listed-canary-value-4d1c";
    let t = TestAgent::start().await;
    let mut req = bash("printf %s \"$SECRET_ONE\"; sleep 30");
    req.process
        .as_mut()
        .unwrap()
        .envs
        .insert("SECRET_ONE".into(), VALUE.into());
    let mut stream = t.process().start(req).await.unwrap().into_inner();
    let Event::Start(s) = next_event(&mut stream).await else {
        panic!()
    };
    let Event::Data(pb::DataEvent {
        output: Some(pb::data_event::Output::Stdout(out)),
        ..
    }) = next_event(&mut stream).await
    else {
        panic!("the value reaches the process")
    };
    assert_eq!(out, VALUE.as_bytes());
    let list = t
        .process()
        .list(pb::ListRequest {})
        .await
        .unwrap()
        .into_inner();
    let info = list
        .processes
        .iter()
        .find(|p| p.pid == s.pid)
        .expect("listed");
    let envs = &info.config.as_ref().unwrap().envs;
    assert_eq!(envs.get("SECRET_ONE").map(String::as_str), Some(""));
    assert!(!format!("{list:?}").contains(VALUE), "{list:?}");
}

#[tokio::test]
async fn start_errors_have_exact_messages() {
    let t = TestAgent::start().await;
    let cases: Vec<(pb::StartRequest, Code, &str)> = vec![
        (
            pb::StartRequest::default(),
            Code::InvalidArgument,
            "empty command",
        ),
        (
            {
                let mut r = bash("true");
                r.process.as_mut().unwrap().cwd = Some("relative".into());
                r
            },
            Code::InvalidArgument,
            "invalid working directory",
        ),
        (
            {
                let mut r = bash("true");
                r.process.as_mut().unwrap().cwd = Some("/home/user/missing".into());
                r
            },
            Code::InvalidArgument,
            "invalid working directory",
        ),
        (
            {
                let mut r = bash("true");
                r.user = Some(pb::User {
                    username: "nobody".into(),
                });
                r
            },
            Code::InvalidArgument,
            "unknown user",
        ),
        (
            {
                let mut r = bash("true");
                r.user = Some(pb::User {
                    username: "root".into(),
                });
                r
            },
            Code::PermissionDenied,
            "running as root is not allowed",
        ),
        (
            pb::StartRequest {
                process: Some(pb::ProcessConfig {
                    cmd: "/nonexistent/program".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            Code::InvalidArgument,
            "cannot execute the command",
        ),
    ];
    for (req, code, msg) in cases {
        let err = t.process().start(req).await.unwrap_err();
        assert_status(&err, code, msg);
    }
}

#[tokio::test]
async fn at_most_8_subscribers_per_pid() {
    let t = TestAgent::start().await;
    let mut start = t
        .process()
        .start(bash("sleep 30"))
        .await
        .unwrap()
        .into_inner();
    let Event::Start(s) = next_event(&mut start).await else {
        panic!()
    };
    let mut held = Vec::new();
    for _ in 0..7 {
        held.push(
            t.process()
                .connect(pb::ConnectRequest {
                    pid: s.pid,
                    from_seq: 0,
                })
                .await
                .unwrap(),
        );
    }
    let err = t
        .process()
        .connect(pb::ConnectRequest {
            pid: s.pid,
            from_seq: 0,
        })
        .await
        .unwrap_err();
    assert_status(&err, Code::ResourceExhausted, "too many subscribers");
}

#[tokio::test]
async fn at_most_256_live_processes() {
    // 256 sleeps plus the agent, the test and what else runs here.
    if let Some(headroom) = pids_headroom()
        && headroom < 256 + 64
    {
        skip_support::skip(format!(
            "this host allows only {headroom} more processes (pids limit); it needs 320"
        ));
        return;
    }
    let t = TestAgent::start().await;
    let mut pids = Vec::new();
    for _ in 0..256 {
        let req = pb::StartRequest {
            process: Some(pb::ProcessConfig {
                cmd: "sleep".into(),
                args: vec!["300".into()],
                ..Default::default()
            }),
            ..Default::default()
        };
        // Read the StartEvent and drop the stream: the process keeps running
        // and the HTTP/2 stream slot is freed.
        let mut stream = t.process().start(req).await.unwrap().into_inner();
        let Event::Start(s) = next_event(&mut stream).await else {
            panic!()
        };
        pids.push(s.pid);
    }
    let err = tokio::time::timeout(Duration::from_secs(10), t.process().start(bash("true")))
        .await
        .expect("answer within 10 s")
        .unwrap_err();
    assert_status(&err, Code::ResourceExhausted, "too many processes");
    let listed = t
        .process()
        .list(pb::ListRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.processes.len(), 256);
    t.agent.shutdown().await;
    for _ in 0..50 {
        if pids.iter().all(|p| !alive(*p)) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("processes survived shutdown");
}

#[tokio::test]
async fn suspend_ends_live_streams_and_resume_reattaches() {
    let t = TestAgent::start().await;
    let mut req = bash("echo one; read x; echo two");
    req.stdin = true;
    let mut stream = t.process().start(req).await.unwrap().into_inner();
    let Event::Start(s) = next_event(&mut stream).await else {
        panic!()
    };
    let Event::Data(d) = next_event(&mut stream).await else {
        panic!()
    };
    assert_eq!(t.hook("suspend", None).await.0, 200);
    let end = outcome(&collect_events_after_start(stream).await)
        .end
        .unwrap();
    assert_eq!(
        (end.exit_code, end.exited, end.status.as_str(), end.signal),
        (0, false, "suspending", None)
    );
    let err = end.error.unwrap();
    assert_eq!(
        (err.code.as_str(), err.message.as_str()),
        ("suspending", "suspending")
    );
    assert!(alive(s.pid), "process must survive a suspend");
    let err = t.process().start(bash("true")).await.unwrap_err();
    assert_status(&err, Code::Unavailable, "suspending");

    t.hook("resume", None).await;
    let re = t
        .process()
        .connect(pb::ConnectRequest {
            pid: s.pid,
            from_seq: d.seq + 1,
        })
        .await
        .unwrap()
        .into_inner();
    t.process()
        .send_input(pb::SendInputRequest {
            pid: s.pid,
            data: b"\n".to_vec(),
        })
        .await
        .unwrap();
    let o = outcome(&collect_events(re).await);
    assert_eq!(o.stdout, b"two\n");
    assert_eq!(o.end.unwrap().status, "exited");
}

#[tokio::test]
async fn no_process_survives_terminate() {
    let t = TestAgent::start().await;
    let mut stream = t
        .process()
        .start(bash("sleep 100 & echo $!; sleep 100"))
        .await
        .unwrap()
        .into_inner();
    let Event::Start(s) = next_event(&mut stream).await else {
        panic!()
    };
    let Event::Data(d) = next_event(&mut stream).await else {
        panic!()
    };
    let Some(pb::data_event::Output::Stdout(out)) = d.output else {
        panic!()
    };
    let grandchild: u32 = String::from_utf8(out).unwrap().trim().parse().unwrap();
    assert!(alive(s.pid) && alive(grandchild));
    assert_eq!(t.hook("terminate", None).await.0, 200);
    for _ in 0..50 {
        if !alive(s.pid) && !alive(grandchild) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("a process survived terminate");
}

#[tokio::test]
async fn no_process_survives_agent_drop() {
    let t = TestAgent::start().await;
    let mut stream = t
        .process()
        .start(bash("sleep 100"))
        .await
        .unwrap()
        .into_inner();
    let Event::Start(s) = next_event(&mut stream).await else {
        panic!()
    };
    drop(t);
    for _ in 0..50 {
        if !alive(s.pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("a process survived the agent's drop");
}

/// How many more processes this host lets the test start, when a limit is
/// found: the pids controller of our cgroup (v2 or v1) and, for a non-root
/// user, RLIMIT_NPROC.
fn pids_headroom() -> Option<u64> {
    let read_number =
        |path: &str| -> Option<u64> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
    let mut limits = Vec::new();
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    for line in cgroups.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        let (Some(controllers), Some(path)) = (controllers, path) else {
            continue;
        };
        let dir = match controllers {
            "" => format!("/sys/fs/cgroup{path}"),
            c if c.split(',').any(|c| c == "pids") => format!("/sys/fs/cgroup/pids{path}"),
            _ => continue,
        };
        if let (Some(max), Some(current)) = (
            read_number(&format!("{dir}/pids.max")),
            read_number(&format!("{dir}/pids.current")),
        ) {
            limits.push(max.saturating_sub(current));
        }
    }
    if !rustix::process::getuid().is_root()
        && let Some(max) = rustix::process::getrlimit(rustix::process::Resource::Nproc).current
    {
        // Processes of this user, counted from /proc.
        let uid = rustix::process::getuid().as_raw();
        let mine = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| {
                std::fs::read_to_string(e.path().join("status")).is_ok_and(|s| {
                    s.lines().any(|l| {
                        l.starts_with("Uid:")
                            && l.split_whitespace().nth(1) == Some(&uid.to_string())
                    })
                })
            })
            .count() as u64;
        limits.push(max.saturating_sub(mine));
    }
    limits.into_iter().min()
}
