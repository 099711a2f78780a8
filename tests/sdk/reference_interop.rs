//! The reference's tooling and ours interoperate (issue 24 §4): the
//! Python `rayito image publish` (PyPI `rayito[cli]==0.17.1`, installed by
//! `.ci/install-test-deps` into `target/test-deps/venv`) run against our
//! emulator with our artifact produces an image our SDK launches; and an
//! image our `Images::publish` made is launched by the reference SDK's
//! `Sandbox.create(template=arn)`, which runs a command in it.
//!
//! Both ways are shown through what each tool builds, reuses and
//! launches: an image the reference published is launched by our SDK, and
//! our publish of the same artifact reuses the reference's version (our
//! desired configuration equals what the reference sent, as the service
//! echoes it); an image we published is reused by the reference's publish
//! of the same artifact (its desired configuration equals ours), and is
//! launched by the reference SDK's `Sandbox.create`, which runs a command,
//! a code cell and a file round trip in it.
//!
//! The reference SDK's gRPC goes over TLS to port 443 of the MicroVM's
//! endpoint, so that test runs the emulator in TLS mode (root: port 443)
//! with `tls_ip_name_constraints` off (grpc-core's BoringSSL refuses a CA
//! that constrains iPAddress names: "unsupported name constraint type")
//! and the reference trusts its CA through `GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`.
//!
//! The reference reaches the emulator the way every boto3 program can:
//! `AWS_ENDPOINT_URL` (MicroVMs API, STS, CloudWatch Logs),
//! `AWS_ENDPOINT_URL_S3` (the emulator's S3, path style from an AWS config
//! file), static credentials and region in the environment, and
//! `--build-role-arn` (no CloudFormation stack to read it from). The
//! tests need local builds and the reference installed; otherwise they
//! print `SKIPPED: <test>: <reason>`.

use crate::sdk_support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rayito::template::{Arch, PublishOptions, pack_base_image};
use rayito::{Client, Sandbox};
use rayito_emulator::{Emulator, EmulatorConfig, Operation};
use sdk_support::skip::{local_builds_unavailable, skip};

/// The reference's version this test pins (the one the spec describes).
const REFERENCE_VERSION: &str = "0.17.1";

/// The venv `.ci/install-test-deps` installs the reference into.
fn venv() -> PathBuf {
    crate::sdk_support::repo_root().join("target/test-deps/venv")
}

/// Why the reference cannot run here, if it cannot.
fn reference_missing() -> Option<String> {
    let python = venv().join("bin/python3");
    let out = std::process::Command::new(&python)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('rayito'))",
        ])
        .output();
    match out {
        Ok(out) if out.status.success() => {
            let found = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            (found != REFERENCE_VERSION).then(|| {
                format!(
                    "the reference rayito in {} is {found}, not {REFERENCE_VERSION} \
                     (.ci/install-test-deps installs it)",
                    venv().display()
                )
            })
        }
        _ => Some(format!(
            "the reference rayito {REFERENCE_VERSION} is not installed in {} \
             (.ci/install-test-deps installs it)",
            venv().display()
        )),
    }
}

/// The first bytes of an ARM_64 ELF executable (the local build copies
/// `rayd`; nothing runs it).
fn arm64_elf() -> Vec<u8> {
    let mut bytes = b"\x7fELF\x02\x01\x01\x00".to_vec();
    bytes.resize(16, 0);
    bytes.extend_from_slice(&3u16.to_le_bytes());
    bytes.extend_from_slice(&0xB7u16.to_le_bytes());
    bytes.extend_from_slice(b" a stand-in for rayito-agent");
    bytes
}

/// A base directory whose Dockerfile marks the image with `marker`.
fn base_dir(marker: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Dockerfile"),
        format!(
            "COPY rayd /opt/rayito-img/rayd\n\
             RUN echo {marker} > /opt/rayito-img/marker\n\
             CMD [\"/opt/rayito-img/rayd\", \"serve\"]\n"
        ),
    )
    .unwrap();
    dir
}

