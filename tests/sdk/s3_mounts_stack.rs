//! The `s3-mounts` stack (`rayito::stacks`): its template and setup's
//! two pass cfn-lint (installed beside moto in target/test-deps/venv), and
//! against moto's CloudFormation and IAM a deploy creates the managed
//! policy with the grants of the spec, a second deploy changes nothing,
//! a writable one updates the grants, another bucket under the same stack
//! is refused, and destroy removes the stack.

use crate::sdk_support;
use crate::setup::url_decoded_json;
use crate::skip_support;

use std::path::PathBuf;
use std::time::Duration;

use rayito::setup::StepAction;
use rayito::stacks::{S3MountsPolicy, StackOptions, s3_mounts_template};
use rayito::{AwsOptions, Client};
use sdk_support::moto::{MotoServer, xml_text};
use serde_json::{Value, json};

/// cfn-lint as .ci/install-test-deps installs it (a dependency of
/// moto[server]), else on the PATH.
pub(crate) fn cfn_lint() -> Option<PathBuf> {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    crate_dir
        .ancestors()
        .map(|dir| dir.join("target/test-deps/venv/bin/cfn-lint"))
        .find(|p| p.is_file())
        .or_else(|| {
            std::env::var_os("PATH").and_then(|path| {
                std::env::split_paths(&path)
                    .map(|dir| dir.join("cfn-lint"))
                    .find(|p| p.is_file())
            })
        })
}

