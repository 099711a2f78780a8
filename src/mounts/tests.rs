//! The S3 mounts' checks and the mapping of the agent's answers, each
//! refusal and message pinned.

use std::time::Duration;

use rayito_agent::pb as agent_pb;

use super::S3Mount;
use super::section::{self, MountOutcomes};
use super::steps::check_all;
use crate::configure::{Outcomes, Section};
use crate::error::map::configure::NotAvailable;
use crate::error::{ErrorKind, MountCode, SandboxError};
use crate::sandbox::SandboxBuilder;

fn builder() -> SandboxBuilder {
    crate::Sandbox::builder()
}

/// The argument and message of an `InvalidArgument`.
fn refusal(err: SandboxError) -> (String, String) {
    match err {
        SandboxError::InvalidArgument {
            argument: Some(arg),
            meta,
        } => (arg.into_owned(), meta.message().to_owned()),
        other => panic!("not an InvalidArgument naming its argument: {other:?}"),
    }
}

fn check(mounts: &[(&str, S3Mount)]) -> Result<(), SandboxError> {
    let owned: Vec<(String, S3Mount)> = mounts
        .iter()
        .map(|(p, m)| ((*p).to_owned(), m.clone()))
        .collect();
    check_all(&builder(), &owned)
}

#[test]
fn a_mount_is_read_only_by_default_and_its_setters_set_the_fields() {
    let m = S3Mount::new("data-bucket");
    assert_eq!((m.bucket.as_str(), m.prefix.as_str()), ("data-bucket", ""));
    assert!(m.read_only && !m.allow_overwrite && !m.allow_delete);
    let m = m
        .prefix("team7/")
        .read_only(false)
        .allow_overwrite(true)
        .allow_delete(true);
    assert_eq!(m.prefix, "team7/");
    assert!(!m.read_only && m.allow_overwrite && m.allow_delete);
}

#[test]
fn good_mounts_pass() {
    for mount in [
        S3Mount::new("data-bucket"),
        S3Mount::new("a.b-c").prefix("team7/"),
        S3Mount::new("abc").prefix("a/b/c"),
        S3Mount::new("my-bucket--usw2-az1--x-s3").prefix("x/"),
        S3Mount::new("out")
            .read_only(false)
            .allow_overwrite(true)
            .allow_delete(true),
    ] {
        assert_eq!(check(&[("/mnt/data", mount.clone())]), Ok(()), "{mount:?}");
    }
    assert_eq!(check(&[]), Ok(()));
}

#[test]
fn each_refusal_of_a_mount_is_pinned() {
    let at = "/home/user/data";
    let cases = [
        (
            S3Mount::new(""),
            "invalid mounts: the S3 mount at /home/user/data has an empty bucket; pass the bucket's name",
        ),
        (
            S3Mount::new("Upper"),
            "invalid mounts: the S3 mount at /home/user/data has a bucket that is not an S3 bucket name (3 to 63 of a-z, 0-9, '.' and '-', starting and ending with a letter or a digit, no '..', not an IP address); pass the bucket's name",
        ),
        (
            S3Mount::new("/data").prefix("x"),
            "invalid mounts: the S3 mount at /home/user/data has a bucket that is not an S3 bucket name (3 to 63 of a-z, 0-9, '.' and '-', starting and ending with a letter or a digit, no '..', not an IP address); pass the bucket's name",
        ),
        (
            S3Mount::new("data").prefix("/team7/"),
            "invalid mounts: the S3 mount at /home/user/data has a prefix starting with '/'; pass it relative to the bucket (team/data/, not /team/data/)",
        ),
        (
            S3Mount::new("data").prefix("a//b"),
            "invalid mounts: the S3 mount at /home/user/data has a prefix of 1,024 bytes or more, with an empty, '.' or '..' segment, or holding a control character; pass an S3 key prefix such as team/data/",
        ),
        (
            S3Mount::new("data").read_only(true).allow_delete(true),
            "invalid mounts: the S3 mount at /home/user/data allows overwrite or delete but is read-only; pass read_only(false) with them, or drop them",
        ),
        (
            S3Mount::new("data").allow_overwrite(true),
            "invalid mounts: the S3 mount at /home/user/data allows overwrite or delete but is read-only; pass read_only(false) with them, or drop them",
        ),
    ];
    for (mount, message) in cases {
        let err = check(&[(at, mount.clone())]).unwrap_err();
        assert_eq!(
            refusal(err),
            ("mounts".to_owned(), message.to_owned()),
            "{mount:?}"
        );
    }
}

