//! Every refusal of `volumes` (kind, argument and exact message) in the
//! reference's order, the section built from the volumes, the mount target
//! choice and lookup, and the mapping of the agent's answers.

use std::net::Ipv4Addr;
use std::sync::Mutex;

use super::section::{self, VolumeOutcomes};
use super::spec::{EfsVolume, check_all};
use super::targets;
use super::view::{VolumeState, VolumeStatus, statuses};
use crate::aws::efs::mount_targets::MountTarget;
use crate::configure::{Outcomes, Section};
use crate::error::map::configure::{NotAvailable, error_class};
use crate::error::{ErrorKind, SandboxError};
use crate::pb;
use crate::sandbox::{NetworkConnector, SandboxBuilder};

const FS: &str = "fs-0123456789abcdef0";
const AP: &str = "fsap-0123456789abcdef0";
const CONNECTOR: &str = "arn:aws:lambda:us-east-1:123456789012:network-connector:efs";
const ROLE: &str = "arn:aws:iam::123456789012:role/sandbox";

fn good() -> EfsVolume {
    EfsVolume::new(FS, AP)
}

/// A builder that passes every check but the volumes'.
fn builder() -> SandboxBuilder {
    crate::Sandbox::builder()
        .template("rayito-base-caps-efs")
        .egress([NetworkConnector::arn(CONNECTOR)])
        .execution_role_arn(ROLE)
}

fn check(builder: &SandboxBuilder, volumes: Vec<(&str, EfsVolume)>) -> Result<(), SandboxError> {
    let list: Vec<(String, EfsVolume)> = volumes
        .into_iter()
        .map(|(p, v)| (p.to_owned(), v))
        .collect();
    check_all(builder, &list, &[])
}

/// (kind, argument or feature, message) of the refusal.
fn refusal(
    builder: &SandboxBuilder,
    volumes: Vec<(&str, EfsVolume)>,
) -> (ErrorKind, String, String) {
    let err = check(builder, volumes).expect_err("refused");
    let named = match &err {
        SandboxError::InvalidArgument { argument, .. } => {
            argument.as_deref().unwrap_or_default().to_owned()
        }
        SandboxError::Unimplemented { feature, .. } => feature.to_string(),
        other => panic!("unexpected {other:?}"),
    };
    (err.kind(), named, err.to_string())
}

#[test]
fn valid_volumes_pass() {
    let b = builder();
    check(&b, vec![]).unwrap();
    check(
        &b,
        vec![
            ("/mnt/a", good()),
            (
                "/mnt/b",
                good()
                    .name("data-1")
                    .region("eu-west-1")
                    .read_only(true)
                    .mount_target_ip(Ipv4Addr::new(10, 0, 0, 5)),
            ),
            (
                "/home/user/c",
                EfsVolume::new(format!("fs-{}", "a".repeat(40)), AP),
            ),
            ("/home/user/d", good().name("A".repeat(100))),
        ],
    )
    .unwrap();
    // Any name that is not an official one is left to the agent.
    for image in [
        "my-image",
        "rayito-mybuild",
        "arn:aws:lambda:us-east-1:1:microvm-image:x",
    ] {
        check(&builder().template(image), vec![("/mnt/a", good())]).unwrap();
    }
    check(
        &builder().template("rayito-base-caps-efs-4gb"),
        vec![("/mnt/a", good())],
    )
    .unwrap();
}

