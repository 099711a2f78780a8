//! Containment (issue 10, sections 1 and 3): no process of a sandbox
//! survives its end whatever it does to escape, and sandbox code does not
//! run as host root.
//!
//! These tests need what CI has (root, a writable cgroup v2, user
//! namespaces). Where the host lacks one, the test prints
//! `SKIPPED: <test>: <reason>` and returns (fails under
//! `RAYITO_TEST_STRICT=1`, as in CI).

use crate::skip_support;
use crate::support;

use std::time::Duration;

use rayito_agent::pb;
use support::*;

/// Every way a background process tries to leave the sandbox, each running
/// `sleep <token>.<n>` so that /proc shows which one survived.
fn escapes(token: &str) -> Vec<(&'static str, String)> {
    let q = ">/dev/null 2>&1 </dev/null";
    vec![
        ("env -i", format!("env -i sleep {token}1 {q} &")),
        (
            "env -u",
            format!("env -u RAYITO_SANDBOX sleep {token}2 {q} &"),
        ),
        ("setsid", format!("setsid sleep {token}3 {q} &")),
        ("nohup", format!("nohup sleep {token}4 {q} &")),
        ("double fork", format!("( (sleep {token}5 {q} &) & )")),
        (
            "all at once",
            format!("env -i setsid nohup sh -c '(sleep {token}6 {q} &) &' {q} &"),
        ),
    ]
}

/// A fresh token (`100.<random>`) so that concurrent tests never match
/// each other's processes.
fn token() -> String {
    format!("100.{:08}", rand::random::<u32>() % 100_000_000)
}

