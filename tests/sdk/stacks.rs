//! `OptionalStacks` (feature `stacks`): every generated template passes
//! cfn-lint; the IAM-only and DynamoDB components deploy on moto's
//! CloudFormation with status, update (no_changes and changed, a left-out
//! parameter kept), the fixed tags and destroy; the Lambda zip of a
//! component is uploaded once (through a recording proxy in front of
//! moto's S3); and the failure paths moto never produces (a stack in
//! ROLLBACK_COMPLETE, a create that rolls back, a wait that times out) are
//! served by a scripted CloudFormation peer over HTTP. docs/stacks.md's
//! transcribed messages are kept in step with the SDK's.

use crate::sdk_support;
use crate::skip_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rayito::stacks::{
    CloudWatchBoard, OptionalStacks, ParameterChange, StackDeploy, StackOptions, UpdateOutcome,
    components,
};
use rayito::{AwsOptions, Client, SandboxError};
use sdk_support::moto::MotoServer;
use sdk_support::recording_proxy::RecordingProxy;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

#[test]
fn every_generated_template_passes_cfn_lint() {
    let Some(lint) = crate::s3_mounts_stack::cfn_lint() else {
        skip_support::skip(
            "cfn-lint not found in target/test-deps/venv or on the PATH (.ci/install-test-deps installs moto[server], which brings it)",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    // efs-volumes' template is written from its parameters (the volumes'
    // generator, linted in each shape by tests/sdk/volumes_aws.rs): here as
    // `rayito stack deploy efs-volumes` sends it for two subnets.
    let efs: BTreeMap<String, String> = [
        ("VpcId", "vpc-12345678"),
        ("SubnetIds", "subnet-0a1b2c3d,subnet-1a2b3c4d"),
        ("ConnectorName", "rayito-efs"),
        ("AllowWrite", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    for c in components() {
        let Some(body) = c.template_for(&efs).unwrap() else {
            continue;
        };
        let path = dir.path().join(format!("{}.json", c.name));
        std::fs::write(&path, body).unwrap();
        files.push(path);
    }
    assert_eq!(files.len(), 12, "the supported components");
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

/// A client whose AWS calls (STS, CloudFormation, S3) go to `endpoint`.
async fn client(endpoint: &str) -> Client {
    Client::builder()
        .aws(
            AwsOptions::new()
                .endpoint_url(endpoint)
                .s3_endpoint_url(endpoint)
                .region("us-east-1")
                .static_credentials("testing", "testing"),
        )
        .build()
        .await
        .expect("a client")
}

fn fast(stacks: OptionalStacks, timeout: Duration) -> OptionalStacks {
    let mut options = StackOptions::default();
    options.poll_interval = Duration::from_millis(50);
    options.timeout = timeout;
    stacks.with_options(options)
}

/// The optional stacks of a [`client`] of `endpoint`, polling fast and
/// waiting at most `timeout`.
async fn stacks_at(endpoint: &str, timeout: Duration) -> OptionalStacks {
    fast(client(endpoint).await.optional_stacks(), timeout)
}

/// The parameter changes as (name, before, after).
fn changed(changes: &[ParameterChange]) -> Vec<(&str, Option<&str>, &str)> {
    changes
        .iter()
        .map(|c| (c.name.as_str(), c.before.as_deref(), c.after.as_str()))
        .collect()
}

/// Deploys otlp-export against a [`ScriptedCloudFormation`] (its
/// DescribeStacks answers `statuses`, `failed` the failed resource),
/// waiting at most `timeout`: the peer, and the deploy's error, asserted
/// to be `Stack { code }`.
async fn failed_otlp_deploy(
    statuses: Vec<Option<&'static str>>,
    failed: &'static str,
    timeout: Duration,
    code: &str,
) -> (ScriptedCloudFormation, SandboxError) {
    let (peer, url) = ScriptedCloudFormation::start(statuses, failed).await;
    let err = stacks_at(&url, timeout)
        .await
        .deploy("otlp-export", &StackDeploy::new())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, SandboxError::Stack { code: c, .. } if c.as_str() == code),
        "{err:?}"
    );
    (peer, err)
}

async fn moto() -> Option<MotoServer> {
    tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metadata_index_deploys_updates_keeps_what_was_left_out_and_destroys_on_moto() {
    let Some(moto) = moto().await else { return };
    let stacks = stacks_at(&moto.endpoint_url(), Duration::from_secs(60)).await;
    assert_eq!(stacks.status("metadata-index", None).await.unwrap(), None);

    let deploy = StackDeploy::new()
        .param("TableName", "rayito-test-index")
        .tag("team", "seven")
        .tag("rayito:component", "forged");
    let changes = stacks
        .parameter_changes("metadata-index", &deploy)
        .await
        .unwrap();
    assert_eq!(
        changed(&changes),
        [
            ("DeletionProtection", None, "false"),
            ("PointInTimeRecovery", None, "false"),
            ("TableName", None, "rayito-test-index"),
        ]
    );
    let created = stacks.deploy("metadata-index", &deploy).await.unwrap();
    assert_eq!(created.outcome, None, "created, not updated");
    let status = &created.status;
    assert_eq!(status.name, "rayito-metadata-index");
    assert_eq!(status.state, "CREATE_COMPLETE");
    assert_eq!(status.outputs["TableName"], "rayito-test-index");
    assert!(
        status.outputs["TableArn"].ends_with(":table/rayito-test-index"),
        "{:?}",
        status.outputs
    );
    for output in ["WriterPolicyArn", "ReaderPolicyArn"] {
        assert!(
            status.outputs[output].starts_with("arn:aws:iam::123456789012:policy/"),
            "{output}: {:?}",
            status.outputs
        );
    }
    assert_eq!(status.tags["team"], "seven");
    assert_eq!(status.tags["rayito:component"], "metadata-index");
    assert_eq!(status.tags["rayito:managed-by"], "rayito-sdk");
    assert_eq!(status.tags["rayito:sdk-version"], env!("CARGO_PKG_VERSION"));

    // The same deploy again: CloudFormation has nothing to do.
    let again = stacks.deploy("metadata-index", &deploy).await.unwrap();
    assert_eq!(again.outcome, Some(UpdateOutcome::NoChanges));

    // An update of the table itself is left to AWS: moto's CloudFormation
    // loses a DynamoDB table it updates. The IAM-only s3-mounts below
    // shows an update that keeps what was left out.
    stacks
        .destroy("metadata-index", None, true)
        .await
        .expect("destroyed");
    let gone = stacks.status("metadata-index", None).await.unwrap();
    assert!(
        gone.is_none_or(|s| s.state == "DELETE_COMPLETE"),
        "the stack is gone"
    );
}

/// An update that leaves parameters out keeps their deployed values
/// (`UsePreviousValue`) instead of resetting them to their defaults.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_keeps_the_parameters_left_out_on_moto() {
    let Some(moto) = moto().await else { return };
    let stacks = stacks_at(&moto.endpoint_url(), Duration::from_secs(60)).await;
    let first = StackDeploy::new()
        .param("BucketName", "datasets")
        .param("Prefixes", "team7/*");
    let created = stacks.deploy("s3-mounts", &first).await.unwrap();
    assert_eq!(created.status.parameters["ReadOnly"], "true", "the default");

    let later = StackDeploy::new().param("ReadOnly", "false");
    let changes = stacks.parameter_changes("s3-mounts", &later).await.unwrap();
    assert_eq!(changed(&changes), [("ReadOnly", Some("true"), "false")]);
    let updated = stacks.deploy("s3-mounts", &later).await.unwrap();
    assert_eq!(updated.outcome, Some(UpdateOutcome::Changed));
    assert_eq!(updated.status.state, "UPDATE_COMPLETE");
    assert_eq!(updated.status.parameters["ReadOnly"], "false");
    assert_eq!(
        updated.status.parameters["BucketName"], "datasets",
        "the left-out bucket kept its value"
    );
    assert!(
        updated.status.parameters["Prefixes"].contains("team7/*"),
        "the left-out prefixes kept theirs: {:?}",
        updated.status.parameters
    );
    stacks.destroy("s3-mounts", None, true).await.unwrap();
}

/// Every other IAM-only component creates its resources and outputs on
/// moto, under its default name or a given one, and goes with destroy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_iam_only_components_deploy_and_destroy_on_moto() {
    let Some(moto) = moto().await else { return };
    let stacks = stacks_at(&moto.endpoint_url(), Duration::from_secs(60)).await;
    let cases: [(&str, StackDeploy, &[&str]); 6] = [
        (
            // With a key: moto refuses the policy that AWS::NoValue leaves
            // without one (MalformedPolicyDocument; cfn-lint and AWS take it).
            "secrets-access",
            StackDeploy::new().param(
                "KmsKeyArn",
                "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
            ),
            &["ReaderPolicyArn", "AdminPolicyArn"],
        ),
        ("otlp-export", StackDeploy::new(), &["PolicyArn"]),
        (
            "sizes-guard",
            StackDeploy::new().param(
                "ImageArns",
                "arn:aws:lambda:us-east-1:123456789012:microvm-image:rayito-base",
            ),
            &["PolicyArn"],
        ),
        (
            "templates",
            StackDeploy::new()
                .param("ArtifactBucketArn", "arn:aws:s3:::arts")
                .param("BuildRoleArn", "arn:aws:iam::123456789012:role/build"),
            &["TemplateBuilderPolicyArn"],
        ),
        (
            "s3-mounts",
            StackDeploy::new()
                .param("BucketName", "datasets")
                .stack_name("rayito-s3-mounts-datasets"),
            &["PolicyArn"],
        ),
        (
            "dashboard-read-role",
            StackDeploy::new()
                .param("TrustedPrincipalArn", "arn:aws:iam::123456789012:role/dash")
                .param("ExternalId", "a-shared-value"),
            &["RoleArn"],
        ),
    ];
    for (component, deploy, outputs) in cases {
        let done = stacks
            .deploy(component, &deploy)
            .await
            .unwrap_or_else(|e| panic!("{component}: {e}"));
        assert_eq!(done.status.state, "CREATE_COMPLETE", "{component}");
        for output in outputs {
            assert!(
                done.status
                    .outputs
                    .get(*output)
                    .is_some_and(|v| v.starts_with("arn:aws:iam::")),
                "{component} {output}: {:?}",
                done.status.outputs
            );
        }
        let name = deploy.stack_name.as_deref();
        stacks.destroy(component, name, true).await.unwrap();
        let gone = stacks.status(component, name).await.unwrap();
        assert!(
            gone.is_none_or(|s| s.state == "DELETE_COMPLETE"),
            "{component}"
        );
    }
}

/// events-webhooks' zip is uploaded under its sha256 before the stack,
/// once: a second deploy reads the object back and puts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_components_zip_is_uploaded_once_under_its_sha256() {
    let Some(moto) = moto().await else { return };
    let upstream = format!("127.0.0.1:{}", moto.port()).parse().unwrap();
    let proxy = RecordingProxy::start(upstream).await;
    let config = sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "testing");
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    );
    s3.create_bucket().bucket("arts").send().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let zip = dir.path().join("functions.zip");
    std::fs::write(&zip, b"PK\x05\x06 a tiny zip for the test").unwrap();
    let sha = sdk_support::plain_http::sha256_hex(&std::fs::read(&zip).unwrap());
    let key = format!("rayito/stacks/events-webhooks/{sha}.zip");

    let stacks = stacks_at(&proxy.endpoint_url(), Duration::from_secs(30)).await;
    for round in 0..2 {
        // Each round under its own stack name: whatever moto's
        // CloudFormation makes of the stack, the upload comes first.
        let deploy = StackDeploy::new()
            .param("LogGroupName", "/rayito/rayito-base")
            .artifact_bucket("arts")
            .artifact(&zip)
            .stack_name(format!("rayito-events-upload-{round}"));
        let _ = stacks.deploy("events-webhooks", &deploy).await;
    }
    let object_calls: Vec<String> = proxy
        .records()
        .iter()
        .filter(|r| r.path.starts_with("/arts/"))
        .map(|r| format!("{} {}", r.method, r.path.split('?').next().unwrap()))
        .collect();
    let path = format!("/arts/{key}");
    assert_eq!(
        object_calls,
        [
            format!("GET {path}"),
            format!("PUT {path}"),
            format!("GET {path}")
        ],
        "uploaded once, read back the second time"
    );
    let stored = s3
        .get_object()
        .bucket("arts")
        .key(&key)
        .send()
        .await
        .unwrap();
    let body = stored.body.collect().await.unwrap().into_bytes();
    assert_eq!(body.as_ref(), std::fs::read(&zip).unwrap().as_slice());
}

