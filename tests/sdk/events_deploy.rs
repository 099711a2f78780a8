//! `LifecycleEvents::deploy` on AWS, for real against moto through a
//! recording proxy: the functions' zip uploaded to the artifact bucket,
//! then the SDK's own CreateStack and UpdateStack requests
//! (the real template as TemplateBody, the four parameters, the named-IAM
//! capability, the caller's tags with the three fixed `rayito:` tags
//! winning) as moto received them, and how the deploy ends: moto's
//! CloudFormation cannot create the real stack (it has no
//! `AWS::SecretsManager::Secret`, and its IAM parser then refuses the
//! policies that name the secret: `MalformedPolicyDocument`), so the
//! refusal the SDK reports is pinned as a real failure mapped for real.

use std::net::SocketAddr;

use rayito::events::{EventsDeploy, LifecycleEvents};
use rayito::{ErrorKind, SandboxError};

use crate::sdk_support;
use crate::sdk_support::moto::MotoServer;
use crate::sdk_support::recording_proxy::{Recorded, RecordingProxy};

/// A template moto can create, standing in for a stack deployed before.
const STAND_IN: &str = r#"{"Resources": {"Queue": {"Type": "AWS::SQS::Queue", "Properties": {}}}}"#;

/// `application/x-www-form-urlencoded` pairs, decoded.
fn form(body: &[u8]) -> Vec<(String, String)> {
    fn decode(text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'%' if i + 3 <= bytes.len() => {
                    let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).expect("hex");
                    out.push(u8::from_str_radix(hex, 16).expect("a percent escape"));
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
        String::from_utf8(out).expect("UTF-8")
    }
    std::str::from_utf8(body)
        .expect("a form body")
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

/// The one request of `action` the proxy saw, as form pairs.
fn request_of(records: &[Recorded], action: &str) -> Vec<(String, String)> {
    let wanted = ("Action".to_owned(), action.to_owned());
    let found: Vec<_> = records
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| form(&r.body))
        .filter(|pairs| pairs.contains(&wanted))
        .collect();
    assert_eq!(found.len(), 1, "{action} requests: {found:?}");
    found.into_iter().next().unwrap()
}

fn value<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// The `<prefix>.member.N.<a>` / `.<b>` pairs of a list, in N's order.
fn members(pairs: &[(String, String)], prefix: &str, a: &str, b: &str) -> Vec<(String, String)> {
    (1..)
        .map_while(|n| {
            let key = value(pairs, &format!("{prefix}.member.{n}.{a}"))?;
            let val = value(pairs, &format!("{prefix}.member.{n}.{b}")).unwrap_or_default();
            Some((key.to_owned(), val.to_owned()))
        })
        .collect()
}

