//! Honest answers (issue 42, section 2), the binary run as a child
//! process on the local backend: a wrong or stale id is called a sandbox
//! that does not exist (or one of another cache), never a missing token;
//! no daemon is started only to say so; and the tokens of sandboxes the
//! CLI learns are gone leave the cache.

use std::process::Output;

use serde_json::Value;

use crate::skip_support;

use crate::session;
use session::Session;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn token(s: &Session, id: &str) -> std::path::PathBuf {
    s.cache.path().join("tokens").join(id)
}

fn daemon_recorded(s: &Session) -> bool {
    s.cache.path().join("local/backend.json").exists()
}

/// `args` must fail with exit `code` and `message` on stderr, and nothing
/// about tokens.
fn refused(s: &Session, args: &[&str], code: i32, message: &str) -> Output {
    let out = s.run(args);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    assert!(stderr.contains(message), "{args:?}: {stderr}");
    assert!(!stderr.contains("access token for"), "{args:?}: {stderr}");
    out
}

/// Every command on an existing sandbox, with `id` (exit code when refused).
fn on_sandbox(id: &str) -> Vec<(Vec<&str>, i32)> {
    vec![
        (vec!["sandbox", "exec", id, "--", "true"], 125),
        (vec!["sandbox", "shell", id], 125),
        (vec!["sandbox", "metrics", id], 1),
        (vec!["sandbox", "pause", id], 1),
        (vec!["sandbox", "files", "ls", id, "/"], 1),
        (vec!["sandbox", "run-code", id, "1"], 1),
        (vec!["sandbox", "network", "get", id], 1),
        (vec!["sandbox", "connect", id], 1),
        (vec!["sandbox", "info", id], 1),
    ]
}

#[test]
fn a_wrong_id_is_no_such_sandbox_and_no_daemon_starts_to_say_so() {
    let s = Session::local();
    // No daemon runs: no sandbox of the local backend exists, and none is
    // started to hear it.
    for (args, code) in on_sandbox("garbage") {
        refused(
            &s,
            &args,
            code,
            "error: no such sandbox: garbage: the local backend is not running, and its sandboxes end when it stops\nkind: sandbox_not_found",
        );
    }
    assert!(!daemon_recorded(&s), "a daemon was started");
    assert_eq!(
        s.ok(&["sandbox", "kill", "garbage"]),
        "garbage was already gone\n"
    );
    let out = s.run(&[
        "--output", "json", "sandbox", "exec", "garbage", "--", "true",
    ]);
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(error["error"]["kind"], "sandbox_not_found");
    assert!(!daemon_recorded(&s), "a daemon was started");

    // A daemon runs: the control plane's word.
    let id = s.ok(&["sandbox", "create"]).trim().to_owned();
    for (args, code) in on_sandbox("garbage") {
        refused(
            &s,
            &args,
            code,
            "error: control plane call GetMicrovm found no such sandbox: MicroVM not found: garbage; it has terminated or never existed, create a new sandbox\nkind: sandbox_not_found",
        );
    }

    // A sandbox that exists, reached from a cache that does not keep its
    // token: one of another cache, said so.
    let other = Session::local();
    std::fs::create_dir_all(other.cache.path().join("local")).unwrap();
    std::fs::copy(
        s.cache.path().join("local/backend.json"),
        other.cache.path().join("local/backend.json"),
    )
    .unwrap();
    let message = format!(
        "error: sandbox {id} exists but was not created with this cache ({}): its access token is kept only in the cache it was created with; run the command where that cache is, or point RAYITO_CACHE_DIR at it",
        other.cache.path().display()
    );
    refused(
        &other,
        &["sandbox", "exec", &id, "--", "true"],
        125,
        &message,
    );
    refused(&other, &["sandbox", "metrics", &id], 1, &message);
}

