//! Issue 22, section 2: root never acts on a guest-controlled path, the
//! agent's memory is never opened to a sandbox, a sandbox's files are its
//! own, its uid is its own, its processes and memory are bounded, and file
//! calls carry nothing of the agent's own credentials.
//!
//! Most tests need what CI has (root, a cgroup with the pids and memory
//! controllers, mount and user namespaces); where the host lacks one, the
//! test prints `SKIPPED: <test>: <reason>` and returns.

use crate::support;

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};

use rayito_agent::{AgentConfig, SandboxLimits, pb};
use support::*;

/// Whether the agent switched to an unprivileged uid inside a mount
/// namespace (root on a host with namespaces); prints a skip otherwise.
fn isolated(t: &TestAgent, test: &str) -> bool {
    let c = t.agent.env().containment();
    let ok = c.unprivileged_uid.is_some() && c.mount_namespace;
    if !ok {
        eprintln!(
            "SKIPPED: {test}: needs root with mount namespaces (an unprivileged uid per sandbox)"
        );
    }
    ok
}

/// Starts `sleep 60` in `t`'s sandbox and returns its pid.
async fn sleeper(t: &TestAgent) -> u32 {
    let mut stream = t
        .process()
        .start(bash("exec sleep 60"))
        .await
        .expect("Start")
        .into_inner();
    match next_event(&mut stream).await {
        Event::Start(s) => s.pid,
        other => panic!("{other:?}"),
    }
}

