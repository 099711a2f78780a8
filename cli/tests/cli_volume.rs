//! `rayito volume` and `rayito volumes` as a user runs them: the binary as
//! a child process, EFS, EC2 and CloudFormation on a moto server
//! (AWS_ENDPOINT_URL, the AWS SDK's own variable).

use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::moto;

use moto::{MotoServer, http_post};

fn rayito(moto: &MotoServer, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rayito"))
        .args(args)
        .env("AWS_ENDPOINT_URL", moto.endpoint_url())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1")
        .env_remove("AWS_PROFILE")
        .env_remove("RAYITO_BACKEND")
        .stdin(Stdio::null())
        .output()
        .expect("run rayito")
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

/// A file system in moto (its EFS REST API).
fn file_system(moto: &MotoServer) -> String {
    let (status, answer) = http_post(
        moto.port(),
        "/2015-02-01/file-systems",
        &[
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=AKIDMOTOSETUP/20260101/us-east-1/elasticfilesystem/aws4_request, \
                 SignedHeaders=host, Signature=0",
            ),
            ("Content-Type", "application/json"),
        ],
        br#"{"CreationToken":"cli"}"#,
    )
    .expect("moto's EFS answers");
    assert!((200..300).contains(&status), "{answer}");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    answer["FileSystemId"].as_str().unwrap().to_owned()
}

#[test]
fn volumes_are_created_listed_and_destroyed() {
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let fs = file_system(&moto);
    let base = ["--output", "json", "volume"];
    let with = |rest: &[&str]| -> Vec<String> {
        base.iter().chain(rest).map(|s| (*s).to_owned()).collect()
    };
    let run = |rest: &[&str]| {
        let args = with(rest);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        rayito(&moto, &args)
    };
    let out = run(&["create", "--file-system-id", &fs, "data"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let created = json(&out);
    assert_eq!(created["name"], "data");
    assert_eq!(created["root_directory"], "/rayito-volumes/data");

    let listed = json(&run(&["list", "--file-system-id", &fs]));
    assert_eq!(
        listed["volumes"][0]["access_point_id"],
        created["access_point_id"]
    );

    let out = run(&["destroy", "--file-system-id", &fs, "data"]);
    assert_eq!(json(&out)["destroyed"], true);
    let out = run(&["destroy", "--file-system-id", &fs, "data"]);
    assert!(out.status.success());
    assert_eq!(json(&out)["destroyed"], false);

    let out = run(&["create", "--file-system-id", "fs-nope", "data"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("the file system id is not 'fs-'")
            || String::from_utf8_lossy(&out.stderr).contains("the file system id is not 'fs-'"),
        "{out:?}"
    );
}

#[test]
fn the_stack_check_fails_on_a_missing_vpc_and_status_says_not_deployed() {
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let out = rayito(
        &moto,
        &[
            "--output",
            "json",
            "volumes",
            "check",
            "--vpc-id",
            "vpc-0123456789abcdef0",
            "--subnet-id",
            "subnet-0123456789abcdef0",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let report = json(&out);
    assert_eq!(report["status"], "FAIL");
    assert_eq!(report["findings"][0]["code"], "vpc-missing");

    let out = rayito(&moto, &["--output", "json", "volumes", "status"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(json(&out)["exists"], false);
}