#[test]
fn tokens_of_sandboxes_found_gone_leave_the_cache() {
    let s = Session::local();
    // Ended on its own (its timeout): the first command that hears it
    // forgets the token.
    let ended = s
        .ok(&["sandbox", "create", "--timeout", "1"])
        .trim()
        .to_owned();
    let kept = s.ok(&["sandbox", "create"]).trim().to_owned();
    assert!(token(&s, &ended).exists());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let out = s.run(&["--output", "json", "sandbox", "info", &ended]);
        let info: Value = serde_json::from_slice(&out.stdout).unwrap();
        if info["state"] == "TERMINATED" || info["error"]["kind"] == "sandbox_not_found" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{info}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    refused(
        &s,
        &["sandbox", "exec", &ended, "--", "true"],
        125,
        "kind: sandbox_not_found",
    );
    assert!(
        !token(&s, &ended).exists(),
        "the token of an ended sandbox stayed"
    );
    assert!(token(&s, &kept).exists());

    // The daemon stopped: its sandboxes ended with it. Said without a new
    // daemon, and the token forgotten.
    s.ok(&["local", "stop"]);
    refused(
        &s,
        &["sandbox", "exec", &kept, "--", "true"],
        125,
        &format!(
            "error: no such sandbox: {kept}: the local backend is not running, and its sandboxes end when it stops"
        ),
    );
    assert!(!daemon_recorded(&s), "a daemon was started");
    assert!(
        !token(&s, &kept).exists(),
        "the token of an ended sandbox stayed"
    );
}

/// docs/cli.md, whitespace folded to single spaces.
fn cli_doc() -> String {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/cli.md"))
        .expect("docs/cli.md");
    doc.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn the_reference_transcribes_the_messages_as_they_are() {
    let doc = cli_doc();
    for message in [
        "no such sandbox: ID: the local backend is not running, and its sandboxes end when it stops",
        "sandbox ID exists but was not created with this cache ...",
    ] {
        assert!(doc.contains(message), "docs/cli.md lacks `{message}`");
    }
}

#[test]
fn local_commands_that_need_aws_say_so_in_one_sentence() {
    let s = Session::unset_backend();
    let secret = "error: `rayito secret` needs AWS: secrets live in AWS Secrets Manager, which the local backend does not have; run it without --local (and without RAYITO_BACKEND=local), or set AWS_ENDPOINT_URL_SECRETS_MANAGER to an endpoint of that service\n";
    let setup = "error: `rayito setup` needs AWS: it deploys CloudFormation stacks in an AWS account, and the local backend needs no setup; run it without --local (and without RAYITO_BACKEND=local), or set AWS_ENDPOINT_URL_CLOUDFORMATION to an endpoint of that service\n";
    let doctor = "error: `rayito doctor` needs AWS: it checks what an AWS account lacks (`rayito local status` says whether the local daemon runs); run it without --local (and without RAYITO_BACKEND=local)\n";
    for (args, message) in [
        (vec!["--local", "secret", "create", "t1"], secret),
        (vec!["--local", "secret", "update", "t1"], secret),
        (vec!["--local", "secret", "info", "t1"], secret),
        (vec!["--local", "secret", "list"], secret),
        (vec!["--local", "secret", "delete", "t1"], secret),
        (vec!["--local", "setup"], setup),
        (vec!["--local", "setup", "--yes"], setup),
        (vec!["--local", "doctor"], doctor),
    ] {
        let out = s.run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(text(&out.stderr), message, "{args:?}");
    }
    // RAYITO_BACKEND=local is the same choice; JSON carries the sentence.
    let out = s
        .cmd(&["--output", "json", "secret", "list"])
        .env("RAYITO_BACKEND", "local")
        .output()
        .unwrap();
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        error["error"]["message"],
        secret["error: ".len()..].trim_end()
    );
    assert_eq!(error["error"]["kind"], "cli");
    assert!(!daemon_recorded(&s), "a daemon was started");
}

/// `args` with no AWS configuration at all (a fresh HOME, no AWS_*).
fn without_aws(s: &Session, args: &[&str]) -> Output {
    let mut cmd = s.cmd(args);
    for (name, _) in std::env::vars() {
        if name.starts_with("AWS_") {
            cmd.env_remove(name);
        }
    }
    cmd.env("HOME", s.tmp.path()).output().unwrap()
}