/// A command of the reference's venv with the environment that points it
/// at `emu` and nothing else of this host's AWS setup.
fn reference_command(emu: &Emulator, home: &Path, program: &str) -> tokio::process::Command {
    let config = home.join("aws-config");
    std::fs::write(&config, "[default]\ns3 =\n    addressing_style = path\n").unwrap();
    let mut cmd = tokio::process::Command::new(venv().join("bin").join(program));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("AWS_CONFIG_FILE", &config)
        .env("AWS_SHARED_CREDENTIALS_FILE", home.join("no-credentials"))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", &emu.access_key().id)
        .env("AWS_SECRET_ACCESS_KEY", &emu.access_key().secret)
        .env("AWS_ENDPOINT_URL", emu.endpoint_url())
        .env("AWS_ENDPOINT_URL_S3", emu.s3_endpoint_url())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    if let Some(ca) = emu.ca_path() {
        cmd.env("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", ca);
    }
    cmd
}

/// Runs `cmd` (at most 120 s) and returns its stdout and stderr; panics
/// with both when it fails.
async fn run(mut cmd: tokio::process::Command, what: &str) -> (String, String) {
    let output = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish in 120 s"))
        .unwrap_or_else(|e| panic!("{what} could not run: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    (stdout, stderr)
}

/// The reference's `rayito image publish` of `zip` as `image` on `emu`.
fn reference_publish(
    emu: &Emulator,
    home: &Path,
    zip: &Path,
    image: &str,
) -> tokio::process::Command {
    let mut publish = reference_command(emu, home, "rayito");
    publish.args([
        "image",
        "publish",
        "--artifact",
        zip.to_str().unwrap(),
        "--base-image-version",
        "latest",
        "--bucket",
        &emu.artifact_bucket(),
        "--image-name",
        image,
        "--build-role-arn",
        &format!(
            "arn:aws:iam::{}:role/rayito-m0-build-us-east-1",
            emu.account_id()
        ),
        "--timeout-seconds",
        "90",
    ]);
    publish
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_publish_and_ours_build_images_each_other_launches_and_reuses() {
    if let Some(reason) = local_builds_unavailable() {
        skip(reason);
        return;
    }
    if let Some(reason) = reference_missing() {
        skip(reason);
        return;
    }
    let emu = sdk_support::emulator().await;
    let home = tempfile::tempdir().unwrap();
    let client = Client::builder()
        .aws(sdk_support::aws(&emu).s3_endpoint_url(emu.s3_endpoint_url()))
        .build()
        .await
        .unwrap();
    let mut options = PublishOptions::default();
    options.bucket = Some(emu.artifact_bucket());
    options.poll_interval = Some(Duration::from_millis(100));
    options.timeout = Duration::from_secs(90);

    // 1. The reference publishes our artifact; our SDK launches the image,
    // and our publish of the same artifact reuses the reference's version.
    let first = base_dir("published-by-the-reference");
    let artifact = pack_base_image(first.path(), Some(&arm64_elf()), Arch::Arm64).unwrap();
    let zip = home.path().join("first.zip");
    std::fs::write(&zip, artifact.bytes()).unwrap();
    let (stdout, _) = run(
        reference_publish(&emu, home.path(), &zip, "ref-published"),
        "rayito image publish (the reference)",
    )
    .await;
    let arn = emu.image_arn("ref-published");
    assert!(
        stdout
            .lines()
            .any(|l| l == format!("RAYITO_TEMPLATE={arn}")),
        "{stdout}"
    );
    assert_eq!(
        emu.get_object_directly(&emu.artifact_bucket(), &artifact.image_key())
            .await
            .unwrap()
            .as_deref(),
        Some(artifact.bytes()),
        "the reference uploaded our bytes under the key we compute"
    );
    let sandbox = Sandbox::builder()
        .aws(sdk_support::aws(&emu))
        .template(arn.clone())
        .ready_timeout(Duration::from_secs(60))
        .create()
        .await
        .expect("our SDK launches the reference's image");
    let out = sandbox
        .commands()
        .run("cat /opt/rayito-img/marker")
        .await
        .unwrap();
    assert_eq!(out.stdout, "published-by-the-reference\n");
    sandbox.kill().await.unwrap();
    let ours = client
        .images()
        .publish(&artifact, "ref-published", options.clone())
        .await
        .expect("our publish over the reference's image");
    assert!(
        ours.reused && !ours.artifact_uploaded && ours.image_version == "1",
        "our publish reuses the reference's version: {ours:?}"
    );
    assert_eq!(emu.calls(Operation::UpdateMicrovmImage), 0);

    // 2. We publish another artifact; the reference's publish of the same
    // artifact reuses our version.
    let second = base_dir("published-by-us");
    let artifact = pack_base_image(second.path(), Some(&arm64_elf()), Arch::Arm64).unwrap();
    let info = client
        .images()
        .publish(&artifact, "ours-published", options)
        .await
        .expect("our publish");
    assert!(!info.reused && info.image_version == "1", "{info:?}");
    let zip = home.path().join("second.zip");
    std::fs::write(&zip, artifact.bytes()).unwrap();
    let (stdout, stderr) = run(
        reference_publish(&emu, home.path(), &zip, "ours-published"),
        "rayito image publish (the reference) over ours",
    )
    .await;
    assert!(
        format!("{stdout}{stderr}").contains(
            "ours-published: version 1 already built from this artifact and config; reusing"
        ),
        "the reference reuses our version:\n{stdout}\n{stderr}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l == format!("RAYITO_TEMPLATE={}", info.image_arn)),
        "{stdout}"
    );
    assert_eq!(emu.calls(Operation::CreateMicrovmImage), 2);
    assert_eq!(
        emu.calls(Operation::UpdateMicrovmImage),
        0,
        "nothing rebuilt"
    );
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_sdk_launches_an_image_we_published_and_runs_in_it() {
    if let Some(reason) = local_builds_unavailable() {
        skip(reason);
        return;
    }
    if let Some(reason) = reference_missing() {
        skip(reason);
        return;
    }
    if !rustix::process::geteuid().is_root() {
        skip("the emulator's TLS mode binds port 443, where the reference dials: needs root");
        return;
    }
    let emu = Emulator::start(EmulatorConfig {
        tls: true,
        tls_ip_name_constraints: false,
        ..EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts in TLS mode");
    let home = tempfile::tempdir().unwrap();
    let dir = base_dir("published-by-us");
    let artifact = pack_base_image(dir.path(), Some(&arm64_elf()), Arch::Arm64).unwrap();
    let client = Client::builder()
        .aws(
            sdk_support::aws(&emu)
                .s3_endpoint_url(emu.s3_endpoint_url())
                .add_root_certificate_pem(emu.ca_pem().unwrap().to_owned()),
        )
        .build()
        .await
        .unwrap();
    let mut options = PublishOptions::default();
    options.bucket = Some(emu.artifact_bucket());
    options.poll_interval = Some(Duration::from_millis(100));
    options.timeout = Duration::from_secs(90);
    let info = client
        .images()
        .publish(&artifact, "ours-launched", options)
        .await
        .expect("our publish");
    let mut launch = reference_command(&emu, home.path(), "python3");
    launch.args([
        "-c",
        "import sys\n\
         from rayito import Sandbox\n\
         sandbox = Sandbox.create(template=sys.argv[1])\n\
         try:\n\
         \x20   result = sandbox.commands.run('cat /opt/rayito-img/marker')\n\
         \x20   print('command', result.exit_code, result.stdout.strip())\n\
         \x20   cell = sandbox.run_code('print(6 * 7)')\n\
         \x20   print('code', ''.join(cell.logs.stdout).strip(), cell.error)\n\
         \x20   sandbox.files.write('/tmp/interop.txt', 'round trip')\n\
         \x20   print('file', sandbox.files.read('/tmp/interop.txt'))\n\
         finally:\n\
         \x20   sandbox.kill()\n",
        &info.image_arn,
    ]);
    let (stdout, _) = run(launch, "Sandbox.create (the reference)").await;
    assert_eq!(
        stdout,
        "command 0 published-by-us\ncode 42 None\nfile round trip\n"
    );
    assert!(
        emu.microvm_ids()
            .iter()
            .all(|id| !matches!(emu.state(id), Some(rayito_emulator::MicrovmState::Running))),
        "the reference's kill terminated its MicroVM"
    );
    emu.shutdown().await;
}

/// A listing's resume token is the reference's format: a token the
/// reference's paginator hands out resumes in ours, and ours in the
/// reference's, in the control plane's order and in an order by start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_tokens_resume_across_the_two_sdks() {
    use futures_util::{StreamExt as _, TryStreamExt as _};
    use rayito::{ListOrder, ListQuery};

    if let Some(reason) = reference_missing() {
        skip(reason);
        return;
    }
    let emu = sdk_support::emulator().await;
    let home = tempfile::tempdir().unwrap();
    let mut made = Vec::new();
    for _ in 0..5 {
        made.push(sdk_support::builder(&emu).create().await.unwrap());
    }
    let all: std::collections::BTreeSet<String> = made.iter().map(|s| s.id().to_owned()).collect();
    let client = sdk_support::builder(&emu).client().await.unwrap();
    // The reference's paginator: one page of `limit` items from `order`
    // (or none) and the token then, or every item from a token.
    let reference = |args: &[&str]| {
        let mut cmd = reference_command(&emu, home.path(), "python3");
        cmd.args([
            "-c",
            "import sys\n\
             from rayito import Sandbox\n\
             mode, order, token = sys.argv[1], sys.argv[2] or None, sys.argv[3] or None\n\
             pages = Sandbox.paginate(limit=2, order=order, next_token=token)\n\
             ids = []\n\
             while pages.has_next:\n\
             \x20   ids += [item.sandbox_id for item in pages.next_items()]\n\
             \x20   if mode == 'one':\n\
             \x20       break\n\
             print(' '.join(ids))\n\
             print(pages.next_token or '')\n",
        ]);
        cmd.args(args);
        cmd
    };
    for (order, ours) in [
        ("", ListQuery::new().page_size(2)),
        ("desc", ListQuery::new().order(ListOrder::Descending)),
    ] {
        // Theirs first, then ours.
        let (out, _) = run(reference(&["one", order, ""]), "paginate (the reference)").await;
        let mut lines = out.lines();
        let mut first: Vec<String> = lines
            .next()
            .unwrap()
            .split(' ')
            .map(str::to_owned)
            .collect();
        let token = lines.next().unwrap().to_owned();
        assert_eq!(first.len(), 2, "{out}");
        let rest: Vec<String> = client
            .list(ours.clone().next_token(token))
            .map_ok(|s| s.sandbox_id)
            .try_collect()
            .await
            .expect("ours resumes the reference's token");
        first.extend(rest);
        assert_eq!(first.len(), 5, "{order}: {first:?}");
        assert_eq!(
            first
                .iter()
                .cloned()
                .collect::<std::collections::BTreeSet<_>>(),
            all
        );
        let theirs_then_ours = first;

        // Ours first, then theirs.
        let mut list = client.list(ours.clone());
        let mut first = Vec::new();
        for _ in 0..3 {
            first.push(list.next().await.unwrap().unwrap().sandbox_id);
        }
        let token = list.next_token().expect("a token");
        let (out, _) = run(
            reference(&["all", order, &token]),
            "paginate (the reference)",
        )
        .await;
        first.extend(out.lines().next().unwrap().split(' ').map(str::to_owned));
        assert_eq!(first.len(), 5, "{order}: {first:?}");
        assert_eq!(
            first
                .iter()
                .cloned()
                .collect::<std::collections::BTreeSet<_>>(),
            all
        );
        if !order.is_empty() {
            assert_eq!(first, theirs_then_ours, "the same order on both sides");
        }
    }
    for sbx in made {
        assert!(sbx.kill().await.unwrap());
    }
    emu.shutdown().await;
}
