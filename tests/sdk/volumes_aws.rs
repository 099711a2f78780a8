//! The AWS side of EFS volumes against moto: `VolumeStore` (create,
//! idempotent create, get, list, destroy, the not-found mapping),
//! `EfsVolumes::check` on VPCs and subnets made in moto's EC2 (its four
//! Query reads are our own, src/aws/ec2/), `deploy` refused on a `FAIL`
//! without creating anything, the template through cfn-lint, and
//! `delete_file_system` (tag required, a gone file system a no-op). What
//! moto does not do (a client token already used, a file system that does
//! not exist, the listing's lag) runs against the emulator's EFS.
//!
//! Not here: a deploy through moto's CloudFormation. moto 5 cannot create
//! this stack at all: it does not model `AWS::Lambda::NetworkConnector`
//! (CreateStack fails validating the `Connector.Arn` output) and its
//! `AWS::EFS::FileSystem` has no `GetAtt` (`FileSystem.Arn`, which the
//! client policy and an output need), so CreateStack answers 500 before any
//! resource exists.

use crate::sdk_support;

use std::time::Duration;

use rayito::error::ErrorKind;
use rayito::volumes::{EfsDeployOptions, EfsVolumes, FindingLevel, VolumeStore};
use rayito_emulator::Emulator;
use sdk_support::emulator;
use sdk_support::moto::{MotoServer, http_post, xml_text};
use sdk_support::moto_config::sdk_config;

/// Calls moto's EC2 Query API (unsigned: moto routes by the credential
/// scope's service) and returns the XML answer.
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

/// Calls moto's EFS REST API; the status and the JSON answer.
fn efs_rest(moto: &MotoServer, path: &str, body: &serde_json::Value) -> (u16, serde_json::Value) {
    let (status, answer) = http_post(
        moto.port(),
        path,
        &[
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=AKIDMOTOSETUP/20260101/us-east-1/elasticfilesystem/aws4_request, \
                 SignedHeaders=host, Signature=0",
            ),
            ("Content-Type", "application/json"),
        ],
        body.to_string().as_bytes(),
    )
    .expect("moto's EFS answers");
    (status, serde_json::from_str(&answer).unwrap_or_default())
}

/// A file system in moto, tagged `rayito=efs-volumes` when `tagged`.
fn file_system(moto: &MotoServer, token: &str, tagged: bool) -> String {
    let tags = if tagged {
        serde_json::json!([{ "Key": "rayito", "Value": "efs-volumes" }])
    } else {
        serde_json::json!([])
    };
    let (status, answer) = efs_rest(
        moto,
        "/2015-02-01/file-systems",
        &serde_json::json!({ "CreationToken": token, "Tags": tags }),
    );
    assert!((200..300).contains(&status), "CreateFileSystem: {answer}");
    answer["FileSystemId"].as_str().unwrap().to_owned()
}

fn vpc(moto: &MotoServer, cidr: &str) -> String {
    let answer = ec2(moto, "CreateVpc", &[("CidrBlock", cidr)]);
    xml_text(&answer, "vpcId").unwrap().to_owned()
}

fn subnet(moto: &MotoServer, vpc: &str, cidr: &str, zone: &str) -> String {
    let answer = ec2(
        moto,
        "CreateSubnet",
        &[
            ("VpcId", vpc),
            ("CidrBlock", cidr),
            ("AvailabilityZone", zone),
        ],
    );
    xml_text(&answer, "subnetId").unwrap().to_owned()
}

fn store(moto: &MotoServer, file_system_id: &str) -> VolumeStore {
    VolumeStore::new(file_system_id)
        .unwrap()
        .sdk_config(sdk_config(&moto.endpoint_url(), "testing"))
        .listing_wait(Duration::from_millis(50), Duration::from_secs(2))
}

