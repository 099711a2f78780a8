//! The latency profile (docs/local.md, "Latency profile"): off by default;
//! its create, suspend and resume times hold a MicroVM PENDING,
//! SUSPENDING and PENDING meanwhile. Checked by ordering against an
//! emulator without a profile (a MicroVM started later there gets through
//! first), never by a wall-clock bound.

use crate::emulator_support;

use std::time::Duration;

use aws_sdk_lambdamicrovms::types::MicrovmState;
use emulator_support::*;
use rayito_agent::pb;
use rayito_emulator::{EmulatorConfig, LatencyProfile};

/// Longer than any test could wait: a step held for it is seen held.
const HELD: Duration = Duration::from_secs(3600);

async fn slow(profile: LatencyProfile) -> Harness {
    Harness::start_with(EmulatorConfig {
        latency: profile,
        ..EmulatorConfig::default()
    })
    .await
}

async fn state(h: &Harness, id: &str) -> MicrovmState {
    h.client
        .get_microvm()
        .microvm_identifier(id)
        .send()
        .await
        .expect("GetMicrovm")
        .state()
        .clone()
}

async fn suspended(h: &Harness, id: &str) {
    h.client
        .suspend_microvm()
        .microvm_identifier(id)
        .send()
        .await
        .expect("SuspendMicrovm");
    wait_state(&h.client, id, MicrovmState::Suspended).await;
}

#[test]
fn the_profile_is_off_by_default() {
    assert!(EmulatorConfig::default().latency.is_off());
    assert_eq!(EmulatorConfig::default().latency, LatencyProfile::OFF);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_stays_pending_for_the_profiles_create_time() {
    let slow = slow(LatencyProfile::new(HELD, Duration::ZERO, Duration::ZERO)).await;
    let plain = Harness::start().await;
    let out = slow
        .client
        .run_microvm()
        .image_identifier(slow.image())
        .run_hook_payload(payload(serde_json::json!({})))
        .maximum_duration_in_seconds(600)
        .send()
        .await
        .expect("RunMicrovm");
    let id = out.microvm_id().to_owned();
    // Started after it, without a profile: running first.
    plain.run_ready().await;
    assert_eq!(state(&slow, &id).await, MicrovmState::Pending);
    // Its agent answers behind the proxy, but has had no `/run`: not ready.
    let token = slow.mint(&id, &[8080]).await;
    let ch = channel(out.endpoint()).await;
    let health = health(&ch, ProxyHeaders::sdk(&token))
        .health(pb::HealthRequest {})
        .await
        .expect("Health")
        .into_inner();
    assert!(health.sandbox_id.is_empty(), "{health:?}");
    // A terminate is not held up by the wait.
    slow.client
        .terminate_microvm()
        .microvm_identifier(&id)
        .send()
        .await
        .expect("TerminateMicrovm");
    wait_state(&slow.client, &id, MicrovmState::Terminated).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspend_stays_suspending_for_the_profiles_suspend_time() {
    let slow = slow(LatencyProfile::new(Duration::ZERO, HELD, Duration::ZERO)).await;
    let plain = Harness::start().await;
    let (held, _) = slow.run_ready().await;
    let (other, _) = plain.run_ready().await;
    slow.client
        .suspend_microvm()
        .microvm_identifier(&held)
        .send()
        .await
        .expect("SuspendMicrovm");
    suspended(&plain, &other).await;
    assert_eq!(state(&slow, &held).await, MicrovmState::Suspending);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_answers_after_the_profiles_resume_time() {
    let slow = slow(LatencyProfile::new(Duration::ZERO, Duration::ZERO, HELD)).await;
    let plain = Harness::start().await;
    let (held, _) = slow.run_ready().await;
    let (other, _) = plain.run_ready().await;
    suspended(&slow, &held).await;
    suspended(&plain, &other).await;
    let resuming = tokio::spawn(
        slow.client
            .resume_microvm()
            .microvm_identifier(&held)
            .send(),
    );
    // The resume has begun.
    wait_state(&slow.client, &held, MicrovmState::Pending).await;
    plain
        .client
        .resume_microvm()
        .microvm_identifier(&other)
        .send()
        .await
        .expect("ResumeMicrovm");
    assert_eq!(state(&plain, &other).await, MicrovmState::Running);
    assert!(!resuming.is_finished(), "ResumeMicrovm answered early");
    assert_eq!(state(&slow, &held).await, MicrovmState::Pending);
    resuming.abort();
}
