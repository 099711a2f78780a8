//! `rayito::setup` against moto's CloudFormation, IAM and S3 (and, for
//! the base image, the emulator's MicroVMs API and S3 with moto's
//! CloudFormation): the dry run writes nothing, `apply` creates both
//! stacks with the roles, policies and bucket of the spec, a second run
//! changes nothing, and a failing stack is a `stack` error.

use crate::sdk_support;

use std::time::Duration;

use aws_sdk_cloudformation as cfn;
use rayito::error::StackCode;
use rayito::setup::{ARTIFACTS_STACK, IAM_STACK, SetupOptions, SetupPlan, StepAction, StepTarget};
use rayito::template::{Arch, PublishOptions, pack_base_image};
use rayito::{AwsOptions, Client, SandboxError};
use sdk_support::moto::MotoServer;

const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";
const BUCKET: &str = "rayito-artifacts-123456789012-us-east-1";

/// A client whose every AWS call (STS, CloudFormation, S3) goes to moto.
async fn client(moto: &MotoServer) -> Client {
    Client::builder()
        .aws(
            AwsOptions::new()
                .endpoint_url(moto.endpoint_url())
                .s3_endpoint_url(moto.endpoint_url())
                .region(REGION)
                .static_credentials("testing", "testing"),
        )
        .build()
        .await
        .expect("a client on moto")
}

fn options() -> SetupOptions {
    let mut options = SetupOptions::default();
    options.poll_interval = Duration::from_millis(50);
    options.timeout = Duration::from_secs(60);
    options
}

/// A raw CloudFormation client on moto, to read what setup did.
async fn raw_cfn(moto: &MotoServer) -> cfn::Client {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(REGION))
        .endpoint_url(moto.endpoint_url())
        .credentials_provider(cfn::config::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .load()
        .await;
    cfn::Client::new(&config)
}

/// A raw S3 client on moto (path style).
async fn raw_s3(moto: &MotoServer) -> aws_sdk_s3::Client {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(REGION))
        .endpoint_url(moto.endpoint_url())
        .credentials_provider(cfn::config::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .load()
        .await;
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .build(),
    )
}

/// An IAM query call to moto (`Action=...&k=v`), its XML answer. moto
/// routes by the credential scope's service; it does not check the
/// signature.
fn iam_query(moto: &MotoServer, query: &str) -> String {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", moto.port())).unwrap();
    write!(
        stream,
        "GET /?{query}&Version=2010-05-08 HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Authorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/iam/aws4_request, SignedHeaders=host, Signature=00\r\n\
         Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// The text of the first `<tag>` of `xml`.
fn tag<'a>(xml: &'a str, tag: &str) -> &'a str {
    let open = format!("<{tag}>");
    let start = xml
        .find(&open)
        .unwrap_or_else(|| panic!("no <{tag}> in {xml}"))
        + open.len();
    let end = xml[start..].find(&format!("</{tag}>")).unwrap() + start;
    &xml[start..end]
}

/// IAM's documents are URL-encoded JSON.
pub(crate) fn url_decoded_json(text: &str) -> serde_json::Value {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(if bytes[i] == b'+' { b' ' } else { bytes[i] });
            i += 1;
        }
    }
    let text = String::from_utf8(out).unwrap();
    let text = text.replace("&quot;", "\"").replace("&amp;", "&");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn steps(plan: &SetupPlan) -> Vec<String> {
    plan.steps().iter().map(ToString::to_string).collect()
}

