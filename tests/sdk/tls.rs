//! The SDK's TLS path, the one every AWS user takes, against the emulator
//! in TLS mode: bare endpoints, TLS with ALPN h2 on port 443 of a loopback
//! address per sandbox, trusted through an extra root certificate (the
//! emulator's CA). Runs as root here (binding 443 needs root or
//! CAP_NET_BIND_SERVICE).

use crate::sdk_support;

use std::time::Duration;

use rayito::{AwsOptions, Sandbox, SandboxError};
use rayito_emulator::{Emulator, EmulatorConfig};

async fn tls_emulator() -> Emulator {
    Emulator::start(EmulatorConfig {
        tls: true,
        ..EmulatorConfig::default()
    })
    .await
    .expect("TLS mode starts (needs root or CAP_NET_BIND_SERVICE)")
}

fn aws_for(emulator: &Emulator) -> AwsOptions {
    sdk_support::aws(emulator)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_run_code_commands_and_files_over_tls() {
    let emu = tls_emulator().await;
    let ca = emu.ca_pem().unwrap().to_owned();
    let sbx = Sandbox::builder()
        .aws(aws_for(&emu).add_root_certificate_pem(ca))
        .template(emu.image_arn("rayito-base"))
        .ready_timeout(Duration::from_secs(60))
        .create()
        .await
        .expect("create over TLS");
    // GetMicrovm's endpoint is a bare loopback address, as on AWS.
    let info = sbx.get_info().await.unwrap();
    assert_eq!(info.sandbox_id, sbx.id());

    let execution = sbx
        .run_code("x = 6\nprint('over tls')\nx * 7")
        .await
        .unwrap();
    assert_eq!(execution.logs.stdout.concat(), "over tls\n");
    assert_eq!(execution.text(), Some("42"));

    let out = sbx
        .commands()
        .run("echo tls; printf 'err' >&2")
        .await
        .unwrap();
    assert_eq!((out.exit_code, out.stdout.as_str()), (0, "tls\n"));
    assert_eq!(out.stderr, "err");

    sbx.files()
        .write("/home/user/tls.txt", "secret-free payload")
        .await
        .unwrap();
    assert_eq!(
        sbx.files()
            .read_to_string("/home/user/tls.txt")
            .await
            .unwrap(),
        "secret-free payload"
    );
    let cat = sbx.commands().run("cat /home/user/tls.txt").await.unwrap();
    assert_eq!(cat.stdout, "secret-free payload");

    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_local_backend_in_tls_mode() {
    let sbx = Sandbox::builder()
        .local_tls()
        .create()
        .await
        .expect("create on the local backend in TLS mode");
    let execution = sbx.run_code("1 + 1").await.unwrap();
    assert_eq!(execution.text(), Some("2"));
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_ca_the_sandbox_is_never_reached() {
    let emu = tls_emulator().await;
    let err = Sandbox::builder()
        .aws(aws_for(&emu))
        .template(emu.image_arn("rayito-base"))
        .ready_timeout(Duration::from_secs(3))
        .create()
        .await
        .expect_err("the emulator's certificate is not trusted");
    assert!(
        matches!(err, SandboxError::SandboxNotReady { .. }),
        "{err:?}"
    );
}