/// What every deploy request of this file carries.
fn assert_shape(pairs: &[(String, String)], stack: &str) {
    assert_eq!(value(pairs, "StackName"), Some(stack));
    assert_eq!(
        value(pairs, "TemplateBody"),
        Some(rayito::stacks::events_webhooks_template().as_str()),
        "the real template, whole"
    );
    let mut parameters = members(pairs, "Parameters", "ParameterKey", "ParameterValue");
    parameters.sort();
    let expected: Vec<(String, String)> = [
        ("ArtifactBucket", "sdk-artifacts"),
        ("ArtifactS3Key", EventsDeploy::ARTIFACT_KEY),
        ("LogGroupName", "/rayito/sdk-deploy"),
        ("ReconcilerIntervalMinutes", "7"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    assert_eq!(parameters, expected);
    assert_eq!(
        value(pairs, "Capabilities.member.1"),
        Some("CAPABILITY_NAMED_IAM")
    );
    assert_eq!(value(pairs, "Capabilities.member.2"), None);
    let version = env!("CARGO_PKG_VERSION");
    let expected: Vec<(String, String)> = [
        ("team", "core"),
        ("cost-center", "42"),
        ("rayito:component", "events-webhooks"),
        ("rayito:managed-by", "rayito-sdk"),
        ("rayito:sdk-version", version),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    assert_eq!(members(pairs, "Tags", "Key", "Value"), expected);
}

/// A zip holding one `bootstrap`, as `tools/build-events-lambda` writes
/// the functions' (moto's Lambda reads the code from the bucket).
fn functions_zip(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>) {
    use std::io::Write as _;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.start_file("bootstrap", zip::write::SimpleFileOptions::default())
        .expect("a zip entry");
    zip.write_all(b"#!/bin/sh\n").expect("the entry's bytes");
    let bytes = zip.finish().expect("the zip").into_inner();
    let path = dir.join("events-webhooks.zip");
    std::fs::write(&path, &bytes).expect("the zip on disk");
    (path, bytes)
}

fn deploy(zip: &std::path::Path) -> EventsDeploy {
    EventsDeploy::new("sdk-artifacts", "/rayito/sdk-deploy")
        .artifact(zip)
        .reconciler_interval_minutes(7)
        .tags([
            ("team", "core"),
            ("rayito:managed-by", "someone-else"),
            ("cost-center", "42"),
            ("rayito:component", "not-this"),
        ])
}

#[tokio::test]
async fn the_deploy_sends_the_real_stack_and_reports_motos_refusal() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .expect("the start task")
    else {
        return;
    };
    let upstream: SocketAddr = ([127, 0, 0, 1], moto.port()).into();
    let proxy = RecordingProxy::start(upstream).await;
    let config = sdk_support::moto_config::sdk_config(&proxy.endpoint_url(), "AKIDEVENTSDEPLOY");

    // The artifact bucket (as `rayito setup` makes it); the SDK uploads
    // the functions' zip into it before CreateStack.
    aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&sdk_support::moto_config::sdk_config(
            &moto.endpoint_url(),
            "AKIDEVENTSDEPLOY",
        ))
        .force_path_style(true)
        .build(),
    )
    .create_bucket()
    .bucket("sdk-artifacts")
    .send()
    .await
    .expect("the artifact bucket");
    let dir = tempfile::tempdir().expect("a directory");
    let (zip, zip_bytes) = functions_zip(dir.path());

    // A first deploy: the zip uploaded, then CreateStack with the real
    // template, refused.
    let events = LifecycleEvents::new()
        .sdk_config(config.clone())
        .endpoint_url(proxy.endpoint_url());
    let err = events.deploy(deploy(&zip)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Stack, "{err:?}");
    assert!(matches!(err, SandboxError::Stack { .. }));
    assert_eq!(
        err.to_string(),
        "the CloudFormation call CreateStack for stack rayito-events-webhooks was refused (MalformedPolicyDocument); check your permissions and that no resource of that name exists outside the stack, then run rayito events deploy again"
    );
    let records = proxy.records();
    let key = format!("/sdk-artifacts/{}", EventsDeploy::ARTIFACT_KEY);
    let uploads: Vec<&Recorded> = records
        .iter()
        .filter(|r| r.method == "PUT" && r.path.split('?').next() == Some(key.as_str()))
        .collect();
    assert_eq!(uploads.len(), 1, "{records:?}");
    // The zip's bytes whole (the body may be framed as `aws-chunked`
    // with a trailing checksum).
    assert!(
        uploads[0]
            .body
            .windows(zip_bytes.len())
            .any(|w| w == zip_bytes.as_slice()),
        "the upload carries the zip"
    );
    assert_shape(
        &request_of(&records, "CreateStack"),
        "rayito-events-webhooks",
    );

    // A stack there already: the deploy updates it, with the same shape.
    aws_sdk_cloudformation::Client::new(&config)
        .create_stack()
        .stack_name("sdk-events-deployed")
        .template_body(STAND_IN)
        .send()
        .await
        .expect("the stand-in stack");
    let events = events.stack_name("sdk-events-deployed");
    let err = events.deploy(deploy(&zip)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Stack, "{err:?}");
    assert_eq!(
        err.to_string(),
        "the CloudFormation call UpdateStack for stack sdk-events-deployed was refused (MalformedPolicyDocument); check your permissions and that no resource of that name exists outside the stack, then deploy it again"
    );
    assert_shape(
        &request_of(&proxy.records(), "UpdateStack"),
        "sdk-events-deployed",
    );
}
