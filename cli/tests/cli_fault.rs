//! `rayito local fault ...` end to end: a fault injected by one invocation
//! changes what the next one meets, as a script testing a service would
//! use it, with the SDK's messages and the CLI's exit codes; `clear`
//! restores; the refusals are pinned.

use serde_json::Value;

use crate::session;
use session::Session;

/// Runs `args` with `--output json`: its exit code and document.
fn json_run(s: &Session, args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["--output", "json"];
    all.extend_from_slice(args);
    let out = s.run(&all);
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "{args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), doc)
}

#[test]
fn a_fault_changes_the_next_command_and_clear_restores() {
    let s = Session::local();

    // Throttled creates past the SDK's retries: rate_limit, exit 75.
    let out = s.ok(&[
        "local",
        "fault",
        "throttle",
        "--creates",
        "100",
        "--retry-after",
        "0",
    ]);
    assert_eq!(out, "applied: throttle\n");
    s.ok(&["local", "fault", "proxy-status", "--status", "502"]);
    assert_eq!(
        s.ok(&["local", "fault", "list"]),
        "throttle RunMicrovm x100 (retry after 0 s)\nproxy-status 502\n"
    );
    let (code, listed) = json_run(&s, &["local", "fault", "list"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        listed["throttles"],
        serde_json::json!([{"operation": "RunMicrovm", "count": 100, "retryAfterSeconds": 0}])
    );
    assert_eq!(listed["proxyStatuses"], serde_json::json!([502]));
    s.ok(&["local", "fault", "clear"]);
    s.ok(&[
        "local",
        "fault",
        "throttle",
        "--creates",
        "100",
        "--retry-after",
        "0",
    ]);
    let (code, doc) = json_run(&s, &["sandbox", "create"]);
    assert_eq!(code, Some(75), "{doc}");
    assert_eq!(doc["error"]["kind"], "rate_limit");
    assert_eq!(
        doc["error"]["message"],
        "control plane call RunMicrovm was throttled: Rate exceeded; retry after 0 s"
    );

    // Cleared: create works again.
    let (code, doc) = json_run(&s, &["local", "fault", "clear"]);
    assert_eq!(code, Some(0));
    assert_eq!(doc, serde_json::json!({"applied": true, "fault": "clear"}));
    assert_eq!(s.ok(&["local", "fault", "list"]), "no pending faults\n");
    let (code, created) = json_run(&s, &["sandbox", "create"]);
    assert_eq!(code, Some(0), "{created}");
    let id = created["sandbox_id"].as_str().expect("an id").to_owned();

    // A spent quota: final, exit 1.
    s.ok(&["local", "fault", "quota"]);
    let (code, doc) = json_run(&s, &["sandbox", "create"]);
    assert_eq!(code, Some(1), "{doc}");
    assert_eq!(doc["error"]["kind"], "quota_exceeded");

    // A full disk, for this sandbox only.
    s.ok(&["local", "fault", "fill-disk", &id]);
    let input = s.tmp.path().join("input.txt");
    std::fs::write(&input, "data").unwrap();
    let (code, doc) = json_run(
        &s,
        &[
            "sandbox",
            "files",
            "put",
            &id,
            input.to_str().unwrap(),
            "/home/user/input.txt",
        ],
    );
    assert_eq!(code, Some(1), "{doc}");
    assert_eq!(doc["error"]["kind"], "disk_full");
    assert_eq!(
        doc["error"]["message"],
        "/home/user/input.txt: the sandbox has less than 256 MiB of free disk (files.write); free space or use a larger disk"
    );
    assert_eq!(doc["error"]["path"], "/home/user/input.txt");

    // A killed agent: the sandbox is gone.
    s.ok(&["local", "fault", "kill-agent", &id]);
    let (code, doc) = json_run(&s, &["sandbox", "files", "ls", &id, "/home/user"]);
    assert_eq!(code, Some(1), "{doc}");
    assert_eq!(doc["error"]["kind"], "sandbox_not_found");
}

#[test]
fn refusals_are_pinned() {
    let s = Session::local();
    // No such sandbox: the SDK's message, exit 1.
    let (code, doc) = json_run(&s, &["local", "fault", "cut", "microvm-nope"]);
    assert_eq!(code, Some(1), "{doc}");
    assert_eq!(doc["error"]["kind"], "sandbox_not_found");
    assert_eq!(
        doc["error"]["message"],
        "the sandbox microvm-nope does not exist or has terminated; create a new sandbox"
    );
    // Values clap refuses: usage errors, exit 2, nothing injected.
    let out = s.run(&["local", "fault", "proxy-status", "--status", "200"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("200 is not in 400..=599"), "{stderr}");
    let out = s.run(&[
        "local",
        "fault",
        "throttle",
        "--operation",
        "runMicrovm",
        "--count",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "not a control-plane operation of the local backend (an AWS name such as RunMicrovm or GetMicrovm)"
        ),
        "{stderr}"
    );
    let out = s.run(&["local", "fault", "throttle"]);
    assert_eq!(out.status.code(), Some(2));
}
