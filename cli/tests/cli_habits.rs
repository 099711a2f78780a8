//! What people expect of a CLI, tried as a new user would, the binary run
//! as a child process on the local backend: `exec` passing its arguments
//! as given, exit codes a command cannot be confused with, `--output json`
//! for usage errors, completions, examples in `--help`, `-q`, `sandbox
//! connect` for another shell, streamed and recursive `files put/get`
//! (through S3 above the staging threshold), and `sandbox network`.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::session;
use session::Session;

/// A new sandbox of the session's daemon; its id.
fn create(s: &Session) -> String {
    s.ok(&["sandbox", "create"]).trim().to_owned()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn exec_passes_arguments_as_given_and_keeps_its_codes_apart() {
    let s = Session::local();
    let id = create(&s);
    s.ok(&["sandbox", "exec", &id, "--", "touch '/home/user/a b'"]);

    // Several words: each passed exactly (no word splitting, no expansion).
    let out = s.run(&[
        "sandbox",
        "exec",
        &id,
        "--cwd",
        "/home/user",
        "--",
        "ls",
        "a b",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "a b\n");
    let out = s.run(&[
        "sandbox", "exec", &id, "--", "printf", "%s|", "$HOME", "it's", "", "*",
    ]);
    assert_eq!(text(&out.stdout), "$HOME|it's||*|");
    // One word: a bash command line, run by a login bash.
    let out = s.run(&[
        "sandbox",
        "exec",
        &id,
        "--",
        "echo $((6 * 7)) | tr 4 X; shopt -q login_shell && echo login",
    ]);
    assert_eq!(text(&out.stdout), "X2\nlogin\n");
    // --env reaches the command.
    let out = s.run(&[
        "sandbox",
        "exec",
        &id,
        "-e",
        "GREETING=hi there",
        "--",
        "printenv",
        "GREETING",
    ]);
    assert_eq!(text(&out.stdout), "hi there\n");
    // -e K alone: the value K has in rayito's environment, never on
    // rayito's command line; an unset K is refused by name (usage: 125).
    let out = s
        .cmd(&[
            "sandbox",
            "exec",
            &id,
            "-e",
            "RAYITO_TEST_TOKEN",
            "--",
            "printenv",
            "RAYITO_TEST_TOKEN",
        ])
        .env("RAYITO_TEST_TOKEN", "from the environment")
        .output()
        .unwrap();
    assert_eq!(
        text(&out.stdout),
        "from the environment\n",
        "{}",
        text(&out.stderr)
    );
    let out = s
        .cmd(&[
            "sandbox",
            "exec",
            &id,
            "-e",
            "RAYITO_TEST_UNSET",
            "--",
            "true",
        ])
        .env_remove("RAYITO_TEST_UNSET")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(
        text(&out.stderr).contains(
            "RAYITO_TEST_UNSET is not set in rayito's environment; export it or pass RAYITO_TEST_UNSET=VALUE"
        ),
        "{}",
        text(&out.stderr)
    );
    // A value that is not UTF-8, and an empty name: usage errors too.
    let not_utf8 = {
        use std::os::unix::ffi::OsStrExt as _;
        std::ffi::OsStr::from_bytes(b"caf\xe9")
    };
    for (name, env, reason) in [
        (
            "RAYITO_TEST_LATIN1",
            Some(not_utf8),
            "RAYITO_TEST_LATIN1 in rayito's environment is not UTF-8",
        ),
        (
            "",
            None,
            "expected K=V, or K for the value K has in rayito's environment",
        ),
    ] {
        let mut cmd = s.cmd(&["sandbox", "exec", &id, "-e", name, "--", "true"]);
        if let Some(value) = env {
            cmd.env(name, value);
        }
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(125), "{name:?}");
        assert!(text(&out.stderr).contains(reason), "{}", text(&out.stderr));
    }

    // The command's code, whatever it is; 128+N for a signal.
    for code in ["0", "1", "2", "75", "255"] {
        let out = s.run(&["sandbox", "exec", &id, "--", &format!("exit {code}")]);
        assert_eq!(out.status.code(), Some(code.parse().unwrap()));
    }
    let out = s.run(&["sandbox", "exec", &id, "--", "kill -TERM $$"]);
    assert_eq!(out.status.code(), Some(143));
    // Past --timeout: 124, with the SDK's error.
    let out = s.run(&[
        "sandbox",
        "exec",
        &id,
        "--timeout",
        "1",
        "--",
        "sleep",
        "30",
    ]);
    assert_eq!(out.status.code(), Some(124), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("kind: timeout"),
        "{}",
        text(&out.stderr)
    );
    // rayito's own failures: 125, usage errors included; elsewhere 1 and 2.
    let out = s.run(&["sandbox", "exec", "microvm-unknown", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        text(&out.stderr).starts_with(
            "error: control plane call GetMicrovm found no such sandbox: MicroVM not found: microvm-unknown"
        ),
        "{}",
        text(&out.stderr)
    );
    let out = s.run(&["--output", "json", "sandbox", "exec", &id]);
    assert_eq!(out.status.code(), Some(125));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["error"]["message"],
        "the following required arguments were not provided: <CMD>..."
    );
    let out = s.run(&["sandbox", "shell"]);
    assert_eq!(out.status.code(), Some(125));
    let out = s.run(&["sandbox", "info"]);
    assert_eq!(out.status.code(), Some(2));
    let out = s.run(&["sandbox", "run-code", "microvm-unknown", "1"]);
    assert_eq!(out.status.code(), Some(1));

    // JSON tells the command's code from rayito's failure.
    let out = s.run(&["--output", "json", "sandbox", "exec", &id, "--", "exit 125"]);
    assert_eq!(out.status.code(), Some(125));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["exit_code"], 125);
    let out = s.run(&[
        "--output",
        "json",
        "sandbox",
        "exec",
        "microvm-unknown",
        "--",
        "true",
    ]);
    assert_eq!(out.status.code(), Some(125));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "sandbox_not_found");
    assert!(v.get("exit_code").is_none());

    s.ok(&["sandbox", "kill", &id]);
}

