//! The `rayito` binary end to end on the local backend, run as a child
//! process: every invocation is a new process, so this also proves the
//! local-backend daemon is shared across invocations and stopped at the end.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::skip_support;

use crate::session;
use session::Session;

/// What these tests read of a session's cache.
trait CacheFiles {
    fn token_path(&self, id: &str) -> PathBuf;
    fn daemon_pid(&self) -> Option<i32>;
}

impl CacheFiles for Session {
    fn token_path(&self, id: &str) -> PathBuf {
        self.cache.path().join("tokens").join(id)
    }

    fn daemon_pid(&self) -> Option<i32> {
        let text = std::fs::read_to_string(self.cache.path().join("local/backend.json")).ok()?;
        let state: Value = serde_json::from_str(&text).ok()?;
        state["pid"].as_i64().and_then(|p| i32::try_from(p).ok())
    }
}

fn alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[test]
fn a_local_session_from_create_to_kill() {
    let s = Session::local();

    // create (JSON), with metadata; the token stays out of the output.
    let created = s.json(&[
        "--output",
        "json",
        "sandbox",
        "create",
        "--metadata",
        "owner=cli-test",
    ]);
    let id = created["sandbox_id"].as_str().expect("an id").to_owned();
    assert!(created.get("access_token").is_none(), "{created}");
    let token_file = s.token_path(&id);
    let mode = std::fs::metadata(&token_file)
        .expect("the token file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let daemon = s.daemon_pid().expect("the daemon recorded its pid");
    assert!(alive(daemon));

    // list: by metadata (probes the agent) and plain.
    let listed = s.json(&[
        "sandbox",
        "list",
        "--metadata",
        "owner=cli-test",
        "--output",
        "json",
    ]);
    let rows = listed.as_array().expect("an array");
    assert_eq!(rows.len(), 1, "{listed}");
    assert_eq!(rows[0]["sandbox_id"], id.as_str());
    assert_eq!(rows[0]["state"], "RUNNING");
    assert_eq!(rows[0]["metadata"]["owner"], "cli-test");
    let none = s.json(&[
        "sandbox",
        "list",
        "--metadata",
        "owner=nobody",
        "--output",
        "json",
    ]);
    assert_eq!(none, Value::Array(vec![]));

    // info
    let info = s.json(&["sandbox", "info", &id, "--output", "json"]);
    assert_eq!(info["state"], "RUNNING");
    assert!(
        info["template"]
            .as_str()
            .unwrap()
            .ends_with(":microvm-image:rayito-base")
    );

    // metrics: one sample of the agent's readings.
    let m = s.json(&["sandbox", "metrics", &id, "--output", "json"]);
    assert_eq!(m["sandbox_id"], id.as_str());
    assert!(m["cpu_count"].as_u64().unwrap() >= 1, "{m}");
    let (used, total) = (
        m["mem_used_bytes"].as_u64().unwrap(),
        m["mem_total_bytes"].as_u64().unwrap(),
    );
    assert!(0 < used && used < total, "{m}");
    assert!(m["disk_total_bytes"].as_u64().unwrap() > 0, "{m}");
    let text = s.run(&["sandbox", "metrics", &id]);
    assert!(text.status.success());
    // Text: one line with units (docs/cli.md).
    let line = String::from_utf8_lossy(&text.stdout);
    assert!(
        line.lines().count() == 1 && line.contains("  cpu ") && line.contains("iB / "),
        "{line}"
    );
    let bad = s.run(&["sandbox", "metrics", &id, "--follow", "--interval", "0"]);
    assert_eq!(bad.status.code(), Some(2), "a usage error");

    // exec: output streamed, the exit code passed through.
    let out = s.run(&[
        "sandbox",
        "exec",
        &id,
        "--",
        "echo out; echo err >&2; exit 7",
    ]);
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
    let ok = s.run(&["sandbox", "exec", &id, "--", "true"]);
    assert_eq!(ok.status.code(), Some(0));
    let out = s.run(&[
        "--output",
        "json",
        "sandbox",
        "exec",
        &id,
        "--",
        "printf x; exit 3",
    ]);
    assert_eq!(out.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["stdout"], "x");

    // run-code: state between cells, results, and an error as data.
    let out = s.run(&["sandbox", "run-code", &id, "x = 20"]);
    assert!(out.status.success());
    let out = s.run(&["sandbox", "run-code", &id, "print('doubling'); x * 2 + 2"]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "doubling\n42\n");
    let out = s.run(&["sandbox", "run-code", &id, "1/0", "--output", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["name"], "ZeroDivisionError");
    assert_eq!(v["error"]["value"], "division by zero");
    let out = s.run(&["sandbox", "run-code", &id, "raise ValueError('nope')"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ValueError: nope"));

    // files: put, ls, get (to a file and to stdout).
    let local_in = s.tmp.path().join("in.bin");
    let data: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
    std::fs::write(&local_in, &data).unwrap();
    let put = s.json(&[
        "sandbox",
        "files",
        "put",
        &id,
        local_in.to_str().unwrap(),
        "/home/user/data.bin",
        "--output",
        "json",
    ]);
    assert_eq!(put["size"], 100_000);
    let ls = s.json(&[
        "sandbox",
        "files",
        "ls",
        &id,
        "/home/user",
        "--output",
        "json",
    ]);
    assert!(
        ls.as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "data.bin" && e["size"] == 100_000),
        "{ls}"
    );
    let local_out = s.tmp.path().join("out.bin");
    let got = s.run(&[
        "sandbox",
        "files",
        "get",
        &id,
        "/home/user/data.bin",
        local_out.to_str().unwrap(),
    ]);
    assert!(got.status.success());
    assert_eq!(std::fs::read(&local_out).unwrap(), data);
    s.run(&[
        "sandbox",
        "exec",
        &id,
        "--",
        "printf hello > /home/user/t.txt",
    ]);
    let got = s.run(&["sandbox", "files", "get", &id, "/home/user/t.txt"]);
    assert_eq!(got.stdout, b"hello");

    // A missing file: the SDK's message and kind, not retryable (exit 1).
    let missing = s.run(&[
        "sandbox",
        "files",
        "get",
        &id,
        "/home/user/missing",
        "--output",
        "json",
    ]);
    assert_eq!(missing.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&missing.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "file_not_found");
    assert_eq!(v["error"]["retryable"], false);

    // shell: the input from a pipe reaches the terminal, its output comes
    // back, the shell's exit code passes through.
    let mut shell = s
        .cmd(&["sandbox", "shell", &id])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = shell.stdin.take().unwrap();
        stdin.write_all(b"echo hi-$((6*7))\nexit 3\n").unwrap();
    }
    let out = shell.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stdout).contains("hi-42"));

    // pause and resume; the files survive.
    let paused = s.json(&["sandbox", "pause", &id, "--output", "json"]);
    assert_eq!(paused["paused"], true);
    let info = s.json(&["sandbox", "info", &id, "--output", "json"]);
    assert_eq!(info["state"], "SUSPENDED");
    let suspended = s.json(&[
        "sandbox",
        "list",
        "--state",
        "suspended",
        "--output",
        "json",
    ]);
    assert_eq!(suspended[0]["sandbox_id"], id.as_str());
    s.json(&["sandbox", "resume", &id, "--output", "json"]);
    let out = s.run(&["sandbox", "exec", &id, "--", "cat /home/user/t.txt"]);
    assert_eq!(out.stdout, b"hello");

    // --show-token prints the token that was kept; without it, never.
    let second = s.json(&["sandbox", "create", "--show-token", "--output", "json"]);
    let second_id = second["sandbox_id"].as_str().unwrap().to_owned();
    let kept = std::fs::read_to_string(s.token_path(&second_id)).unwrap();
    assert_eq!(second["access_token"], kept.as_str());
    let text = s.run(&["sandbox", "create"]);
    let third_id = String::from_utf8_lossy(&text.stdout).trim().to_owned();
    let third_token = std::fs::read_to_string(s.token_path(&third_id)).unwrap();
    assert!(!String::from_utf8_lossy(&text.stdout).contains(&third_token));
    assert!(!String::from_utf8_lossy(&text.stderr).contains(&third_token));
    for other in [&second_id, &third_id] {
        s.json(&["sandbox", "kill", other, "--output", "json"]);
        assert!(!s.token_path(other).exists());
    }

    // kill: the token goes with it; the sandbox is gone.
    let killed = s.json(&["sandbox", "kill", &id, "--output", "json"]);
    assert_eq!(killed["killed"], true);
    assert!(!token_file.exists());
    // exec's own failures exit 125: its other codes are the command's.
    let after = s.run(&["sandbox", "exec", &id, "--", "true"]);
    assert_eq!(after.status.code(), Some(125));
    let info = s.run(&["sandbox", "info", "microvm-does-not-exist"]);
    assert_eq!(info.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&info.stderr).contains("kind: sandbox_not_found"));

    // status (JSON): where the daemon runs, never the emulator's secret
    // key, which stays in the 0600 state file.
    let status = s.run(&["local", "status", "--output", "json"]);
    assert_eq!(status.status.code(), Some(0));
    let text = String::from_utf8(status.stdout).expect("UTF-8");
    let status: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(status["running"]["pid"], daemon);
    assert!(status["running"]["access_key_id"].is_string(), "{status}");
    assert!(
        status["running"].get("secret_access_key").is_none(),
        "{status}"
    );
    let state = std::fs::read_to_string(s.cache.path().join("local/backend.json")).unwrap();
    let state: Value = serde_json::from_str(&state).unwrap();
    let secret = state["secret_access_key"]
        .as_str()
        .expect("the recorded key");
    assert!(!text.contains(secret), "{text}");

    // stop: the daemon and its sandboxes' directories are gone; its root
    // keeps only what the next daemon finds (images, objects, EFS volumes).
    let stopped = s.json(&["local", "stop", "--output", "json"]);
    assert_eq!(stopped["stopped"], true);
    assert!(!alive(daemon));
    assert!(s.daemon_pid().is_none());
    let names = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };
    let mut left = Vec::new();
    for name in names(s.tmp.path()) {
        if name.starts_with("rayito-local-") {
            let kept = names(&s.tmp.path().join(&name));
            assert!(
                kept.iter()
                    .all(|k| ["images", "s3", "efs"].contains(&k.as_str())),
                "the daemon's root holds {kept:?}"
            );
        } else if name.starts_with("rayito-") {
            left.push(name);
        }
    }
    assert!(left.is_empty(), "left behind: {left:?}");

    // status when it does not run: said, and exit 3 (LSB's "not
    // running", as `systemctl status`), so that a script can test it.
    let status = s.run(&["local", "status"]);
    assert_eq!(status.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&status.stdout), "not running\n");
    let status = s.run(&["local", "status", "--output", "json"]);
    assert_eq!(status.status.code(), Some(3));
    let status: Value = serde_json::from_slice(&status.stdout).expect("JSON");
    assert_eq!(status, serde_json::json!({ "running": null }));
}

