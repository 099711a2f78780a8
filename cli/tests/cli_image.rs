//! `rayito image zip`, `image publish` and `image list` as a user runs
//! them: the binary as a child process, publishing on the local daemon
//! (the AWS path: STS, its S3 endpoint and bucket, a real local build).

use std::path::Path;

use serde_json::Value;

use crate::skip_support;

use crate::session;
use session::Session;

/// The first bytes of an ELF executable for `machine` (never run: the
/// local build only copies it).
fn elf(machine: u16) -> Vec<u8> {
    let mut bytes = b"\x7fELF\x02\x01\x01\x00".to_vec();
    bytes.resize(16, 0);
    bytes.extend_from_slice(&3u16.to_le_bytes());
    bytes.extend_from_slice(&machine.to_le_bytes());
    bytes.extend_from_slice(b" a stand-in for rayito-agent");
    bytes
}

fn s(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temp path")
}

#[test]
fn zip_is_deterministic_checks_the_arch_and_publish_builds_then_reuses() {
    let session = Session::unset_backend();
    let work = tempfile::tempdir().unwrap();
    let base = work.path().join("base");
    std::fs::create_dir(&base).unwrap();
    // Host-safe steps: the local build runs them over this host.
    std::fs::write(
        base.join("Dockerfile"),
        "COPY rayd /opt/rayito-cli-img/rayd\nRUN echo cli > /opt/rayito-cli-img/marker\nCMD [\"/opt/rayito-cli-img/rayd\"]\n",
    )
    .unwrap();
    let arm = work.path().join("agent-arm");
    let x86 = work.path().join("agent-x86");
    std::fs::write(&arm, elf(0xB7)).unwrap();
    std::fs::write(&x86, elf(0x3E)).unwrap();
    let one = work.path().join("one.zip");
    let two = work.path().join("two.zip");

    // Two zips of the same inputs: the same bytes, key and hash.
    let a = session.json(&[
        "--output",
        "json",
        "image",
        "zip",
        s(&base),
        s(&one),
        "--agent-binary",
        s(&arm),
    ]);
    let b = session.json(&[
        "--output",
        "json",
        "image",
        "zip",
        s(&base),
        s(&two),
        "--agent-binary",
        s(&arm),
        "--arch",
        "ARM_64",
    ]);
    assert_eq!(std::fs::read(&one).unwrap(), std::fs::read(&two).unwrap());
    assert_eq!(a["sha256"], b["sha256"]);
    let sha = a["sha256"].as_str().unwrap();
    assert_eq!(a["key"], format!("rayito/images/rayd-{}.zip", &sha[..12]));
    assert_eq!(a["arch"], "ARM_64");

    // An x86-64 agent for an ARM_64 image: refused, nothing written.
    let refused = work.path().join("refused.zip");
    let out = session.run(&[
        "image",
        "zip",
        s(&base),
        s(&refused),
        "--agent-binary",
        s(&x86),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).lines().next(),
        Some(
            "error: invalid agent_binary: the agent binary is built for X86_64 but the image's \
             architecture is ARM_64; pass a rayito-agent built for ARM_64 (cargo build --release \
             -p rayito-agent --target aarch64-unknown-linux-gnu) or choose the architecture it \
             is built for"
        )
    );
    assert!(!refused.exists());

    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let publish = [
        "--local",
        "--output",
        "json",
        "image",
        "publish",
        "--artifact",
        s(&one),
        "--image-name",
        "cli-base",
        "--base-image-version",
        "latest",
    ];
    let first = session.json(&publish);
    assert_eq!(first["launchable"], true);
    assert_eq!(first["imageVersion"], "1");
    assert_eq!(first["baseImageVersion"], "1");
    assert_eq!(first["artifactUploaded"], true);
    assert_eq!(first["reused"], false);
    let arn = first["imageArn"].as_str().unwrap().to_owned();
    assert!(arn.ends_with(":microvm-image:cli-base"), "{arn}");
    let again = session.json(&publish);
    assert_eq!(again["reused"], true);
    assert_eq!(again["artifactUploaded"], false);
    assert_eq!(again["imageVersion"], "1");

    // Text output: the line a shell sources.
    let out = session.run(&[
        "--local",
        "image",
        "publish",
        "--artifact",
        s(&one),
        "--image-name",
        "cli-base",
        "--base-image-version",
        "1",
    ]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("RAYITO_TEMPLATE={arn}\n")),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let versions = session.json(&["--local", "--output", "json", "image", "list", "cli-base"]);
    assert_eq!(versions["versions"].as_array().unwrap().len(), 1);
    assert_eq!(versions["versions"][0]["state"], "SUCCESSFUL");
    let images = session.json(&["--local", "--output", "json", "image", "list"]);
    let names: Vec<&str> = images["images"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["name"].as_str())
        .collect();
    assert!(
        names.contains(&"cli-base") && names.contains(&"rayito-base"),
        "{names:?}"
    );

    // A failing step: not launchable, exit 1, the gate's outcome in JSON.
    let failing = work.path().join("failing");
    std::fs::create_dir(&failing).unwrap();
    std::fs::write(
        failing.join("Dockerfile"),
        "COPY rayd /opt/rayito-cli-img/rayd\nRUN exit 7\nCMD [\"/opt/rayito-cli-img/rayd\"]\n",
    )
    .unwrap();
    let failing_zip = work.path().join("failing.zip");
    session.json(&[
        "--output",
        "json",
        "image",
        "zip",
        s(&failing),
        s(&failing_zip),
        "--agent-binary",
        s(&arm),
    ]);
    let out = session.run(&[
        "--local",
        "--output",
        "json",
        "image",
        "publish",
        "--artifact",
        s(&failing_zip),
        "--image-name",
        "cli-fail",
        "--base-image-version",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let failed: Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(failed["launchable"], false);
    assert_eq!(failed["gate"], "failed");
    assert_eq!(failed["error"]["kind"], "build");
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exit code 7"),
        "{failed}"
    );

    // A version that is not a number is a usage mistake of the CLI's.
    let out = session.run(&[
        "--local",
        "image",
        "publish",
        "--artifact",
        s(&one),
        "--image-name",
        "cli-base",
        "--base-image-version",
        "newest",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--base-image-version takes a major version number or latest")
    );
}

#[test]
fn publish_sizes_then_image_sizes_and_a_dry_run_prune_print_their_tables() {
    if let Some(reason) = skip_support::local_builds_unavailable() {
        skip_support::skip(reason);
        return;
    }
    let session = Session::unset_backend();
    let work = tempfile::tempdir().unwrap();
    let base = work.path().join("base");
    std::fs::create_dir(&base).unwrap();
    std::fs::write(
        base.join("Dockerfile"),
        "COPY rayd /opt/rayito-cli-sz/rayd\nCMD [\"/opt/rayito-cli-sz/rayd\"]\n",
    )
    .unwrap();
    let agent = work.path().join("agent");
    std::fs::write(&agent, elf(0xB7)).unwrap();
    let zip = work.path().join("sz.zip");
    session.json(&[
        "--output",
        "json",
        "image",
        "zip",
        s(&base),
        s(&zip),
        "--agent-binary",
        s(&agent),
    ]);

    // The baseline and one size; the lines a shell sources.
    let out = session.run(&[
        "--local",
        "image",
        "publish",
        "--artifact",
        s(&zip),
        "--image-name",
        "cli-sz",
        "--base-image-version",
        "1",
        "--sizes",
        "512mb",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let arn = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .map(str::to_owned)
    };
    assert!(
        arn("RAYITO_TEMPLATE")
            .unwrap()
            .ends_with(":microvm-image:cli-sz")
    );
    assert!(
        arn("RAYITO_TEMPLATE_512MB")
            .unwrap()
            .ends_with(":microvm-image:cli-sz-512mb")
    );

    // The baseline again (forced): version 2; the size keeps version 1.
    let forced = session.json(&[
        "--local",
        "--output",
        "json",
        "image",
        "publish",
        "--artifact",
        s(&zip),
        "--image-name",
        "cli-sz",
        "--base-image-version",
        "1",
        "--force",
    ]);
    assert_eq!(forced["imageVersion"], "2");

    let out = session.run(&["--local", "image", "sizes", "--image-name", "cli-sz"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "SIZE   IMAGE                            PUBLISHED STATE          VERSION SAME_ARTIFACT\n\
         512mb  cli-sz-512mb                     yes       CREATED        1       yes\n\
         1gb    cli-sz-1gb                       no        -              -       -\n\
         2gb    cli-sz                           yes       UPDATED        2       -\n\
         4gb    cli-sz-4gb                       no        -              -       -\n\
         8gb    cli-sz-8gb                       no        -              -       -\n"
    );

    let dry = [
        "--local",
        "image",
        "prune",
        "--image-name",
        "cli-sz",
        "--keep",
        "1",
        "--dry-run",
    ];
    let out = session.run(&dry);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "keep    2 (newest)\nwould delete 1\n"
    );
    let mut json_dry = vec!["--output", "json"];
    json_dry.extend_from_slice(&dry);
    let report = session.json(&json_dry);
    assert_eq!(report["dryRun"], true);
    assert_eq!(
        report["kept"],
        serde_json::json!([{ "version": "2", "reason": "newest" }])
    );
    assert_eq!(report["deleted"], serde_json::json!(["1"]));
    // Nothing was deleted.
    let versions = session.json(&["--local", "--output", "json", "image", "list", "cli-sz"]);
    assert_eq!(versions["versions"].as_array().unwrap().len(), 2);
}

#[test]
fn zip_with_efs_writes_the_marker_and_publish_refuses_caps_flags_that_do_not_fit() {
    let session = Session::unset_backend();
    let work = tempfile::tempdir().unwrap();
    let base = work.path().join("base");
    std::fs::create_dir(&base).unwrap();
    let arm = work.path().join("agent-arm");
    std::fs::write(&arm, elf(0xB7)).unwrap();
    let zip = work.path().join("efs.zip");
    let packed = session.json(&[
        "--output",
        "json",
        "image",
        "zip",
        s(&base),
        s(&zip),
        "--agent-binary",
        s(&arm),
        "--with-efs",
    ]);
    assert_eq!(packed["withEfs"], true);
    let bytes = std::fs::read(&zip).unwrap();
    // The marker's name and content are in the zip (deflated content is
    // checked by the SDK's own tests; the name is stored as is).
    assert!(
        bytes
            .windows(b"kernel-sidecar/efs_variant".len())
            .any(|w| w == b"kernel-sidecar/efs_variant")
    );

    // Refusals of the flags, before the artifact is read or AWS called.
    for (args, message) in [
        (
            &["--with-efs"][..],
            "--with-efs needs --os-capabilities ALL: the agent mounts EFS only with CAP_SYS_ADMIN",
        ),
        (
            &[
                "--with-efs",
                "--os-capabilities",
                "ALL",
                "--variant",
                "slim",
            ][..],
            "--with-efs publishes rayito-base-caps-efs, built from the full artifact: drop --variant slim",
        ),
        (
            &["--os-capabilities", "ALL", "--variant", "poly"][..],
            "--os-capabilities ALL publishes the caps image, built from the full artifact: drop --variant poly",
        ),
        (
            &["--os-capabilities", "SYS_ADMIN"][..],
            "--os-capabilities takes ALL, the only value the service accepts",
        ),
    ] {
        let mut all = vec![
            "image",
            "publish",
            "--artifact",
            "/nonexistent/never-read.zip",
            "--base-image-version",
            "1",
        ];
        all.extend_from_slice(args);
        let out = session.run(&all);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).lines().next(),
            Some(format!("error: {message}").as_str()),
            "{args:?}"
        );
    }

    // The s3-mounts stack needs CloudFormation: refused on --local.
    let out = session.run(&["--local", "mounts", "policy", "status"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).lines().next(),
        Some(
            "error: `rayito mounts policy` needs AWS: it deploys a CloudFormation stack with an IAM \
             policy, and the local backend has neither (its S3 mounts need no policy); run it \
             without --local (and without RAYITO_BACKEND=local), or set \
             AWS_ENDPOINT_URL_CLOUDFORMATION to an endpoint of that service"
        )
    );
}