#[test]
fn bucket_names_follow_s3s_rules() {
    let bad_name = |b: &str| {
        check(&[("/mnt/d", S3Mount::new(b))])
            .unwrap_err()
            .to_string()
            .contains("not an S3 bucket name")
    };
    for bad in [
        "ab",
        &"a".repeat(64),
        "-abc",
        "abc-",
        ".abc",
        "a..b",
        "a_b",
        "ab c",
        "192.168.1.10",
        "buck\u{e9}t",
    ] {
        assert!(bad_name(bad), "{bad}");
    }
    for good in ["abc", &"a".repeat(63), "1bucket", "a.b.c", "192.168.1.10x"] {
        assert_eq!(check(&[("/mnt/d", S3Mount::new(good))]), Ok(()), "{good}");
    }
}

#[test]
fn prefixes_the_agent_would_refuse_are_refused() {
    for bad in ["a//b", "./a", "a/../b", "..", "a/\n", &"p".repeat(1_024)] {
        let err = check(&[("/mnt/d", S3Mount::new("data").prefix(bad))]).unwrap_err();
        assert!(
            err.to_string()
                .contains("has a prefix of 1,024 bytes or more"),
            "{bad:?}: {err}"
        );
    }
    for good in ["a", "a/", "a/b/", ".a/..b/", &"p".repeat(1_023)] {
        assert_eq!(
            check(&[("/mnt/d", S3Mount::new("data").prefix(good))]),
            Ok(()),
            "{good}"
        );
    }
}

#[test]
fn the_paths_are_checked_first_by_the_shared_rules() {
    let err = check(&[("/tmp/x", S3Mount::new(""))]).unwrap_err();
    assert_eq!(
        refusal(err),
        (
            "mounts".to_owned(),
            "invalid mounts: the mount path /tmp/x is not strictly under /mnt/ or /home/user/; pass a path below one of them".to_owned()
        )
    );
    let five: Vec<(String, S3Mount)> = (0..5)
        .map(|i| (format!("/mnt/{i}"), S3Mount::new("data")))
        .collect();
    let err = check_all(&builder(), &five).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid mounts: the sandbox asks for 5 mount paths (S3 mounts and EFS volumes together); pass at most 4"
    );
    let err = check(&[
        ("/mnt/a", S3Mount::new("data")),
        ("/mnt/a/b", S3Mount::new("data")),
    ])
    .unwrap_err();
    assert!(err.to_string().contains("overlap"), "{err}");
}

