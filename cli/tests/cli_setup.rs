//! `rayito setup` as a user runs it: the binary as a child process on the
//! local daemon (its MicroVMs API, STS, S3 and artifact bucket), with
//! CloudFormation on a moto server (AWS_ENDPOINT_URL_CLOUDFORMATION, the
//! AWS SDK's own variable). The dry run's output is pinned and writes
//! nothing; `--yes` deploys the IAM stack, publishes rayito-base and runs
//! the doctor; a second `--yes` changes nothing and says so.

use std::io::{Read as _, Write as _};
use std::path::Path;

use serde_json::Value;

use crate::skip_support as skip;
// moto.rs reaches the skip helper as `super::skip`.
use crate::moto;

use moto::MotoServer;

use crate::session;
use session::Session;

/// DescribeStacks on moto through its query API (moto routes by the
/// credential scope's service and does not check the signature).
fn describe_stack(moto: &MotoServer, name: &str) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", moto.port())).unwrap();
    write!(
        stream,
        "GET /?Action=DescribeStacks&StackName={name}&Version=2010-05-15 HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Authorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/cloudformation/aws4_request, SignedHeaders=host, Signature=00\r\n\
         Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// The first bytes of an aarch64 ELF executable (never run: the local
/// build only copies it).
fn aarch64_elf() -> Vec<u8> {
    let mut bytes = b"\x7fELF\x02\x01\x01\x00".to_vec();
    bytes.resize(16, 0);
    bytes.extend_from_slice(&3u16.to_le_bytes());
    bytes.extend_from_slice(&0xB7u16.to_le_bytes());
    bytes.extend_from_slice(b" a stand-in for rayito-agent");
    bytes
}

fn s(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temp path")
}

#[test]
fn setup_plans_without_writing_then_applies_once_and_a_second_run_changes_nothing() {
    if let Some(reason) = skip::local_builds_unavailable() {
        skip::skip(reason);
        return;
    }
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let session =
        Session::unset_backend().env("AWS_ENDPOINT_URL_CLOUDFORMATION", moto.endpoint_url());

    // The dry run (the default): the plan, nothing written.
    let plan: Value =
        serde_json::from_str(&session.ok(&["--local", "--output", "json", "setup"])).unwrap();
    let account = plan["account"].as_str().unwrap().to_owned();
    let bucket = plan["bucket"].as_str().unwrap().to_owned();
    assert_eq!(plan["dryRun"], true);
    let text = session.ok(&["--local", "setup", "--dry-run"]);
    assert_eq!(
        text,
        format!(
            "setup of account {account} in us-east-1 (dry run: nothing is written; --yes applies it)\n\
             \x20 exists bucket {bucket}\n\
             \x20 create stack rayito-m0-iam\n\
             \x20 exists image rayito-base\n\
             artifact bucket: {bucket}\n"
        )
    );
    assert!(
        describe_stack(&moto, "rayito-m0-iam").contains("does not exist"),
        "the dry run created no stack"
    );

    // --yes: the IAM stack, the base image from an artifact, the doctor.
    let work = tempfile::tempdir().unwrap();
    let base = work.path().join("base");
    std::fs::create_dir(&base).unwrap();
    std::fs::write(
        base.join("Dockerfile"),
        "COPY rayd /opt/rayito-cli-setup/rayd\nRUN echo setup > /opt/rayito-cli-setup/marker\nCMD [\"/opt/rayito-cli-setup/rayd\"]\n",
    )
    .unwrap();
    let agent = work.path().join("rayito-agent");
    std::fs::write(&agent, aarch64_elf()).unwrap();
    let zip = work.path().join("base.zip");
    session.ok(&[
        "image",
        "zip",
        s(&base),
        s(&zip),
        "--agent-binary",
        s(&agent),
    ]);
    let out = session.ok(&["--local", "setup", "--yes", "--artifact", s(&zip)]);
    assert!(out.starts_with(&format!(
        "unchanged bucket {bucket}\ncreated stack rayito-m0-iam\nbuilt image rayito-base version 2 over al2023-1 version 1\n"
    )), "{out}");
    assert!(
        out.contains("RAYITO_TEMPLATE=arn:aws:lambda:us-east-1:"),
        "{out}"
    );
    assert!(out.contains("verdict: ready"), "{out}");
    assert!(out.contains("publishing: ready"), "{out}");
    assert!(
        describe_stack(&moto, "rayito-m0-iam")
            .contains("<StackStatus>CREATE_COMPLETE</StackStatus>"),
        "the stack is there"
    );

    // Again: nothing changes, and it says so.
    let again = session.ok(&["--local", "setup", "--yes", "--artifact", s(&zip)]);
    assert!(again.starts_with(&format!(
        "unchanged bucket {bucket}\nunchanged stack rayito-m0-iam\nunchanged image rayito-base (version 2 reused)\nnothing changed: this account was already set up\n"
    )), "{again}");
    let plan = session.ok(&["--local", "setup"]);
    assert!(
        plan.ends_with("nothing to do: this account is set up\n"),
        "{plan}"
    );

    // The image setup published starts sandboxes.
    let template = again
        .lines()
        .find_map(|l| l.strip_prefix("RAYITO_TEMPLATE="))
        .expect("setup prints RAYITO_TEMPLATE")
        .to_owned();
    let created: Value = serde_json::from_str(&session.ok(&[
        "--local",
        "sandbox",
        "create",
        "--template",
        &template,
        "--output",
        "json",
    ]))
    .unwrap();
    let id = created["sandbox_id"].as_str().unwrap().to_owned();
    let marker = session.ok(&[
        "--local",
        "sandbox",
        "exec",
        &id,
        "--",
        "cat /opt/rayito-cli-setup/marker",
    ]);
    assert_eq!(marker, "setup\n");
    session.run(&["--local", "sandbox", "kill", &id]);
}

/// `rayito stack` and `rayito dashboard cloudwatch` as a user runs them:
/// the catalog and the dashboard JSON without any AWS call; a component
/// deployed (after a dry run that changes nothing), read and destroyed on
/// moto's CloudFormation (the AWS SDK's own endpoint variables).
#[test]
fn stack_lists_deploys_reads_and_destroys_a_component_on_moto() {
    let offline = Session::unset_backend();
    let list = offline.json(&["--output", "json", "stack", "list"]);
    let names: Vec<&str> = list["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 15);
    assert_eq!(names[0], "metadata-index");
    assert_eq!(
        list["components"][0]["parameters"][0]["default"],
        "rayito-sandboxes"
    );
    let text = offline.ok(&["stack", "list"]);
    assert!(text.contains("\nquota-alerts\n"), "{text}");
    let out = offline.tmp.path().join("board.json");
    offline.ok(&["dashboard", "cloudwatch", "--quota", "--out", s(&out)]);
    let board: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(board["widgets"].as_array().unwrap().len(), 7);
    let bad = offline.run(&["dashboard", "cloudwatch", "--log-group-prefix", "rayito"]);
    assert_eq!(bad.status.code(), Some(2));

    let Some(moto) = MotoServer::start() else {
        return;
    };
    let session = Session::unset_backend()
        .env("AWS_ENDPOINT_URL_CLOUDFORMATION", moto.endpoint_url())
        .env("AWS_ENDPOINT_URL_STS", moto.endpoint_url())
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1");
    let dry = session.json(&["--output", "json", "stack", "deploy", "otlp-export"]);
    assert_eq!(dry["dryRun"], true);
    assert!(
        describe_stack(&moto, "rayito-otlp-export").contains("does not exist"),
        "the dry run created no stack"
    );
    let done = session.json(&[
        "--output",
        "json",
        "stack",
        "deploy",
        "otlp-export",
        "--tag",
        "team=7",
        "--yes",
    ]);
    assert_eq!(done["outcome"], "created");
    assert_eq!(done["stack"]["state"], "CREATE_COMPLETE");
    assert_eq!(done["stack"]["tags"]["rayito:component"], "otlp-export");
    assert_eq!(done["stack"]["tags"]["team"], "7");
    let status = session.json(&["--output", "json", "stack", "status", "otlp-export"]);
    assert!(
        status["stack"]["outputs"]["PolicyArn"]
            .as_str()
            .unwrap()
            .starts_with("arn:aws:iam::"),
        "{status}"
    );
    let again = session.json(&[
        "--output",
        "json",
        "stack",
        "deploy",
        "otlp-export",
        "--yes",
    ]);
    assert_eq!(
        again["outcome"], "changed",
        "moto updates a stack without parameters"
    );
    session.ok(&["stack", "destroy", "otlp-export", "--yes"]);
    let gone = session.run(&["stack", "status", "otlp-export"]);
    let gone_text = String::from_utf8_lossy(&gone.stdout);
    assert!(
        gone.status.code() == Some(1) || gone_text.contains("DELETE_COMPLETE"),
        "{gone_text}"
    );
    let unsupported = session.run(&["stack", "deploy", "custom-domain", "--yes"]);
    assert_ne!(unsupported.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&unsupported.stderr)
            .contains("the routing function at the distribution's edge (custom domains, domain=) is not built in this SDK yet"),
        "{}",
        String::from_utf8_lossy(&unsupported.stderr)
    );
}