#[test]
fn the_sdks_hints_speak_cli() {
    let s = Session::unset_backend();
    let out = without_aws(&s, &["sandbox", "list"]);
    assert_eq!(
        text(&out.stderr).lines().next().unwrap_or_default(),
        "error: no AWS credentials or region found: no AWS region is configured; configure AWS (environment variables, a profile or an instance role) or choose the local backend with --local (or RAYITO_BACKEND=local)"
    );
    let out = without_aws(&s, &["--profile", "nope", "sandbox", "list"]);
    assert_eq!(
        text(&out.stderr).lines().next().unwrap_or_default(),
        "error: the AWS profile nope is not in the AWS config or credentials file; fix the profile name (--profile or AWS_PROFILE) or add the profile"
    );

    let s = Session::local();
    let id = s.ok(&["sandbox", "create"]).trim().to_owned();
    let out = s.run(&["sandbox", "logs", &id]);
    assert_eq!(
        text(&out.stderr).lines().next().unwrap_or_default(),
        format!(
            "error: no logs (logging disabled, no execution role, or another group) for sandbox {id} in log group /rayito/rayito-base; create the sandbox with `sandbox create --logs` (on AWS with an execution role that may write there), or pass the group it logs to with --log-group"
        )
    );
    let out = s.run(&["sandbox", "exec", "--timeout", "1", &id, "--", "sleep 30"]);
    assert_eq!(out.status.code(), Some(124));
    assert_eq!(
        text(&out.stderr).lines().next().unwrap_or_default(),
        "error: command sleep reached its timeout and was stopped; raise exec's --timeout, or leave it out for no limit"
    );
    // JSON carries the same words.
    let out = s.run(&["--output", "json", "sandbox", "logs", &id]);
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("`sandbox create --logs`"), "{message}");
    assert!(!message.contains("::"), "{message}");
}

#[test]
fn local_templates_outlive_the_daemon_and_a_missing_one_is_an_image() {
    let s = Session::local();
    // A missing image is named as one: kind not_found, never a sandbox.
    let image = "arn:aws:lambda:us-east-1:000000000000:microvm-image:nonexist";
    for (args, operation) in [
        (
            vec!["template", "status", "nonexist"],
            "ListMicrovmImageVersions",
        ),
        (
            vec!["sandbox", "create", "--template", "nonexist"],
            "RunMicrovm",
        ),
    ] {
        let out = s.run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            text(&out.stderr),
            format!(
                "error: control plane call {operation} found no such resource: MicroVM image not found: {image}; the image is probably missing, check the image ARN or publish the image\nkind: not_found (the thing asked for does not exist)\n"
            ),
            "{args:?}"
        );
    }
    let out = s.run(&["--output", "json", "template", "logs", "nonexist"]);
    assert_eq!(out.status.code(), Some(1));
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        error["error"]["message"],
        "no such template: nonexist (no image of that name; `rayito template list` lists them)"
    );
    assert_eq!(error["error"]["kind"], "not_found");

    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let spec = s.tmp.path().join("tiny.toml");
    std::fs::write(
        &spec,
        "version = \"rayito.template-spec/1\"\n[base]\nname = \"rayito-base\"\n\n[[steps]]\nkind = \"run\"\ncmd = \"mkdir -p /srv/tiny && echo kept > /srv/tiny/x\"\n",
    )
    .unwrap();
    s.ok(&[
        "template",
        "build",
        spec.to_str().unwrap(),
        "--name",
        "tiny",
    ]);
    // The daemon stops (as at its idle exit); the next one has the image.
    s.ok(&["local", "stop"]);
    assert_eq!(
        s.ok(&["template", "status", "tiny"]),
        "tiny version 1: SUCCESSFUL\n"
    );
    let id = s
        .ok(&["sandbox", "create", "--template", "tiny"])
        .trim()
        .to_owned();
    assert_eq!(
        s.ok(&["sandbox", "exec", &id, "--", "cat", "/srv/tiny/x"]),
        "kept\n"
    );
    // A rebuild of the same file reuses the kept version.
    let again = s.json(&[
        "--output",
        "json",
        "template",
        "build",
        spec.to_str().unwrap(),
        "--name",
        "tiny",
    ]);
    assert_eq!(again["reused"], true, "{again}");
}