/// A guest symlink into another sandbox (`/proc/<pid>/root/home/user` of
/// one of its processes) used as a working directory: the agent checks it
/// as the sandbox's user (who may not follow another uid's `/proc` links)
/// and refuses it for a command, a terminal and a code context, and a
/// default working directory that is such a link is entered as that user
/// too, so the command does not start rather than reading the other
/// sandbox's files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_working_directory_linked_into_another_sandbox_is_never_entered() {
    let victim = TestAgent::start().await;
    if !isolated(
        &victim,
        "a_working_directory_linked_into_another_sandbox_is_never_entered",
    ) {
        return;
    }
    let secret = run_bash(&victim, "echo TOPSECRET > /home/user/secret").await;
    assert_eq!(secret.end.unwrap().exit_code, 0);
    let pid = sleeper(&victim).await;

    let link = format!("/proc/{pid}/root/home/user");
    let attacker = TestAgent::start_with(serde_json::json!({ "workdir": "/home/user/w" })).await;
    let mut make_link = bash(&format!("ln -s {link} /home/user/w && echo linked"));
    make_link.process.as_mut().unwrap().cwd = Some("/home/user".to_owned());
    let made = outcome(
        &collect_events(
            attacker
                .process()
                .start(make_link)
                .await
                .unwrap()
                .into_inner(),
        )
        .await,
    );
    assert_eq!(String::from_utf8_lossy(&made.stdout), "linked\n");

    // A command's cwd.
    let mut read = bash("cat secret; pwd");
    read.process.as_mut().unwrap().cwd = Some("/home/user/w".to_owned());
    let refused = match attacker.process().start(read).await {
        Ok(stream) => {
            let o = outcome(&collect_events(stream.into_inner()).await);
            panic!(
                "the command started in the other sandbox: {:?} {:?}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        Err(status) => status,
    };
    assert_status(&refused, tonic::Code::PermissionDenied, "permission denied");

    // A terminal's cwd.
    let mut pty = pb::pty_service_client::PtyServiceClient::with_interceptor(
        attacker.channel.clone(),
        attacker.interceptor(),
    );
    let refused = pty
        .create(pb::PtyStart {
            size: Some(pb::PtySize { cols: 80, rows: 24 }),
            cwd: Some("/home/user/w".to_owned()),
            ..Default::default()
        })
        .await
        .expect_err("a terminal in the other sandbox");
    assert_status(&refused, tonic::Code::PermissionDenied, "permission denied");

    // A code context's cwd.
    let refused = attacker
        .code()
        .create_context(pb::CreateContextRequest {
            language: "bash".to_owned(),
            cwd: Some("/home/user/w".to_owned()),
            ..Default::default()
        })
        .await
        .expect_err("a context in the other sandbox");
    assert_status(&refused, tonic::Code::PermissionDenied, "permission denied");

    // The payload's default working directory is checked the same way.
    let default_cwd = attacker.process().start(bash("cat secret; pwd")).await;
    match default_cwd {
        Ok(stream) => {
            let o = outcome(&collect_events(stream.into_inner()).await);
            panic!(
                "the command started in the other sandbox: {:?} {:?}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        Err(status) => assert_status(&status, tonic::Code::PermissionDenied, "permission denied"),
    }
    victim.agent.env().kill_all();
}

/// A symlinked directory leading out of the view is the file calls'
/// `path not allowed` as a working directory too, and a missing one stays
/// `invalid working directory`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn working_directories_follow_the_file_calls_rules() {
    let t = TestAgent::start().await;
    let made = run_bash(
        &t,
        "ln -s /etc /home/user/etc && mkdir -p /home/user/sub && echo ok",
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&made.stdout), "ok\n");
    for (cwd, code, message) in [
        (
            "/home/user/etc",
            tonic::Code::PermissionDenied,
            "path not allowed",
        ),
        ("/proc", tonic::Code::PermissionDenied, "path not allowed"),
        (
            "/home/user/missing",
            tonic::Code::InvalidArgument,
            "invalid working directory",
        ),
        ("/usr", tonic::Code::PermissionDenied, "path not allowed"),
        (
            "/var",
            tonic::Code::InvalidArgument,
            "invalid working directory",
        ),
    ] {
        let mut req = bash("pwd");
        req.process.as_mut().unwrap().cwd = Some(cwd.to_owned());
        let status = t.process().start(req).await.expect_err(cwd);
        assert_status(&status, code, message);
    }
    let mut req = bash("pwd");
    req.process.as_mut().unwrap().cwd = Some("/home/user/sub".to_owned());
    let o = outcome(&collect_events(t.process().start(req).await.unwrap().into_inner()).await);
    let expected = if t.agent.env().is_isolated() {
        "/home/user/sub\n".to_owned()
    } else {
        format!("{}\n", t.host_path("/home/user/sub").display())
    };
    assert_eq!(String::from_utf8_lossy(&o.stdout), expected);
}

/// Starting a process as the sandbox's uid marks the agent's memory not
/// dumpable (the kernel does so on the child's uid change, in the memory
/// both share until `execve`), and the agent never sets it back: another
/// launch's child may be running as that uid in the agent's memory at that
/// moment, and a dumpable memory would let a sandbox process open it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_memory_stays_undumpable_once_it_switched_uids() {
    let t = TestAgent::start().await;
    if t.agent.env().containment().unprivileged_uid.is_none() {
        eprintln!("SKIPPED: the_agent_memory_stays_undumpable_once_it_switched_uids: needs root");
        return;
    }
    for _ in 0..4 {
        let o = run_bash(&t, "true").await;
        assert_eq!(o.end.unwrap().exit_code, 0);
        // SAFETY: prctl(PR_GET_DUMPABLE) takes no pointer and changes nothing.
        let dumpable = unsafe { libc::prctl(libc::PR_GET_DUMPABLE) };
        assert_eq!(dumpable, 0, "the agent's memory was made dumpable again");
    }
}

/// A pseudo-terminal's master never reaches a sandbox process: terminals
/// opened while other commands start (each listing its descriptors) leave
/// no `/dev/ptmx` in any of them. (The old code set CLOEXEC after opening,
/// a window a concurrent start could fall into; this test stresses it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_command_inherits_a_terminal_master() {
    let t = TestAgent::start().await;
    let mut pty = pb::pty_service_client::PtyServiceClient::with_interceptor(
        t.channel.clone(),
        t.interceptor(),
    );
    let opener = tokio::spawn(async move {
        let mut pids = Vec::new();
        for _ in 0..30 {
            let mut stream = pty
                .create(pb::PtyStart {
                    size: Some(pb::PtySize { cols: 80, rows: 24 }),
                    shell: Some("/bin/sh".to_owned()),
                    ..Default::default()
                })
                .await
                .expect("Create")
                .into_inner();
            if let Some(pb::pty_server_message::Message::Started(s)) =
                stream.message().await.unwrap().unwrap().message
            {
                pids.push(s.pid);
            }
            pty.kill(pb::KillPtyRequest {
                pid: *pids.last().unwrap(),
            })
            .await
            .unwrap();
        }
        pids.len()
    });
    let mut listings = Vec::new();
    while !opener.is_finished() {
        let o = run_bash(&t, "ls -l /proc/self/fd/ 2>/dev/null").await;
        listings.push(String::from_utf8_lossy(&o.stdout).into_owned());
    }
    assert_eq!(opener.await.unwrap(), 30);
    assert!(!listings.is_empty());
    for listing in &listings {
        assert!(
            !listing.contains("ptmx"),
            "a command inherited a master:\n{listing}"
        );
    }
}

