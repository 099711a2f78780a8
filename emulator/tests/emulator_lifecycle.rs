//! Ownership: dropping the emulator leaves no process behind, and the
//! `rayito-emulator` binary prints what a client needs and stops on
//! SIGTERM.

use crate::emulator_support;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use emulator_support::*;
use rayito_agent::pb;

/// Pids of live processes whose command line contains `needle`.
fn pids_with(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            let zombie = std::fs::read_to_string(entry.path().join("stat"))
                .is_ok_and(|s| s.contains(") Z "));
            if cmd.contains(needle) && !zombie {
                found.push(pid);
            }
        }
    }
    found
}

#[tokio::test]
async fn dropping_the_emulator_leaves_no_process_behind() {
    let h = Harness::start().await;
    let (id, endpoint) = h.run_ready().await;
    let token = h.mint(&id, &[8080]).await;
    let ch = channel(&endpoint).await;
    wait_ready(&ch, &token).await;
    let marker = format!("{}.{}", 3000 + std::process::id() % 1000, 4242);
    let mut stream = process(&ch, ProxyHeaders::sdk(&token))
        .start(pb::StartRequest {
            process: Some(pb::ProcessConfig {
                cmd: "/bin/sleep".into(),
                args: vec![marker.clone()],
                ..Default::default()
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    stream.message().await.unwrap().expect("StartEvent");
    assert_eq!(
        pids_with(&format!("sleep {marker}")).len(),
        1,
        "the sleep runs"
    );
    drop(stream);
    drop(h);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pids_with(&format!("sleep {marker}")).is_empty() {
        assert!(
            Instant::now() < deadline,
            "a sandbox process survived the emulator"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn binary_prints_the_environment_and_stops_on_sigterm() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rayito-emulator"))
        .args(["--addr", "127.0.0.1:0", "--region", "eu-west-1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("binary starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut got = Vec::new();
    for _ in 0..9 {
        got.push(lines.next().expect("a line").expect("utf-8"));
    }
    let url = got[0]
        .strip_prefix("rayito emulator listening on ")
        .expect("first line")
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let key_id = got[1]
        .strip_prefix("aws_access_key_id: ")
        .expect("the key id line")
        .to_string();
    let secret = got[2]
        .strip_prefix("aws_secret_access_key: ")
        .expect("the secret line")
        .to_string();
    assert!(key_id.starts_with("AKIA") && key_id.len() == 20, "{key_id}");
    assert_eq!(secret.len(), 40, "a generated secret");
    assert_eq!(
        got[3..],
        [
            format!("export AWS_ENDPOINT_URL={url}"),
            format!("export AWS_ACCESS_KEY_ID={key_id}"),
            format!("export AWS_SECRET_ACCESS_KEY={secret}"),
            "export AWS_REGION=eu-west-1".to_string(),
            "export RAYITO_TEMPLATE=arn:aws:lambda:eu-west-1:000000000000:microvm-image:rayito-base".to_string(),
            got[8].clone(),
        ]
    );
    let s3_url = got[8]
        .strip_prefix("export AWS_ENDPOINT_URL_S3=http://127.0.0.1:")
        .expect("the S3 endpoint line");
    assert!(s3_url.parse::<u16>().is_ok(), "{s3_url}");
    assert_ne!(
        format!("http://127.0.0.1:{s3_url}"),
        url,
        "a port of its own"
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let listed = rt.block_on(async {
        let client = sdk_client_at(&url, &key_id, &secret);
        client.list_microvms().send().await
    });
    assert!(
        listed
            .expect("the printed endpoint answers")
            .items()
            .is_empty()
    );
    // Any other key is refused, as AWS refuses it.
    let refused = rt.block_on(async {
        let client = sdk_client_at(&url, &key_id, "not-the-secret");
        client.list_microvms().send().await
    });
    let (status, code, _) = err_parts(&refused.expect_err("a wrong secret is refused"));
    assert_eq!((status, code.as_str()), (403, "InvalidSignatureException"));
    // SIGTERM only once the binary handles it (SigCgt in /proc).
    let handled_by = Instant::now() + Duration::from_secs(60);
    while !catches_sigterm(child.id()) {
        assert!(Instant::now() < handled_by, "SIGTERM never handled");
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(code) = child.try_wait().unwrap() {
            assert_eq!(code.code(), Some(0));
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the emulator did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn emulator_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<rayito_emulator::Emulator>();
    assert_send_sync::<rayito_emulator::Faults>();
}

#[test]
fn a_detached_emulator_outlives_the_runtime_that_started_it() {
    use aws_sdk_lambdamicrovms::types::MicrovmState;
    use rayito_emulator::{Emulator, EmulatorConfig};

    let first = tokio::runtime::Runtime::new().unwrap();
    let emulator = first
        .block_on(Emulator::start_detached(EmulatorConfig::default()))
        .expect("starts");
    drop(first);

    let second = tokio::runtime::Runtime::new().unwrap();
    let client = sdk_client(&emulator);
    let id = second.block_on(async {
        let out = client
            .run_microvm()
            .image_identifier(emulator.image_arn("rayito-base"))
            .run_hook_payload(payload(serde_json::json!({})))
            .send()
            .await
            .expect("served after the first runtime ended");
        let id = out.microvm_id().to_string();
        wait_state(&client, &id, MicrovmState::Running).await;
        id
    });
    // Faults work from outside any runtime: their work runs on the emulator's.
    assert!(emulator.faults().kill_agent(&id));
    second.block_on(async {
        let end = wait_state(&client, &id, MicrovmState::Terminated).await;
        assert_eq!(
            end.state_reason(),
            Some("Container Stopped with Exit Code: 137")
        );
    });
    drop(emulator);
}

/// Whether process `pid` has a handler for SIGTERM (bit 14 of `SigCgt`).
fn catches_sigterm(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let mask = status.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
            u64::from_str_radix(mask.trim(), 16).ok()
        })
        .is_some_and(|mask| mask & (1 << 14) != 0)
}
