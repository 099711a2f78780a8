//! Terminated MicroVMs stay visible for a bounded time and number (issue
//! 44, item 5): GetMicrovm of a recently terminated id answers TERMINATED
//! as on AWS, and after the retention window, or past the number kept, the
//! emulator forgets them, so that a process creating and killing sandboxes
//! for hours keeps only the live ones and the recent ones.

use crate::emulator_support;

use std::time::Duration;

use emulator_support::*;
use lmv::types::MicrovmState;
use rayito_emulator::EmulatorConfig;

use aws_sdk_lambdamicrovms as lmv;

async fn terminate(h: &Harness, id: &str) {
    h.client
        .terminate_microvm()
        .microvm_identifier(id)
        .send()
        .await
        .expect("TerminateMicrovm");
    wait_state(&h.client, id, MicrovmState::Terminated).await;
}

async fn is_not_found(h: &Harness, id: &str) -> bool {
    match h.client.get_microvm().microvm_identifier(id).send().await {
        Ok(_) => false,
        Err(err) => err.into_service_error().is_resource_not_found_exception(),
    }
}

async fn listed(h: &Harness) -> Vec<String> {
    let out = h.client.list_microvms().send().await.expect("ListMicrovms");
    out.items()
        .iter()
        .map(|m| m.microvm_id().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_microvms_answer_until_the_retention_window_ends() {
    let window = Duration::from_secs(2);
    let h = Harness::start_with(EmulatorConfig {
        terminated_retention: window,
        ..EmulatorConfig::default()
    })
    .await;
    let (live, _) = h.run_ready().await;
    let mut ended = Vec::new();
    for _ in 0..5 {
        let (id, _) = h.run_ready().await;
        terminate(&h, &id).await;
        ended.push(id);
    }
    // Recently terminated: as on AWS, GetMicrovm still answers, TERMINATED
    // with its reason, and ListMicrovms still lists it.
    let out = h
        .client
        .get_microvm()
        .microvm_identifier(&ended[4])
        .send()
        .await
        .expect("a recently terminated MicroVM answers");
    assert_eq!(*out.state(), MicrovmState::Terminated);
    assert_eq!(out.state_reason(), Some("Success."));
    assert!(listed(&h).await.contains(&ended[0]));
    assert_eq!(h.emulator.microvm_ids().len(), 6);

    // Past the window (a sleep longer than it: however slow the machine,
    // the window has ended): only the live one is kept.
    tokio::time::sleep(window + Duration::from_millis(500)).await;
    assert_eq!(h.emulator.microvm_ids(), vec![live.clone()]);
    assert_eq!(listed(&h).await, vec![live.clone()]);
    for id in &ended {
        assert!(is_not_found(&h, id).await, "{id} is forgotten");
    }
    assert_eq!(
        *h.client
            .get_microvm()
            .microvm_identifier(&live)
            .send()
            .await
            .unwrap()
            .state(),
        MicrovmState::Running
    );
    terminate(&h, &live).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_the_kept_number_of_terminated_microvms_stay() {
    let h = Harness::start_with(EmulatorConfig {
        terminated_kept: 3,
        ..EmulatorConfig::default()
    })
    .await;
    let mut ended = Vec::new();
    for i in 0..10 {
        let (id, _) = h
            .run_ready_with(|r| r.client_token(format!("soak-token-{i}")))
            .await;
        terminate(&h, &id).await;
        ended.push(id);
    }
    // Within the (default, 20 min) window, but past the number kept: the
    // three most recently terminated stay, oldest first.
    assert_eq!(h.emulator.microvm_ids(), ended[7..].to_vec());
    assert!(is_not_found(&h, &ended[0]).await);
    let out = h
        .client
        .get_microvm()
        .microvm_identifier(&ended[9])
        .send()
        .await
        .expect("the last terminated answers");
    assert_eq!(*out.state(), MicrovmState::Terminated);
    // The clientToken of a kept one still replays its MicroVM.
    let replay = h
        .client
        .run_microvm()
        .image_identifier(h.image())
        .run_hook_payload(payload(serde_json::json!({})))
        .maximum_duration_in_seconds(600)
        .client_token("soak-token-9")
        .send()
        .await
        .expect("a replay");
    assert_eq!(replay.microvm_id(), ended[9]);
    assert_eq!(h.emulator.microvm_ids().len(), 3, "no new MicroVM");
}