/// The refusals that come before any AWS call, through the public API.
#[tokio::test]
async fn refusals_come_before_any_call() {
    // A dead endpoint: any call would fail with a connection error.
    let client = client("http://127.0.0.1:9").await;
    let stacks = client.optional_stacks();
    let kind = |e: &SandboxError| e.kind().as_str();
    let err = stacks
        .deploy("nope", &StackDeploy::new())
        .await
        .unwrap_err();
    assert_eq!(kind(&err), "invalid_argument");
    let err = stacks
        .deploy("custom-domain", &StackDeploy::new())
        .await
        .unwrap_err();
    assert_eq!(kind(&err), "unimplemented");
    assert_eq!(
        err.to_string(),
        "feature rayito stack deploy custom-domain is not available: the routing function at the distribution's edge (custom domains, domain=) is not built in this SDK yet; see docs/stacks.md"
    );
    let err = stacks
        .deploy(
            "events-webhooks",
            &StackDeploy::new().param("LogGroupName", "/rayito/x"),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().starts_with("invalid artifact_bucket: "),
        "{err}"
    );
    let err = stacks
        .deploy("otlp-export", &StackDeploy::new().param("Bogus", "1"))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid parameters: otlp-export has no parameter 'Bogus'; pass only its parameters (rayito stack list shows them)"
    );
}

