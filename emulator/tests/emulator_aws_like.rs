//! The emulator, closer to AWS (issue 10, section 5): the kill-mode
//! deadline ends the MicroVM with exit code 124, idle auto-suspend and
//! auto-resume, one MicroVM per clientToken under concurrency, and TLS mode
//! (bare loopback endpoints, TLS with ALPN h2 on 443, a CA served and
//! written to a file).

use crate::emulator_support;
use crate::skip_support;

use std::io::{BufRead as _, BufReader};
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use aws_sdk_lambdamicrovms::types::{IdlePolicy, MicrovmState};
use emulator_support::*;
use rayito_agent::pb;
use rayito_emulator::EmulatorConfig;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

fn idle_policy(auto_resume: bool) -> IdlePolicy {
    IdlePolicy::builder()
        .max_idle_duration_seconds(60)
        .suspended_duration_seconds(600)
        .auto_resume_enabled(auto_resume)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_forced_kill_mode_deadline_ends_the_microvm_with_exit_code_124() {
    let h = Harness::start_with(EmulatorConfig {
        deadline_exit_delay: Duration::from_millis(300),
        ..EmulatorConfig::default()
    })
    .await;
    let (id, endpoint) = h.run_ready().await;
    let token = h.mint(&id, &[8080]).await;
    let ch = channel(&endpoint).await;
    wait_ready(&ch, &token).await;
    assert!(h.emulator.faults().expire_deadline(&id));
    // Until the "exit", calls get sandbox_timeout ...
    let s = process(&ch, ProxyHeaders::sdk(&token))
        .list(pb::ListRequest {})
        .await
        .unwrap_err();
    assert_eq!(s.message(), "sandbox_timeout");
    // ... then the MicroVM ends as AWS ends it.
    let end = wait_state(&h.client, &id, MicrovmState::Terminated).await;
    assert_eq!(
        end.state_reason(),
        Some("Container Stopped with Exit Code: 124")
    );
    assert!(end.terminated_at().is_some());
}

#[tokio::test]
async fn the_payload_deadline_in_kill_mode_ends_the_microvm() {
    let h = Harness::start_with(EmulatorConfig {
        deadline_exit_delay: Duration::ZERO,
        ..EmulatorConfig::default()
    })
    .await;
    let kill_in_1s = payload(serde_json::json!({
        "lifecycle": {"timeout_s": 1, "cap_s": 120, "on_timeout": "kill", "auto_resume": false}
    }));
    let out = h
        .client
        .run_microvm()
        .image_identifier(h.image())
        .run_hook_payload(kill_in_1s)
        .send()
        .await
        .unwrap();
    let end = wait_state(&h.client, out.microvm_id(), MicrovmState::Terminated).await;
    assert_eq!(
        end.state_reason(),
        Some("Container Stopped with Exit Code: 124")
    );
}

#[tokio::test]
async fn an_idle_microvm_is_suspended_and_resumed_by_the_next_request() {
    let h = Harness::start_with(EmulatorConfig {
        max_idle_override: Some(Duration::from_millis(500)),
        ..EmulatorConfig::default()
    })
    .await;
    let (id, endpoint) = h.run_ready_with(|r| r.idle_policy(idle_policy(true))).await;
    let token = h.mint(&id, &[8080]).await;
    let ch = channel(&endpoint).await;
    let before = wait_ready(&ch, &token).await;
    // No traffic: the emulator suspends it through /suspend.
    wait_state(&h.client, &id, MicrovmState::Suspended).await;
    // The next request resumes it first (auto-resume), then is served.
    let after = health(&ch, ProxyHeaders::sdk(&token))
        .health(pb::HealthRequest {})
        .await
        .expect("auto-resumed")
        .into_inner();
    assert!(after.resume_generation > before.resume_generation);
    assert_eq!(
        h.emulator.state(&id),
        Some(rayito_emulator::MicrovmState::Running)
    );
}

#[tokio::test]
async fn without_auto_resume_an_idle_microvm_stays_suspended() {
    let h = Harness::start_with(EmulatorConfig {
        max_idle_override: Some(Duration::from_millis(300)),
        ..EmulatorConfig::default()
    })
    .await;
    let (id, endpoint) = h
        .run_ready_with(|r| r.idle_policy(idle_policy(false)))
        .await;
    let token = h.mint(&id, &[8080]).await;
    wait_state(&h.client, &id, MicrovmState::Suspended).await;
    let ch = channel(&endpoint).await;
    let s = health(&ch, ProxyHeaders::sdk(&token))
        .health(pb::HealthRequest {})
        .await
        .unwrap_err();
    assert_eq!(s.code(), tonic::Code::Unavailable, "{s:?}");
    assert_eq!(
        h.emulator.state(&id),
        Some(rayito_emulator::MicrovmState::Suspended)
    );
}

#[tokio::test]
async fn traffic_keeps_a_microvm_awake() {
    let h = Harness::start_with(EmulatorConfig {
        max_idle_override: Some(Duration::from_secs(2)),
        ..EmulatorConfig::default()
    })
    .await;
    let (id, endpoint) = h
        .run_ready_with(|r| r.idle_policy(idle_policy(false)))
        .await;
    let token = h.mint(&id, &[8080]).await;
    let ch = channel(&endpoint).await;
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        health(&ch, ProxyHeaders::sdk(&token))
            .health(pb::HealthRequest {})
            .await
            .expect("still running");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        h.emulator.state(&id),
        Some(rayito_emulator::MicrovmState::Running)
    );
}