#[test]
fn every_error_is_json_with_output_json() {
    let s = Session::local();
    // A usage error: one document on stdout, nothing on stderr, exit 2.
    let out = s.run(&["--output", "json", "sandbox", "create", "--timeout", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("a JSON usage error");
    assert_eq!(v["error"]["kind"], "usage");
    assert_eq!(v["error"]["retryable"], false);
    assert_eq!(v["error"]["invalid_argument"], "--timeout <SECS>");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid value 'soon' for '--timeout <SECS>'"),
        "{v}"
    );
    // --output json after the subcommand, an unknown subcommand.
    let out = s.run(&["sandbox", "launch", "--output", "json"]);
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "usage");
    // A missing subcommand.
    let out = s.run(&["--output", "json", "sandbox"]);
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["error"]["message"],
        "a subcommand is required: rayito sandbox [OPTIONS] <COMMAND>"
    );
    // Text usage errors stay clap's, on stderr.
    let out = s.run(&["sandbox", "launch"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("error: unrecognized subcommand 'launch'"));
    assert!(out.stdout.is_empty());
    // local stop, with nothing running.
    let v = s.json(&["--output", "json", "local", "stop"]);
    assert_eq!(v, serde_json::json!({ "stopped": false }));
    // A CLI failure: a directory without --recursive.
    let dir = s.tmp.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    let id = create(&s);
    let out = s.run(&[
        "--output",
        "json",
        "sandbox",
        "files",
        "put",
        &id,
        dir.to_str().unwrap(),
        "/home/user/d",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["error"]["message"],
        format!(
            "{} is a directory: pass --recursive to upload it",
            dir.display()
        )
    );
    s.ok(&["sandbox", "kill", &id]);
}

#[test]
fn help_shows_examples_and_completions_load() {
    let s = Session::local();
    let help = s.ok(&["sandbox", "exec", "--help"]);
    assert!(
        help.contains("Runs a command in a login bash (`bash -l -c`"),
        "{help}"
    );
    assert!(
        help.contains("Examples:\n  rayito sandbox exec ID -- ls -l \"my file.txt\""),
        "{help}"
    );
    let short = s.ok(&["-h"]);
    assert!(
        short.contains("`rayito --help` adds exit codes and the environment."),
        "{short}"
    );
    let long = s.ok(&["--help"]);
    assert!(long.contains("Exit codes:\n  0    success"), "{long}");
    assert!(long.contains("125"), "{long}");

    let bash = s.ok(&["completions", "bash"]);
    assert!(bash.contains("complete -F _rayito"), "{bash}");
    // bash loads it, and it completes subcommands.
    let script = s.tmp.path().join("rayito.bash");
    std::fs::write(&script, &bash).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(rayito sandbox ex); COMP_CWORD=2; COMP_LINE='rayito sandbox ex'; COMP_POINT=17; _rayito rayito ex sandbox; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display()
        ))
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout), "exec\n", "{}", text(&out.stderr));
    assert!(s.ok(&["completions", "zsh"]).starts_with("#compdef rayito"));
    assert!(
        s.ok(&["completions", "fish"])
            .contains("complete -c rayito")
    );
    let out = s.run(&["completions", "powershell-core"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn connect_prints_what_another_shell_needs() {
    let s = Session::local();
    let id = create(&s);
    let lines = s.ok(&["sandbox", "connect", &id]);
    assert_eq!(
        lines,
        format!(
            "export RAYITO_SANDBOX_ID={id}\nexport RAYITO_CACHE_DIR={}\nexport RAYITO_BACKEND=local\n",
            s.cache.path().display()
        )
    );
    let token = std::fs::read_to_string(s.cache.path().join("tokens").join(&id)).unwrap();
    assert!(!lines.contains(token.trim()));
    // Another shell, with none of this session's environment, evaluates
    // them and reaches the sandbox.
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "eval \"$1\"; {bin} sandbox exec \"$RAYITO_SANDBOX_ID\" -- echo via-connect",
            bin = env!("CARGO_BIN_EXE_rayito"),
        ))
        .arg("bash")
        .arg(&lines)
        .env_remove("RAYITO_BACKEND")
        .env_remove("RAYITO_CACHE_DIR")
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout), "via-connect\n", "{}", text(&out.stderr));
    let v = s.json(&["--output", "json", "sandbox", "connect", &id]);
    assert_eq!(v["env"]["RAYITO_SANDBOX_ID"], id.as_str());
    s.ok(&["sandbox", "kill", &id]);
}