/// Pids whose command line contains `sleep <token>`.
fn sleepers(token: &str) -> Vec<(u32, String)> {
    let needle = format!("sleep\0{token}");
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline"))
            && String::from_utf8_lossy(&cmdline).contains(&needle)
            && alive(pid)
        {
            out.push((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
    }
    out
}

/// Waits (bounded) until `sleepers(token)` has `n` entries.
async fn wait_for_sleepers(token: &str, n: usize) -> Vec<(u32, String)> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let found = sleepers(token);
        if found.len() == n || tokio::time::Instant::now() > deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Skips (see `skip_support`) where the host has no cgroup v2.
fn has_cgroup(t: &TestAgent) -> bool {
    let ok = t.agent.env().containment().cgroup;
    if !ok {
        skip_support::skip("needs a writable cgroup v2 with cgroup.kill (root on Linux 5.14+)");
    }
    ok
}

/// Starts every escape in the sandbox and checks that they all run.
async fn start_escapes(t: &TestAgent) -> String {
    let token = token();
    let list = escapes(&token);
    let script: String = list.iter().map(|(_, s)| format!("{s}\n")).collect();
    let o = run_bash(t, &format!("{script}echo started")).await;
    assert_eq!(String::from_utf8_lossy(&o.stdout), "started\n");
    let running = wait_for_sleepers(&token, list.len()).await;
    assert_eq!(running.len(), list.len(), "every escape runs: {running:?}");
    token
}

/// Waits (bounded) until no process of the token remains; panics with the
/// survivors otherwise.
async fn assert_none_survive(token: &str, how: &str) {
    let left = wait_for_sleepers(token, 0).await;
    assert!(left.is_empty(), "survived {how}: {left:?}");
}

#[tokio::test]
async fn no_escape_survives_terminate() {
    let t = TestAgent::start().await;
    if !has_cgroup(&t) {
        return;
    }
    let token = start_escapes(&t).await;
    assert_eq!(t.hook("terminate", None).await.0, 200);
    assert_none_survive(&token, "/terminate").await;
}

#[tokio::test]
async fn no_escape_survives_kill() {
    let t = TestAgent::start().await;
    if !has_cgroup(&t) {
        return;
    }
    let token = start_escapes(&t).await;
    t.agent.kill();
    assert_none_survive(&token, "Agent::kill").await;
}

#[tokio::test]
async fn no_escape_survives_drop() {
    let t = TestAgent::start().await;
    if !has_cgroup(&t) {
        return;
    }
    let token = start_escapes(&t).await;
    drop(t);
    assert_none_survive(&token, "dropping the agent").await;
}

#[tokio::test]
async fn no_escape_survives_a_kill_mode_deadline() {
    let t = TestAgent::start().await;
    if !has_cgroup(&t) {
        return;
    }
    let token = start_escapes(&t).await;
    t.agent.expire_deadline_now();
    assert_none_survive(&token, "the kill-mode deadline").await;
}

#[tokio::test]
async fn a_kernel_background_process_does_not_survive_terminate() {
    let t = TestAgent::start().await;
    if !has_cgroup(&t) {
        return;
    }
    let token = token();
    let code = format!("env -i setsid sleep {token}7 >/dev/null 2>&1 </dev/null &\necho ok");
    let mut stream = t
        .code()
        .execute(pb::ExecuteRequest {
            code,
            language: Some("bash".into()),
            ..Default::default()
        })
        .await
        .expect("Execute")
        .into_inner();
    while tokio::time::timeout(Duration::from_secs(30), stream.message())
        .await
        .expect("cell ends within 30 s")
        .expect("stream ok")
        .is_some()
    {}
    assert_eq!(wait_for_sleepers(&token, 1).await.len(), 1);
    assert_eq!(t.hook("terminate", None).await.0, 200);
    assert_none_survive(&token, "/terminate (kernel)").await;
}

/// Skips (see `skip_support`) unless the agent switches uids here.
fn switches_uid(t: &TestAgent) -> Option<u32> {
    let uid = t.agent.env().containment().unprivileged_uid;
    if uid.is_none() {
        skip_support::skip(
            "needs the agent to run as root (sandbox code then drops to another uid)",
        );
    }
    uid
}

#[tokio::test]
async fn sandbox_code_runs_as_user_1000_not_host_root() {
    let t = TestAgent::start().await;
    let Some(host_uid) = switches_uid(&t) else {
        return;
    };
    let containment = t.agent.env().containment();
    assert!(host_uid >= 0x7800_0000, "a high unprivileged host uid");
    let o = run_bash(
        &t,
        "sleep 30 & echo $!; id -u; id -g; whoami; echo \"$HOME|$USER\"; touch ~/mine",
    )
    .await;
    let out = String::from_utf8(o.stdout.clone()).unwrap();
    let mut lines = out.lines();
    let sleeper: u32 = lines.next().unwrap().parse().unwrap();
    let rest: Vec<&str> = lines.collect();
    if containment.user_namespace {
        assert_eq!(rest, ["1000", "1000", "user", "/home/user|user"], "{o:?}");
    } else {
        skip_support::skip(
            "uid 1000 inside is not checked: no user namespace, the sandbox sees its host uid",
        );
        assert_eq!(rest[0], host_uid.to_string());
    }
    // The host sees the unprivileged uid, on processes and on files.
    let status = std::fs::read_to_string(format!("/proc/{sleeper}/status")).unwrap();
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    let uids: Vec<u32> = uid_line[4..]
        .split_whitespace()
        .map(|u| u.parse().unwrap())
        .collect();
    assert_eq!(uids, [host_uid; 4]);
    use std::os::unix::fs::MetadataExt as _;
    let md = std::fs::metadata(t.host_path("/home/user/mine")).unwrap();
    assert_eq!((md.uid(), md.gid()), (host_uid, host_uid));
}

#[tokio::test]
async fn sandbox_code_cannot_write_a_root_owned_file_outside_the_sandbox() {
    let t = TestAgent::start().await;
    if switches_uid(&t).is_none() {
        return;
    }
    // A root-owned file (0644) in a root-owned directory (0755) that the
    // sandbox can see: its mount namespace only replaces /home and /tmp.
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("containment-{:016x}", rand::random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("root-owned");
    std::fs::write(&file, "original\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let path = file.display().to_string();
    let o = run_bash(
        &t,
        &format!(
            "cat {path}; echo changed >> {path} || echo append-refused; \
             rm -f {path} || echo remove-refused; echo x > {dir}/new || echo create-refused",
            dir = dir.display()
        ),
    )
    .await;
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(
        out,
        "original\nappend-refused\nremove-refused\ncreate-refused\n",
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("Permission denied"));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "original\n");
    assert!(!dir.join("new").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn files_written_by_rpc_belong_to_the_sandbox_user() {
    let t = TestAgent::start().await;
    let Some(host_uid) = switches_uid(&t) else {
        return;
    };
    let mut files = t.files();
    for path in ["/home/user/deep/er/f.txt", "/tmp/made/by/rpc.txt"] {
        let msg = pb::WriteRequest {
            path: Some(path.to_owned()),
            chunk: b"rpc\n".to_vec().into(),
            ..Default::default()
        };
        files
            .write(tokio_stream::iter(vec![msg]))
            .await
            .expect("Write");
    }
    files
        .make_dir(pb::MakeDirRequest {
            path: "/home/user/a/b".into(),
            ..Default::default()
        })
        .await
        .expect("MakeDir");
    use std::os::unix::fs::MetadataExt as _;
    for guest in [
        "/home/user/deep",
        "/home/user/deep/er",
        "/home/user/deep/er/f.txt",
        "/tmp/made",
        "/tmp/made/by/rpc.txt",
        "/home/user/a",
        "/home/user/a/b",
    ] {
        let md = std::fs::symlink_metadata(t.host_path(guest)).unwrap();
        assert_eq!(md.uid(), host_uid, "{guest} belongs to the sandbox user");
    }
    let o = run_bash(
        &t,
        "echo cmd >> /home/user/deep/er/f.txt && touch /home/user/deep/er/g /home/user/a/b/c \
         /tmp/made/by/h && echo cmd >> /tmp/made/by/rpc.txt && cat /home/user/deep/er/f.txt",
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "rpc\ncmd\n",
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A Python kernel too: same user, same files.
    let code = "import getpass, os\n\
                open('/home/user/deep/er/f.txt', 'a').write('py\\n')\n\
                print(os.getuid(), getpass.getuser(), open('/home/user/deep/er/f.txt').read().split())";
    let out = support::python_stdout(&t, code).await;
    let (uid, name) = if t.agent.env().containment().user_namespace {
        ("1000".to_owned(), "user")
    } else {
        skip_support::skip(
            "the kernel's uid 1000 is not checked: no user namespace, it sees its host uid",
        );
        (host_uid.to_string(), "user")
    };
    assert_eq!(out, format!("{uid} {name} ['rpc', 'cmd', 'py']\n"));
}

#[tokio::test]
async fn file_rpcs_have_the_sandbox_users_rights_not_roots() {
    let t = TestAgent::start().await;
    if switches_uid(&t).is_none() {
        return;
    }
    // A root-only file inside the home (placed by the host): the user
    // cannot read it, so neither can a file RPC made for the user.
    let secret = t.host_path("/home/user/root-only");
    std::fs::write(&secret, "secret").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let err = t
        .files()
        .read(pb::ReadRequest {
            path: "/home/user/root-only".into(),
            ..Default::default()
        })
        .await
        .expect_err("a root-only file is not readable");
    assert_status(&err, tonic::Code::PermissionDenied, "permission denied");
}

/// The mount and user namespaces are built once per sandbox and shared by
/// its processes (issue 13): a command still ends up with no capability at
/// all, cannot change the mounts its siblings see, sees only uid 1000
/// mapped, and the agent (whose memory the child borrows until exec) keeps
/// its own dumpable setting.
#[tokio::test]
async fn shared_namespaces_give_a_command_no_privilege() {
    let t = TestAgent::start().await;
    let containment = t.agent.env().containment();
    if containment.unprivileged_uid.is_none()
        || !containment.user_namespace
        || !containment.mount_namespace
    {
        skip_support::skip("needs root, a mount namespace and a user namespace");
        return;
    }
    let dumpable_before = rustix::process::dumpable_behavior().unwrap();
    let o = run_bash(
        &t,
        "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status | awk '{print $1 $2}' | \
         grep -v '^CapBnd'; cat /proc/self/uid_map | awk '{print $1, $3}'; \
         mount -t tmpfs none /home/user 2>/dev/null && echo mounted || echo mount-refused; \
         umount /tmp 2>/dev/null && echo unmounted || echo umount-refused",
    )
    .await;
    let out = String::from_utf8(o.stdout.clone()).unwrap();
    assert_eq!(
        out,
        "CapInh:0000000000000000\nCapPrm:0000000000000000\nCapEff:0000000000000000\n\
         CapAmb:0000000000000000\n1000 1\nmount-refused\numount-refused\n",
        "{o:?}"
    );
    // A sibling still sees the sandbox's own /tmp and home.
    let o = run_bash(&t, "touch /tmp/sibling ~/sibling && echo ok").await;
    assert_eq!(String::from_utf8_lossy(&o.stdout), "ok\n");
    assert!(t.host_path("/tmp/sibling").exists());
    assert!(t.host_path("/home/user/sibling").exists());
    assert_eq!(
        rustix::process::dumpable_behavior().unwrap(),
        dumpable_before,
        "the agent's dumpable setting survives its launches"
    );
}

// The fallback of a host without cgroup v2 (process groups and the
// RAYITO_SANDBOX marker), forced on this host with `AgentConfig::cgroup`.

/// An agent contained without a cgroup, after `/run`.
async fn fallback_agent() -> TestAgent {
    let t = TestAgent::start_config(rayito_agent::AgentConfig {
        cgroup: false,
        ..Default::default()
    })
    .await;
    let (status, body) = t.run(&payload(serde_json::json!({}))).await;
    assert_eq!((status, body.as_str()), (200, "ok"));
    assert!(
        !t.agent.env().containment().cgroup,
        "AgentConfig::cgroup = false gives no cgroup"
    );
    t
}

/// What the fallback contains: every escape that stays in the process
/// group of a command that still runs (`env -i`, `env -u`), and every one
/// that keeps the marker, wherever it goes (`setsid`, `nohup`, a double
/// fork, all three at once). The command itself sleeps as `sleep <token>0`
/// until the sandbox ends. Returns the token and the open stream (the
/// command stays live while it is held).
async fn start_fallback_escapes(t: &TestAgent) -> (String, tonic::Streaming<pb::ProcessEvent>) {
    let token = token();
    let q = ">/dev/null 2>&1 </dev/null";
    let script = format!(
        "env -i sleep {token}1 {q} &\n\
         env -u RAYITO_SANDBOX sleep {token}2 {q} &\n\
         setsid sleep {token}3 {q} &\n\
         nohup sleep {token}4 {q} &\n\
         ( (sleep {token}5 {q} &) & )\n\
         setsid nohup sh -c '(sleep {token}6 {q} &) &' {q} &\n\
         echo started\n\
         sleep {token}0"
    );
    let mut stream = t
        .process()
        .start(bash(&script))
        .await
        .expect("Start")
        .into_inner();
    let Event::Start(_) = next_event(&mut stream).await else {
        panic!("the command starts")
    };
    let running = wait_for_sleepers(&token, 7).await;
    assert_eq!(running.len(), 7, "every escape runs: {running:?}");
    (token, stream)
}

#[tokio::test]
async fn without_a_cgroup_no_contained_escape_survives_terminate() {
    let t = fallback_agent().await;
    let (token, _live) = start_fallback_escapes(&t).await;
    assert_eq!(t.hook("terminate", None).await.0, 200);
    assert_none_survive(&token, "/terminate without a cgroup").await;
}

#[tokio::test]
async fn without_a_cgroup_no_contained_escape_survives_kill() {
    let t = fallback_agent().await;
    let (token, _live) = start_fallback_escapes(&t).await;
    t.agent.kill();
    assert_none_survive(&token, "Agent::kill without a cgroup").await;
}

#[tokio::test]
async fn without_a_cgroup_no_contained_escape_survives_drop() {
    let t = fallback_agent().await;
    let (token, live) = start_fallback_escapes(&t).await;
    drop(t);
    drop(live);
    assert_none_survive(&token, "dropping the agent without a cgroup").await;
}

#[tokio::test]
async fn without_a_cgroup_no_contained_escape_survives_a_kill_mode_deadline() {
    let t = fallback_agent().await;
    let (token, _live) = start_fallback_escapes(&t).await;
    t.agent.expire_deadline_now();
    assert_none_survive(&token, "the kill-mode deadline without a cgroup").await;
}

/// Once the command that started them has ended (its process group is no
/// longer tracked), the marker alone finds what left the group.
#[tokio::test]
async fn without_a_cgroup_the_marker_finds_escapes_of_an_ended_command() {
    let t = fallback_agent().await;
    let token = token();
    let q = ">/dev/null 2>&1 </dev/null";
    let o = run_bash(
        &t,
        &format!(
            "setsid sleep {token}3 {q} &\n\
             nohup setsid sleep {token}4 {q} &\n\
             ( (setsid sleep {token}5 {q} &) & )\n\
             echo started"
        ),
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&o.stdout), "started\n");
    assert_eq!(wait_for_sleepers(&token, 3).await.len(), 3);
    assert_eq!(t.hook("terminate", None).await.0, 200);
    assert_none_survive(&token, "/terminate without a cgroup (ended command)").await;
}

/// SIGKILL from the client to one command (the SDK's `kill`) ends what the
/// command moved out of its process group too (its own cgroup), and
/// nothing of another command; its background processes otherwise outlive
/// it (a command that ended keeps what it started in the background).
#[tokio::test]
async fn sigkill_to_a_command_ends_what_left_its_process_group() {
    let t = TestAgent::start().await;
    if !has_cgroup(&t) {
        return;
    }
    let token = token();
    let q = ">/dev/null 2>&1 </dev/null";
    let mut command = t
        .process()
        .start(bash(&format!(
            "setsid sleep {token}1 {q} &\n\
             ( (sleep {token}2 {q} &) & )\n\
             env -i setsid nohup sh -c '(sleep {token}3 {q} &) &' {q} &\n\
             sleep {token}0"
        )))
        .await
        .expect("Start")
        .into_inner();
    let Event::Start(started) = next_event(&mut command).await else {
        panic!("the command starts")
    };
    // A command that ended, whose background process lives on.
    let o = run_bash(&t, &format!("setsid sleep {token}8 {q} &")).await;
    assert_eq!(o.end.map(|e| e.exit_code), Some(0));
    let _bystander = t
        .process()
        .start(bash(&format!("sleep {token}9")))
        .await
        .expect("Start");
    assert_eq!(wait_for_sleepers(&token, 6).await.len(), 6);
    t.process()
        .send_signal(pb::SendSignalRequest {
            pid: started.pid,
            signal: 9,
        })
        .await
        .expect("SendSignal");
    let left = wait_for_sleepers(&token, 2).await;
    let mut names: Vec<String> = left.into_iter().map(|(_, cmd)| cmd).collect();
    names.sort();
    assert_eq!(
        names,
        [format!("sleep {token}8 "), format!("sleep {token}9 ")],
        "only the other commands' processes are left"
    );
    assert_eq!(t.hook("terminate", None).await.0, 200);
    assert_none_survive(&token, "/terminate").await;
}

/// The host directory of the cgroup v2 path `path` (as `/proc/<pid>/cgroup`
/// gives it, for a process in the root cgroup namespace).
fn cgroup2_dir(path: &str) -> std::path::PathBuf {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let mount_point = mountinfo
        .lines()
        .find_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            (right.split_whitespace().next()? == "cgroup2")
                .then(|| left.split_whitespace().nth(4).map(str::to_owned))?
        })
        .expect("a cgroup2 mount");
    std::path::Path::new(&mount_point).join(path.trim_start_matches('/'))
}

/// A command runs in a v2 cgroup of its own inside its sandbox's, and in
/// the sandbox's own cgroup of every v1 hierarchy the sandbox uses (where
/// its limits are on a hybrid host); once it ended with nothing left in
/// the background, its cgroup is removed.
#[tokio::test]
async fn a_command_has_its_own_cgroup_inside_its_sandboxs() {
    let t = TestAgent::start().await;
    if !has_cgroup(&t) {
        return;
    }
    let o = run_bash(&t, "cat /proc/self/cgroup").await;
    assert_eq!(o.end.map(|e| e.exit_code), Some(0));
    let cgroups = String::from_utf8(o.stdout).expect("utf-8");
    let v2 = cgroups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .expect("a cgroup v2 line");
    let (sandbox, command) = v2.rsplit_once('/').expect("a nested cgroup");
    assert!(
        command.starts_with("command-")
            && sandbox.rsplit('/').next().unwrap().starts_with("sandbox-"),
        "the command's v2 cgroup is its own, inside the sandbox's: {cgroups}"
    );
    let sandbox_name = sandbox.rsplit('/').next().unwrap();
    for line in cgroups.lines().filter(|l| !l.starts_with("0::")) {
        assert!(
            !line.contains("command-"),
            "no v1 cgroup of the command's own: {cgroups}"
        );
        if line.contains("/rayito-") {
            assert!(
                line.ends_with(&format!("/{sandbox_name}")),
                "a v1 cgroup of the agent's is the sandbox's: {cgroups}"
            );
        }
    }
    let limits = t.agent.env().containment().limits;
    let v2_controllers = std::fs::read_to_string(cgroup2_dir(sandbox).join("cgroup.controllers"))
        .expect("the sandbox's cgroup.controllers");
    if limits.pids_max.is_some() && !v2_controllers.split_whitespace().any(|c| c == "pids") {
        assert!(
            cgroups.lines().any(|l| l
                .split(':')
                .nth(1)
                .is_some_and(|c| c.split(',').any(|c| c == "pids"))
                && l.ends_with(&format!("/{sandbox_name}"))),
            "the sandbox's pids limit is in v1, and the command is in it: {cgroups}"
        );
    }
    let dir = cgroup2_dir(v2);
    let gone_by = std::time::Instant::now() + Duration::from_secs(10);
    while dir.exists() {
        assert!(
            std::time::Instant::now() < gone_by,
            "the ended command's empty cgroup {} is left",
            dir.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        cgroup2_dir(sandbox).exists(),
        "the sandbox's cgroup stays while the sandbox lives"
    );
}

/// A command that times out is ended whole: 5 s after the SIGTERM to its
/// process group (which its first process obeys, and a double fork inside
/// the group too), what it moved out of the group (`setsid`) and what
/// ignores SIGTERM in the group are SIGKILLed through its cgroup, though
/// its first process has ended; other commands' processes are left alone.
#[tokio::test]
async fn a_timeout_ends_what_left_the_process_group() {
    let t = TestAgent::start().await;
    if !has_cgroup(&t) {
        return;
    }
    let token = token();
    let q = ">/dev/null 2>&1 </dev/null";
    // A command that ended, whose background process lives on, and one
    // that runs.
    let o = run_bash(&t, &format!("setsid sleep {token}8 {q} &")).await;
    assert_eq!(o.end.map(|e| e.exit_code), Some(0));
    let _bystander = t
        .process()
        .start(bash(&format!("sleep {token}9")))
        .await
        .expect("Start");
    let mut req = bash(&format!(
        "setsid sleep {token}1 {q} &\n\
         ( (sleep {token}2 {q} &) & )\n\
         env -i setsid nohup sh -c '(sleep {token}3 {q} &) &' {q} &\n\
         (trap '' TERM; exec sleep {token}4 {q}) &\n\
         sleep {token}0"
    ));
    // Long enough for every process to start on a loaded machine.
    req.timeout_ms = 4_000;
    let started = std::time::Instant::now();
    let stream = t.process().start(req).await.expect("Start").into_inner();
    assert_eq!(wait_for_sleepers(&token, 7).await.len(), 7);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "every process started before the timeout"
    );
    let o = outcome(&collect_events(stream).await);
    let end = o.end.expect("an end");
    assert_eq!(end.status, "timeout");
    assert_eq!(end.signal, Some(15), "the command obeyed the SIGTERM");
    let left = wait_for_sleepers(&token, 2).await;
    let mut names: Vec<String> = left.into_iter().map(|(_, cmd)| cmd).collect();
    names.sort();
    assert_eq!(
        names,
        [format!("sleep {token}8 "), format!("sleep {token}9 ")],
        "only the other commands' processes are left"
    );
    assert_eq!(t.hook("terminate", None).await.0, 200);
    assert_none_survive(&token, "/terminate").await;
}

/// `kill_tree` needs the command's own cgroup: without one, the start is
/// refused (FAILED_PRECONDITION, the message pinned) and nothing runs.
#[tokio::test]
async fn without_a_cgroup_a_kill_tree_start_is_refused() {
    let t = fallback_agent().await;
    let token = token();
    let mut req = bash(&format!("sleep {token}1"));
    req.kill_tree = true;
    let status = t.process().start(req).await.expect_err("refused");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    assert_eq!(
        status.message(),
        "kill_tree needs a cgroup v2 with cgroup.kill (Linux 5.14+, root or a delegated \
         subtree), which this host does not give the agent; start the command without kill_tree"
    );
    assert!(sleepers(&token).is_empty(), "nothing was started");
}