#[test]
fn a_failed_builds_json_error_carries_its_command_and_log() {
    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let s = Session::local();
    let spec = s.tmp.path().join("fails.json");
    std::fs::write(
        &spec,
        r#"{"version": "rayito.template-spec/1", "base": {"name": "rayito-base"},
            "steps": [{"kind": "run", "cmd": "echo about-to-fail; exit 3"}]}"#,
    )
    .unwrap();
    let out = s.run(&[
        "--output",
        "json",
        "template",
        "build",
        spec.to_str().unwrap(),
        "--name",
        "fails",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = &v["error"];
    assert_eq!(
        error["message"],
        "template build step 2 failed with exit code 3; fix that step (its command and the end of the build log are in the error)"
    );
    assert_eq!(error["kind"], "build");
    assert_eq!(error["build"]["step"], 2);
    assert_eq!(error["build"]["command"], "RUN echo about-to-fail; exit 3");
    assert_eq!(error["build"]["exit_code"], 3);
    let tail = error["build"]["log_tail"].as_str().unwrap();
    assert!(tail.contains("about-to-fail"), "{tail}");
}

#[test]
fn file_errors_name_the_path_and_say_why_kinds_differ() {
    let s = Session::local();
    let id = s.ok(&["sandbox", "create"]).trim().to_owned();
    let local = s.tmp.path().join("x.bin");
    std::fs::write(&local, "x").unwrap();
    let local = local.to_str().unwrap();
    for (remote, message) in [
        (
            "/root/x.bin",
            "error: /root/x.bin: file not found (files.write): path not found; check the path (files commands reach only /home/user and /tmp: another path is outside their view, absent to them, or refused for a system directory such as /etc)\nkind: file_not_found",
        ),
        (
            "/etc/passwd",
            "error: /etc/passwd: the sandbox's user may not use the path given to files.write: path not allowed; pass a path that user may use (its home is /home/user)\nkind: permission_denied",
        ),
    ] {
        refused(
            &s,
            &["sandbox", "files", "put", &id, local, remote],
            1,
            message,
        );
    }
    refused(
        &s,
        &["sandbox", "files", "get", &id, "/tmp/none/y"],
        1,
        "error: /tmp/none/y: file not found (files.read_stream): path not found; check the path\nkind: file_not_found",
    );
    let out = s.run(&["--output", "json", "sandbox", "files", "ls", &id, "nope"]);
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(error["error"]["path"], "nope");
    assert_eq!(error["error"]["kind"], "file_not_found");
    assert_eq!(
        error["error"]["message"],
        "nope: file not found (files.list): path not found; check the path"
    );
}

#[test]
fn run_code_gives_images_in_json_and_saves_them() {
    let s = Session::local();
    let id = s.ok(&["sandbox", "create"]).trim().to_owned();
    let code = "class I:\n    def _repr_svg_(self): return '<svg/>'\n    def _repr_png_(self): return b'\\x89PNG-bytes'\nI()";
    let v = s.json(&["--output", "json", "sandbox", "run-code", &id, code]);
    let result = &v["results"][0];
    assert_eq!(result["png"], "iVBORy1ieXRlcw==", "{v}");
    assert_eq!(result["svg"], "<svg/>");
    let dir = s.tmp.path().join("images");
    let dir_arg = dir.to_str().unwrap();
    let out = s.ok(&["sandbox", "run-code", &id, "--save-dir", dir_arg, code]);
    assert!(
        out.ends_with(&format!(
            "saved {dir_arg}/result-1.png\nsaved {dir_arg}/result-1.svg\n"
        )),
        "{out}"
    );
    assert_eq!(
        std::fs::read(dir.join("result-1.png")).unwrap(),
        b"\x89PNG-bytes"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("result-1.svg")).unwrap(),
        "<svg/>"
    );
}