#[test]
fn an_official_image_of_another_variant_is_unimplemented() {
    let mount = || vec![("/mnt/d".to_owned(), S3Mount::new("data"))];
    for name in ["rayito-base", "rayito-base-slim", "rayito-base-poly-2gb"] {
        let err = check_all(&builder().template(name), &mount()).unwrap_err();
        let variant = name.trim_start_matches("rayito-").trim_end_matches("-2gb");
        match &err {
            SandboxError::Unimplemented { feature, doc, .. } => {
                assert_eq!(&**feature, "mounts");
                assert_eq!(doc.as_deref(), Some("docs/mounts.md"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            err.to_string(),
            format!(
                "feature mounts is not available: mounting S3 needs an image of the base-caps variant (rayito-base-caps or rayito-base-caps-efs, or a sized form such as rayito-base-caps-2gb); the image asked for is of the variant {variant}; see docs/mounts.md"
            )
        );
    }
    for name in [
        "rayito-base-caps",
        "rayito-base-caps-efs",
        "rayito-base-caps-2gb",
        "my-image",
        "rayito-mybuild",
        "arn:aws:lambda:us-east-1:1:microvm-image:rayito-base",
    ] {
        assert_eq!(
            check_all(&builder().template(name), &mount()),
            Ok(()),
            "{name}"
        );
    }
}

fn status(states: &[(&str, agent_pb::S3MountPhase, &str)]) -> agent_pb::ConfigureStatusResponse {
    agent_pb::ConfigureStatusResponse {
        s3_mounts: Some(agent_pb::S3MountsStatus {
            mounts: states
                .iter()
                .map(|(path, phase, class)| agent_pb::S3MountState {
                    mount_path: (*path).into(),
                    phase: *phase as i32,
                    error_class: (*class).into(),
                })
                .collect(),
        }),
        ..Default::default()
    }
}

/// The code and the whole message of a `Mount` error.
fn mount_error(err: SandboxError) -> (MountCode, String) {
    assert_eq!(err.kind(), ErrorKind::Mount, "{err:?}");
    let code = err.mount_code().cloned().expect("a code");
    (code, err.to_string())
}

/// Every code's remedy, as the messages end.
const REMEDIES: [(&str, &str); 8] = [
    (
        "network",
        "check that the sandbox reaches S3 (its egress policy, the bucket's region)",
    ),
    (
        "iam_denied",
        "give the sandbox an execution role with the s3-mounts policy for this bucket and prefix (docs/mounts.md, IAM)",
    ),
    (
        "not_found",
        "check that the bucket exists in the sandbox's region and that its execution role may list it",
    ),
    (
        "not_allowed",
        "the bucket is not in the image's allowlist (RAYITO_ALLOWED_MOUNT_BUCKETS; empty or absent denies every bucket): publish the image with --env RAYITO_ALLOWED_MOUNT_BUCKETS=<bucket>, or set it in the template's environment",
    ),
    (
        "invalid_path",
        "pass a path the agent accepts: canonical, strictly under /mnt/ or /home/user/, with no symbolic link on the way",
    ),
    (
        "helper_missing",
        "use an image of the base-caps variant, which ships the mount helper and FUSE",
    ),
    (
        "timeout",
        "create the sandbox again, or check that it reaches S3 quickly (its egress policy, the bucket's region)",
    ),
    (
        "unknown",
        "the agent reported a class this SDK does not know; see docs/mounts.md",
    ),
];

#[test]
fn a_refused_section_is_a_mount_error_with_its_code_and_remedy() {
    for (class, remedy) in REMEDIES {
        for status in ["INVALID", "FAILED"] {
            let (code, message) = mount_error(section::refused(status, class));
            assert_eq!(code.as_str(), class);
            assert_eq!(code.is_known(), class != "unknown");
            assert_eq!(
                message,
                format!(
                    "mounts: the agent refused the s3_mounts section ({status}, {class}); {remedy}"
                )
            );
        }
    }
    // A class this SDK does not know: kept in the code, `unknown` in the
    // message; free text never reaches either.
    let (code, message) = mount_error(section::refused("FAILED", "fuse_gone"));
    assert_eq!(code, MountCode::from("fuse_gone"));
    assert!(message.contains("(FAILED, unknown)"), "{message}");
    let (code, message) = mount_error(section::refused(
        "INVALID",
        "bucket secret-data is not allowed",
    ));
    assert_eq!(code.as_str(), "unrecognized_error_class");
    assert!(!message.contains("secret-data"), "{message}");
    let (code, _) = mount_error(section::refused("INVALID", ""));
    assert_eq!(code.as_str(), "unspecified");
}

#[test]
fn the_outcomes_map_the_gate_and_the_answers() {
    let mounts = vec![
        ("/mnt/a".to_owned(), S3Mount::new("data")),
        ("/home/user/b".to_owned(), S3Mount::new("data")),
    ];
    let outcomes = MountOutcomes::new(&mounts);
    let s = Section::S3Mounts;
    let reason = |e: SandboxError| match &e {
        SandboxError::Unimplemented { feature, .. } if &**feature == "mounts" => e.to_string(),
        other => panic!("{other:?}"),
    };
    assert_eq!(
        reason(outcomes.not_available(s, NotAvailable::SectionOff)),
        "feature mounts is not available: the agent in this sandbox does not offer S3 mounts (Health's s3_mounts flag is false: an agent older than S3 mounts, or a host or image variant without FUSE); use an image of the base-caps variant; see docs/mounts.md"
    );
    assert_eq!(
        reason(outcomes.not_available(s, NotAvailable::Unsupported)),
        "feature mounts is not available: the agent in this sandbox answered that it cannot mount S3 (UNSUPPORTED); use an image of the base-caps variant with a newer agent; see docs/mounts.md"
    );
    assert!(
        reason(outcomes.not_available(s, NotAvailable::NoFeatures))
            .contains("reports no optional features")
    );
    assert!(
        mount_error(outcomes.invalid(s, "not_allowed"))
            .1
            .starts_with("mounts: the agent refused the s3_mounts section (INVALID, not_allowed)")
    );
    assert!(
        mount_error(outcomes.failed(s, "network"))
            .1
            .starts_with("mounts: the agent refused the s3_mounts section (FAILED, network)")
    );

    use agent_pb::S3MountPhase as P;
    // Settled only when every path asked is mounted; other paths ignored.
    assert_eq!(
        outcomes.settled(
            s,
            &status(&[
                ("/mnt/a", P::Mounted, ""),
                ("/home/user/b", P::Mounted, ""),
                ("/mnt/other", P::Failed, "network"),
            ])
        ),
        Ok(true)
    );
    // Pending, unspecified, an unknown phase or not reported: waiting; the
    // timeout names the first path still waiting.
    for waiting in [
        status(&[("/mnt/a", P::Mounted, ""), ("/home/user/b", P::Pending, "")]),
        status(&[
            ("/mnt/a", P::Mounted, ""),
            ("/home/user/b", P::Unspecified, ""),
        ]),
        status(&[("/mnt/a", P::Mounted, "")]),
        agent_pb::ConfigureStatusResponse::default(),
    ] {
        assert_eq!(outcomes.settled(s, &waiting), Ok(false));
    }
    let mut odd = status(&[("/mnt/a", P::Mounted, ""), ("/home/user/b", P::Mounted, "")]);
    odd.s3_mounts.as_mut().unwrap().mounts[1].phase = 42;
    assert_eq!(outcomes.settled(s, &odd), Ok(false));
    let (code, message) = mount_error(outcomes.unsettled(s, Duration::from_secs(15)));
    assert_eq!(code, MountCode::Timeout);
    assert_eq!(
        message,
        format!(
            "mounts: /home/user/b was still not mounted after 15 s (timeout); {}",
            REMEDIES[6].1
        )
    );
    // The first failed path fails, with its class and remedy.
    for (class, remedy) in REMEDIES {
        let failed = status(&[
            ("/mnt/a", P::Failed, class),
            ("/home/user/b", P::Pending, ""),
        ]);
        let (code, message) = mount_error(outcomes.settled(s, &failed).unwrap_err());
        assert_eq!(code.as_str(), class);
        assert_eq!(
            message,
            format!("mounts: /mnt/a could not be mounted ({class}); {remedy}")
        );
    }
    // No poll before the bound: the first path is named.
    let fresh = MountOutcomes::new(&mounts);
    assert!(
        mount_error(fresh.unsettled(s, Duration::ZERO))
            .1
            .starts_with("mounts: /mnt/a was still not mounted after 0 s (timeout)")
    );
}

#[test]
fn the_section_carries_every_field() {
    let request = section::request(&[
        ("/mnt/a".to_owned(), S3Mount::new("data").prefix("team7/")),
        (
            "/home/user/out".to_owned(),
            S3Mount::new("out")
                .read_only(false)
                .allow_overwrite(true)
                .allow_delete(true),
        ),
    ]);
    assert!(request.efs_volumes.is_none() && request.secret_gateway.is_none());
    assert_eq!(
        request.s3_mounts.expect("the section").mounts,
        [
            agent_pb::S3Mount {
                mount_path: "/mnt/a".into(),
                bucket: "data".into(),
                prefix: "team7/".into(),
                read_only: true,
                allow_overwrite: false,
                allow_delete: false,
            },
            agent_pb::S3Mount {
                mount_path: "/home/user/out".into(),
                bucket: "out".into(),
                prefix: String::new(),
                read_only: false,
                allow_overwrite: true,
                allow_delete: true,
            },
        ]
    );
}

#[test]
fn the_builders_debug_shows_paths_never_buckets() {
    let b = builder()
        .mount(
            "/mnt/a",
            S3Mount::new("secret-bucket-name").prefix("secret-prefix/"),
        )
        .mount("/mnt/b", S3Mount::new("data"))
        .mount("/mnt/a", S3Mount::new("replaced-bucket"));
    let shown = format!("{b:?}");
    assert!(shown.contains("\"/mnt/a\", \"/mnt/b\""), "{shown}");
    for hidden in ["secret-bucket-name", "secret-prefix", "replaced-bucket"] {
        assert!(!shown.contains(hidden), "{shown}");
    }
    assert_eq!(super::steps::mount_paths(&b), ["/mnt/a", "/mnt/b"]);
}

/// docs/mounts.md's failure table transcribes each code's remedy.
#[test]
fn the_docs_failure_table_is_the_remedies() {
    let doc = include_str!("../../docs/mounts.md");
    for (code, remedy) in REMEDIES {
        let row = format!("| `{code}` | {remedy} |");
        assert!(doc.contains(&row), "docs/mounts.md lacks {row}");
        let (_, message) = mount_error(section::failed_at("/mnt/a", code));
        assert!(message.ends_with(remedy), "{message}");
    }
}