/// A builder, its volumes and the (kind, name, message) of the refusal.
type RefusalRow = (
    SandboxBuilder,
    Vec<(&'static str, EfsVolume)>,
    (ErrorKind, String, String),
);

const EGRESS_HINT: &str = "pass that connector, and for internet access leave through your VPC (a NAT or transit gateway in the connector's subnets)";

#[test]
fn every_refusal_names_volumes_with_the_exact_message_and_never_an_id() {
    let five: Vec<(&str, EfsVolume)> = ["/mnt/a", "/mnt/b", "/mnt/c", "/mnt/d", "/mnt/e"]
        .into_iter()
        .map(|p| (p, good()))
        .collect();
    let invalid = |text: &str| {
        (
            ErrorKind::InvalidArgument,
            "volumes".to_owned(),
            format!("invalid volumes: {text}"),
        )
    };
    let rows: Vec<RefusalRow> = vec![
        (builder(), five, invalid("the sandbox has 5 volumes; pass at most 4")),
        (
            builder(),
            vec![("/mnt/a", EfsVolume::new("fs-XYZ", AP))],
            invalid("the volume at /mnt/a has a file_system_id that is not fs- and 8 to 40 lowercase hex digits; pass the file system's id"),
        ),
        (
            builder(),
            vec![("/mnt/a", EfsVolume::new(FS, "fsap-0123"))],
            invalid("the volume at /mnt/a has an access_point_id that is not fsap- and 8 to 40 lowercase hex digits; pass the access point's id"),
        ),
        (
            builder(),
            vec![("/mnt/a", EfsVolume::new(FS, FS))],
            invalid("the volume at /mnt/a has an access_point_id that is not fsap- and 8 to 40 lowercase hex digits; pass the access point's id"),
        ),
        (
            builder(),
            vec![("/mnt/a", good().name("a b"))],
            invalid("the volume at /mnt/a has a name that is empty, longer than 100 characters or holds a character outside A-Z, a-z, 0-9 and '-'; pass a name of 1 to 100 of those"),
        ),
        (
            builder(),
            vec![("/mnt/a", good().name(""))],
            invalid("the volume at /mnt/a has a name that is empty, longer than 100 characters or holds a character outside A-Z, a-z, 0-9 and '-'; pass a name of 1 to 100 of those"),
        ),
        (
            builder(),
            vec![("/mnt/a", good().region("us east"))],
            invalid("the volume at /mnt/a has a region that is not a region name; pass one such as us-east-1, or none for the client's"),
        ),
        (
            builder().template("rayito-base-caps"),
            vec![("/mnt/a", good())],
            (
                ErrorKind::Unimplemented,
                "volumes".to_owned(),
                "feature volumes is not available: volumes need an image of the variant base-caps-efs (or a size of it), and the image asked for is of the variant base-caps; see docs/volumes.md".to_owned(),
            ),
        ),
        (
            builder().template("rayito-base-2gb"),
            vec![("/mnt/a", good())],
            (
                ErrorKind::Unimplemented,
                "volumes".to_owned(),
                "feature volumes is not available: volumes need an image of the variant base-caps-efs (or a size of it), and the image asked for is of the variant base; see docs/volumes.md".to_owned(),
            ),
        ),
        (
            crate::Sandbox::builder().template("rayito-base-caps-efs").execution_role_arn(ROLE),
            vec![("/mnt/a", good())],
            invalid(&format!("volumes need egress with the one connector of your VPC that reaches the mount targets (the efs-volumes stack's ConnectorArn): without it the sandbox takes the image's INTERNET_EGRESS and never reaches a mount target; {EGRESS_HINT}")),
        ),
        (
            builder().egress(Vec::<NetworkConnector>::new()),
            vec![("/mnt/a", good())],
            invalid(&format!("volumes need egress with the one connector of your VPC that reaches the mount targets (the efs-volumes stack's ConnectorArn): without it the sandbox takes the image's INTERNET_EGRESS and never reaches a mount target; {EGRESS_HINT}")),
        ),
        (
            builder().egress(["INTERNET_EGRESS"]),
            vec![("/mnt/a", good())],
            invalid("volumes do not combine with INTERNET_EGRESS: a MicroVM takes one egress connector, and the volumes need your VPC's; pass only that connector, and for internet access leave through your VPC (a NAT or transit gateway in the connector's subnets)"),
        ),
        (
            builder().egress([
                CONNECTOR,
                "arn:aws:lambda:us-east-1:aws:network-connector:aws-network-connector:INTERNET_EGRESS",
            ]),
            vec![("/mnt/a", good())],
            invalid("volumes do not combine with INTERNET_EGRESS: a MicroVM takes one egress connector, and the volumes need your VPC's; pass only that connector, and for internet access leave through your VPC (a NAT or transit gateway in the connector's subnets)"),
        ),
        (
            builder().egress([CONNECTOR, "arn:aws:lambda:us-east-1:123456789012:network-connector:other"]),
            vec![("/mnt/a", good())],
            invalid("volumes take one egress connector (a MicroVM accepts only one), and 2 were given; pass only your VPC's connector (the efs-volumes stack's ConnectorArn)"),
        ),
        (
            crate::Sandbox::builder()
                .template("rayito-base-caps-efs")
                .egress([NetworkConnector::arn(CONNECTOR)]),
            vec![("/mnt/a", good())],
            invalid("volumes need an execution role: amazon-efs-utils signs the mount's TLS tunnel with its credentials (which need the efs-volumes stack's CallerPolicyArn policy); pass execution_role_arn"),
        ),
    ];
    for (b, volumes, want) in rows {
        let got = refusal(&b, volumes);
        assert!(!got.2.contains("0123456789abcdef0"), "{}", got.2);
        assert_eq!(got, want);
    }
}

#[test]
fn the_checks_run_in_the_references_order() {
    // A bad id, on an image of the wrong variant, without egress or role:
    // the id is what is reported (the first thing the caller can fix).
    let bare = crate::Sandbox::builder().template("rayito-base");
    let (kind, _, text) = refusal(&bare, vec![("/mnt/a", EfsVolume::new("fs-x", AP))]);
    assert_eq!(kind, ErrorKind::InvalidArgument);
    assert!(text.contains("file_system_id"), "{text}");
    // Then the variant, then egress, then the role.
    let (kind, ..) = refusal(&bare, vec![("/mnt/a", good())]);
    assert_eq!(kind, ErrorKind::Unimplemented);
    let efs = crate::Sandbox::builder().template("rayito-base-caps-efs");
    let (_, _, text) = refusal(&efs, vec![("/mnt/a", good())]);
    assert!(text.contains("need egress"), "{text}");
}

#[test]
fn the_same_path_again_replaces_its_volume_in_place() {
    let b = crate::Sandbox::builder()
        .volume("/mnt/a", good())
        .volume("/mnt/b", good())
        .volume("/mnt/a", good().read_only(true));
    let paths = super::steps::volume_paths(&b);
    assert_eq!(paths, ["/mnt/a", "/mnt/b"]);
}

#[test]
fn the_section_carries_every_volume_as_given() {
    let volumes = vec![
        (
            "/mnt/a".to_owned(),
            good().mount_target_ip(Ipv4Addr::new(10, 0, 1, 9)),
        ),
        (
            "/home/user/b".to_owned(),
            good().name("n").region("eu-west-1").read_only(true),
        ),
    ];
    let request = section::request(&volumes);
    assert!(request.s3_mounts.is_none() && request.secret_gateway.is_none());
    let mounts = request.efs_volumes.expect("the section").mounts;
    assert_eq!(
        mounts,
        [
            pb::EfsVolumeMount {
                mount_path: "/mnt/a".into(),
                file_system_id: FS.into(),
                access_point_id: AP.into(),
                read_only: false,
                mount_target_ip: "10.0.1.9".into(),
            },
            pb::EfsVolumeMount {
                mount_path: "/home/user/b".into(),
                file_system_id: FS.into(),
                access_point_id: AP.into(),
                read_only: true,
                mount_target_ip: String::new(),
            },
        ]
    );
}

fn target(id: &str, az: &str, state: &str, ip: Option<&str>) -> MountTarget {
    MountTarget {
        id: id.into(),
        availability_zone_id: az.into(),
        state: state.into(),
        ip_address: ip.map(str::to_owned),
    }
}

#[test]
fn the_first_available_target_by_zone_then_id_is_chosen() {
    let targets = [
        target("fsmt-3", "use1-az6", "available", Some("10.0.6.1")),
        target("fsmt-2", "use1-az1", "creating", Some("10.0.1.9")),
        target("fsmt-9", "use1-az2", "available", Some("10.0.2.9")),
        target("fsmt-1", "use1-az2", "available", Some("10.0.2.1")),
        target("fsmt-0", "use1-az0", "available", None),
        target("fsmt-4", "use1-az0", "available", Some("fd00::1")),
    ];
    assert_eq!(targets::choose(&targets), Some(Ipv4Addr::new(10, 0, 2, 1)));
    assert_eq!(
        targets::choose(&targets[..2]),
        Some(Ipv4Addr::new(10, 0, 6, 1))
    );
    assert_eq!(targets::choose(&targets[1..2]), None);
    assert_eq!(targets::choose(&[]), None);
}

#[tokio::test]
async fn one_lookup_per_file_system_and_region_and_none_for_a_given_ip() {
    let other = "fs-00000000aaaaaaaa";
    let mut volumes = vec![
        ("/mnt/a".to_owned(), good()),
        ("/mnt/b".to_owned(), EfsVolume::new(other, AP)),
        ("/mnt/c".to_owned(), good().read_only(true)),
        (
            "/mnt/d".to_owned(),
            EfsVolume::new("fs-11111111bbbbbbbb", AP)
                .mount_target_ip(Ipv4Addr::new(192, 168, 0, 1)),
        ),
        ("/home/user/e".to_owned(), good().region("eu-west-1")),
    ];
    assert!(targets::needed(&volumes));
    let calls = Mutex::new(Vec::new());
    targets::resolve(&mut volumes, |region, fs| {
        calls.lock().unwrap().push((region.clone(), fs.clone()));
        let ip = if fs == FS { "10.0.0.1" } else { "10.0.0.2" };
        let ip = if region.is_some() { "10.9.0.1" } else { ip };
        async move { Ok(vec![target("fsmt-1", "az", "available", Some(ip))]) }
    })
    .await
    .unwrap();
    assert_eq!(
        calls.into_inner().unwrap(),
        [
            (None, FS.to_owned()),
            (None, other.to_owned()),
            (Some("eu-west-1".to_owned()), FS.to_owned()),
        ]
    );
    let ips: Vec<String> = volumes
        .iter()
        .map(|(_, v)| v.mount_target_ip.unwrap().to_string())
        .collect();
    assert_eq!(
        ips,
        [
            "10.0.0.1",
            "10.0.0.2",
            "10.0.0.1",
            "192.168.0.1",
            "10.9.0.1"
        ]
    );
    assert!(!targets::needed(&volumes));
}

#[tokio::test]
async fn a_file_system_without_an_available_target_is_a_volume_error() {
    let mut volumes = vec![("/mnt/a".to_owned(), good())];
    let err = targets::resolve(&mut volumes, |_, _| async {
        Ok(vec![target("fsmt-1", "az", "creating", Some("10.0.0.1"))])
    })
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Volume);
    assert_eq!(
        err.to_string(),
        "volumes: the file system has no available mount target; deploy the efs-volumes stack, or wait until its mount targets are available"
    );
    assert!(volumes[0].1.mount_target_ip.is_none());
}