#[tokio::test]
async fn simultaneous_runs_with_one_client_token_create_one_microvm() {
    let h = Harness::start().await;
    let run = || {
        h.client
            .run_microvm()
            .image_identifier(h.image())
            .run_hook_payload(payload(serde_json::json!({})))
            .client_token("one-token-for-all")
            .send()
    };
    let (a, b, c) = tokio::join!(run(), run(), run());
    let ids = [a, b, c].map(|r| r.expect("RunMicrovm").microvm_id().to_string());
    assert_eq!(ids[0], ids[1]);
    assert_eq!(ids[1], ids[2]);
    let listed = h.client.list_microvms().send().await.unwrap();
    assert_eq!(listed.items().len(), 1);
}

/// A TLS channel to a bare endpoint on 443, trusting only the emulator's CA.
async fn tls_channel(endpoint: &str, ca_pem: &str) -> Channel {
    Endpoint::from_shared(format!("https://{endpoint}:443"))
        .unwrap()
        .tls_config(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(ca_pem))
                .domain_name(endpoint.to_owned()),
        )
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .connect()
        .await
        .expect("TLS with ALPN h2 on 443")
}

#[tokio::test]
async fn tls_mode_serves_bare_endpoints_on_443_with_the_emulator_ca() {
    let h = Harness::start_with(EmulatorConfig {
        tls: true,
        ..EmulatorConfig::default()
    })
    .await;
    let ca = h.emulator.ca_pem().expect("a CA in TLS mode").to_owned();
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"));
    // The CA is in its file and at /_emulator/ca.pem.
    let path = h.emulator.ca_path().unwrap().to_path_buf();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), ca);
    let served = http_get(h.emulator.addr(), "/_emulator/ca.pem").await;
    assert_eq!(served, ca);

    let (id, endpoint) = h.run_ready().await;
    let ip: Ipv4Addr = endpoint.parse().expect("a bare address, no port");
    assert!(ip.is_loopback() && ip != Ipv4Addr::LOCALHOST, "{ip}");
    let (id2, endpoint2) = h.run_ready().await;
    assert_ne!(endpoint, endpoint2, "one address per MicroVM");

    let token = h.mint(&id, &[8080]).await;
    let ch = tls_channel(&endpoint, &ca).await;
    let ready = wait_ready(&ch, &token).await;
    assert_eq!(ready.sandbox_id, id);
    // The proxy's rules hold behind TLS too.
    let other = h.mint(&id2, &[8080]).await;
    let s = health(&ch, ProxyHeaders::sdk(&other))
        .health(pb::HealthRequest {})
        .await
        .unwrap_err();
    assert_eq!(s.code(), tonic::Code::PermissionDenied);

    // A client that does not trust the CA fails the handshake.
    let untrusting = Endpoint::from_shared(format!("https://{endpoint}:443"))
        .unwrap()
        .tls_config(ClientTlsConfig::new().domain_name(endpoint.clone()))
        .unwrap()
        .connect()
        .await;
    assert!(untrusting.is_err());

    // Terminate closes the listener and frees the address's port.
    h.client
        .terminate_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .unwrap();
    wait_state(&h.client, &id, MicrovmState::Terminated).await;
    let path_after = path.clone();
    drop(h);
    let deadline = Instant::now() + Duration::from_secs(5);
    while path_after.exists() {
        assert!(Instant::now() < deadline, "ca.pem left behind");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A plain HTTP/1.1 GET on the control plane; returns the body.
async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).await.unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

