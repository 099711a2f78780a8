//! `rayito sandbox exec` and `files get` as a pipeline stage, the binary
//! run as a child process on the local backend: output as bytes end to end
//! (and as base64 in JSON when it is not UTF-8), a stdout that cannot be
//! written (exit 1 and one line, the command ended), signals passed on to
//! the command in the sandbox (and a second one killing it), `--detach`,
//! `-i` (stdin streamed) and `-t` (a terminal).

use std::io::{Read as _, Write as _};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::Value;

use crate::skip_support;

use crate::session;
use session::Session;

/// What rayito says when stdout is /dev/full.
const FULL: &str = "rayito: cannot write to stdout: No space left on device (os error 28)\n";

fn create(s: &Session) -> String {
    s.ok(&["sandbox", "create"]).trim().to_owned()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `len` bytes no UTF-8 decoder accepts whole (xorshift, fixed seed).
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()[3]
        })
        .collect()
}

/// Uploads `data` to `remote` through a file of the session's temp dir.
fn put(s: &Session, id: &str, data: &[u8], remote: &str) {
    let local = s.tmp.path().join("upload.bin");
    std::fs::write(&local, data).unwrap();
    s.ok(&[
        "sandbox",
        "files",
        "put",
        id,
        local.to_str().unwrap(),
        remote,
    ]);
}

/// `files get --output json` of `path`: the document.
fn get_json(s: &Session, id: &str, path: &str) -> Value {
    s.json(&["--output", "json", "sandbox", "files", "get", id, path])
}

fn dev_full() -> std::fs::File {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full")
}

/// Whether a process whose command line matches `pattern` (a `pgrep -f`
/// pattern that does not match itself, like `^slee[p] 4242`: the `sleep`
/// itself, not the bash that starts it, which matches before it ran a
/// `trap`) runs in the sandbox, asked there.
fn running(s: &Session, id: &str, pattern: &str) -> bool {
    let out = s.run(&[
        "sandbox",
        "exec",
        id,
        "--",
        &format!("pgrep -f '{pattern}'"),
    ]);
    match out.status.code() {
        Some(0) => true,
        Some(1) => false,
        other => panic!("pgrep in the sandbox: {other:?}: {}", text(&out.stderr)),
    }
}