#[test]
fn lookup_failures_map_without_aws_text() {
    use crate::error::map::aws::AwsFailure;
    let failure = |code: &str| {
        let mut f = AwsFailure::new("DescribeMountTargets");
        f.code = Some(code.into());
        f.http_status = Some(400);
        f.message = Some(format!("File system '{FS}' does not exist."));
        f
    };
    let err = targets::lookup_error(failure("FileSystemNotFound"));
    assert_eq!(err.kind(), ErrorKind::VolumeNotFound);
    assert_eq!(
        err.to_string(),
        "volumes: no such file system in the region looked in; check the file system's id and region"
    );
    let err = targets::lookup_error(failure("AccessDeniedException"));
    assert_eq!(err.kind(), ErrorKind::Volume);
    assert_eq!(
        err.to_string(),
        "volumes: no IAM permission elasticfilesystem:DescribeMountTargets on the file system (the caller's credentials); grant it, or pass each volume's mount_target_ip"
    );
    let mut throttled = failure("ThrottlingException");
    throttled.http_status = Some(429);
    let err = targets::lookup_error(throttled);
    assert_eq!(err.kind(), ErrorKind::RateLimit);
    for code in [
        "FileSystemNotFound",
        "AccessDeniedException",
        "ThrottlingException",
        "BadRequest",
    ] {
        let err = targets::lookup_error(failure(code));
        for text in [err.to_string(), format!("{err:?}")] {
            assert!(!text.contains(FS), "{text}");
        }
    }
}