/// Whether the stack exists, by DescribeStacks.
async fn stack_status(cfn: &cfn::Client, name: &str) -> Option<String> {
    match cfn.describe_stacks().stack_name(name).send().await {
        Ok(out) => out.stacks()[0]
            .stack_status()
            .map(|s| s.as_str().to_owned()),
        Err(_) => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dry_run_plans_both_stacks_and_writes_nothing() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let client = client(&moto).await;
    let setup = client.setup(options());
    let plan = setup.plan().await.expect("a plan");
    assert_eq!(
        steps(&plan),
        [
            "create stack rayito-m0-artifacts",
            "create stack rayito-m0-iam"
        ]
    );
    assert_eq!(plan.bucket(), BUCKET);
    assert_eq!((plan.account(), plan.region()), (ACCOUNT, REGION));
    assert!(!plan.is_noop());
    // Nothing was created.
    let cfn = raw_cfn(&moto).await;
    assert_eq!(stack_status(&cfn, ARTIFACTS_STACK).await, None);
    assert_eq!(stack_status(&cfn, IAM_STACK).await, None);
    let err = setup.outputs().await.expect_err("no IAM stack yet");
    assert!(
        matches!(
            &err,
            SandboxError::Stack {
                code: StackCode::NotFound,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "stack rayito-m0-iam does not exist in this account and region; create it with rayito setup --yes"
    );
    assert!(!setup.bucket_exists(BUCKET).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_creates_the_stacks_with_their_resources_and_a_second_run_changes_nothing() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let client = client(&moto).await;
    let setup = client.setup(options());
    let plan = setup.plan().await.unwrap();
    let done = setup.apply(&plan).await.expect("setup applies");
    let actions: Vec<String> = done.steps.iter().map(ToString::to_string).collect();
    assert_eq!(
        actions,
        [
            "create stack rayito-m0-artifacts",
            "create stack rayito-m0-iam"
        ]
    );
    let role_arn = format!("arn:aws:iam::{ACCOUNT}:role/rayito-m0-build-{REGION}");
    assert_eq!(done.build_role_arn, role_arn);
    assert_eq!(done.bucket, BUCKET);
    for key in rayito::setup::IAM_OUTPUTS {
        assert!(done.outputs.contains_key(key), "{key}: {:?}", done.outputs);
    }
    assert_eq!(
        done.outputs["ImagePublisherPolicyArn"],
        format!("arn:aws:iam::{ACCOUNT}:policy/rayito-m0-image-publisher-{REGION}")
    );

    // The build role: Lambda may assume it (and tag the session), for
    // this account only.
    let role = iam_query(
        &moto,
        &format!("Action=GetRole&RoleName=rayito-m0-build-{REGION}"),
    );
    let trust = url_decoded_json(tag(&role, "AssumeRolePolicyDocument"));
    assert_eq!(
        trust["Statement"][0]["Principal"]["Service"],
        "lambda.amazonaws.com"
    );
    assert_eq!(
        trust["Statement"][0]["Action"],
        serde_json::json!(["sts:AssumeRole", "sts:TagSession"])
    );
    assert_eq!(
        trust["Statement"][0]["Condition"]["StringEquals"]["aws:SourceAccount"],
        ACCOUNT
    );
    // The publisher policy: what publishing calls, and PassRole on the
    // build role only.
    let policy_arn = &done.outputs["ImagePublisherPolicyArn"];
    let policy = iam_query(&moto, &format!("Action=GetPolicy&PolicyArn={policy_arn}"));
    let version = tag(&policy, "DefaultVersionId").to_owned();
    let doc = iam_query(
        &moto,
        &format!("Action=GetPolicyVersion&PolicyArn={policy_arn}&VersionId={version}"),
    );
    let doc = url_decoded_json(tag(&doc, "Document"));
    let statements = doc["Statement"].as_array().unwrap();
    let publish = &statements[0];
    assert_eq!(publish["Sid"], "PublishImages");
    let actions: Vec<&str> = publish["Action"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    for action in [
        "lambda:CreateMicrovmImage",
        "lambda:UpdateMicrovmImage",
        "lambda:GetMicrovmImageVersion",
        "lambda:ListMicrovmImageVersions",
    ] {
        assert!(actions.contains(&action), "{action}: {actions:?}");
    }
    assert_eq!(
        publish["Resource"],
        format!("arn:aws:lambda:{REGION}:{ACCOUNT}:microvm-image:*")
    );
    let pass = statements
        .iter()
        .find(|s| s["Sid"] == "PassBuildRole")
        .unwrap();
    assert_eq!(pass["Action"], "iam:PassRole");
    assert_eq!(pass["Resource"], role_arn);

    // The bucket: there, this account's, encrypted; its lifecycle rule is
    // in the deployed template (moto's CloudFormation does not apply a
    // bucket's LifecycleConfiguration: GetBucketLifecycleConfiguration
    // answers NoSuchLifecycleConfiguration there).
    assert!(setup.bucket_exists(BUCKET).await.unwrap());
    let s3 = raw_s3(&moto).await;
    let encryption = s3
        .get_bucket_encryption()
        .bucket(BUCKET)
        .send()
        .await
        .expect("the bucket is encrypted");
    let rule = &encryption
        .server_side_encryption_configuration()
        .unwrap()
        .rules()[0];
    assert_eq!(
        rule.apply_server_side_encryption_by_default()
            .unwrap()
            .sse_algorithm()
            .as_str(),
        "AES256"
    );
    let cfn = raw_cfn(&moto).await;
    let deployed = cfn
        .get_template()
        .stack_name(ARTIFACTS_STACK)
        .send()
        .await
        .unwrap();
    let deployed: serde_json::Value =
        serde_json::from_str(deployed.template_body().unwrap()).unwrap();
    let bucket = &deployed["Resources"]["ArtifactBucket"];
    assert_eq!(bucket["DeletionPolicy"], "Retain");
    assert_eq!(
        bucket["Properties"]["LifecycleConfiguration"]["Rules"][0],
        serde_json::json!({
            "Id": "expire-image-artifacts",
            "Status": "Enabled",
            "Prefix": "rayito/images/",
            "ExpirationInDays": 7
        })
    );

    // A second run: every step exists, and applying it calls no
    // UpdateStack (moto would mark an updated stack UPDATE_COMPLETE).
    let again = setup.plan().await.unwrap();
    assert_eq!(
        steps(&again),
        [
            "exists stack rayito-m0-artifacts",
            "exists stack rayito-m0-iam"
        ]
    );
    assert!(again.is_noop());
    let done = setup.apply(&again).await.unwrap();
    assert!(done.steps.iter().all(|s| s.action == StepAction::Exists));
    assert_eq!(done.build_role_arn, role_arn);
    for stack in [ARTIFACTS_STACK, IAM_STACK] {
        assert_eq!(
            stack_status(&cfn, stack).await.as_deref(),
            Some("CREATE_COMPLETE"),
            "{stack}"
        );
    }

    // A stack deployed with another template is updated. (Only the
    // description differs: moto drops a managed policy's `Ref` output
    // once the policy itself is updated, which AWS does not.)
    let mut older: serde_json::Value =
        serde_json::from_str(&rayito::setup::iam_template(BUCKET)).unwrap();
    older["Description"] = "an older rayito".into();
    cfn.update_stack()
        .stack_name(IAM_STACK)
        .template_body(serde_json::to_string(&older).unwrap())
        .capabilities(cfn::types::Capability::CapabilityNamedIam)
        .send()
        .await
        .unwrap();
    let changed = setup.plan().await.unwrap();
    assert_eq!(
        steps(&changed),
        [
            "exists stack rayito-m0-artifacts",
            "update stack rayito-m0-iam"
        ]
    );
    let done = setup.apply(&changed).await.unwrap();
    assert_eq!(done.steps[1].action, StepAction::Update);
    assert!(setup.plan().await.unwrap().is_noop());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stack_cloudformation_refuses_is_a_stack_error_and_a_missing_bucket_is_refused() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    // A role of the build role's name made outside the stack: CreateStack
    // fails on the name conflict.
    let made = iam_query(
        &moto,
        &format!(
            "Action=CreateRole&RoleName=rayito-m0-build-{REGION}&AssumeRolePolicyDocument=%7B%7D"
        ),
    );
    assert!(made.contains("<CreateRoleResult>"), "{made}");
    let client = client(&moto).await;
    let setup = client.setup(options());
    let plan = setup.plan().await.unwrap();
    let err = setup.apply(&plan).await.expect_err("the name is taken");
    assert!(
        matches!(
            &err,
            SandboxError::Stack {
                code: StackCode::Failed,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the CloudFormation call CreateStack for stack rayito-m0-iam was refused (EntityAlreadyExists); check your permissions and that no resource of that name exists outside the stack, then run rayito setup --yes again"
    );
    assert_eq!(err.kind().as_str(), "stack");

    // --bucket naming a bucket that does not exist: refused before any
    // stack is touched.
    let mut options = options();
    options.bucket = Some("no-such-bucket-anywhere".into());
    let err = client.setup(options).plan().await.expect_err("no bucket");
    assert_eq!(
        err.to_string(),
        "invalid bucket: no such bucket in this account; create it, or leave --bucket out to create rayito-artifacts-<account>-<region>"
    );
}

/// The first bytes of an aarch64 ELF executable (the local build only
/// copies it).
fn aarch64_elf() -> Vec<u8> {
    let mut bytes = b"\x7fELF\x02\x01\x01\x00".to_vec();
    bytes.resize(16, 0);
    bytes.extend_from_slice(&3u16.to_le_bytes());
    bytes.extend_from_slice(&0xB7u16.to_le_bytes());
    bytes.extend_from_slice(b" a stand-in for rayito-agent");
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_an_existing_bucket_setup_deploys_iam_and_the_base_image_publishes_with_its_role() {
    if let Some(reason) = sdk_support::skip::local_builds_unavailable() {
        sdk_support::skip::skip(reason);
        return;
    }
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let emu = sdk_support::emulator().await;
    let client = Client::builder()
        .aws(sdk_support::aws(&emu).s3_endpoint_url(emu.s3_endpoint_url()))
        .build()
        .await
        .unwrap();
    let mut options = options();
    options.bucket = Some(emu.artifact_bucket());
    options.cloudformation_endpoint_url = Some(moto.endpoint_url());
    let setup = client.setup(options);
    let plan = setup.plan().await.unwrap();
    assert_eq!(
        steps(&plan),
        [
            format!("exists bucket {}", emu.artifact_bucket()),
            "create stack rayito-m0-iam".to_owned()
        ]
    );
    assert_eq!(plan.steps()[0].target, StepTarget::Bucket);
    let done = setup.apply(&plan).await.unwrap();
    assert_eq!(done.bucket, emu.artifact_bucket());
    // The base image, built with the stack's build role.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Dockerfile"),
        "COPY rayd /opt/rayito-setup/rayd\nRUN echo setup > /opt/rayito-setup/marker\nCMD [\"/opt/rayito-setup/rayd\", \"serve\"]\n",
    )
    .unwrap();
    let artifact = pack_base_image(dir.path(), Some(&aarch64_elf()), Arch::Arm64).unwrap();
    let mut publish = PublishOptions::default();
    publish.bucket = Some(done.bucket.clone());
    publish.build_role_arn = Some(done.build_role_arn.clone());
    publish.poll_interval = Some(Duration::from_millis(50));
    publish.timeout = Duration::from_secs(60);
    let info = client
        .images()
        .publish(&artifact, "rayito-setup-base", publish)
        .await
        .expect("the base image publishes");
    assert!(!info.reused);
    // What the image service was sent: the stack's build role.
    let key = emu.access_key();
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(REGION))
        .endpoint_url(emu.endpoint_url())
        .credentials_provider(cfn::config::Credentials::new(
            key.id.clone(),
            key.secret.clone(),
            None,
            None,
            "test",
        ))
        .load()
        .await;
    let version = aws_sdk_lambdamicrovms::Client::new(&config)
        .get_microvm_image_version()
        .image_identifier("rayito-setup-base")
        .image_version(&info.image_version)
        .send()
        .await
        .unwrap();
    assert_eq!(version.build_role_arn, done.build_role_arn);
}

/// A scripted CloudFormation (the awsQuery protocol over HTTP) for the
/// states moto never reaches: moto creates a stack's resources inside
/// CreateStack, so a resource failing later (ROLLBACK_COMPLETE, with
/// failed events) or a stack still changing cannot happen there. The
/// artifacts stack is deployed with this version's template; the IAM
/// stack is in `iam_status` (absent when `None`), and after a CreateStack
/// goes CREATE_IN_PROGRESS then ROLLBACK_COMPLETE, with events naming
/// BuildRole as the first failure.
mod scripted_cloudformation {
    use std::sync::{Arc, Mutex};

    use axum::body::Bytes;
    use axum::http::StatusCode;
    use axum::response::IntoResponse;

    /// CloudFormation's text in the events: it must never reach an error.
    pub const SECRET_REASON: &str = "Resource handler returned message: s3cr3t-detail";

    #[derive(Default)]
    struct State {
        iam_status: Option<String>,
        polls: u32,
    }

    fn xml_escape(text: &str) -> String {
        text.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    }

    fn form(body: &[u8]) -> Vec<(String, String)> {
        url_decode_pairs(std::str::from_utf8(body).unwrap_or_default())
    }

    fn url_decode_pairs(text: &str) -> Vec<(String, String)> {
        text.split('&')
            .filter_map(|pair| pair.split_once('='))
            .map(|(k, v)| (decode(k), decode(v)))
            .collect()
    }

    fn decode(text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'%' if i + 2 < bytes.len() => {
                    let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("00");
                    out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                    i += 3;
                }
                b'+' => {
                    out.push(b' ');
                    i += 1;
                }
                b => {
                    out.push(b);
                    i += 1;
                }
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    fn ok(action: &str, result: &str) -> axum::response::Response {
        (
            StatusCode::OK,
            [("content-type", "text/xml")],
            format!(
                "<{action}Response xmlns=\"http://cloudformation.amazonaws.com/doc/2010-05-15/\">\
                 <{action}Result>{result}</{action}Result>\
                 <ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></{action}Response>"
            ),
        )
            .into_response()
    }

    fn absent(name: &str) -> axum::response::Response {
        (
            StatusCode::BAD_REQUEST,
            [("content-type", "text/xml")],
            format!(
                "<ErrorResponse xmlns=\"http://cloudformation.amazonaws.com/doc/2010-05-15/\">\
                 <Error><Type>Sender</Type><Code>ValidationError</Code>\
                 <Message>Stack with id {name} does not exist</Message></Error>\
                 <RequestId>r</RequestId></ErrorResponse>"
            ),
        )
            .into_response()
    }

    fn stack(name: &str, status: &str) -> String {
        format!(
            "<Stacks><member><StackName>{name}</StackName>\
             <StackId>arn:aws:cloudformation:us-east-1:123456789012:stack/{name}/1</StackId>\
             <CreationTime>2026-01-01T00:00:00Z</CreationTime>\
             <StackStatus>{status}</StackStatus></member></Stacks>"
        )
    }

    fn event(id: u32, logical: &str, status: &str, reason: &str) -> String {
        format!(
            "<member><StackId>arn:aws:cloudformation:us-east-1:123456789012:stack/rayito-m0-iam/1</StackId>\
             <EventId>{id}</EventId><StackName>rayito-m0-iam</StackName>\
             <LogicalResourceId>{logical}</LogicalResourceId>\
             <ResourceStatus>{status}</ResourceStatus>\
             <ResourceStatusReason>{reason}</ResourceStatusReason>\
             <Timestamp>2026-01-01T00:00:{id:02}Z</Timestamp></member>"
        )
    }

    async fn handle(
        axum::extract::State(state): axum::extract::State<Arc<Mutex<State>>>,
        body: Bytes,
    ) -> axum::response::Response {
        let form = form(&body);
        let get = |key: &str| {
            form.iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let name = get("StackName");
        let mut state = state.lock().unwrap();
        match get("Action").as_str() {
            "DescribeStacks" if name == "rayito-m0-artifacts" => {
                ok("DescribeStacks", &stack(&name, "CREATE_COMPLETE"))
            }
            "DescribeStacks" => match state.iam_status.clone() {
                None => absent(&name),
                Some(status) => {
                    state.polls += 1;
                    let shown = if status == "CREATE_IN_PROGRESS" && state.polls > 2 {
                        state.iam_status = Some("ROLLBACK_COMPLETE".into());
                        "ROLLBACK_COMPLETE".to_owned()
                    } else {
                        status
                    };
                    ok("DescribeStacks", &stack(&name, &shown))
                }
            },
            "GetTemplate" => {
                let body = rayito::setup::artifacts_template();
                ok(
                    "GetTemplate",
                    &format!("<TemplateBody>{}</TemplateBody>", xml_escape(&body)),
                )
            }
            "CreateStack" => {
                state.iam_status = Some("CREATE_IN_PROGRESS".into());
                ok(
                    "CreateStack",
                    "<StackId>arn:aws:cloudformation:us-east-1:123456789012:stack/rayito-m0-iam/1</StackId>",
                )
            }
            "DescribeStackEvents" => {
                // Newest first; an older operation's failure below the
                // start of this one must not be taken.
                let events = [
                    event(9, "rayito-m0-iam", "ROLLBACK_COMPLETE", ""),
                    event(8, "ExecutionRole", "DELETE_COMPLETE", ""),
                    event(7, "rayito-m0-iam", "ROLLBACK_IN_PROGRESS", SECRET_REASON),
                    event(
                        6,
                        "ExecutionRole",
                        "CREATE_FAILED",
                        "Resource creation cancelled",
                    ),
                    event(5, "BuildRole", "CREATE_FAILED", SECRET_REASON),
                    event(4, "ExecutionRole", "CREATE_IN_PROGRESS", ""),
                    event(3, "BuildRole", "CREATE_IN_PROGRESS", ""),
                    event(2, "rayito-m0-iam", "CREATE_IN_PROGRESS", "User Initiated"),
                    event(1, "OldPolicy", "CREATE_FAILED", "an older operation"),
                ];
                ok(
                    "DescribeStackEvents",
                    &format!("<StackEvents>{}</StackEvents>", events.concat()),
                )
            }
            other => (StatusCode::BAD_REQUEST, format!("unscripted {other}")).into_response(),
        }
    }

    /// Serves the script on a loopback port with the IAM stack in
    /// `iam_status`; the endpoint URL.
    pub async fn start(iam_status: Option<&str>) -> String {
        let state = Arc::new(Mutex::new(State {
            iam_status: iam_status.map(str::to_owned),
            polls: 0,
        }));
        let app = axum::Router::new()
            .route("/", axum::routing::post(handle))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_resource_is_named_with_its_status_and_a_blocked_or_changing_stack_is_refused() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let client = client(&moto).await;

    // CreateStack, then the stack rolls back: the first failed resource
    // of this operation, never CloudFormation's reason text.
    let mut rolling_back = options();
    rolling_back.cloudformation_endpoint_url = Some(scripted_cloudformation::start(None).await);
    let setup = client.setup(rolling_back);
    let plan = setup.plan().await.unwrap();
    assert_eq!(
        steps(&plan),
        [
            "exists stack rayito-m0-artifacts",
            "create stack rayito-m0-iam"
        ]
    );
    let err = setup.apply(&plan).await.expect_err("the stack rolls back");
    assert!(
        matches!(
            &err,
            SandboxError::Stack {
                code: StackCode::Failed,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "stack rayito-m0-iam failed: resource BuildRole ended CREATE_FAILED; read the stack's events in CloudFormation, fix the cause, then run rayito setup --yes again"
    );
    let shown = format!("{err:?} {}", err.to_wire());
    assert!(!shown.contains("s3cr3t"), "{shown}");

    // A stack CloudFormation cannot update from, and one still changing:
    // refused at the plan, before anything is written.
    for (status, code, message) in [
        (
            "ROLLBACK_COMPLETE",
            StackCode::Blocked,
            "stack rayito-m0-iam is ROLLBACK_COMPLETE and cannot be updated; delete the stack, then run rayito setup --yes again",
        ),
        (
            "UPDATE_IN_PROGRESS",
            StackCode::InProgress,
            "stack rayito-m0-iam is still changing (UPDATE_IN_PROGRESS); wait until it settles, then run rayito setup --yes again",
        ),
    ] {
        let mut stuck = options();
        stuck.cloudformation_endpoint_url =
            Some(scripted_cloudformation::start(Some(status)).await);
        let err = client
            .setup(stuck)
            .plan()
            .await
            .expect_err("no plan over that stack");
        assert_eq!(err.to_string(), message);
        let SandboxError::Stack { code: got, .. } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(got, &code);
    }
}
