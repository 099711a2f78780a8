//! `rayito volumes deploy` (`EfsVolumes::deploy`) and `rayito stack deploy
//! efs-volumes` (`OptionalStacks::deploy`) make the same stack: both
//! deploys run against moto (EC2 for the VPC check, CloudFormation) through
//! a recording proxy, and their CreateStack requests carry the same
//! template, tags and capabilities, and no parameter. moto cannot create
//! this stack (see tests/sdk/volumes_aws.rs), so what is compared is what
//! each deploy sent, not what moto made of it.

use crate::sdk_support;

use std::collections::BTreeMap;
use std::time::Duration;

use rayito::stacks::{StackDeploy, StackOptions};
use rayito::volumes::{EfsDeployOptions, EfsVolumes};
use rayito::{AwsOptions, Client};
use sdk_support::moto::{MotoServer, http_post, xml_text};
use sdk_support::moto_config::sdk_config;
use sdk_support::recording_proxy::RecordingProxy;

fn ec2(moto: &MotoServer, action: &str, params: &[(&str, &str)]) -> String {
    let mut body = format!("Action={action}&Version=2016-11-15");
    for (name, value) in params {
        body.push_str(&format!("&{name}={}", value.replace('/', "%2F")));
    }
    let (status, answer) = http_post(
        moto.port(),
        "/",
        &[
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=AKIDMOTOSETUP/20260101/us-east-1/ec2/aws4_request, \
                 SignedHeaders=host, Signature=0",
            ),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        body.as_bytes(),
    )
    .expect("moto's EC2 answers");
    assert_eq!(status, 200, "EC2 {action}: {answer}");
    answer
}

fn decode(text: &str) -> String {
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
    String::from_utf8(out).unwrap()
}

/// The first CreateStack of `stack` the proxy saw, as its form fields
/// (StackName left out).
fn create_stack(proxy: &RecordingProxy, stack: &str) -> BTreeMap<String, String> {
    proxy
        .records()
        .iter()
        .map(|r| {
            String::from_utf8_lossy(&r.body)
                .split('&')
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (decode(k), decode(v)))
                .collect::<BTreeMap<String, String>>()
        })
        .find(|form| {
            form.get("Action").map(String::as_str) == Some("CreateStack")
                && form.get("StackName").map(String::as_str) == Some(stack)
        })
        .map(|mut form| {
            form.remove("StackName");
            form
        })
        .unwrap_or_else(|| panic!("no CreateStack of {stack}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volumes_deploy_and_stack_deploy_send_the_same_stack() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let (vpc, a, b) = tokio::task::block_in_place(|| {
        let vpc = xml_text(
            &ec2(&moto, "CreateVpc", &[("CidrBlock", "10.40.0.0/16")]),
            "vpcId",
        )
        .unwrap()
        .to_owned();
        let subnet = |cidr: &str, zone: &str| {
            let answer = ec2(
                &moto,
                "CreateSubnet",
                &[
                    ("VpcId", vpc.as_str()),
                    ("CidrBlock", cidr),
                    ("AvailabilityZone", zone),
                ],
            );
            xml_text(&answer, "subnetId").unwrap().to_owned()
        };
        let a = subnet("10.40.1.0/24", "us-east-1a");
        let b = subnet("10.40.2.0/24", "us-east-1b");
        (vpc, a, b)
    });
    let upstream = format!("127.0.0.1:{}", moto.port()).parse().unwrap();
    let proxy = RecordingProxy::start(upstream).await;

    // rayito volumes deploy: the check passes, then CreateStack (which moto
    // may refuse: what it was sent is what counts).
    let efs = EfsVolumes::new()
        .stack_name("efs-by-volumes")
        .sdk_config(sdk_config(&proxy.endpoint_url(), "testing"))
        .wait_timing(Duration::from_secs(5), Duration::from_millis(100));
    let mut options = EfsDeployOptions::default();
    options.wait = false;
    let _ = efs.deploy(&vpc, &[a.clone(), b.clone()], options).await;

    // rayito stack deploy efs-volumes with the same values.
    let client = Client::builder()
        .aws(
            AwsOptions::new()
                .endpoint_url(proxy.endpoint_url())
                .region("us-east-1")
                .static_credentials("testing", "testing"),
        )
        .build()
        .await
        .expect("a client");
    let mut stack_options = StackOptions::default();
    stack_options.timeout = Duration::from_secs(5);
    stack_options.poll_interval = Duration::from_millis(100);
    let stacks = client.optional_stacks().with_options(stack_options);
    let deploy = StackDeploy::new()
        .stack_name("efs-by-stacks")
        .param("VpcId", &vpc)
        .param("SubnetIds", format!("{a},{b}"));
    let _ = stacks.deploy("efs-volumes", &deploy).await;

    let by_volumes = create_stack(&proxy, "efs-by-volumes");
    let by_stacks = create_stack(&proxy, "efs-by-stacks");
    assert_eq!(by_volumes, by_stacks);
    let template: serde_json::Value =
        serde_json::from_str(&by_stacks["TemplateBody"]).expect("a JSON template");
    assert_eq!(
        template["Resources"]["MountTarget2"]["Properties"]["SubnetId"],
        b.as_str()
    );
    assert!(by_stacks.keys().all(|k| !k.starts_with("Parameters.")));
    assert_eq!(
        by_stacks.get("Capabilities.member.1").map(String::as_str),
        Some("CAPABILITY_IAM")
    );
    let tags: BTreeMap<&str, &str> = (1..)
        .map_while(|i| {
            Some((
                by_stacks.get(&format!("Tags.member.{i}.Key"))?.as_str(),
                by_stacks.get(&format!("Tags.member.{i}.Value"))?.as_str(),
            ))
        })
        .collect();
    assert_eq!(tags.get("rayito:component"), Some(&"efs-volumes"));
    assert_eq!(tags.get("rayito:managed-by"), Some(&"rayito-sdk"));
}