const IMAGE_REASON: &str = "feature volumes is not available: this image has no amazon-efs-utils (or does not run with additionalOsCapabilities ALL); publish the optional image rayito-base-caps-efs with `rayito image publish --with-efs --os-capabilities ALL` and create the sandbox from it; see docs/volumes.md";

#[test]
fn the_agents_answers_map_to_the_volumes_errors() {
    let outcomes = VolumeOutcomes {
        paths: vec!["/mnt/a".to_owned(), "/mnt/b".to_owned()],
    };
    let s = Section::EfsVolumes;
    for why in [NotAvailable::SectionOff, NotAvailable::Unsupported] {
        let err = outcomes.not_available(s, why);
        assert_eq!(err.kind(), ErrorKind::Unimplemented);
        assert_eq!(err.to_string(), IMAGE_REASON);
    }
    let err = outcomes.not_available(s, NotAvailable::NoFeatures);
    assert_eq!(err.kind(), ErrorKind::Unimplemented);
    assert!(
        err.to_string().starts_with(
            "feature volumes is not available: the agent in this image reports no optional features"
        ),
        "{err}"
    );

    for (class, code) in [
        ("network", "network"),
        ("iam_denied", "iam_denied"),
        ("not_found", "not_found"),
        ("tls", "tls"),
        ("helper_missing", "helper_missing"),
        ("timeout", "timeout"),
        ("invalid_path", "invalid_path"),
        ("not_allowed", "unknown"),
        ("", "unknown"),
        ("free text with fs-0123456789abcdef0", "unknown"),
    ] {
        for err in [outcomes.invalid(s, class), outcomes.failed(s, class)] {
            assert_eq!(err.kind(), ErrorKind::VolumeMount);
            assert_eq!(
                err.to_string(),
                format!(
                    "volumes: the volumes could not be mounted ({code}); see docs/volumes.md for what the code means"
                )
            );
            let named = volume_mount_code(&err);
            if code == "unknown" {
                assert_eq!(named, error_class(class));
            } else {
                assert_eq!(named, code);
            }
        }
    }

    let err = outcomes.unsettled(s, section::APPLY_TIMEOUT);
    assert_eq!(err.kind(), ErrorKind::VolumeMount);
    assert_eq!(volume_mount_code(&err), "timeout");
    assert_eq!(
        err.to_string(),
        "volumes: a volume was still not mounted after 65 s (timeout); check the network path to the mount target, then create the sandbox again"
    );
}