#[test]
fn doctor_without_aws_configuration_names_the_fix() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rayito"));
    for (name, _) in std::env::vars() {
        if name.starts_with("AWS_") || name.starts_with("RAYITO_") {
            cmd.env_remove(name);
        }
    }
    let out = cmd
        .arg("doctor")
        .env("HOME", home.path())
        .env("RAYITO_CACHE_DIR", home.path().join("cache"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("[FAIL] credentials, region and lambda-microvms:ListMicrovms"),
        "{stdout}"
    );
    assert!(
        stdout.contains("fix: configure AWS credentials and a region"),
        "{stdout}"
    );
    assert!(stdout.contains("fix: set RAYITO_TEMPLATE"), "{stdout}");
    assert!(stdout.contains("verdict: NOT ready"), "{stdout}");

    let out = cmd.arg("--output").arg("json").output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ready"], false);
    assert_eq!(v["checks"][0]["ok"], false);
    assert!(
        v["checks"][0]["fix"]
            .as_str()
            .unwrap()
            .contains("aws configure")
    );
}

/// Posts one fault to the emulator's admin endpoint (plain HTTP/1.1),
/// signed with the key the daemon recorded in `state` (backend.json).
fn inject(state: &Value, body: &str) {
    use std::io::{Read as _, Write as _};
    let endpoint_url = state["endpoint_url"].as_str().unwrap();
    let key = rayito_emulator::AccessKey::new(
        state["access_key_id"].as_str().unwrap(),
        state["secret_access_key"].as_str().unwrap(),
    );
    let url = format!("{endpoint_url}/_emulator/faults");
    let signature: String = key
        .sign(
            "POST",
            &url,
            body.as_bytes(),
            state["region"].as_str().unwrap(),
        )
        .unwrap()
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let addr = endpoint_url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST /_emulator/faults HTTP/1.1\r\nhost: {addr}\r\n{signature}content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[test]
fn a_retryable_failure_exits_75_and_a_final_one_exits_1() {
    let s = Session::local();
    // The first --local command starts the daemon.
    assert_eq!(
        s.json(&["sandbox", "list", "--output", "json"]),
        Value::Array(vec![])
    );
    let text = std::fs::read_to_string(s.cache.path().join("local/backend.json")).unwrap();
    let state: Value = serde_json::from_str(&text).unwrap();
    // Throttled past the SDK's retries: rate_limit, retryable, exit 75.
    inject(
        &state,
        r#"{"fault":"throttle","operation":"GetMicrovm","count":100,"retryAfterSeconds":1}"#,
    );
    let out = s.run(&["sandbox", "info", "microvm-x", "--output", "json"]);
    assert_eq!(
        out.status.code(),
        Some(75),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "rate_limit");
    assert_eq!(v["error"]["retryable"], true);
    let out = s.run(&["sandbox", "info", "microvm-x"]);
    assert_eq!(out.status.code(), Some(75));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains("\nkind: rate_limit ("), "{stderr}");
    assert!(
        stderr.contains("retryable: the same call may succeed later"),
        "{stderr}"
    );

    // Cleared: not found is final, exit 1.
    inject(&state, r#"{"fault":"clear"}"#);
    let out = s.run(&["sandbox", "info", "microvm-x", "--output", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["error"]["kind"], "sandbox_not_found");
    assert_eq!(v["error"]["retryable"], false);
}

/// The daemons serving this session's cache directory (found through
/// /proc: their command line and environment).
fn daemons_of(s: &Session) -> Vec<i32> {
    let marker = format!("RAYITO_CACHE_DIR={}", s.cache.path().display());
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            String::from_utf8_lossy(&cmdline).contains("__local-backend")
                && environ.split(|b| *b == 0).any(|v| v == marker.as_bytes())
                && alive(*pid)
        })
        .collect()
}