/// The sandbox's root and `home` are 0711 (traversed, not listed), its
/// home and tmp 0700 and its own; what its processes create is theirs
/// alone (umask 077).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxs_files_are_its_own() {
    let t = TestAgent::start().await;
    let mode = |guest: &str| {
        std::fs::metadata(t.host_path(guest))
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    };
    let root = t.agent.env().root().to_path_buf();
    let root_mode = std::fs::metadata(&root).unwrap().permissions().mode() & 0o7777;
    if t.agent.env().containment().unprivileged_uid.is_some() {
        assert_eq!(
            (root_mode, mode("/home"), mode("/home/user"), mode("/tmp")),
            (0o711, 0o711, 0o700, 0o700)
        );
        assert_eq!(std::fs::metadata(root.join("home")).unwrap().uid(), 0);
    } else {
        assert_eq!(
            (root_mode, mode("/home"), mode("/home/user"), mode("/tmp")),
            (0o700, 0o700, 0o700, 0o700)
        );
    }
    let o = run_bash(
        &t,
        "umask; echo x > /home/user/f; mkdir /home/user/d; echo y > /tmp/t; \
         stat -c '%a %n' /home/user/f /home/user/d /tmp/t",
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "0077\n600 /home/user/f\n700 /home/user/d\n600 /tmp/t\n"
    );
}

/// Two sandboxes never share a uid, and a uid is free again once its
/// sandbox is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandboxes_get_distinct_uids() {
    let agents = futures_util::future::join_all((0..6).map(|_| TestAgent::start())).await;
    let mut uids: Vec<u32> = agents
        .iter()
        .filter_map(|t| t.agent.env().containment().unprivileged_uid)
        .collect();
    if uids.is_empty() {
        eprintln!("SKIPPED: sandboxes_get_distinct_uids: needs root");
        return;
    }
    uids.sort_unstable();
    uids.dedup();
    assert_eq!(uids.len(), agents.len());
    for uid in &uids {
        assert!(
            std::path::Path::new(&format!("/run/rayito-agent/uids/{uid}")).exists(),
            "uid {uid} holds no lock"
        );
    }
    drop(agents);
    // The agents' tasks let their sandboxes go within moments.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for uid in &uids {
        let lock = format!("/run/rayito-agent/uids/{uid}");
        while std::path::Path::new(&lock).exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "{lock} outlived its sandbox"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// The limits of the sandboxes of the limit tests: small, so that a guest
/// reaches them at once.
const TEST_PIDS_MAX: u64 = 32;
const TEST_MEMORY_MAX: u64 = 64 << 20;

async fn limited_agent(test: &str) -> Option<TestAgent> {
    limited_agent_with(test, TEST_MEMORY_MAX).await
}

