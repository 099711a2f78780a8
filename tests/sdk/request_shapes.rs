//! The requests our publish and template build send to the MicroVMs API
//! are the contract (`aws-sdk-lambdamicrovms`' shapes, spec
//! images-and-templates §1.1, §1.2, §2.2): a recording proxy between the
//! SDK and an emulator (which answers) keeps every request, and each
//! path and every JSON field of Create and Update is pinned.
//!
//! The artifacts go to a second emulator's S3 (same account, so same
//! bucket and the same seeded base artifact): the first emulator never
//! finds them and fails each build at once, with no local build, on any
//! host. What is pinned does not depend on the build.

use crate::sdk_support;

use std::collections::BTreeMap;
use std::time::Duration;

use rayito::template::{Arch, BuildOptions, PublishOptions, Template, pack_base_image};
use rayito::{AwsOptions, Client};
use rayito_emulator::{AccessKey, Emulator, EmulatorConfig};
use sdk_support::recording_proxy::{Recorded, RecordingProxy};

async fn emulator(key: &AccessKey) -> Emulator {
    Emulator::start(EmulatorConfig {
        access_keys: vec![key.clone()],
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts")
}

fn arm64_elf() -> Vec<u8> {
    let mut bytes = b"\x7fELF\x02\x01\x01\x00".to_vec();
    bytes.resize(16, 0);
    bytes.extend_from_slice(&3u16.to_le_bytes());
    bytes.extend_from_slice(&0xB7u16.to_le_bytes());
    bytes.extend_from_slice(b" a stand-in for rayito-agent");
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_and_template_build_send_the_spec_shapes() {
    let key = AccessKey::generate();
    let emu = emulator(&key).await;
    let store = emulator(&key).await;
    let proxy = RecordingProxy::start(emu.addr()).await;
    let client = Client::builder()
        .aws(
            AwsOptions::new()
                .endpoint_url(proxy.endpoint_url())
                .s3_endpoint_url(store.s3_endpoint_url())
                .region("us-east-1")
                .static_credentials(key.id.clone(), key.secret.clone()),
        )
        .build()
        .await
        .expect("a client through the proxy");

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Dockerfile"),
        "COPY rayd /opt/rayd\nCMD [\"/opt/rayd\"]\n",
    )
    .unwrap();
    let artifact = pack_base_image(dir.path(), Some(&arm64_elf()), Arch::Arm64).unwrap();
    let mut publish = PublishOptions::default();
    publish.bucket = Some(emu.artifact_bucket());
    publish.poll_interval = Some(Duration::from_millis(50));
    publish.timeout = Duration::from_secs(30);
    client
        .images()
        .publish(&artifact, "shape-img", publish.clone())
        .await
        .expect_err("the emulator fails the build: the artifact is elsewhere");
    let mut again = publish.clone();
    again.memory_mib = 4096;
    again.env = BTreeMap::from([("SHAPE".to_owned(), "1".to_owned())]);
    client
        .images()
        .publish(&artifact, "shape-img", again)
        .await
        .expect_err("the emulator fails the build: the artifact is elsewhere");

    let build = BuildOptions {
        bucket: Some(emu.artifact_bucket()),
        context_dir: Some(dir.path().to_path_buf()),
        poll_interval: Some(Duration::from_millis(50)),
        timeout: Duration::from_secs(30),
        ..BuildOptions::default()
    };
    let template = Template::new().run_cmd("echo shape");
    client
        .templates()
        .build(&template, "shape-tpl", build.clone())
        .await
        .expect_err("the emulator fails the build: the artifact is elsewhere");
    let smaller = BuildOptions {
        memory_mib: 1024,
        ..build
    };
    client
        .templates()
        .build(&template, "shape-tpl", smaller)
        .await
        .expect_err("the emulator fails the build: the artifact is elsewhere");

    let records = proxy.records();
    // STS (the account) and CloudWatch Logs (a failed build's log) share
    // the endpoint: only the MicroVMs API's requests are pinned here.
    let api: Vec<&Recorded> = records
        .iter()
        .filter(|r| r.path.starts_with("/2025-09-09/"))
        .collect();
    let image = |name: &str| {
        format!(
            "/2025-09-09/microvm-images/arn%3Aaws%3Alambda%3Aus-east-1%3A000000000000%3Amicrovm-image%3A{name}"
        )
    };
    let managed = "/2025-09-09/managed-microvm-images/\
                   arn%3Aaws%3Alambda%3Aus-east-1%3Aaws%3Amicrovm-image%3Aal2023-1/versions"
        .to_owned();
    let (img, tpl, base) = (image("shape-img"), image("shape-tpl"), image("rayito-base"));
    let expected: Vec<(&str, String)> = vec![
        // publish: the image read first (absent; one tagged as a
        // stack's would stop it before any write), `latest` resolved,
        // Create, the gate (image, version).
        ("GET", img.clone()),
        ("GET", managed.clone()),
        ("POST", "/2025-09-09/microvm-images".to_owned()),
        ("GET", img.clone()),
        ("GET", format!("{img}/versions/1")),
        // publish again, another configuration: reuse looked for in the
        // versions (at most 50 a page), then Update and the gate.
        ("GET", img.clone()),
        ("GET", managed.clone()),
        ("GET", format!("{img}/versions?maxResults=50")),
        ("PUT", img.clone()),
        ("GET", img.clone()),
        ("GET", format!("{img}/versions/2")),
        // template build: the base's newest usable version and its full
        // configuration, the template's image (absent), Create, the gate.
        ("GET", format!("{base}/versions?maxResults=50")),
        ("GET", format!("{base}/versions/1")),
        ("GET", tpl.clone()),
        ("POST", "/2025-09-09/microvm-images".to_owned()),
        ("GET", tpl.clone()),
        ("GET", format!("{tpl}/versions/1")),
        // again with less memory: reuse looked for, Update, the gate.
        ("GET", format!("{base}/versions?maxResults=50")),
        ("GET", format!("{base}/versions/1")),
        ("GET", tpl.clone()),
        ("GET", format!("{tpl}/versions?maxResults=50")),
        ("PUT", tpl.clone()),
        ("GET", tpl.clone()),
        ("GET", format!("{tpl}/versions/2")),
    ];
    let sent: Vec<(&str, String)> = api
        .iter()
        .map(|r| (r.method.as_str(), r.path.clone()))
        .collect();
    assert_eq!(one_poll_per_gate(sent), expected);
    for r in &api {
        if r.method == "GET" {
            assert!(r.body.is_empty(), "{} {}: a body", r.method, r.path);
        }
    }

    let submissions: Vec<&&Recorded> = api
        .iter()
        .filter(|r| r.method == "POST" || r.method == "PUT")
        .collect();
    let bodies: Vec<serde_json::Value> = submissions.iter().map(|r| r.json()).collect();
    let image_key = artifact.image_key();
    let bucket = emu.artifact_bucket();
    let template_uri = bodies[2]["codeArtifact"]["uri"]
        .as_str()
        .unwrap()
        .to_owned();
    let template_key = template_uri
        .strip_prefix(&format!("s3://{bucket}/rayito/templates/"))
        .and_then(|k| k.strip_suffix(".zip"))
        .unwrap_or_else(|| panic!("a template's key: {template_uri}"));
    assert!(
        template_key.len() == 64 && template_key.bytes().all(|b| b.is_ascii_hexdigit()),
        "{template_key}"
    );
    // Table 1.2, as sent: every field, nothing else (no
    // environmentVariables when empty, no additionalOsCapabilities,
    // egressNetworkConnectors or tags; baseImageVersion the integral "1",
    // never the "1.0" the service echoes).
    let fields = |name: Option<&str>,
                  uri: &str,
                  memory: u32,
                  group: &str,
                  description: &str,
                  env: Option<serde_json::Value>| {
        let mut body = serde_json::json!({
            "baseImageArn": "arn:aws:lambda:us-east-1:aws:microvm-image:al2023-1",
            "baseImageVersion": "1",
            "buildRoleArn": "arn:aws:iam::000000000000:role/rayito-m0-build-us-east-1",
            "codeArtifact": {"uri": uri},
            "cpuConfigurations": [{"architecture": "ARM_64"}],
            "description": description,
            "hooks": {
                "port": 9000,
                "microvmHooks": {
                    "run": "ENABLED", "runTimeoutInSeconds": 30,
                    "resume": "ENABLED", "resumeTimeoutInSeconds": 30,
                    "suspend": "ENABLED", "suspendTimeoutInSeconds": 30,
                    "terminate": "ENABLED", "terminateTimeoutInSeconds": 10,
                },
                "microvmImageHooks": {
                    "ready": "ENABLED", "readyTimeoutInSeconds": 600,
                    "validate": "ENABLED", "validateTimeoutInSeconds": 600,
                },
            },
            "logging": {"cloudWatch": {"logGroup": group}},
            "resources": [{"minimumMemoryInMiB": memory}],
        });
        if let Some(name) = name {
            body["name"] = name.into();
        }
        if let Some(env) = env {
            body["environmentVariables"] = env;
        }
        body
    };
    let image_uri = format!("s3://{bucket}/{image_key}");
    let mut tokens = Vec::new();
    let mut checked = Vec::new();
    for mut body in bodies {
        // The crate fills the idempotency token itself (a fresh UUID per
        // call; the SDK sets none): shown, then left out of the pin.
        let token = body
            .as_object_mut()
            .and_then(|o| o.remove("clientToken"))
            .and_then(|t| t.as_str().map(str::to_owned))
            .expect("a clientToken");
        assert_eq!(token.len(), 36, "{token}");
        tokens.push(token);
        checked.push(body);
    }
    tokens.sort();
    tokens.dedup();
    assert_eq!(tokens.len(), 4, "one token per submission");
    // Publish's description is `rayd <UTC time>`.
    for body in &mut checked[..2] {
        let description = body["description"].as_str().unwrap().to_owned();
        let time = description.strip_prefix("rayd ").unwrap_or_default();
        assert!(
            time.len() == 20
                && time.ends_with('Z')
                && time.as_bytes()[4] == b'-'
                && time.as_bytes()[10] == b'T',
            "{description}"
        );
        body["description"] = "rayd <time>".into();
    }
    assert_eq!(
        checked[0],
        fields(
            Some("shape-img"),
            &image_uri,
            2048,
            "/rayito/shape-img",
            "rayd <time>",
            None
        ),
        "publish's Create"
    );
    assert_eq!(
        checked[1],
        fields(
            None,
            &image_uri,
            4096,
            "/rayito/shape-img",
            "rayd <time>",
            Some(serde_json::json!({"SHAPE": "1"}))
        ),
        "publish's Update"
    );
    assert_eq!(
        checked[2],
        fields(
            Some("shape-tpl"),
            &template_uri,
            2048,
            "/rayito/shape-tpl",
            "rayito template build",
            None
        ),
        "the template build's Create"
    );
    assert_eq!(
        checked[3],
        fields(
            None,
            &template_uri,
            1024,
            "/rayito/shape-tpl",
            "rayito template build",
            None
        ),
        "the template build's Update"
    );
    emu.shutdown().await;
    store.shutdown().await;
}

/// The gate polls (image, version) every `poll_interval` until the build
/// ends. The emulator fails these builds at once, but on a loaded host
/// the first poll can still see the build running: how many polls a gate
/// takes is timing, not shape, so repeats of a gate's pair count once.
fn one_poll_per_gate(sent: Vec<(&str, String)>) -> Vec<(&str, String)> {
    let mut out: Vec<(&str, String)> = Vec::with_capacity(sent.len());
    let mut i = 0;
    while i < sent.len() {
        let n = out.len();
        let gate_again = n >= 2
            && i + 1 < sent.len()
            && out[n - 1].0 == "GET"
            && out[n - 1].1.contains("/versions/")
            && sent[i..i + 2] == out[n - 2..];
        if gate_again {
            i += 2;
            continue;
        }
        out.push(sent[i].clone());
        i += 1;
    }
    out
}