/// A scripted CloudFormation peer: each DescribeStacks answers the next
/// status of `statuses` (the last one repeats; `None` is "does not
/// exist"); CreateStack, UpdateStack and DeleteStack are accepted;
/// DescribeStackEvents names `failed` as the failed resource. It records
/// every action.
#[derive(Clone)]
struct ScriptedCloudFormation {
    statuses: Arc<Mutex<Vec<Option<&'static str>>>>,
    actions: Arc<Mutex<Vec<String>>>,
    failed: &'static str,
}

impl ScriptedCloudFormation {
    async fn start(statuses: Vec<Option<&'static str>>, failed: &'static str) -> (Self, String) {
        let peer = Self {
            statuses: Arc::new(Mutex::new(statuses)),
            actions: Arc::new(Mutex::new(Vec::new())),
            failed,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let serving = peer.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serving.clone().serve(stream));
            }
        });
        (peer, url)
    }

    fn actions(&self) -> Vec<String> {
        self.actions.lock().unwrap().clone()
    }

    async fn serve(self, mut stream: tokio::net::TcpStream) {
        let mut buf = Vec::new();
        loop {
            let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                let mut chunk = [0u8; 4096];
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                continue;
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < head_end + 4 + length {
                let mut chunk = [0u8; 4096];
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let body =
                String::from_utf8_lossy(&buf[head_end + 4..head_end + 4 + length]).into_owned();
            buf.drain(..head_end + 4 + length);
            let action = body
                .split('&')
                .find_map(|kv| kv.strip_prefix("Action="))
                .unwrap_or("")
                .to_owned();
            self.actions.lock().unwrap().push(action.clone());
            let (status, xml) = self.answer(&action);
            let reply = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: text/xml\r\ncontent-length: {}\r\n\r\n{xml}",
                xml.len()
            );
            if stream.write_all(reply.as_bytes()).await.is_err() {
                return;
            }
        }
    }

    fn answer(&self, action: &str) -> (u16, String) {
        const NS: &str = "http://cloudformation.amazonaws.com/doc/2010-05-15/";
        let stack_id = "arn:aws:cloudformation:us-east-1:123456789012:stack/s/1";
        let wrap = |inner: String| {
            format!(
                "<{action}Response xmlns=\"{NS}\"><{action}Result>{inner}</{action}Result><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></{action}Response>"
            )
        };
        match action {
            "DescribeStacks" => {
                let status = {
                    let mut statuses = self.statuses.lock().unwrap();
                    if statuses.len() > 1 {
                        statuses.remove(0)
                    } else {
                        statuses[0]
                    }
                };
                match status {
                    None => (
                        400,
                        format!(
                            "<ErrorResponse xmlns=\"{NS}\"><Error><Type>Sender</Type><Code>ValidationError</Code><Message>Stack with id s does not exist</Message></Error><RequestId>r</RequestId></ErrorResponse>"
                        ),
                    ),
                    Some(status) => (
                        200,
                        wrap(format!(
                            "<Stacks><member><StackName>rayito-otlp-export</StackName><StackId>{stack_id}</StackId><CreationTime>2026-01-01T00:00:00Z</CreationTime><StackStatus>{status}</StackStatus></member></Stacks>"
                        )),
                    ),
                }
            }
            "DescribeStackEvents" => {
                let event = |logical: &str, status: &str, n: u32| {
                    format!(
                        "<member><StackId>{stack_id}</StackId><EventId>e{n}</EventId><StackName>rayito-otlp-export</StackName><LogicalResourceId>{logical}</LogicalResourceId><Timestamp>2026-01-01T00:00:0{n}Z</Timestamp><ResourceStatus>{status}</ResourceStatus></member>"
                    )
                };
                (
                    200,
                    wrap(format!(
                        "<StackEvents>{}{}{}</StackEvents>",
                        event("rayito-otlp-export", "ROLLBACK_COMPLETE", 3),
                        event(self.failed, "CREATE_FAILED", 2),
                        event("rayito-otlp-export", "CREATE_IN_PROGRESS", 1)
                    )),
                )
            }
            "CreateStack" | "UpdateStack" => (200, wrap(format!("<StackId>{stack_id}</StackId>"))),
            _ => (200, wrap(String::new())),
        }
    }
}