/// A sandbox of [`TEST_PIDS_MAX`] processes and `memory_max` bytes.
async fn limited_agent_with(test: &str, memory_max: u64) -> Option<TestAgent> {
    let t = TestAgent::start_config(AgentConfig {
        limits: SandboxLimits {
            pids_max: Some(TEST_PIDS_MAX),
            memory_max_bytes: Some(memory_max),
        },
        ..AgentConfig::default()
    })
    .await;
    let (status, body) = t.run(&payload(serde_json::json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    let limits = t.agent.env().containment().limits;
    if limits.pids_max.is_none() || limits.memory_max_bytes.is_none() {
        eprintln!("SKIPPED: {test}: needs a cgroup with the pids and memory controllers (root)");
        return None;
    }
    Some(t)
}

/// The default limits are the documented ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_limits_are_512_processes_and_2_gib() {
    let t = TestAgent::start().await;
    let limits = t.agent.env().containment().limits;
    if limits.pids_max.is_none() {
        eprintln!(
            "SKIPPED: the_default_limits_are_512_processes_and_2_gib: needs cgroup controllers"
        );
        return;
    }
    assert_eq!(
        limits,
        SandboxLimits {
            pids_max: Some(512),
            memory_max_bytes: Some(2048 << 20),
        }
    );
}

/// A process that forks without end gets EAGAIN once the sandbox holds
/// `pids.max` tasks: the guest counts its children and reports the errno.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_bomb_stops_at_pids_max() {
    let Some(t) = limited_agent("a_fork_bomb_stops_at_pids_max").await else {
        return;
    };
    // At most 200 children, so that the old code (no limit) ends too.
    let script = "import os, time\n\
                  n = 0\n\
                  err = 0\n\
                  while n < 200:\n\
                  \x20   try:\n\
                  \x20       pid = os.fork()\n\
                  \x20   except OSError as e:\n\
                  \x20       err = e.errno\n\
                  \x20       break\n\
                  \x20   if pid == 0:\n\
                  \x20       time.sleep(30)\n\
                  \x20       os._exit(0)\n\
                  \x20   n += 1\n\
                  print(n, err, flush=True)\n\
                  os.killpg(0, 9)\n";
    let o = outcome(
        &collect_events(
            t.process()
                .start(pb::StartRequest {
                    process: Some(pb::ProcessConfig {
                        cmd: "python3".to_owned(),
                        args: vec!["-c".to_owned(), script.to_owned()],
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .await
                .unwrap()
                .into_inner(),
        )
        .await,
    );
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let (n, errno) = out.trim().split_once(' ').expect("n errno");
    let n: u64 = n.parse().unwrap();
    assert!(
        n < TEST_PIDS_MAX,
        "{n} children forked past pids.max {TEST_PIDS_MAX}"
    );
    assert_eq!(errno, libc::EAGAIN.to_string(), "{out}");
}

/// Python taking four times [`TEST_MEMORY_MAX`].
const OVER_THE_LIMIT: &str = "b = b'x' * (256 << 20)\nprint('survived')";

/// A command running `python3 -c code`.
fn python(code: &str) -> pb::StartRequest {
    let mut req = bash(code);
    req.process.as_mut().unwrap().cmd = "python3".to_owned();
    req
}

/// Starts `req` in `t`'s sandbox and gathers its events in a task.
async fn start_gathering(
    t: &TestAgent,
    req: pb::StartRequest,
) -> tokio::task::JoinHandle<Vec<Event>> {
    let stream = t.process().start(req).await.unwrap().into_inner();
    tokio::spawn(collect_events(stream))
}

/// `o` printed nothing and ended as docs/local.md says a process the
/// kernel killed at the sandbox's memory limit ([`TEST_MEMORY_MAX`]) ends.
fn assert_ended_at_the_memory_limit(o: &Outcome) {
    assert_eq!(String::from_utf8_lossy(&o.stdout), "");
    let end = o.end.clone().unwrap();
    assert_eq!(
        (end.exit_code, end.exited, end.status.as_str(), end.signal),
        (137, false, "signaled", Some(9))
    );
    assert_eq!(
        end.error,
        Some(pb::StreamError {
            code: "resource_exhausted".to_owned(),
            message: "the sandbox reached its memory limit (64 MiB) and the kernel ended the \
                      process; use less memory, or give the sandbox a higher limit"
                .to_owned(),
        })
    );
}

/// A process that takes more memory than the sandbox's limit is ended by
/// the kernel, and its end says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_over_the_limit_ends_the_process_and_says_so() {
    let Some(t) = limited_agent("memory_over_the_limit_ends_the_process_and_says_so").await else {
        return;
    };
    let o = outcome(
        &collect_events(
            t.process()
                .start(python(OVER_THE_LIMIT))
                .await
                .unwrap()
                .into_inner(),
        )
        .await,
    );
    assert_ended_at_the_memory_limit(&o);
    // A process killed by hand is not blamed on memory.
    let o = run_bash(&t, "kill -9 $$").await;
    let end = o.end.unwrap();
    assert_eq!((end.signal, end.error), (Some(9), None));
}

/// One process hosts several sandboxes, as the local backend does (the
/// emulator and every sandbox's agent): while one sandbox fork-bombs
/// without end and another allocates past its memory limit, the process
/// lives on and a third (and the bomber itself) keeps answering commands.
/// Each offender gets what docs/local.md documents: the bomb's forks fail
/// with EAGAIN inside its sandbox, and the allocating process ends
/// `signaled`, signal 9, with the `resource_exhausted` memory-limit error.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_process_outlives_a_fork_bomb_and_an_out_of_memory_next_door() {
    let test = "one_process_outlives_a_fork_bomb_and_an_out_of_memory_next_door";
    // The bomb's processes (Python's memory, copied as they write to it)
    // get room, so that only its process count stops it.
    let (Some(bomber), Some(hog)) =
        tokio::join!(limited_agent_with(test, 1 << 30), limited_agent(test))
    else {
        return;
    };
    let bystander = TestAgent::start().await;

    // Every process of the bomb forks until the sandbox is full and keeps
    // trying for two seconds, counting its EAGAINs; the first one reports
    // the count of its own.
    let bomb = "import os, time\n\
                first = os.getpid()\n\
                end = time.time() + 2\n\
                eagain = 0\n\
                while time.time() < end:\n\
                \x20   try:\n\
                \x20       os.fork()\n\
                \x20   except OSError as e:\n\
                \x20       eagain += e.errno == 11\n\
                \x20       time.sleep(0.01)\n\
                if os.getpid() == first:\n\
                \x20   print('eagain', eagain > 0, flush=True)\n\
                \x20   os.killpg(0, 9)\n\
                os._exit(0)\n";
    let bombed = start_gathering(&bomber, python(bomb)).await;
    let hogged = start_gathering(&hog, python(OVER_THE_LIMIT)).await;

    // Round trips meanwhile: the bystander, and the bomber's own agent (a
    // command started into a full sandbox still starts; only its forks fail).
    let started = std::time::Instant::now();
    let mut round_trips = 0;
    while started.elapsed() < std::time::Duration::from_millis(2500) {
        let o = run_bash(&bystander, "echo alive").await;
        assert_eq!(String::from_utf8_lossy(&o.stdout), "alive\n");
        round_trips += 1;
    }
    assert!(round_trips > 1, "{round_trips} round trips");
    let o = run_bash(&bomber, "echo alive").await;
    assert_eq!(String::from_utf8_lossy(&o.stdout), "alive\n");

    let bombed = outcome(&bombed.await.unwrap());
    assert_eq!(
        String::from_utf8_lossy(&bombed.stdout),
        "eagain True\n",
        "{:?}",
        String::from_utf8_lossy(&bombed.stderr)
    );
    let hogged = outcome(&hogged.await.unwrap());
    assert_ended_at_the_memory_limit(&hogged);
    // Both offenders' agents still answer, and so does the bystander.
    for t in [&bomber, &hog, &bystander] {
        let o = run_bash(t, "echo still").await;
        assert_eq!(String::from_utf8_lossy(&o.stdout), "still\n");
    }
    bomber.agent.env().kill_all();
}

/// File calls run with the sandbox's file-system ids and no supplementary
/// group: a file of a group the agent's process is in stays unreadable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_calls_carry_none_of_the_agents_groups() {
    let t = TestAgent::start().await;
    if !isolated(&t, "file_calls_carry_none_of_the_agents_groups") {
        return;
    }
    const GROUP: libc::gid_t = 4242;
    let file = t.host_path("/home/user/group-only");
    std::fs::write(&file, "group secret").unwrap();
    std::os::unix::fs::chown(&file, Some(0), Some(GROUP)).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
    // SAFETY: setgroups(2) with a valid one-element array; glibc applies it
    // to every thread of this (test) process, whose root needs no group.
    assert_eq!(unsafe { libc::setgroups(1, &GROUP) }, 0);
    let read = t
        .files()
        .read(pb::ReadRequest {
            path: "/home/user/group-only".to_owned(),
            ..Default::default()
        })
        .await;
    // SAFETY: as above, with no group.
    unsafe { libc::setgroups(0, std::ptr::null()) };
    let status = match read {
        Ok(stream) => {
            let mut stream = stream.into_inner();
            match stream.message().await {
                Ok(Some(chunk)) => panic!(
                    "read a file of the agent's group: {:?}",
                    String::from_utf8_lossy(&chunk.chunk)
                ),
                Ok(None) => panic!("an empty read"),
                Err(status) => status,
            }
        }
        Err(status) => status,
    };
    assert_status(&status, tonic::Code::PermissionDenied, "permission denied");
}

/// The embedding program may change its ids for the whole process while a
/// file call runs as a sandbox's user on another thread: glibc's
/// `setgroups` makes every thread apply it and aborted the process
/// (SIGABRT, nothing printed: the abort one run in ten of this binary) when
/// that thread, without its capabilities, failed to; now the call succeeds
/// there too, the file call goes on as the sandbox's uid, and the thread is
/// root again afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_program_may_change_its_groups_during_a_file_call() {
    let t = TestAgent::start().await;
    if !isolated(&t, "the_program_may_change_its_groups_during_a_file_call") {
        return;
    }
    let uid = t.agent.env().containment().unprivileged_uid.unwrap();
    let env = t.agent.env().clone();
    let (inside_tx, inside_rx) = std::sync::mpsc::channel();
    let (leave_tx, leave_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        let inside = env.as_user(|| {
            inside_tx.send(()).unwrap();
            leave_rx.recv().unwrap();
            rustix::process::geteuid().as_raw()
        });
        (inside, rustix::process::geteuid().as_raw())
    });
    inside_rx.recv().unwrap();
    const GROUP: libc::gid_t = 4243;
    // SAFETY: setgroups(2) with a valid one-element array, then none (what
    // the test process, root, starts with and needs).
    assert_eq!(unsafe { libc::setgroups(1, &GROUP) }, 0);
    leave_tx.send(()).unwrap();
    let (inside, after) = holder.join().unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::setgroups(0, std::ptr::null()) }, 0);
    assert_eq!((inside, after), (uid, 0));
}