#[test]
fn racing_first_invocations_share_one_daemon_which_stops_when_idle() {
    let s = Session::local();
    let racers: Vec<_> = (0..3)
        .map(|_| {
            s.cmd(&["sandbox", "list", "--output", "json"])
                .env("RAYITO_LOCAL_IDLE_SECS", "3")
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for racer in racers {
        let out = racer.wait_with_output().unwrap();
        assert!(out.status.success());
        assert_eq!(
            serde_json::from_slice::<Value>(&out.stdout).unwrap(),
            Value::Array(vec![])
        );
    }
    let daemons = daemons_of(&s);
    assert_eq!(daemons.len(), 1, "{daemons:?}");
    assert_eq!(Some(daemons[0]), s.daemon_pid());

    // Idle for 3 s: it stops by itself and removes its record.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while alive(daemons[0]) {
        assert!(
            std::time::Instant::now() < deadline,
            "the idle daemon did not stop"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(s.daemon_pid().is_none());
    assert!(daemons_of(&s).is_empty());
}

/// The daemon reads `RAYITO_EMULATOR_LATENCY` as the SDK's embedded local
/// backend does: a profile it cannot parse stops it at start, and the
/// first invocation says so and where the log is, which names the
/// variable and the part it refused.
#[test]
fn the_daemon_reads_the_latency_profile_and_refuses_a_bad_one() {
    let s = Session::local().env("RAYITO_EMULATOR_LATENCY", "aws,slow");
    let out = s.run(&["sandbox", "list"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the local backend exited at start"),
        "{stderr}"
    );
    let log = std::fs::read_to_string(s.cache.path().join("local").join("backend.log"))
        .expect("the daemon's log");
    assert!(
        log.contains(
            "rayito local backend: RAYITO_EMULATOR_LATENCY: invalid latency profile part \"slow\""
        ),
        "{log}"
    );
    assert!(s.daemon_pid().is_none());
}

/// `doctor` against a real MicroVMs endpoint (the session's local daemon,
/// reached the way any AWS client is: endpoint, region and credentials from
/// the environment, here the key the daemon recorded): every live check
/// passes, the image check included; an image the endpoint does not have
/// fails with the fix.
#[test]
fn doctor_against_an_endpoint_checks_the_image() {
    let s = Session::local();
    assert_eq!(
        s.json(&["sandbox", "list", "--output", "json"]),
        Value::Array(vec![])
    );
    let text = std::fs::read_to_string(s.cache.path().join("local/backend.json")).unwrap();
    let state: Value = serde_json::from_str(&text).unwrap();
    let endpoint = state["endpoint_url"].as_str().unwrap().to_owned();
    let image = state["image_arn"].as_str().unwrap().to_owned();
    let key_id = state["access_key_id"].as_str().unwrap().to_owned();
    let secret = state["secret_access_key"].as_str().unwrap().to_owned();
    let home = tempfile::tempdir().unwrap();
    let doctor_with = |template: &str, key_id: &str, extra: &[&str]| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rayito"));
        for (name, _) in std::env::vars() {
            if name.starts_with("AWS_") || name.starts_with("RAYITO_") {
                cmd.env_remove(name);
            }
        }
        cmd.args(["doctor", "--output", "json"])
            .args(extra)
            .env("HOME", home.path())
            .env("RAYITO_CACHE_DIR", s.cache.path())
            .env("AWS_ENDPOINT_URL", &endpoint)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", key_id)
            .env("AWS_SECRET_ACCESS_KEY", &secret)
            .env("RAYITO_TEMPLATE", template)
            .output()
            .unwrap()
    };
    let doctor_as = |template: &str, key_id: &str| doctor_with(template, key_id, &[]);
    let doctor = |template: &str| doctor_as(template, &key_id);
    // Another key id: the daemon's emulator refuses it, as AWS would.
    let out = doctor_as(&image, "AKIDDOCTORTEST00");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{v}");
    assert!(
        v["checks"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("(UnrecognizedClientException)"),
        "{v}"
    );
    let out = doctor(&image);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{v}");
    assert_eq!(v["ready"], true, "{v}");
    let image_check = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str().unwrap().starts_with("image"))
        .cloned()
        .unwrap();
    assert_eq!(image_check["ok"], true, "{v}");
    assert!(
        image_check["detail"].as_str().unwrap().contains("exists"),
        "{v}"
    );
    // Publishing, read-only: the image has a launchable version, but this
    // endpoint serves no CloudFormation (no stack) and no bucket is
    // known. Its own verdict; the exit code stays 0.
    let publishing = &v["publishing"];
    assert_eq!(publishing["ready"], false, "{v}");
    let checks = publishing["checks"].as_array().unwrap();
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "stack rayito-m0-iam (build role, policies) and cloudformation:DescribeStacks",
            "artifact bucket",
            "launchable image version and lambda-microvms:ListMicrovmImageVersions"
        ],
        "{v}"
    );
    assert_eq!(
        checks
            .iter()
            .map(|c| c["ok"].as_bool().unwrap())
            .collect::<Vec<_>>(),
        [false, false, true],
        "{v}"
    );
    assert!(
        checks[0]["fix"]
            .as_str()
            .unwrap()
            .contains("rayito setup --yes"),
        "{v}"
    );
    assert!(
        checks[2]["detail"]
            .as_str()
            .unwrap()
            .ends_with("is SUCCESSFUL and ACTIVE"),
        "{v}"
    );

    // The quotas, read from the endpoint's Service Quotas: every quota at
    // its default, nothing running, no warning; the report in --json.
    let quotas = &v["quotas"];
    assert_eq!(quotas["ok"], true, "{v}");
    assert_eq!(
        quotas["checks"][0]["name"], "quotas (servicequotas:ListServiceQuotas) and memory in use",
        "{v}"
    );
    assert!(
        quotas["checks"][0]["detail"]
            .as_str()
            .unwrap()
            .starts_with("memory 0.0 of 1024 GB allocated (0%, ok)"),
        "{v}"
    );
    assert_eq!(
        quotas["report"]["entries"].as_array().unwrap().len(),
        18,
        "{v}"
    );
    assert_eq!(v["launch"], false, "{v}");

    // --launch: a sandbox starts, its agent answers, it is killed.
    let out = doctor_with(&image, &key_id, &["--launch"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(0), "{v}");
    let launch: Vec<_> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["name"].as_str().unwrap().starts_with("test launch"))
        .map(|c| {
            (
                c["name"].as_str().unwrap().to_owned(),
                c["ok"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        launch,
        [
            (
                "test launch: RunMicrovm, CreateMicrovmAuthToken and the agent's readiness"
                    .to_owned(),
                true
            ),
            ("test launch: the agent runs a command".to_owned(), true),
            ("test launch: TerminateMicrovm".to_owned(), true),
        ],
        "{v}"
    );

    let missing = image.replace(":microvm-image:rayito-base", ":microvm-image:not-published");
    let out = doctor(&missing);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{v}");
    let image_check = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str().unwrap().starts_with("image"))
        .cloned()
        .unwrap();
    assert_eq!(image_check["ok"], false, "{v}");
    assert!(
        image_check["fix"]
            .as_str()
            .unwrap()
            .starts_with("publish the image"),
        "{v}"
    );
}

#[test]
fn a_template_file_builds_on_the_local_daemon_and_a_sandbox_starts_from_it() {
    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let s = Session::local();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("site")).unwrap();
    std::fs::write(dir.path().join("site/page.txt"), "from the cli\n").unwrap();
    let spec = dir.path().join("site.toml");
    std::fs::write(
        &spec,
        r#"version = "rayito.template-spec/1"

[base]
name = "rayito-base"

[[steps]]
kind = "copy"
src = "site"
dst = "/srv/cli"

[[steps]]
kind = "run"
cmd = "echo built > /srv/cli/built.txt"
"#,
    )
    .unwrap();
    let spec = spec.to_str().unwrap();
    let built = s.json(&[
        "template", "build", spec, "--name", "cli-site", "--output", "json",
    ]);
    assert_eq!(built["alias"], "cli-site");
    assert_eq!(built["reused"], false);
    assert_eq!(built["artifact_uploaded"], true);
    let version = built["version"].as_str().unwrap().to_owned();
    let again = s.json(&[
        "template", "build", spec, "--name", "cli-site", "--output", "json",
    ]);
    assert_eq!(again["reused"], true);
    assert_eq!(again["artifact_uploaded"], false);
    assert_eq!(again["version"], version.as_str());

    let status = s.json(&["template", "status", "cli-site", "--output", "json"]);
    assert_eq!(status["status"], "SUCCESSFUL");
    assert_eq!(status["version"], version.as_str());
    let listed = s.json(&["template", "list", "--filter", "cli-", "--output", "json"]);
    let names: Vec<&str> = listed["templates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["cli-site"]);
    let logs = s.json(&["template", "logs", "cli-site", "--output", "json"]);
    assert!(
        logs["lines"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().is_some_and(|l| l.contains("RUN echo built"))),
        "{logs}"
    );

    let created = s.json(&[
        "sandbox",
        "create",
        "--template",
        "cli-site",
        "--output",
        "json",
    ]);
    let id = created["sandbox_id"].as_str().unwrap().to_owned();
    let out = s.run(&[
        "sandbox",
        "exec",
        &id,
        "--",
        "cat /srv/cli/page.txt /srv/cli/built.txt",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "from the cli\nbuilt\n"
    );
    s.run(&["sandbox", "kill", &id]);

    // A failing step: exit 1, the build log then the error on stderr.
    let failing = dir.path().join("fails.json");
    std::fs::write(
        &failing,
        r#"{"version": "rayito.template-spec/1", "base": {"name": "rayito-base"},
            "steps": [{"kind": "run", "cmd": "echo about-to-fail; exit 3"}]}"#,
    )
    .unwrap();
    let out = s.run(&[
        "template",
        "build",
        failing.to_str().unwrap(),
        "--name",
        "cli-fails",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("build log:"), "{stderr}");
    assert!(stderr.contains("about-to-fail"), "{stderr}");
    assert!(
        stderr.contains("error: template build step 2 failed with exit code 3"),
        "{stderr}"
    );
    assert!(stderr.contains("kind: build"), "{stderr}");
}

/// `pool start` fills a pool file in the cache from one long-running
/// process; `pool take` (another process) hands out a parked sandbox and
/// keeps its token like `sandbox create`; `pool stats` shows the slots
/// without tokens; `pool drain` terminates the parked ones.
#[test]
fn a_pool_filled_by_one_process_serves_takes_from_others() {
    let s = Session::local();
    let mut filler = s
        .cmd(&[
            "pool", "start", "--size", "2", "--name", "cli", "--output", "json",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("pool start");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    let stats = loop {
        let stats = s.json(&["pool", "stats", "--name", "cli", "--output", "json"]);
        if stats["ready"] == 2 {
            break stats;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never filled: {stats}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let parked: Vec<String> = stats["slots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|slot| slot["sandbox_id"].as_str().unwrap().to_owned())
        .collect();
    assert!(!stats.to_string().contains("token"), "{stats}");
    let file = s.cache.path().join("pools/cli.json");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    let taken = s.json(&["pool", "take", "--name", "cli", "--output", "json"]);
    let id = taken["sandbox_id"].as_str().unwrap().to_owned();
    assert_eq!(taken["from_pool"], true, "{taken}");
    assert!(parked.contains(&id), "{id} not in {parked:?}");
    assert!(
        s.token_path(&id).exists(),
        "its token is kept like create's"
    );
    let out = s.run(&["sandbox", "exec", &id, "--", "echo pooled"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "pooled\n");

    // SIGTERM: the filler stops, what it parked stays for takers.
    let signalled = Command::new("kill")
        .args(["-TERM", &filler.id().to_string()])
        .status()
        .unwrap();
    assert!(signalled.success());
    assert!(filler.wait().unwrap().success());
    let left = s.json(&["pool", "stats", "--name", "cli", "--output", "json"]);
    let ready = left["ready"].as_u64().unwrap();
    assert!(ready >= 1, "{left}");
    let drained = s.json(&["pool", "drain", "--name", "cli", "--output", "json"]);
    assert_eq!(drained["terminated"].as_u64(), Some(ready));
    let after = s.json(&["pool", "stats", "--name", "cli", "--output", "json"]);
    assert_eq!(after["ready"], 0, "{after}");
    let _ = s.run(&["sandbox", "kill", &id]);
    let out = s.run(&["pool", "take", "--name", "../x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("a pool name is 1 to 64 of A-Z, a-z, 0-9, - and _"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `sandbox logs` on the local backend: a sandbox created with `--logs`
/// has the emulator's lifecycle lines in its stream (text and JSON,
/// `--limit`, `--since`); one created without has none (exit 1 with the
/// `logs.none` message); bad arguments are usage errors.
#[test]
fn sandbox_logs_on_the_local_backend() {
    let s = Session::local();
    let created = s.json(&["--output", "json", "sandbox", "create", "--logs"]);
    let id = created["sandbox_id"].as_str().expect("an id").to_owned();

    // Text: `<ISO-ms-Z> <message>`.
    let out = s.run(&["sandbox", "logs", &id]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let (at, message) = lines[0]
        .split_once(' ')
        .expect("a timestamp, then the line");
    assert_eq!(at.len(), "2026-12-01T10:00:00.123Z".len(), "{at}");
    assert!(at.ends_with('Z') && at.as_bytes()[10] == b'T' && at.as_bytes()[19] == b'.');
    assert!(
        message.starts_with(&format!(
            "rayito emulator: MicroVM {id} started from rayito-base version "
        )),
        "{message}"
    );

    // JSON lines: {timestamp, message, stream}; the stream by convention.
    for args in [
        vec!["sandbox", "logs", id.as_str(), "--json"],
        vec!["--output", "json", "sandbox", "logs", id.as_str()],
    ] {
        let out = s.run(&args);
        assert!(out.status.success());
        let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
        assert_eq!(v["timestamp"], at);
        assert_eq!(v["message"], message);
        let stream = v["stream"].as_str().unwrap();
        assert!(stream.ends_with(&format!("]{id}")), "{stream}");
        assert_eq!(&stream[..10], at[..10].replace('-', "/"));
    }

    // --since in the future: nothing; --since far back and --limit 1: the line.
    let out = s.run(&["sandbox", "logs", &id, "--since", "2999-01-01T00:00"]);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    let out = s.run(&["sandbox", "logs", &id, "--since", "1d", "--limit", "1"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);

    // --follow prints the started line, then the terminated line once the
    // sandbox is killed, and keeps polling until stopped.
    let mut follow = s
        .cmd(&["sandbox", "logs", &id, "--follow"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("rayito sandbox logs --follow");
    let stdout = follow.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let wait = std::time::Duration::from_secs(30);
    let first = rx.recv_timeout(wait).expect("the started line");
    assert!(first.contains(" started from rayito-base "), "{first}");
    // Killed: the terminated line follows.
    let killed = s.run(&["sandbox", "kill", &id]);
    assert!(killed.status.success());
    let second = rx.recv_timeout(wait).expect("the terminated line");
    assert!(
        second.contains(&format!("rayito emulator: MicroVM {id} terminated (")),
        "{second}"
    );
    assert!(follow.try_wait().unwrap().is_none(), "--follow keeps going");
    follow.kill().unwrap();
    follow.wait().unwrap();
    let mut text = String::new();
    for _ in 0..100 {
        text = String::from_utf8_lossy(&s.run(&["sandbox", "logs", &id]).stdout).into_owned();
        if text.lines().count() == 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[1].contains(&format!("rayito emulator: MicroVM {id} terminated (")),
        "{text}"
    );
    let out = s.run(&["sandbox", "logs", &id, "--limit", "1"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);

    // Without logging: exit 1, the message naming the group.
    let plain = s.json(&["--output", "json", "sandbox", "create"]);
    let plain_id = plain["sandbox_id"].as_str().unwrap().to_owned();
    let out = s.run(&["sandbox", "logs", &plain_id]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "error: no logs (logging disabled, no execution role, or another group) for sandbox \
             {plain_id} in log group /rayito/rayito-base; "
        )),
        "{stderr}"
    );
    assert!(stderr.contains("kind: not_found"), "{stderr}");
    s.run(&["sandbox", "kill", &plain_id]);

    // Usage errors: exit 2.
    for bad in [
        vec!["sandbox", "logs", id.as_str(), "--limit", "0"],
        vec!["sandbox", "logs", id.as_str(), "--since", "yesterday"],
        vec!["sandbox", "logs", id.as_str(), "--since", "2026-13-01"],
    ] {
        assert_eq!(s.run(&bad).status.code(), Some(2), "{bad:?}");
    }
}

/// A local build is read at the daemon's pace, not at the SDK's AWS
/// interval (10 s, which the CLI's endpoint client used to get: every
/// local build then took at least 10 s, one whose step takes nothing
/// reporting `(10s)`).
#[test]
fn a_local_build_is_not_held_to_the_aws_poll_interval() {
    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let s = Session::local();
    let spec = s.tmp.path().join("tiny.toml");
    std::fs::write(
        &spec,
        "version = \"rayito.template-spec/1\"\n\n[base]\nname = \"rayito-base\"\n\n\
         [[steps]]\nkind = \"run\"\ncmd = \"true\"\n",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let built = s.json(&[
        "template",
        "build",
        spec.to_str().unwrap(),
        "--name",
        "tiny",
        "--output",
        "json",
    ]);
    let took = started.elapsed();
    assert_eq!(built["reused"], false, "{built}");
    assert!(
        took < std::time::Duration::from_secs(10),
        "a build of one `true` step took {took:?}: read at the AWS interval"
    );
}

/// The venv `.ci/install-test-deps` fills (boto3 with it).
fn venv_python() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-deps/venv/bin/python3")
}

/// Runs `script` with boto3 pointed at the session's daemon (its endpoint
/// and key, as any AWS client reaches it); its stdout.
fn boto3(s: &Session, script: &str) -> String {
    let text = std::fs::read_to_string(s.cache.path().join("local/backend.json")).unwrap();
    let state: Value = serde_json::from_str(&text).unwrap();
    let out = Command::new(venv_python())
        .args(["-c", script])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", s.tmp.path())
        .env("AWS_CONFIG_FILE", s.tmp.path().join("no-config"))
        .env(
            "AWS_SHARED_CREDENTIALS_FILE",
            s.tmp.path().join("no-credentials"),
        )
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL", state["endpoint_url"].as_str().unwrap())
        .env("AWS_DEFAULT_REGION", state["region"].as_str().unwrap())
        .env(
            "AWS_ACCESS_KEY_ID",
            state["access_key_id"].as_str().unwrap(),
        )
        .env(
            "AWS_SECRET_ACCESS_KEY",
            state["secret_access_key"].as_str().unwrap(),
        )
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// EFS volumes are data: a file system, its access point and the files in
/// it outlive `local stop`, and the next daemon serves them (docs/local.md,
/// "EFS").
#[test]
fn efs_volumes_outlive_local_stop() {
    let has_boto3 = Command::new(venv_python())
        .args(["-c", "import boto3"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_boto3 {
        skip_support::skip("no boto3 in the test venv (.ci/install-test-deps installs it)");
        return;
    }
    let s = Session::local();
    s.ok(&["sandbox", "list", "--output", "json"]);
    let made = boto3(
        &s,
        r#"
import boto3
efs = boto3.client("efs")
fid = efs.create_file_system(CreationToken="kept")["FileSystemId"]
ap = efs.create_access_point(ClientToken="kept", FileSystemId=fid,
    RootDirectory={"Path": "/data", "CreationInfo": {"OwnerUid": 1000, "OwnerGid": 1000, "Permissions": "0755"}})
print(fid, ap["AccessPointId"])
"#,
    );
    let (fs, ap) = made.split_once(' ').expect("two ids");
    let root = std::fs::read_dir(s.tmp.path())
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("rayito-local-")
        })
        .expect("the daemon's root");
    let data = root.join("efs").join(fs).join("data.txt");
    std::fs::write(&data, b"kept").unwrap();
    let stopped = s.json(&["local", "stop", "--output", "json"]);
    assert_eq!(stopped["stopped"], true);

    s.ok(&["sandbox", "list", "--output", "json"]);
    let found = boto3(
        &s,
        &format!(
            r#"
import boto3
efs = boto3.client("efs")
aps = efs.describe_access_points(FileSystemId="{fs}")["AccessPoints"]
print(",".join(a["AccessPointId"] for a in aps))
"#
        ),
    );
    assert_eq!(found, ap);
    assert_eq!(std::fs::read(&data).unwrap(), b"kept");
    s.json(&["local", "stop", "--output", "json"]);
}

/// `rayito fleet`: the list, a dry run that acts on nothing, a stale
/// confirmation refused, and `--confirm` / `--yes` runs (docs/fleet.md).
#[test]
fn fleet_plans_then_acts_only_with_the_plans_confirmation() {
    let s = Session::local();
    let create = || {
        let created = s.json(&["--output", "json", "sandbox", "create"]);
        created["sandbox_id"].as_str().expect("an id").to_owned()
    };
    let (a, b) = (create(), create());

    let listed = s.json(&["fleet", "list", "--json"]);
    let ids: Vec<&str> = listed
        .as_array()
        .expect("an array")
        .iter()
        .filter_map(|row| row["sandbox_id"].as_str())
        .collect();
    assert!(
        ids.contains(&a.as_str()) && ids.contains(&b.as_str()),
        "{listed}"
    );

    // A dry run prints the plan and acts on nothing.
    let dry = s.json(&["fleet", "pause", &a, &b, "--json"]);
    assert_eq!(dry["dry_run"], true, "{dry}");
    assert_eq!(dry["plan"]["action"], "pause");
    let code = dry["plan"]["confirmation"]
        .as_str()
        .expect("a code")
        .to_owned();
    assert!(code.starts_with("pause-2-"), "{code}");
    let info = s.json(&["sandbox", "info", &a, "--output", "json"]);
    assert_eq!(info["state"], "RUNNING");

    // The fleet changes: the dry run's confirmation no longer matches.
    s.ok(&["sandbox", "kill", &b]);
    let stale = s.run(&["fleet", "pause", &a, &b, "--confirm", &code]);
    assert_eq!(stale.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&stale.stderr).contains("the confirmation is not this plan's"),
        "{}",
        String::from_utf8_lossy(&stale.stderr)
    );
    assert_eq!(
        s.json(&["sandbox", "info", &a, "--output", "json"])["state"],
        "RUNNING"
    );

    // The new plan's confirmation runs it.
    let dry = s.json(&["fleet", "pause", &a, &b, "--json"]);
    let code = dry["plan"]["confirmation"].as_str().unwrap().to_owned();
    assert!(code.starts_with("pause-1-"), "{code}");
    let ran = s.json(&["fleet", "pause", &a, &b, "--confirm", &code, "--json"]);
    assert_eq!(
        ran["outcome"]["results"][0]["sandbox_id"],
        a.as_str(),
        "{ran}"
    );
    assert_eq!(ran["outcome"]["results"][0]["ok"], true, "{ran}");
    assert_eq!(
        s.json(&["sandbox", "info", &a, "--output", "json"])["state"],
        "SUSPENDED"
    );

    // --yes runs the plan it makes.
    let text = s.ok(&["fleet", "kill", &a, "--yes"]);
    assert!(text.contains("1 done, 0 failed"), "{text}");
}