#[tokio::test]
async fn a_stack_in_rollback_complete_is_blocked_before_any_change() {
    let (peer, err) = failed_otlp_deploy(
        vec![Some("ROLLBACK_COMPLETE")],
        "-",
        Duration::from_secs(5),
        "blocked",
    )
    .await;
    assert_eq!(
        err.to_string(),
        "stack rayito-otlp-export is ROLLBACK_COMPLETE and cannot be updated; delete the stack, then deploy it again"
    );
    assert_eq!(peer.actions(), ["DescribeStacks"], "nothing was changed");
}

#[tokio::test]
async fn a_create_that_rolls_back_names_the_failed_resource() {
    let (peer, err) = failed_otlp_deploy(
        vec![None, Some("CREATE_IN_PROGRESS"), Some("ROLLBACK_COMPLETE")],
        "RayitoOtlpExport",
        Duration::from_secs(5),
        "failed",
    )
    .await;
    assert_eq!(
        err.to_string(),
        "stack rayito-otlp-export failed: resource RayitoOtlpExport ended CREATE_FAILED; read the stack's events in CloudFormation, fix the cause, then deploy it again"
    );
    assert_eq!(
        peer.actions(),
        [
            "DescribeStacks",
            "CreateStack",
            "DescribeStacks",
            "DescribeStacks",
            "DescribeStackEvents"
        ]
    );
}