/// `{:?}` of a running agent shows neither the environment nor the output
/// of its live commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_debug_shows_no_command_environment_or_output() {
    let t = TestAgent::start().await;
    let mut req = bash("echo OUTPUT-CANARY-7; exec sleep 30");
    req.process
        .as_mut()
        .unwrap()
        .envs
        .insert("SECRET".to_owned(), "ENV-CANARY-3".to_owned());
    let mut stream = t.process().start(req).await.unwrap().into_inner();
    loop {
        if let Event::Data(_) = next_event(&mut stream).await {
            break;
        }
    }
    let debug = format!("{:?} {:?}", t.agent, t.agent.env());
    assert!(!debug.contains("ENV-CANARY-3"), "{debug}");
    assert!(!debug.contains("OUTPUT-CANARY-7"), "{debug}");
    assert!(debug.contains("grpc_addr"), "{debug}");
    let spec = rayito_agent::sandbox::SpawnSpec {
        program: "bash".to_owned(),
        args: vec!["-c".to_owned(), "ARG-CANARY-1".to_owned()],
        envs: [("SECRET".to_owned(), "ENV-CANARY-3".to_owned())].into(),
        cwd: None,
        cpu_limited: true,
    };
    let debug = format!("{spec:?}");
    assert!(
        !debug.contains("ENV-CANARY-3") && !debug.contains("ARG-CANARY-1"),
        "{debug}"
    );
    t.agent.env().kill_all();
}