/// The `code` of a `VolumeMount` error, as its name.
fn volume_mount_code(err: &SandboxError) -> String {
    match err {
        SandboxError::VolumeMount { code, .. } => code.as_str().to_owned(),
        other => panic!("not VolumeMount: {other:?}"),
    }
}

fn status(volumes: &[(&str, pb::EfsVolumeState, &str)]) -> pb::ConfigureStatusResponse {
    pb::ConfigureStatusResponse {
        efs_volumes: Some(pb::EfsVolumesStatus {
            volumes: volumes
                .iter()
                .map(|(path, state, class)| pb::EfsVolumeStatus {
                    mount_path: (*path).into(),
                    state: *state as i32,
                    last_error_class: (*class).into(),
                })
                .collect(),
        }),
        ..Default::default()
    }
}

#[test]
fn settled_means_every_path_asked_mounted_and_a_failed_one_names_its_path() {
    use pb::EfsVolumeState as S;
    let outcomes = VolumeOutcomes {
        paths: vec!["/mnt/a".to_owned(), "/mnt/b".to_owned()],
    };
    let settled = |st: &pb::ConfigureStatusResponse| outcomes.settled(Section::EfsVolumes, st);
    assert!(!settled(&pb::ConfigureStatusResponse::default()).unwrap());
    assert!(!settled(&status(&[("/mnt/a", S::Mounted, "")])).unwrap());
    assert!(
        !settled(&status(&[
            ("/mnt/a", S::Mounted, ""),
            ("/mnt/b", S::Mounting, "")
        ]))
        .unwrap()
    );
    assert!(
        !settled(&status(&[
            ("/mnt/a", S::Mounted, ""),
            ("/mnt/b", S::Degraded, "stale")
        ]))
        .unwrap()
    );
    assert!(
        settled(&status(&[
            ("/mnt/b", S::Mounted, ""),
            ("/mnt/a", S::Mounted, ""),
            ("/mnt/x", S::Failed, "network")
        ]))
        .unwrap()
    );
    let err = settled(&status(&[
        ("/mnt/a", S::Mounted, ""),
        ("/mnt/b", S::Failed, "iam_denied"),
    ]))
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::VolumeMount);
    assert_eq!(volume_mount_code(&err), "iam_denied");
    assert_eq!(
        err.to_string(),
        "volumes: /mnt/b could not be mounted (iam_denied); see docs/volumes.md for what the code means"
    );
}

