//! `rayito sandbox create --volume` and `rayito sandbox volumes` on the
//! local backend: the argument's syntax refused by the parser, the SDK's
//! checks refused before any sandbox (pinned), and a sandbox without
//! volumes reading as such. The volumes' mounts themselves are tested end
//! to end in tests/sdk/volumes.rs.

use std::process::Output;

use serde_json::Value;

use crate::session;

use session::Session;

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const VOLUME: &str = "/mnt/data=fs-0123456789abcdef0:fsap-0123456789abcdef0";
const CONNECTOR: &str = "arn:aws:lambda:us-east-1:123456789012:network-connector:efs";

#[test]
fn bad_volume_arguments_are_refused_before_any_sandbox() {
    let s = Session::local();
    let out = s.run(&["sandbox", "create", "--volume", "/mnt/data=fs-1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "invalid value '/mnt/data=fs-1' for '--volume <PATH=fs-ID:fsap-ID[:ro]>': expected PATH=fs-ID:fsap-ID or PATH=fs-ID:fsap-ID:ro"
        ),
        "{}",
        stderr(&out)
    );

    let out = s.run(&["sandbox", "create", "--volume", VOLUME]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).lines().next().unwrap().starts_with(
            "error: invalid volumes: volumes need egress with the one connector of your VPC"
        ),
        "{}",
        stderr(&out)
    );

    let out = s.run(&[
        "--output", "json", "sandbox", "create", "--egress", CONNECTOR, "--volume", VOLUME,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let error: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(error["error"]["kind"], "invalid_argument", "{error}");
    assert_eq!(
        error["error"]["message"],
        "invalid volumes: volumes need an execution role: amazon-efs-utils signs the mount's TLS tunnel with its credentials (which need the efs-volumes stack's CallerPolicyArn policy); pass execution_role_arn",
        "{error}"
    );

    // The checks pass; the file system's mount target is looked up in the
    // daemon's EFS, which has no such file system.
    let out = s.run(&[
        "sandbox",
        "create",
        "--egress",
        CONNECTOR,
        "--execution-role-arn",
        "arn:aws:iam::123456789012:role/sandbox",
        "--volume",
        VOLUME,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).lines().next().unwrap(),
        "error: volumes: no such file system in the region looked in; check the file system's id and region",
    );
    // Nothing was launched: no token in the cache.
    assert!(
        std::fs::read_dir(s.cache.path().join("tokens"))
            .map(|d| d.count() == 0)
            .unwrap_or(true)
    );
}

#[test]
fn a_sandbox_without_volumes_says_so() {
    let s = Session::local();
    let id = s.ok(&["sandbox", "create"]);
    let id = id.trim();
    let out = s.run(&["sandbox", "volumes", id]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert!(
        stderr(&out).contains(&format!("sandbox {id} has no EFS volume")),
        "{}",
        stderr(&out)
    );
    let listed = s.json(&["--output", "json", "sandbox", "volumes", id]);
    assert_eq!(listed["sandbox_id"], id);
    assert_eq!(listed["volumes"], Value::Array(Vec::new()));
    s.ok(&["sandbox", "kill", id]);
}