#[tokio::test]
async fn a_wait_past_its_timeout_is_in_progress() {
    let (_peer, err) = failed_otlp_deploy(
        vec![None, Some("CREATE_IN_PROGRESS")],
        "-",
        Duration::from_millis(200),
        "in_progress",
    )
    .await;
    assert_eq!(
        err.to_string(),
        "stack rayito-otlp-export is still changing (CREATE_IN_PROGRESS); wait until it settles, then deploy it again"
    );
    // A destroy waits for the stack to go: one still there past the
    // timeout is in progress too; one gone is done.
    let (_peer, url) =
        ScriptedCloudFormation::start(vec![Some("DELETE_IN_PROGRESS"), None], "-").await;
    let stacks = stacks_at(&url, Duration::from_secs(5)).await;
    stacks.destroy("otlp-export", None, true).await.unwrap();
}

/// The CLI's `rayito dashboard cloudwatch` body: the five log widgets
/// and the header, the optional ones only when asked.
#[test]
fn the_cloudwatch_board_has_its_widgets() {
    let board = CloudWatchBoard::new("us-east-1").body().unwrap();
    assert_eq!(board["start"], "-PT6H");
    let widgets = board["widgets"].as_array().unwrap();
    assert_eq!(widgets.len(), 6);
    assert_eq!(
        widgets[1]["properties"]["query"],
        "SOURCE logGroups(namePrefix: ['/rayito/']) | stats count(*) as lines by bin(5m)"
    );
    let mut all = CloudWatchBoard::new("us-east-1");
    all.include_otlp = true;
    all.include_quota = true;
    all.log_groups = vec!["/rayito/a".into(), "/rayito/b".into()];
    let board = all.body().unwrap();
    let widgets = board["widgets"].as_array().unwrap();
    assert_eq!(widgets.len(), 10);
    assert!(
        widgets[1]["properties"]["query"]
            .as_str()
            .unwrap()
            .starts_with("SOURCE '/rayito/a' | SOURCE '/rayito/b' | ")
    );
    assert_eq!(
        widgets[9]["properties"]["annotations"]["horizontal"][1]["value"],
        0.95
    );
    let mut bad = CloudWatchBoard::new("us-east-1");
    bad.log_group_prefix = "/x'])| filter".into();
    assert_eq!(
        bad.body().unwrap_err().to_string(),
        "invalid log_group_prefix: a log group prefix starts with '/' and has only letters, digits and '_ . # - /'; pass such a prefix"
    );
}