#[test]
fn the_generated_stack_templates_pass_cfn_lint() {
    let Some(lint) = cfn_lint() else {
        skip_support::skip(
            "cfn-lint not found in target/test-deps/venv or on the PATH (.ci/install-test-deps installs moto[server], which brings it)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for (name, body) in [
        ("s3-mounts.json", s3_mounts_template()),
        (
            "iam.json",
            rayito::setup::iam_template("rayito-artifacts-123456789012-us-east-1"),
        ),
        ("artifacts.json", rayito::setup::artifacts_template()),
        (
            "events-webhooks.json",
            rayito::stacks::events_webhooks_template(),
        ),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, body).unwrap();
        files.push(path);
    }
    let out = std::process::Command::new(&lint)
        .args(["--regions", "us-east-1", "--format", "parseable", "--"])
        .args(&files)
        .output()
        .expect("cfn-lint runs");
    assert!(
        out.status.success(),
        "cfn-lint found problems:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A client whose AWS calls (STS, CloudFormation) go to moto.
async fn client(moto: &MotoServer) -> Client {
    Client::builder()
        .aws(
            AwsOptions::new()
                .endpoint_url(moto.endpoint_url())
                .region("us-east-1")
                .static_credentials("testing", "testing"),
        )
        .build()
        .await
        .expect("a client on moto")
}

/// The default version's document of the managed policy `arn`, in moto's
/// IAM.
fn policy_document(moto: &MotoServer, arn: &str) -> Value {
    let policy = moto.iam("GetPolicy", &[("PolicyArn", arn)]);
    let version = xml_text(&policy, "DefaultVersionId").expect("a default version");
    let doc = moto.iam(
        "GetPolicyVersion",
        &[("PolicyArn", arn), ("VersionId", version)],
    );
    url_decoded_json(xml_text(&doc, "Document").expect("a document"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_policy_stack_deploys_updates_refuses_another_bucket_and_destroys_on_moto() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let client = client(&moto).await;
    let mut options = StackOptions::default();
    options.poll_interval = Duration::from_millis(50);
    options.timeout = Duration::from_secs(60);
    let policies = client.s3_mounts_policies(options);
    assert_eq!(policies.status("rayito-s3-mounts").await.unwrap(), None);

    let read = S3MountsPolicy::new("datasets")
        .prefix("team7/")
        .prefix("runs/*");
    let created = policies.deploy(&read).await.expect("the stack deploys");
    assert_eq!(created.action, StepAction::Create);
    let stack = &created.stack;
    assert_eq!(stack.stack_name, "rayito-s3-mounts");
    assert_eq!(stack.status, "CREATE_COMPLETE");
    assert_eq!(stack.bucket.as_deref(), Some("datasets"));
    assert_eq!(stack.prefixes, ["team7/*", "runs/*"]);
    assert_eq!(stack.read_only, Some(true));
    let arn = stack.policy_arn.clone().expect("the PolicyArn output");
    assert!(
        arn.starts_with("arn:aws:iam::123456789012:policy/"),
        "{arn}"
    );
    let doc = policy_document(&moto, &arn);
    let statements = doc["Statement"].as_array().unwrap();
    assert_eq!(statements.len(), 2, "no write grant: {doc}");
    assert_eq!(statements[0]["Action"], "s3:ListBucket");
    assert_eq!(statements[0]["Resource"], "arn:aws:s3:::datasets");
    assert_eq!(
        statements[0]["Condition"]["StringLike"]["s3:prefix"],
        json!(["team7/*", "runs/*"])
    );
    assert_eq!(statements[1]["Action"], "s3:GetObject");
    assert_eq!(
        statements[1]["Resource"],
        json!([
            "arn:aws:s3:::datasets/team7/*",
            "arn:aws:s3:::datasets/runs/*",
            "arn:aws:s3:::datasets/team7/*",
            "arn:aws:s3:::datasets/team7/*"
        ])
    );

    // The same policy again: nothing to change.
    let again = policies.deploy(&read).await.unwrap();
    assert_eq!(again.action, StepAction::Exists);
    assert_eq!(again.stack.policy_arn.as_deref(), Some(arn.as_str()));

    // Writable: the stack is updated (moto keeps a managed policy's
    // document on update, so the write grant is read on a new stack below).
    let writable = read.clone().read_only(false);
    let updated = policies.deploy(&writable).await.unwrap();
    assert_eq!(updated.action, StepAction::Update);
    assert_eq!(updated.stack.status, "UPDATE_COMPLETE");
    assert_eq!(updated.stack.read_only, Some(false));

    // Another bucket under the same stack would take this one's grant.
    let err = policies
        .deploy(&S3MountsPolicy::new("other-bucket"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid bucket: the stack rayito-s3-mounts grants another bucket (one stack per bucket); deploy this bucket under its own stack name"
    );
    // Under its own name it deploys beside the first; writable, with the
    // write grant on its objects.
    let second = policies
        .deploy(
            &S3MountsPolicy::new("other-bucket")
                .read_only(false)
                .stack_name("rayito-s3-mounts-other"),
        )
        .await
        .unwrap();
    assert_eq!(second.action, StepAction::Create);
    let second_arn = second.stack.policy_arn.clone().unwrap();
    assert_ne!(second_arn, arn);
    let doc = policy_document(&moto, &second_arn);
    let write = &doc["Statement"][2];
    assert_eq!(write["Sid"], "WriteObjects");
    assert_eq!(
        write["Action"],
        json!(["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"])
    );
    assert_eq!(write["Resource"][0], "arn:aws:s3:::other-bucket/*");
    assert_eq!(
        doc["Statement"][0]["Condition"]["StringLike"]["s3:prefix"],
        json!(["*"])
    );

    // Read through status, then destroyed (a second destroy finds none).
    let status = policies.status("rayito-s3-mounts").await.unwrap().unwrap();
    assert_eq!(status.bucket.as_deref(), Some("datasets"));
    assert_eq!(status.policy_arn.as_deref(), Some(arn.as_str()));
    assert!(policies.destroy("rayito-s3-mounts").await.unwrap());
    assert!(!policies.destroy("rayito-s3-mounts").await.unwrap());
    let gone = policies.status("rayito-s3-mounts").await.unwrap();
    assert!(
        gone.is_none() || gone.is_some_and(|s| s.status == "DELETE_COMPLETE"),
        "the stack is gone"
    );
    assert!(policies.destroy("rayito-s3-mounts-other").await.unwrap());
}