#[test]
fn binary_in_tls_mode_prints_the_ca_path() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rayito-emulator"))
        .args(["--addr", "127.0.0.1:0", "--tls"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("binary starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut got = Vec::new();
    // 9 lines as without TLS (the S3 endpoint's last), then 3 for TLS.
    for _ in 0..12 {
        got.push(lines.next().expect("a line").expect("utf-8"));
    }
    let ca_line = got
        .iter()
        .find_map(|l| l.strip_prefix("ca: "))
        .expect("a ca: line");
    let pem = std::fs::read_to_string(ca_line).expect("the CA file exists");
    assert!(pem.starts_with("-----BEGIN CERTIFICATE-----"));
    assert!(got.contains(&format!(
        "export GRPC_DEFAULT_SSL_ROOTS_FILE_PATH={ca_line}"
    )));
    assert!(
        got.iter()
            .any(|l| l.starts_with("export AWS_ENDPOINT_URL_LAMBDA_MICROVMS=http://127.0.0.1:"))
    );
    // The binary catches SIGTERM once its signal handler is installed,
    // which may be just after it printed: wait for that (the SigCgt mask in
    // /proc), not for luck.
    let handled_by = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !catches_sigterm(child.id()) {
        assert!(
            std::time::Instant::now() < handled_by,
            "SIGTERM never handled"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    assert_eq!(child.wait().unwrap().code(), Some(0));
}

#[test]
fn tls_mode_without_the_right_to_bind_443_says_what_is_needed() {
    // Run the binary without CAP_NET_BIND_SERVICE (as root, dropping it
    // from the bounding set) so that binding 443 fails for real.
    let Ok(setpriv) = which("setpriv") else {
        skip_support::skip(
            "setpriv not found (util-linux; .ci/install-test-deps installs it): cannot drop the capability",
        );
        return;
    };
    let out = Command::new(setpriv)
        .args([
            "--bounding-set",
            "-net_bind_service",
            "--inh-caps",
            "-net_bind_service",
        ])
        .arg(env!("CARGO_BIN_EXE_rayito-emulator"))
        .args(["--addr", "127.0.0.1:0", "--tls"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(0) || stderr.contains("setpriv:") {
        skip_support::skip(format!("could not drop the capability here: {stderr}"));
        return;
    }
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("rayito-emulator: cannot start: "))
        .unwrap_or_else(|| panic!("{stderr}"));
    let msg = line.trim_start_matches("rayito-emulator: cannot start: ");
    let (addr, rest) = msg
        .strip_prefix("TLS mode cannot bind ")
        .and_then(|m| m.split_once(": "))
        .unwrap_or_else(|| panic!("{msg}"));
    assert!(addr.ends_with(":443") && addr.starts_with("127."), "{addr}");
    assert_eq!(
        rest,
        "binding port 443 needs root or CAP_NET_BIND_SERVICE (for example `sudo setcap cap_net_bind_service=+ep <binary>`)"
    );
}

fn which(name: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|d| std::path::Path::new(d).join(name))
        .find(|p| p.is_file())
        .ok_or(())
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