/// docs/stacks.md transcribes every component and the messages of the
/// rules: each component's row and each message must be there as the SDK
/// writes it.
#[test]
fn docs_stacks_md_keeps_in_step() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/stacks.md"))
        .expect("docs/stacks.md");
    for c in components() {
        let row = format!("| `{}` |", c.name);
        assert!(doc.contains(&row), "docs/stacks.md lacks the row {row}");
        for p in c.parameters {
            assert!(
                doc.contains(&format!("`{}`", p.name)),
                "docs/stacks.md lacks {} of {}",
                p.name,
                c.name
            );
        }
        if let Some(reason) = c.unsupported_reason {
            assert!(
                doc.contains(reason),
                "docs/stacks.md lacks the reason of {}",
                c.name
            );
        }
    }
    let transcribed: BTreeMap<&str, String> = [
        (
            "unknown component",
            rayito::stacks::component("nope").unwrap_err().to_string(),
        ),
        (
            "unsupported",
            "feature rayito stack deploy custom-domain is not available: the routing function at the distribution's edge (custom domains, domain=) is not built in this SDK yet; see docs/stacks.md".to_owned(),
        ),
    ]
    .into_iter()
    .collect();
    for (what, message) in transcribed {
        assert!(
            doc.contains(&message),
            "docs/stacks.md lacks the {what} message: {message}"
        );
    }
    for message in [
        "invalid parameters: quota-alerts: CriticalPercent must be greater than WarningPercent; pass a critical threshold above the warning one",
        "invalid parameters: otlp-export has no parameter 'Bogus'; pass only its parameters (rayito stack list shows them)",
        "stack rayito-otlp-export is ROLLBACK_COMPLETE and cannot be updated; delete the stack, then deploy it again",
        "stack rayito-otlp-export failed: resource RayitoOtlpExport ended CREATE_FAILED; read the stack's events in CloudFormation, fix the cause, then deploy it again",
        "stack rayito-otlp-export is still changing (CREATE_IN_PROGRESS); wait until it settles, then deploy it again",
        "invalid artifact_bucket: events-webhooks uploads its Lambda code to an artifact bucket and none was given; pass the artifact bucket (rayito setup's)",
    ] {
        assert!(doc.contains(message), "docs/stacks.md lacks: {message}");
    }
}