/// A file time a guest set far in the future or past (tmpfs keeps any
/// 64-bit second count) is reported saturated, not overflowed (which
/// panicked the Stat handler of a debug build and wrapped in release).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extreme_file_times_saturate() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED: extreme_file_times_saturate: needs root (mounts a tmpfs)");
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "tmpfs"])
        .arg(root.path())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("SKIPPED: extreme_file_times_saturate: cannot mount a tmpfs");
        return;
    }
    let t = TestAgent::start_config(AgentConfig {
        root: root.path().join("sandbox"),
        ..AgentConfig::default()
    })
    .await;
    let (status, body) = t.run(&payload(serde_json::json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    let o = run_bash(
        &t,
        "touch /home/user/future /home/user/past && python3 -c \"import os; \
         os.utime('/home/user/future', (2**62, 2**62)); \
         os.utime('/home/user/past', (-2**62, -2**62))\" && echo set",
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "set\n",
        "{:?}",
        String::from_utf8_lossy(&o.stderr)
    );
    for (path, expected) in [
        ("/home/user/future", i64::MAX),
        ("/home/user/past", i64::MIN),
    ] {
        let entry = t
            .files()
            .stat(pb::StatRequest {
                path: path.to_owned(),
                ..Default::default()
            })
            .await
            .expect("Stat")
            .into_inner()
            .entry
            .unwrap();
        assert_eq!(entry.modified_time_unix_ms, expected, "{path}");
    }
    let listed = t
        .files()
        .list_dir(pb::ListDirRequest {
            path: "/home/user".to_owned(),
            depth: 1,
            ..Default::default()
        })
        .await
        .expect("ListDir")
        .into_inner();
    assert_eq!(listed.entries.len(), 2);
    t.agent.env().kill_all();
    drop(t);
    let _ = std::process::Command::new("umount")
        .arg(root.path())
        .status();
}
