//! `rayito secret` as a user runs it: the binary as a child process, Secrets
//! Manager on a moto server (AWS_ENDPOINT_URL_SECRETS_MANAGER, the AWS
//! SDK's own variable). Values go in by stdin or a file and never come
//! out; a missing secret is the SDK's error.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::moto;

use moto::MotoServer;

/// The value every test writes: it must never show in any output.
const VALUE: &str = "s3cr3t-value-42";

fn rayito(moto: &MotoServer, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rayito"));
    cmd.args(args)
        .env("AWS_ENDPOINT_URL_SECRETS_MANAGER", moto.endpoint_url())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_ENDPOINT_URL")
        .env_remove("RAYITO_BACKEND")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run rayito");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    for stream in [&out.stdout, &out.stderr] {
        assert!(
            !String::from_utf8_lossy(stream).contains(VALUE),
            "the value leaked: {args:?}"
        );
    }
    out
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "not one JSON document: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn secrets_are_created_from_stdin_or_a_file_and_never_printed() {
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let prefix = "cli-test/";
    let out = rayito(
        &moto,
        &[
            "--output",
            "json",
            "secret",
            "create",
            "--prefix",
            prefix,
            "api-key",
            "--metadata",
            "owner=ci",
        ],
        Some(VALUE),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let created = json(&out);
    assert_eq!(created["name"], "api-key");
    assert_eq!(created["version"], 1);
    assert_eq!(created["metadata"]["owner"], "ci");

    // A second create of the name with another value: the SDK's error,
    // exit 1, no name in it (the same value again is idempotent: the
    // SDK's request token is the version's).
    let out = rayito(
        &moto,
        &["secret", "create", "--prefix", prefix, "api-key"],
        Some("other"),
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(!stderr.contains("api-key"), "{stderr}");

    // update from a file: version 2, text output.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("value.txt");
    std::fs::write(&file, format!("{VALUE}-2")).unwrap();
    let out = rayito(
        &moto,
        &[
            "secret",
            "update",
            "--prefix",
            prefix,
            "api-key",
            "--from-file",
            file.to_str().unwrap(),
        ],
        None,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "updated api-key version 2\n"
    );

    // info and list show the name, version and metadata.
    let info = json(&rayito(
        &moto,
        &[
            "--output", "json", "secret", "info", "--prefix", prefix, "api-key",
        ],
        None,
    ));
    assert_eq!(info["version"], 2);
    assert_eq!(info["metadata"]["owner"], "ci");
    let listed = json(&rayito(
        &moto,
        &["--output", "json", "secret", "list", "--prefix", prefix],
        None,
    ));
    let names: Vec<&str> = listed["secrets"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["api-key"], "{listed}");

    // An empty value is refused by the SDK before any call, naming `value`.
    let out = rayito(
        &moto,
        &[
            "--output", "json", "secret", "create", "--prefix", prefix, "empty",
        ],
        Some(""),
    );
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["error"]["kind"], "invalid_argument");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("value"),
        "{v}"
    );

    // delete: true once, then false; then info is not found.
    let out = rayito(
        &moto,
        &["secret", "delete", "--prefix", prefix, "api-key"],
        None,
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "deleted api-key\n");
    let again = json(&rayito(
        &moto,
        &[
            "--output", "json", "secret", "delete", "--prefix", prefix, "api-key",
        ],
        None,
    ));
    assert_eq!(again["deleted"], false);
    let out = rayito(
        &moto,
        &[
            "--output", "json", "secret", "info", "--prefix", prefix, "api-key",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["error"]["kind"], "secret_not_found");
}