/// Writes `size` bytes of a pattern that differs per file.
fn pattern(path: &Path, size: usize, seed: u8) -> Vec<u8> {
    let data: Vec<u8> = (0..size)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect();
    std::fs::write(path, &data).unwrap();
    data
}

#[test]
fn files_move_directories_and_large_files_streamed() {
    let s = Session::local();
    let id = create(&s);

    // A tree up and down again: files, an empty directory, a symlink skipped.
    let up = s.tmp.path().join("up");
    std::fs::create_dir_all(up.join("sub/deeper")).unwrap();
    std::fs::create_dir_all(up.join("empty")).unwrap();
    let a = pattern(&up.join("a.txt"), 10, 1);
    let b = pattern(&up.join("sub/b.bin"), 300_000, 2);
    let c = pattern(&up.join("sub/deeper/c"), 0, 3);
    std::os::unix::fs::symlink("a.txt", up.join("link")).unwrap();
    let put = s.run(&[
        "--output",
        "json",
        "sandbox",
        "files",
        "put",
        &id,
        "-r",
        up.to_str().unwrap(),
        "/home/user/tree",
    ]);
    assert!(put.status.success(), "{}", text(&put.stderr));
    assert!(text(&put.stderr).contains("skipped") && text(&put.stderr).contains("link"));
    let v: Value = serde_json::from_slice(&put.stdout).unwrap();
    assert_eq!(v["bytes"], 300_010);
    assert_eq!(v["files"].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(v["directories"], 3);
    let listing = s.ok(&[
        "sandbox",
        "exec",
        &id,
        "--cwd",
        "/home/user/tree",
        "--",
        "find . | sort",
    ]);
    assert_eq!(
        listing,
        ".\n./a.txt\n./empty\n./sub\n./sub/b.bin\n./sub/deeper\n./sub/deeper/c\n"
    );

    let down = s.tmp.path().join("down");
    let got = s.run(&[
        "sandbox",
        "files",
        "get",
        &id,
        "--recursive",
        "/home/user/tree",
        down.to_str().unwrap(),
    ]);
    assert!(got.status.success(), "{}", text(&got.stderr));
    assert_eq!(std::fs::read(down.join("a.txt")).unwrap(), a);
    assert_eq!(std::fs::read(down.join("sub/b.bin")).unwrap(), b);
    assert_eq!(std::fs::read(down.join("sub/deeper/c")).unwrap(), c);
    assert!(down.join("empty").is_dir());
    assert!(
        text(&got.stdout).contains("sub/b.bin (300000 bytes)"),
        "{}",
        text(&got.stdout)
    );

    // A failed get leaves no partial file behind.
    let missing = s.tmp.path().join("missing");
    let out = s.run(&[
        "sandbox",
        "files",
        "get",
        &id,
        "/home/user/nope",
        missing.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let left: Vec<_> = std::fs::read_dir(s.tmp.path())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("missing"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    // Above the staging threshold (8 MiB), with RAYITO_TRANSFER_BUCKET set,
    // files go through S3: a bucket that does not exist fails them, while a
    // small file still goes straight to the agent.
    let big_path = s.tmp.path().join("big.bin");
    let big = pattern(&big_path, 9 << 20, 4);
    let small_path = s.tmp.path().join("small.bin");
    pattern(&small_path, 1000, 5);
    let with_bucket = |bucket: &str, args: &[&str]| {
        s.cmd(args)
            .env("RAYITO_TRANSFER_BUCKET", bucket)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = with_bucket(
        "no-such-bucket-rayito",
        &[
            "sandbox",
            "files",
            "put",
            &id,
            small_path.to_str().unwrap(),
            "/home/user/small.bin",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = with_bucket(
        "no-such-bucket-rayito",
        &[
            "--output",
            "json",
            "sandbox",
            "files",
            "put",
            &id,
            big_path.to_str().unwrap(),
            "/home/user/big.bin",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["error"]["kind"].as_str().is_some(), "{v}");
    // The local daemon has `rayito::LOCAL_BUCKET` from the start, as the
    // SDK's embedded local backend: up and down through it, byte for byte.
    let bucket = rayito::LOCAL_BUCKET;
    let out = with_bucket(
        bucket,
        &[
            "sandbox",
            "files",
            "put",
            &id,
            big_path.to_str().unwrap(),
            "/home/user/big.bin",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("/home/user/big.bin ({} bytes)\n", big.len())
    );
    let back = s.tmp.path().join("big.back");
    let out = with_bucket(
        bucket,
        &[
            "sandbox",
            "files",
            "get",
            &id,
            "/home/user/big.bin",
            back.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        std::fs::read(&back).unwrap() == big,
        "the staged download differs"
    );
    // Streamed to stdout without a staging too.
    let out = s.run(&["sandbox", "files", "get", &id, "/home/user/big.bin"]);
    assert!(out.status.success());
    assert!(out.stdout == big, "the streamed download differs");

    s.ok(&["sandbox", "kill", &id]);
}

/// The peak resident memory of process `pid` (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[test]
fn a_large_put_and_get_hold_a_few_chunks_not_the_file() {
    let s = Session::local();
    let id = create(&s);
    const SIZE: usize = 256 << 20;
    let file = s.tmp.path().join("large.bin");
    std::fs::write(&file, vec![9u8; SIZE]).unwrap();
    let back = s.tmp.path().join("large.back");
    for args in [
        vec![
            "sandbox",
            "files",
            "put",
            &id,
            file.to_str().unwrap(),
            "/home/user/large.bin",
        ],
        vec![
            "sandbox",
            "files",
            "get",
            &id,
            "/home/user/large.bin",
            back.to_str().unwrap(),
        ],
    ] {
        let mut child = s.cmd(&args).stdout(Stdio::null()).spawn().unwrap();
        // The high-water mark only grows: the last reading before the
        // process ends is the closest to its peak.
        let mut peak = 0;
        while child.try_wait().unwrap().is_none() {
            peak = peak.max(peak_rss(child.id()).unwrap_or(0));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(child.wait().unwrap().success(), "{args:?}");
        assert!(peak > 0, "no reading of {args:?}");
        assert!(
            peak < (SIZE as u64) / 4,
            "{args:?} peaked at {peak} bytes for a {SIZE}-byte file"
        );
    }
    assert_eq!(std::fs::metadata(&back).unwrap().len(), SIZE as u64);
    s.ok(&["sandbox", "kill", &id]);
}

#[test]
fn quiet_leaves_only_errors_on_stderr() {
    let s = Session::local();
    // A take from an empty pool creates a sandbox and says so, unless -q.
    let out = s.run(&["pool", "take"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "no parked sandbox: this one was created\n"
    );
    let first = text(&out.stdout).trim().to_owned();
    let out = s.run(&["-q", "pool", "take"]);
    assert!(out.status.success());
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    let second = text(&out.stdout).trim().to_owned();
    // Errors still print.
    let out = s.run(&["-q", "sandbox", "info", "microvm-unknown"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with("error: "));
    let out = s.run(&["-q", "-v", "sandbox", "list"]);
    assert_eq!(out.status.code(), Some(2), "-q and -v conflict");
    for id in [first, second] {
        s.ok(&["sandbox", "kill", &id]);
    }
}

#[test]
fn network_policies_are_set_at_create_read_and_replaced() {
    let s = Session::local();
    // A bad entry is refused before any call, without the entry.
    let out = s.run(&[
        "--output",
        "json",
        "sandbox",
        "create",
        "--deny-out",
        "not an address",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "invalid_argument");
    assert!(
        !text(&out.stdout).contains("not an address"),
        "entries stay out of errors"
    );

    let id = s
        .ok(&["sandbox", "create", "--deny-out", "10.0.0.0/8"])
        .trim()
        .to_owned();
    let got = s.ok(&["sandbox", "network", "get", &id]);
    assert!(
        got.starts_with("allow_out: -\ndeny_out: 10.0.0.0/8\negress_proxy: none\nenforcement: "),
        "{got}"
    );
    let set = s.json(&[
        "--output",
        "json",
        "sandbox",
        "network",
        "set",
        &id,
        "--allow-out",
        "example.com",
        "--allow-out",
        "1.1.1.1",
        "--deny-all",
    ]);
    assert_eq!(
        set["allow_out"],
        serde_json::json!(["example.com", "1.1.1.1"])
    );
    assert_eq!(set["deny_out"], serde_json::json!(["0.0.0.0/0"]));
    let got = s.json(&["--output", "json", "sandbox", "network", "get", &id]);
    assert_eq!(got["deny_out"], serde_json::json!(["0.0.0.0/0"]));
    assert_ne!(got["enforcement"], "none", "{got}");
    // No flag: unrestricted again.
    let open = s.json(&["--output", "json", "sandbox", "network", "set", &id]);
    assert_eq!(open["deny_out"], serde_json::json!([]));
    s.ok(&["sandbox", "kill", &id]);

    // A sandbox created without a policy cannot take one: the SDK says why.
    let plain = create(&s);
    let out = s.run(&["sandbox", "network", "set", &plain, "--deny-all"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("kind: unimplemented"),
        "{}",
        text(&out.stderr)
    );
    s.ok(&["sandbox", "kill", &plain]);
}

/// A reader that went away (`rayito ... | head -1`) ends rayito quietly:
/// exit 0 and nothing on stderr, no panic, in text and JSON output. The
/// pipe's read end is closed before rayito starts, so its first write to
/// stdout fails every time.
#[test]
fn a_closed_stdout_ends_quietly() {
    let s = Session::unset_backend();
    for args in [&["doctor"][..], &["--output", "json", "doctor"][..]] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let out = s
            .cmd(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .expect("run rayito");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert_eq!(text(&out.stderr), "", "{args:?}");
    }
    // Any other write failure (a full disk behind `>`: /dev/full) is exit 1
    // with one line on stderr, never output silently lost.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let out = s
        .cmd(&["doctor"])
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .expect("run rayito");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stderr),
        "rayito: cannot write to stdout: No space left on device (os error 28)\n"
    );
    // With a reader, the same command prints and keeps its own exit code.
    let out = s.run(&["doctor"]);
    assert!(
        text(&out.stdout).starts_with("backend:"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "doctor finds nothing configured"
    );
}

/// `sandbox list --state` takes the states there are, in any case, and
/// refuses any other as a usage error naming them (it used to print `[]`
/// and exit 0, as if no sandbox were in it).
#[test]
fn list_refuses_an_unknown_state() {
    let s = Session::unset_backend();
    const MESSAGE: &str = "invalid value 'weird' for '--state <STATE>': no such state: one of PENDING, RUNNING, SUSPENDING, SUSPENDED, TERMINATING, TERMINATED";
    let out = s.run(&["--local", "sandbox", "list", "--state", "weird"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with(&format!("error: {MESSAGE}\n")),
        "{}",
        text(&out.stderr)
    );
    let out = s.run(&[
        "--local", "--output", "json", "sandbox", "list", "--state", "weird",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let v: Value = serde_json::from_slice(&out.stdout).expect("a JSON error");
    assert_eq!(v["error"]["kind"], "usage");
    assert_eq!(v["error"]["message"], MESSAGE);
    let v = s.json(&[
        "--local",
        "--output",
        "json",
        "sandbox",
        "list",
        "--state",
        "running",
        "--state",
        "Suspended",
    ]);
    assert!(v.is_array(), "{v}");
}