/// Waits (up to 30 s) until `running` is `wanted`.
fn wait_running(s: &Session, id: &str, pattern: &str, wanted: bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while running(s, id, pattern) != wanted {
        assert!(
            Instant::now() < deadline,
            "{pattern} never became running={wanted}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A number for `sleep` no other process on this host runs with (the
/// local backend's sandboxes share its process list): `base.<this pid>`.
fn marker(base: u32) -> String {
    format!("{base}.{}", std::process::id())
}

/// `rayito sandbox exec ID -- LINE` started in the background.
fn spawn_exec(s: &Session, id: &str, line: &str) -> Child {
    s.cmd(&["sandbox", "exec", id, "--", line])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rayito")
}

/// Waits (up to 30 s) for `child` to exit; its exit code.
fn exit_code(mut child: Child) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("wait for rayito") {
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("rayito did not exit within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(child: &Child, signal: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, signal).expect("signal rayito");
}

#[test]
fn exec_and_files_get_carry_bytes_not_text() {
    let s = Session::local();
    let id = create(&s);

    // gzip's output through a real pipe into gunzip.
    let mut rayito = s
        .cmd(&["sandbox", "exec", &id, "--", "echo hello | gzip -c"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start rayito");
    let gunzip = Command::new("gunzip")
        .stdin(rayito.stdout.take().expect("rayito's stdout"))
        .output()
        .expect("run gunzip");
    assert_eq!(rayito.wait().expect("wait for rayito").code(), Some(0));
    assert!(gunzip.status.success(), "{}", text(&gunzip.stderr));
    assert_eq!(gunzip.stdout, b"hello\n");

    // Bytes no decoder accepts, on stdout and stderr, arrive as they are.
    let out = s.run(&[
        "sandbox",
        "exec",
        &id,
        "--",
        r"printf '\x00\xff\xfe'; printf '\xc3\x28\xff' >&2",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, b"\x00\xff\xfe");
    assert_eq!(out.stderr, b"\xc3\x28\xff");

    // 3 MB of noise: many chunks, each cut anywhere in a would-be character.
    let data = noise(3_000_000);
    put(&s, &id, &data, "/home/user/noise.bin");
    let out = s.run(&["sandbox", "exec", &id, "--", "cat /home/user/noise.bin"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout == data, "exec's stdout is not the file's bytes");
    let out = s.run(&["sandbox", "files", "get", &id, "/home/user/noise.bin"]);
    assert!(out.status.success());
    assert!(
        out.stdout == data,
        "files get's stdout is not the file's bytes"
    );

    // JSON: text when UTF-8, else base64, and a field that says which.
    let v: Value = serde_json::from_slice(
        &s.run(&[
            "--output",
            "json",
            "sandbox",
            "exec",
            &id,
            "--",
            r"printf '\x00\xff\xfe'; echo héllo >&2; exit 4",
        ])
        .stdout,
    )
    .expect("one JSON document");
    assert_eq!(v["exit_code"], 4);
    assert_eq!(v["stdout_encoding"], "base64");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(v["stdout"].as_str().unwrap())
        .unwrap();
    assert_eq!(decoded, b"\x00\xff\xfe");
    assert_eq!(v["stderr_encoding"], "utf-8");
    assert_eq!(v["stderr"], "héllo\n");

    let small = &data[..1000];
    put(&s, &id, small, "/home/user/small.bin");
    let v = get_json(&s, &id, "/home/user/small.bin");
    assert_eq!(v["size"], 1000);
    assert_eq!(v["encoding"], "base64");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(v["content"].as_str().unwrap())
        .unwrap();
    assert!(decoded == small, "files get's JSON content is not the file");
    s.ok(&[
        "sandbox",
        "exec",
        &id,
        "--",
        "printf 'a,b' > /home/user/t.csv",
    ]);
    let v = get_json(&s, &id, "/home/user/t.csv");
    assert_eq!(
        (&v["content"], &v["encoding"]),
        (&"a,b".into(), &"utf-8".into())
    );
    s.ok(&["sandbox", "kill", &id]);
}

#[test]
fn a_stdout_that_cannot_be_written_exits_1_and_ends_the_command() {
    let s = Session::local();
    let id = create(&s);
    s.ok(&[
        "sandbox",
        "exec",
        &id,
        "--",
        "head -c 3000000 /dev/zero > /home/user/zeros",
    ]);
    let cases: [&[&str]; 6] = [
        &["completions", "bash"],
        &["sandbox", "exec", &id, "--", "seq 100000"],
        &["sandbox", "exec", "-t", &id, "--", "seq 100000"],
        &["--output", "json", "sandbox", "exec", &id, "--", "seq 3"],
        &["sandbox", "files", "get", &id, "/home/user/zeros"],
        &[
            "--output",
            "json",
            "sandbox",
            "files",
            "get",
            &id,
            "/home/user/zeros",
        ],
    ];
    for args in cases {
        let out = s
            .cmd(args)
            .stdout(dev_full())
            .stderr(Stdio::piped())
            .output()
            .expect("run rayito");
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(text(&out.stderr), FULL, "{args:?}");
    }

    // A command that would write forever is ended, not left behind: on a
    // full disk, and when the reader goes away (exit 0, nothing said).
    let out = s
        .cmd(&[
            "sandbox",
            "exec",
            &id,
            "--",
            &format!("yes marker-{}", marker(4250)),
        ])
        .stdout(dev_full())
        .stderr(Stdio::piped())
        .output()
        .expect("run rayito");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), FULL);
    wait_running(&s, &id, &format!("ye[s] marker-{}", marker(4250)), false);
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    let out = s
        .cmd(&[
            "sandbox",
            "exec",
            &id,
            "--",
            &format!("yes marker-{}", marker(4251)),
        ])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run rayito");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    wait_running(&s, &id, &format!("ye[s] marker-{}", marker(4251)), false);
    s.ok(&["sandbox", "kill", &id]);
}

#[test]
fn signals_reach_the_command_in_the_sandbox_and_detach_leaves_it_running() {
    use rustix::process::Signal;
    let s = Session::local();
    let id = create(&s);

    // Ctrl-C and SIGTERM end the command there; rayito exits 130 and 143.
    for (sig, seconds, code) in [
        (Signal::INT, marker(4242), 130),
        (Signal::TERM, marker(4243), 143),
    ] {
        let child = spawn_exec(&s, &id, &format!("sleep {seconds}"));
        let pattern = format!("^slee[p] {seconds}");
        wait_running(&s, &id, &pattern, true);
        signal(&child, sig);
        assert_eq!(exit_code(child), Some(code), "{sig:?}");
        wait_running(&s, &id, &pattern, false);
    }

    // A command that ignores Ctrl-C: the second one kills it.
    let seconds = marker(4244);
    let pattern = format!("^slee[p] {seconds}");
    let child = spawn_exec(
        &s,
        &id,
        &format!("trap '' INT; sleep {seconds}; echo survived"),
    );
    wait_running(&s, &id, &pattern, true);
    signal(&child, Signal::INT);
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        running(&s, &id, &pattern),
        "the first Ctrl-C is only passed on"
    );
    signal(&child, Signal::INT);
    let mut child = child;
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert_eq!(exit_code(child), Some(130));
    assert_eq!(stdout, "");
    wait_running(&s, &id, &pattern, false);

    // --detach: the pid, at once, and the command runs on.
    let started = Instant::now();
    let seconds = marker(4245);
    let pattern = format!("^slee[p] {seconds}");
    let pid = s.ok(&[
        "sandbox",
        "exec",
        "--detach",
        &id,
        "--",
        &format!("sleep {seconds}"),
    ]);
    assert!(started.elapsed() < Duration::from_secs(20));
    let pid: u32 = pid.trim().parse().expect("a pid");
    wait_running(&s, &id, &pattern, true);
    s.ok(&["sandbox", "exec", &id, "--", &format!("kill {pid}")]);
    wait_running(&s, &id, &pattern, false);
    let v = s.json(&[
        "--output", "json", "sandbox", "exec", "-d", &id, "--", "true",
    ]);
    assert!(v["pid"].as_u64().is_some(), "{v}");
    assert_eq!(v["sandbox_id"], id.as_str());
    let out = s.run(&["sandbox", "exec", "-d", "-i", &id, "--", "true"]);
    assert_eq!(out.status.code(), Some(125), "--detach takes no stdin");
    s.ok(&["sandbox", "kill", &id]);
}

#[test]
fn exec_i_streams_stdin_and_exec_t_gives_a_terminal() {
    let s = Session::local();
    let id = create(&s);
    let piped = |args: &[&str], input: &[u8]| {
        let mut child = s
            .cmd(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start rayito");
        let mut stdin = child.stdin.take().unwrap();
        let input = input.to_vec();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(&input);
        });
        let out = child.wait_with_output().expect("run rayito");
        writer.join().unwrap();
        out
    };

    // Without -i the command reads /dev/null; with it, rayito's stdin.
    let out = piped(
        &["sandbox", "exec", &id, "--", "python3", "-"],
        b"print(1+1)\n",
    );
    assert_eq!(
        (out.status.code(), text(&out.stdout)),
        (Some(0), String::new())
    );
    let out = piped(
        &["sandbox", "exec", "-i", &id, "--", "python3", "-"],
        b"print(1+1)\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "2\n");
    let data = noise(2_000_000);
    let out = piped(&["sandbox", "exec", "-i", &id, "--", "cat"], &data);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        out.stdout == data,
        "stdin did not come back through cat as it was"
    );

    // -t: stdin and stdout are a terminal there; the exit code is the
    // command's, and -i types the input into it.
    let out = s.run(&[
        "sandbox",
        "exec",
        "-t",
        &id,
        "--",
        "test -t 0 && test -t 1 && tty; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("/dev/pts/"),
        "{}",
        text(&out.stdout)
    );
    let out = s.run(&[
        "--output", "json", "sandbox", "exec", "-t", &id, "--", "true",
    ]);
    assert_eq!(out.status.code(), Some(125));
    let v: Value = serde_json::from_slice(&out.stdout).expect("a JSON error");
    assert_eq!(
        v["error"]["message"],
        "exec -t writes the terminal's output as it comes: it has no JSON form (leave out -t or --output json)"
    );
    let out = s.run(&["sandbox", "exec", &id, "--", "test -t 1"]);
    assert_eq!(out.status.code(), Some(1), "no terminal without -t");
    let out = piped(
        &["sandbox", "exec", "-it", &id, "--", "bash --norc"],
        b"exit 7\n",
    );
    assert_eq!(out.status.code(), Some(7), "{}", text(&out.stderr));
    s.ok(&["sandbox", "kill", &id]);
}

/// `exec --kill-tree`: the timeout's SIGTERM reaches what the command
/// moved out of its process group (an escape records it), exit 124.
#[test]
fn kill_tree_sends_the_timeouts_sigterm_to_what_left_the_group() {
    let s = Session::local();
    let id = create(&s);
    let cgroup = s.ok(&["sandbox", "exec", &id, "--", "cat /proc/self/cgroup"]);
    if !cgroup.contains("/command-") {
        skip_support::skip(format!(
            "needs a writable cgroup v2 with cgroup.kill; a command is in {cgroup:?}"
        ));
        s.ok(&["sandbox", "kill", &id]);
        return;
    }
    let q = ">/dev/null 2>&1 </dev/null";
    let script = format!(
        "setsid sh -c 'trap \"echo term > /tmp/term\" TERM; touch /tmp/ready; sleep 4343 & wait' {q} &\n\
         while [ ! -f /tmp/ready ]; do sleep 0.05; done\n\
         sleep 4344"
    );
    let out = s.run(&[
        "sandbox",
        "exec",
        "--kill-tree",
        "--timeout",
        "10",
        &id,
        "--",
        &script,
    ]);
    assert_eq!(out.status.code(), Some(124), "{}", text(&out.stderr));
    assert!(!running(&s, &id, "^slee[p] 4343"), "the escape is gone");
    let marker = s.ok(&["sandbox", "exec", &id, "--", "cat /tmp/term"]);
    assert_eq!(marker, "term\n");
    s.ok(&["sandbox", "kill", &id]);
}
