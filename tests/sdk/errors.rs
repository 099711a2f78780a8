//! Every error the SDK's calls can meet, produced for real against the
//! emulator and a real agent, asserted by variant and exact message.

use crate::sdk_support;

use std::time::Duration;

use rayito::error::{CommandExitStatus, SandboxCode, TimeoutScope};
use rayito::{CommandOptions, ErrorKind, Sandbox, SandboxError};
use rayito_emulator::Operation;
use sdk_support::{builder, emulator, sandbox};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_arguments_are_refused_before_any_io() {
    let emu = emulator().await;

    let err = builder(&emu)
        .timeout(Duration::from_secs(28_801))
        .create()
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::SandboxLifetime { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "sandbox timeout of 28,801 s is above the platform cap of 28,800 s; pass a smaller timeout"
    );

    let err = builder(&emu)
        .env("BAD=NAME", "secret-value-never-shown")
        .create()
        .await
        .unwrap_err();
    match &err {
        SandboxError::InvalidArgument { argument, .. } => {
            assert_eq!(argument.as_deref(), Some("envs"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "invalid envs: an env name is empty, too long or contains a control character or '='; pass names of 1 to 256 printable characters"
    );
    assert!(!format!("{err:?}").contains("secret-value-never-shown"));

    let err = builder(&emu)
        .allowed_ports([9000])
        .create()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        err.to_string(),
        "invalid allowed_ports: port 9000 cannot be opened; pass ports from 1 to 65535 other than 9000 (the hooks port)"
    );

    let err = builder(&emu)
        .access_token("not a token")
        .create()
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid access_token: the access token must be base64url without padding and decode to at least 16 bytes; pass the token the sandbox was created with"
    );

    let big = "x".repeat(5_000);
    let err = builder(&emu).env("BIG", big).create().await.unwrap_err();
    // The payload per the wire contract: compact JSON with sorted keys, the
    // token as 64 hex digits.
    let payload_chars = r#"{"envs":{"BIG":""#.len()
        + 5_000
        + r#""},"token_sha256":""#.len()
        + 64
        + r#"","user":"user","v":1,"workdir":"/home/user"}"#.len();
    assert_eq!(payload_chars, 5_144);
    assert_eq!(
        err.to_string(),
        "invalid envs: the run payload is 5,144 characters, above the limit of 4,096; pass fewer or shorter envs and metadata"
    );

    // None of these reached the control plane.
    assert_eq!(emu.calls(Operation::RunMicrovm), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_image_is_sandbox_not_found() {
    let emu = emulator().await;
    let err = builder(&emu)
        .template(emu.image_arn("no-such-image"))
        .create()
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::SandboxNotFound { .. }),
        "{err:?}"
    );
    assert_eq!(err.meta().aws_code(), Some("ResourceNotFoundException"));
    assert_eq!(
        err.to_string(),
        "control plane call RunMicrovm found no such resource: MicroVM image not found: arn:aws:lambda:us-east-1:000000000000:microvm-image:no-such-image; the image is probably missing, check the image ARN or publish the image"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_met_inside_a_sandbox() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;

    // File not found.
    let err = sbx
        .files()
        .read("/home/user/missing.txt")
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::FileNotFound { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "file not found (files.read): path not found; check the path"
    );

    // Non-zero exit.
    let err = sbx
        .commands()
        .run("echo out; echo err >&2; exit 3")
        .await
        .unwrap_err();
    match &err {
        SandboxError::CommandExit {
            exit_code,
            stdout,
            stderr,
            status,
            truncated,
            ..
        } => {
            assert_eq!(*exit_code, 3);
            assert_eq!(stdout.as_str(), "out\n");
            assert_eq!(stderr.as_str(), "err\n");
            assert_eq!(*status, CommandExitStatus::Exited);
            assert!(!truncated);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        err.to_string(),
        "command echo exited with code 3; its stdout and stderr are in the error"
    );

    // The agent ends a command at its timeout.
    let err = sbx
        .commands()
        .run_with(
            "sleep 30",
            CommandOptions::new().timeout(Duration::from_secs(1)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            SandboxError::Timeout {
                scope: TimeoutScope::Command,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "command sleep reached its timeout and was stopped; raise the command timeout, or pass 0 for no limit"
    );

    // The disk reserve refuses a write.
    assert!(emu.faults().set_disk_reserve(sbx.id(), u64::MAX));
    let err = sbx
        .files()
        .write("/home/user/big.bin", vec![1u8; 16])
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::DiskFull { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the sandbox has less than 256 MiB of free disk (files.write); free space or use a larger disk"
    );
    assert!(emu.faults().set_disk_reserve(sbx.id(), 0));

    // A wrong access token on connect.
    let wrong = "A".repeat(43);
    let err = builder(&emu).connect(sbx.id(), wrong).await.unwrap_err();
    assert!(
        matches!(
            err,
            SandboxError::Authentication {
                proxy_rejected: false,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the agent refused the access token (connect); connect to the sandbox again to get a valid token"
    );

    // The sandbox's deadline passes.
    assert!(emu.faults().expire_deadline(sbx.id()));
    let err = sbx.commands().run("true").await.unwrap_err();
    assert!(
        matches!(
            err,
            SandboxError::Timeout {
                scope: TimeoutScope::Sandbox,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the sandbox reached its timeout (commands.run); extend it with set_timeout before it expires, or create a new sandbox"
    );

    // A killed sandbox used again.
    assert!(sbx.kill().await.unwrap());
    let err = sbx.run_code("1 + 1").await.unwrap_err();
    assert!(
        matches!(
            err,
            SandboxError::Sandbox {
                code: Some(SandboxCode::Closed),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the sandbox handle is closed; create a new sandbox or connect to it again"
    );

    // Connecting to it now finds nothing.
    let err = builder(&emu)
        .connect(sbx.id(), sbx.access_token().clone())
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::SandboxNotFound { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "the sandbox {} does not exist or has terminated; create a new sandbox",
            sbx.id()
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_profile_says_so_instead_of_no_credentials() {
    // A region and an endpoint, and a profile that does not exist: the
    // message names the profile (it used to say no credentials were found).
    let err = Sandbox::builder()
        .aws(
            rayito::AwsOptions::new()
                .region("us-east-1")
                .endpoint_url("http://127.0.0.1:9")
                .profile("rayito-test-profile-that-does-not-exist"),
        )
        .template("arn:aws:lambda:us-east-1:000000000000:microvm-image:rayito-base")
        .create()
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::Authentication { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the AWS profile rayito-test-profile-that-does-not-exist is not in the AWS config or credentials file; fix the profile name (AwsOptions::profile or AWS_PROFILE) or add the profile"
    );
}