#[test]
fn statuses_read_every_state_and_keep_only_class_names() {
    use pb::EfsVolumeState as S;
    let read = statuses(&status(&[
        ("/mnt/a", S::Requested, ""),
        ("/mnt/b", S::Mounting, ""),
        ("/mnt/c", S::Mounted, ""),
        ("/mnt/d", S::Degraded, "credentials_expired"),
        ("/mnt/e", S::Remounting, "stale"),
        ("/mnt/f", S::Unmounted, ""),
        ("/mnt/g", S::Failed, "a message naming fs-0123456789abcdef0"),
        ("/mnt/h", S::Unspecified, ""),
    ]));
    let got: Vec<(&str, &str, Option<&str>)> = read
        .iter()
        .map(|(p, s)| (p.as_str(), s.state.as_str(), s.last_error_class.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("/mnt/a", "requested", None),
            ("/mnt/b", "mounting", None),
            ("/mnt/c", "mounted", None),
            ("/mnt/d", "degraded", Some("credentials_expired")),
            ("/mnt/e", "remounting", Some("stale")),
            ("/mnt/f", "unmounted", None),
            ("/mnt/g", "failed", Some("unrecognized_error_class")),
            ("/mnt/h", "requested", None),
        ]
    );
    assert_eq!(
        read.get("/mnt/c"),
        Some(&VolumeStatus {
            state: VolumeState::Mounted,
            last_error_class: None
        })
    );
    assert!(statuses(&pb::ConfigureStatusResponse::default()).is_empty());
}

#[test]
fn the_mount_path_rules_apply_to_volumes_and_count_the_s3_mounts() {
    let b = builder();
    let refused = |volumes: Vec<(&str, EfsVolume)>, mounts: &[&str]| {
        let list: Vec<(String, EfsVolume)> = volumes
            .into_iter()
            .map(|(p, v)| (p.to_owned(), v))
            .collect();
        let err = check_all(&b, &list, mounts).expect_err("refused");
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        err.to_string()
    };
    assert_eq!(
        refused(vec![("mnt/a", good())], &[]),
        "invalid volumes: the mount path mnt/a is not absolute; pass a path under /mnt/ or /home/user/"
    );
    assert_eq!(
        refused(vec![("/tmp/a", good())], &[]),
        "invalid volumes: the mount path /tmp/a is not strictly under /mnt/ or /home/user/; pass a path below one of them"
    );
    assert_eq!(
        refused(vec![("/mnt/a", good()), ("/mnt/a/b", good())], &[]),
        "invalid volumes: the mount paths /mnt/a and /mnt/a/b overlap (the same path, or one inside the other); pass paths apart"
    );
    assert_eq!(
        refused(vec![("/mnt/data", good())], &["/mnt/data"]),
        "invalid volumes: the mount paths /mnt/data and /mnt/data overlap (the same path, or one inside the other); pass paths apart"
    );
    assert_eq!(
        refused(
            vec![("/mnt/a", good()), ("/mnt/b", good())],
            &["/mnt/c", "/mnt/d", "/mnt/e"]
        ),
        "invalid volumes: the sandbox asks for 5 mount paths (S3 mounts and EFS volumes together); pass at most 4"
    );
    let list = vec![("/mnt/a".to_owned(), good())];
    check_all(&b, &list, &["/mnt/b", "/home/user/c", "/home/user/d"]).unwrap();
}