fn efs_volumes(moto: &MotoServer) -> EfsVolumes {
    EfsVolumes::new()
        .sdk_config(sdk_config(&moto.endpoint_url(), "testing"))
        .wait_timing(Duration::from_secs(120), Duration::from_millis(100))
        .drain_timing(Duration::from_secs(2), Duration::from_millis(50))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_volume_store_creates_lists_and_destroys_tagged_access_points() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let fs = file_system(&moto, "store", false);
    let store = store(&moto, &fs);

    let created = store.create("agent-data").await.unwrap();
    assert_eq!(created.name, "agent-data");
    assert_eq!(created.file_system_id, fs);
    assert!(created.access_point_id.starts_with("fsap-"), "{created:?}");
    assert_eq!(
        created.root_directory.as_deref(),
        Some("/rayito-volumes/agent-data")
    );
    assert_eq!(created.volume().access_point_id, created.access_point_id);

    // (moto ignores CreateAccessPoint's client token, so the idempotent
    // create is pinned against the emulator's EFS below.)
    // An access point without the tag is not a volume.
    let (status, _) = efs_rest(
        &moto,
        "/2015-02-01/access-points",
        &serde_json::json!({ "ClientToken": "untagged", "FileSystemId": fs }),
    );
    assert!((200..300).contains(&status));
    store.create("other").await.unwrap();
    let mut names: Vec<String> = store
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.name)
        .collect();
    names.sort();
    assert_eq!(names, ["agent-data", "other"]);

    assert_eq!(store.get("agent-data").await.unwrap(), created);
    let missing = store.get("nope").await.unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::VolumeNotFound);
    assert_eq!(
        missing.to_string(),
        "no volume named nope on this file system; create it with VolumeStore::create"
    );

    assert!(store.destroy("agent-data").await.unwrap());
    assert!(!store.destroy("agent-data").await.unwrap());
    let names: Vec<String> = store
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(names, ["other"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_network_check_reads_vpcs_and_subnets_made_in_moto() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let main = vpc(&moto, "10.10.0.0/16");
    let a = subnet(&moto, &main, "10.10.1.0/24", "us-east-1a");
    let b = subnet(&moto, &main, "10.10.2.0/24", "us-east-1b");
    let same_zone = subnet(&moto, &main, "10.10.3.0/24", "us-east-1a");
    let other_vpc = vpc(&moto, "10.20.0.0/16");
    let foreign = subnet(&moto, &other_vpc, "10.20.1.0/24", "us-east-1c");
    let efs = efs_volumes(&moto);
    let codes = |r: &rayito::volumes::EfsNetworkReport| {
        r.findings
            .iter()
            .map(|f| (f.code, f.level))
            .collect::<Vec<_>>()
    };

    // A good pair: two zones, nothing fails.
    let good = efs.check(&main, &[a.clone(), b.clone()]).await.unwrap();
    assert!(good.ok(), "{good:?}");
    assert_eq!(good.availability_zones, ["us-east-1a", "us-east-1b"]);
    assert!(codes(&good).contains(&("internet-egress", FindingLevel::Ok)));
    assert!(!codes(&good).iter().any(|(c, _)| *c == "single-az"));

    // One subnet: a warning, still deployable.
    let single = efs.check(&main, std::slice::from_ref(&a)).await.unwrap();
    assert!(single.ok());
    assert!(codes(&single).contains(&("single-az", FindingLevel::Warn)));

    // A subnet of another VPC, two in one zone, one that does not exist.
    let bad = efs
        .check(&main, &[a.clone(), same_zone, foreign.clone()])
        .await
        .unwrap();
    assert!(
        codes(&bad).contains(&("subnet-same-az", FindingLevel::Fail)),
        "{bad:?}"
    );
    assert!(codes(&bad).contains(&("subnet-other-vpc", FindingLevel::Fail)));
    assert_eq!(bad.status(), FindingLevel::Fail);
    let absent = efs
        .check(&main, &["subnet-0123456789abcdef0".to_owned()])
        .await
        .unwrap();
    assert_eq!(
        absent
            .failures()
            .iter()
            .map(|f| f.message.as_str())
            .collect::<Vec<_>>(),
        ["subnet-0123456789abcdef0: the subnet does not exist"]
    );

    // A VPC that does not exist: the one finding.
    let missing = efs
        .check("vpc-0123456789abcdef0", std::slice::from_ref(&a))
        .await
        .unwrap();
    assert_eq!(codes(&missing), [("vpc-missing", FindingLevel::Fail)]);

    // deploy runs the check and creates nothing on a FAIL.
    let err = efs
        .deploy(
            "vpc-0123456789abcdef0",
            std::slice::from_ref(&a),
            EfsDeployOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        err.to_string(),
        "invalid vpc_id: the VPC cannot hold efs-volumes (nothing was created): the VPC does not exist in this account and region"
    );
    assert_eq!(efs.status().await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_file_system_needs_the_stack_tag_and_forgets_a_gone_one() {
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let efs = efs_volumes(&moto);
    let foreign = file_system(&moto, "foreign", false);
    let err = efs.delete_file_system(&foreign).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Volume);
    assert_eq!(
        err.to_string(),
        "that file system does not carry the efs-volumes tag (rayito=efs-volumes), so it is not deleted"
    );

    let ours = file_system(&moto, "ours", true);
    store(&moto, &ours).create("data").await.unwrap();
    efs.delete_file_system(&ours).await.unwrap();
    let (status, answer) = sdk_support::moto::http_get(
        moto.port(),
        &format!("/2015-02-01/file-systems?FileSystemId={ours}"),
    )
    .unwrap();
    assert_eq!(status, 404, "{answer}");
    // Gone already: a no-op.
    efs.delete_file_system(&ours).await.unwrap();
}

/// A file system id no file system has.
const GONE_FILE_SYSTEM: &str = "fs-00000000deadbeef";

/// An AWS configuration for the emulator's endpoint, signed with its key.
fn emulator_config(emu: &Emulator) -> aws_types::SdkConfig {
    aws_types::SdkConfig::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .region(aws_types::region::Region::new("us-east-1"))
        .credentials_provider(aws_types::sdk_config::SharedCredentialsProvider::new(
            aws_sdk_efs::config::Credentials::new(
                &emu.access_key().id,
                &emu.access_key().secret,
                None,
                None,
                "test",
            ),
        ))
        .endpoint_url(emu.endpoint_url())
        .build()
}

/// A file system on the emulator's EFS.
async fn emulator_file_system(emu: &Emulator, token: &str) -> String {
    aws_sdk_efs::Client::new(&emulator_config(emu))
        .create_file_system()
        .creation_token(token)
        .send()
        .await
        .expect("CreateFileSystem")
        .file_system_id()
        .to_owned()
}

/// A store of `fs` on the emulator's EFS.
fn emulator_store(emu: &Emulator, fs: &str) -> VolumeStore {
    VolumeStore::new(fs)
        .unwrap()
        .sdk_config(emulator_config(emu))
}

/// What moto does not do, on the emulator's EFS: CreateAccessPoint with
/// a client token already used answers `AccessPointAlreadyExists`, and
/// EFS's listing is eventually consistent (injected: the two listings
/// after the fault come from before the volume existed).
#[tokio::test(flavor = "multi_thread")]
async fn creating_an_existing_volume_finds_it_once_the_listing_shows_it() {
    let emu = emulator().await;
    let fs = emulator_file_system(&emu, "idempotent").await;
    let store =
        emulator_store(&emu, &fs).listing_wait(Duration::from_millis(20), Duration::from_secs(5));
    emu.efs().stale_listings(2);
    let created = store.create("data").await.unwrap();
    assert_eq!(emu.efs().calls("DescribeAccessPoints"), 0);
    let found = store.create("data").await.unwrap();
    assert_eq!(found.access_point_id, created.access_point_id);
    assert_eq!(found.name, "data");
    assert_eq!(emu.efs().calls("CreateAccessPoint"), 2);
    assert_eq!(emu.efs().calls("DescribeAccessPoints"), 3);

    // With no time to wait, the name is not found (yet).
    emu.efs().stale_listings(1);
    store.create("more").await.unwrap();
    let impatient =
        emulator_store(&emu, &fs).listing_wait(Duration::from_millis(1), Duration::ZERO);
    let err = impatient.create("more").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::VolumeNotFound);
    assert_eq!(
        err.to_string(),
        "no volume named more on this file system; create it with VolumeStore::create"
    );
    assert!(!format!("{err:?}").contains("already exists with the client token"));
    // Once the listing shows it, the same store finds it.
    assert_eq!(impatient.create("more").await.unwrap().name, "more");
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_on_a_file_system_that_does_not_exist_is_not_found() {
    let emu = emulator().await;
    let store = emulator_store(&emu, GONE_FILE_SYSTEM);
    for err in [
        store.list().await.unwrap_err(),
        store.get("data").await.unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::VolumeNotFound, "{err}");
        assert_eq!(
            err.to_string(),
            "the access point or the file system does not exist"
        );
        assert!(!format!("{err:?}").contains(GONE_FILE_SYSTEM));
    }
    assert!(!store.destroy("data").await.unwrap());
    // EFS answered each call FileSystemNotFound (no other error hid it).
    assert_eq!(emu.efs().calls("DescribeAccessPoints"), 3);
    emu.shutdown().await;
}

/// `cfn-lint` from the test venv (moto[server] brings it) or the PATH.
fn cfn_lint() -> Option<std::path::PathBuf> {
    let crate_dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
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

/// The template `deploy` sends passes cfn-lint in each shape it takes: one
/// to three subnets, scoped or not to access points, read-only ones denied
/// writes, read-only policy.
#[test]
fn the_efs_volumes_template_passes_cfn_lint() {
    let Some(lint) = cfn_lint() else {
        sdk_support::skip::skip(
            "cfn-lint not found in target/test-deps/venv or on the PATH (moto[server] installs it)",
        );
        return;
    };
    let arn = |id: &str| {
        format!("arn:aws:elasticfilesystem:us-east-1:123456789012:access-point/fsap-{id}")
    };
    let subnets: Vec<String> = ["subnet-0a1b2c3d", "subnet-1a2b3c4d", "subnet-2a3b4c5d"]
        .map(str::to_owned)
        .to_vec();
    let mut shapes = Vec::new();
    for n in 1..=3 {
        shapes.push((n, EfsDeployOptions::default()));
    }
    let mut scoped = EfsDeployOptions::default();
    scoped.access_point_arns = vec![arn("0123456789abcdef0")];
    scoped.read_only_access_point_arns = vec![arn("1123456789abcdef0")];
    shapes.push((2, scoped));
    let mut read_only = EfsDeployOptions::default();
    read_only.allow_write = false;
    read_only.read_only_access_point_arns = vec![arn("1123456789abcdef0")];
    shapes.push((1, read_only));
    let dir = tempfile::tempdir().unwrap();
    for (i, (n, options)) in shapes.iter().enumerate() {
        let body = EfsVolumes::template("vpc-0a1b2c3d", &subnets[..*n], options).unwrap();
        let path = dir.path().join(format!("efs-volumes-{i}.json"));
        std::fs::write(&path, body).unwrap();
        let out = std::process::Command::new(&lint)
            .args(["--regions", "us-east-1", "--"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "shape {i}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
