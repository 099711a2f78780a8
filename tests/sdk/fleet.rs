//! The fleet on the local backend for real (an emulator per test, reached
//! through the real AWS client): the inventory, each action's plan (act or
//! skip per state) that never acts, the confirmation, runs that act on
//! exactly the planned sandboxes, and a failure reported per sandbox.

use crate::sdk_support;

use std::time::Duration;

use rayito::fleet::{BulkAction, BulkFilter, BulkPlan, BulkWill, FleetQuery};
use rayito::{Client, OnTimeout, Sandbox, SandboxError, SandboxState};
use rayito_emulator::{Emulator, Operation};
use sdk_support::{builder, emulator};

async fn client(emu: &Emulator) -> Client {
    builder(emu).client().await.unwrap()
}

/// A sandbox on `emu` that no idle policy pauses while a test runs.
async fn sandbox(emu: &Emulator) -> Sandbox {
    builder(emu).no_idle_policy().create().await.unwrap()
}

/// Three sandboxes on `emu`: one running, one paused, one killed.
async fn running_paused_killed(emu: &Emulator) -> (Sandbox, Sandbox, Sandbox) {
    let running = sandbox(emu).await;
    let paused = sandbox(emu).await;
    let killed = sandbox(emu).await;
    assert!(paused.pause().await.unwrap());
    assert!(killed.kill().await.unwrap());
    (running, paused, killed)
}

/// The plan's decision for `id`: act or skip, and the reason's code.
fn will(plan: &BulkPlan, id: &str) -> (BulkWill, &'static str) {
    let target = plan
        .targets
        .iter()
        .find(|t| t.sandbox_id == id)
        .unwrap_or_else(|| panic!("{id} is in the plan: {plan:?}"));
    (target.will, target.reason_code)
}

fn acted_calls(emu: &Emulator) -> u64 {
    emu.calls(Operation::TerminateMicrovm)
        + emu.calls(Operation::SuspendMicrovm)
        + emu.calls(Operation::ResumeMicrovm)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inventory_lists_sandboxes_with_image_and_end_and_the_images_with_versions() {
    let emu = emulator().await;
    let (running, paused, _killed) = running_paused_killed(&emu).await;
    let fleet = client(&emu).await.fleet();

    let mut all = fleet.sandboxes(FleetQuery::new()).await.unwrap();
    all.sort_by(|a, b| a.sandbox_id.cmp(&b.sandbox_id));
    let mut expected = vec![running.id().to_owned(), paused.id().to_owned()];
    expected.sort();
    let ids: Vec<_> = all.iter().map(|s| s.sandbox_id.clone()).collect();
    assert_eq!(ids, expected, "the ended one is left out");
    for sandbox in &all {
        assert_eq!(sandbox.image_name, "rayito-base");
        assert_eq!(sandbox.image, emu.image_arn("rayito-base"));
        assert!(!sandbox.version.is_empty());
        let started = sandbox.started_at.expect("a start");
        let end = sandbox.end_at.expect("an end");
        assert_eq!(end, started + sandbox.max_duration.unwrap());
        // The seeded image's version asks for 2,048 MiB: the baseline size.
        assert_eq!(sandbox.memory_mib, Some(2048), "{sandbox:?}");
        assert_eq!(
            sandbox.vcpu,
            Some(rayito::Size::Baseline.vcpus()),
            "{sandbox:?}"
        );
    }

    let suspended = fleet
        .sandboxes(FleetQuery::new().states([SandboxState::Suspended]))
        .await
        .unwrap();
    assert_eq!(suspended.len(), 1);
    assert_eq!(suspended[0].sandbox_id, paused.id());
    assert_eq!(suspended[0].state, SandboxState::Suspended);

    // As the dashboard serves it: states as tokens, times as RFC 3339.
    let json = serde_json::to_value(&suspended[0]).unwrap();
    assert_eq!(json["state"], "SUSPENDED");
    assert!(
        json["started_at"].as_str().unwrap().ends_with('Z'),
        "{json}"
    );
    assert!(json["max_duration"].is_u64(), "{json}");

    let images = fleet.images().await.unwrap();
    let base = images
        .iter()
        .find(|i| i.name == "rayito-base")
        .unwrap_or_else(|| panic!("rayito-base is listed: {images:?}"));
    assert_eq!(base.image_arn, emu.image_arn("rayito-base"));
    assert!(base.versions_error.is_none(), "{base:?}");
    assert!(!base.versions.is_empty(), "{base:?}");
    assert!(
        base.versions
            .iter()
            .any(|v| Some(&v.version) == base.latest_active_version.as_ref()),
        "{base:?}"
    );

    assert!(running.kill().await.unwrap());
    assert!(paused.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_actions_plan_acts_or_skips_by_state_and_never_acts() {
    let emu = emulator().await;
    let (running, paused, killed) = running_paused_killed(&emu).await;
    let (r, p, k) = (running.id(), paused.id(), killed.id());
    let fleet = client(&emu).await.fleet();
    let before = acted_calls(&emu);
    let ids = BulkFilter::new().ids([r, p, k, "microvm-nope"]);

    let kill = fleet
        .plan_bulk(BulkAction::Kill, ids.clone())
        .await
        .unwrap();
    assert_eq!(will(&kill, r), (BulkWill::Act, "act"));
    assert_eq!(will(&kill, p), (BulkWill::Act, "act"));
    assert_eq!(will(&kill, k), (BulkWill::Skip, "ended"));
    assert_eq!(will(&kill, "microvm-nope"), (BulkWill::Skip, "not_found"));
    assert_eq!(kill.act_count(), 2);
    assert!(
        kill.confirmation.starts_with("kill-2-"),
        "{}",
        kill.confirmation
    );

    let pause = fleet
        .plan_bulk(BulkAction::Pause, ids.clone())
        .await
        .unwrap();
    assert_eq!(will(&pause, r), (BulkWill::Act, "act"));
    assert_eq!(will(&pause, p), (BulkWill::Skip, "already_paused"));
    assert_eq!(will(&pause, k), (BulkWill::Skip, "ended"));

    let resume = fleet
        .plan_bulk(BulkAction::Resume, ids.clone())
        .await
        .unwrap();
    assert_eq!(will(&resume, r), (BulkWill::Skip, "already_running"));
    assert_eq!(will(&resume, p), (BulkWill::Act, "act"));
    assert_eq!(will(&resume, k), (BulkWill::Skip, "ended"));

    let set = BulkAction::SetTimeout(Duration::from_secs(300));
    let timeout = fleet.plan_bulk(set, ids.clone()).await.unwrap();
    assert_eq!(will(&timeout, r), (BulkWill::Skip, "no_access_token"));
    assert_eq!(will(&timeout, p), (BulkWill::Skip, "not_running"));
    let with_token = fleet
        .clone()
        .access_token(r, running.access_token().clone());
    let timeout = with_token.plan_bulk(set, ids.clone()).await.unwrap();
    assert_eq!(will(&timeout, r), (BulkWill::Act, "act"));

    // Filters: a listing selects by state; ids outside the filter skip.
    let listed = fleet
        .plan_bulk(
            BulkAction::Kill,
            BulkFilter::new().states([SandboxState::Suspended]),
        )
        .await
        .unwrap();
    let targets: Vec<_> = listed
        .targets
        .iter()
        .map(|t| t.sandbox_id.as_str())
        .collect();
    assert_eq!(targets, [p]);
    let filtered = fleet
        .plan_bulk(
            BulkAction::Kill,
            BulkFilter::new()
                .ids([r, p])
                .states([SandboxState::Running]),
        )
        .await
        .unwrap();
    assert_eq!(will(&filtered, r), (BulkWill::Act, "act"));
    assert_eq!(will(&filtered, p), (BulkWill::Skip, "filtered_state"));

    // Refusals before any call.
    let err = fleet
        .plan_bulk(BulkAction::SetTimeout(Duration::ZERO), ids.clone())
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid timeout: set_timeout: 0 s is out of range; pass 1 to 28,800 s"
    );
    let err = fleet
        .plan_bulk(BulkAction::Kill, BulkFilter::new().ids([""]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::InvalidArgument { .. }),
        "{err:?}"
    );

    assert_eq!(acted_calls(&emu), before, "planning never acts");
    assert_eq!(emu.state(r), Some(rayito_emulator::MicrovmState::Running));
    assert!(running.kill().await.unwrap());
    assert!(paused.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_acts_on_exactly_the_planned_sandboxes_after_its_confirmation() {
    let emu = emulator().await;
    let a = sandbox(&emu).await;
    let b = sandbox(&emu).await;
    let untouched = sandbox(&emu).await;
    let client = client(&emu).await;
    let fleet = client.fleet();
    let state = |id: String| {
        let client = client.clone();
        async move { client.get_info_by_id(&id).await.unwrap().state }
    };

    let pause = fleet
        .plan_bulk(BulkAction::Pause, BulkFilter::new().ids([a.id(), b.id()]))
        .await
        .unwrap();
    assert_eq!(pause.act_count(), 2);

    // Another plan's confirmation, or an edited plan, is refused.
    let message = "invalid confirmation: run_bulk: the confirmation is not this plan's (the fleet changed since the dry run, or it is another plan's); plan again, review it, and pass its confirmation";
    let err = fleet
        .run_bulk(&pause, "pause-2-00000000")
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), message);
    let mut edited = pause.clone();
    edited.targets.push(edited.targets[0].clone());
    edited.targets[2].sandbox_id = untouched.id().to_owned();
    let err = fleet
        .run_bulk(&edited, &pause.confirmation)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), message);
    assert_eq!(acted_calls(&emu), 0, "a refused run acts on nothing");

    let outcome = fleet.run_bulk(&pause, &pause.confirmation).await.unwrap();
    assert_eq!(outcome.succeeded(), 2, "{outcome:?}");
    assert!(outcome.results.iter().all(|r| r.changed));
    assert_eq!(state(a.id().to_owned()).await, SandboxState::Suspended);
    assert_eq!(state(b.id().to_owned()).await, SandboxState::Suspended);
    assert_eq!(
        state(untouched.id().to_owned()).await,
        SandboxState::Running
    );

    // A fleet that changed since the dry run: the old confirmation no
    // longer matches the new plan.
    let resume = fleet
        .plan_bulk(
            BulkAction::Resume,
            BulkFilter::new().states([SandboxState::Suspended]),
        )
        .await
        .unwrap();
    assert_eq!(resume.act_count(), 2);
    assert!(untouched.pause().await.unwrap());
    let again = fleet
        .plan_bulk(
            BulkAction::Resume,
            BulkFilter::new().states([SandboxState::Suspended]),
        )
        .await
        .unwrap();
    assert_eq!(again.act_count(), 3);
    let err = fleet
        .run_bulk(&again, &resume.confirmation)
        .await
        .unwrap_err();
    assert_eq!(err.to_string(), message);

    let outcome = fleet.run_bulk(&resume, &resume.confirmation).await.unwrap();
    assert_eq!(outcome.succeeded(), 2, "{outcome:?}");
    assert_eq!(state(a.id().to_owned()).await, SandboxState::Running);
    assert_eq!(state(b.id().to_owned()).await, SandboxState::Running);
    assert_eq!(
        state(untouched.id().to_owned()).await,
        SandboxState::Suspended,
        "not in the plan that ran"
    );

    let kill = fleet
        .plan_bulk(BulkAction::Kill, BulkFilter::new().ids([a.id(), b.id()]))
        .await
        .unwrap();
    let outcome = fleet.run_bulk(&kill, &kill.confirmation).await.unwrap();
    assert_eq!(outcome.succeeded(), 2, "{outcome:?}");
    assert!(state(a.id().to_owned()).await.is_terminal());
    assert!(state(b.id().to_owned()).await.is_terminal());
    let json = serde_json::to_value(&outcome).unwrap();
    assert_eq!(json["action"], "kill");
    assert_eq!(json["results"][0]["ok"], true);
    assert!(untouched.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_killed_between_plan_and_run_fails_alone() {
    let emu = emulator().await;
    let gone = sandbox(&emu).await;
    let kept = sandbox(&emu).await;
    let managed = builder(&emu)
        .no_idle_policy()
        .on_timeout(OnTimeout::Kill)
        .timeout(Duration::from_secs(60))
        .max_lifetime(Duration::from_secs(900))
        .create()
        .await
        .unwrap();
    let client = client(&emu).await;
    let fleet = client
        .fleet()
        .access_token(managed.id(), managed.access_token().clone())
        .access_token(gone.id(), gone.access_token().clone());

    let pause = fleet
        .plan_bulk(
            BulkAction::Pause,
            BulkFilter::new().ids([gone.id(), kept.id()]),
        )
        .await
        .unwrap();
    assert_eq!(pause.act_count(), 2);
    assert!(client.kill_by_id(gone.id()).await.unwrap());
    let outcome = fleet.run_bulk(&pause, &pause.confirmation).await.unwrap();
    assert_eq!(outcome.results.len(), 2);
    let failed = &outcome.results[0];
    assert_eq!(failed.sandbox_id, gone.id());
    assert!(!failed.ok);
    assert_eq!(failed.error_kind.as_deref(), Some("sandbox_not_found"));
    assert!(outcome.results[1].ok, "{outcome:?}");
    assert_eq!(
        client.get_info_by_id(kept.id()).await.unwrap().state,
        SandboxState::Suspended
    );

    // A kill of one that ended since the plan is done without a change.
    let kill = fleet
        .plan_bulk(BulkAction::Kill, BulkFilter::new().ids([kept.id()]))
        .await
        .unwrap();
    assert!(client.kill_by_id(kept.id()).await.unwrap());
    let outcome = fleet.run_bulk(&kill, &kill.confirmation).await.unwrap();
    assert!(
        outcome.results[0].ok && !outcome.results[0].changed,
        "{outcome:?}"
    );

    // Set-timeout reaches the agent with the fleet's token.
    let set = fleet
        .plan_bulk(
            BulkAction::SetTimeout(Duration::from_secs(600)),
            BulkFilter::new().ids([managed.id()]),
        )
        .await
        .unwrap();
    assert_eq!(set.act_count(), 1, "{set:?}");
    let outcome = fleet.run_bulk(&set, &set.confirmation).await.unwrap();
    assert!(outcome.results[0].ok, "{outcome:?}");
    let health = managed.health().await.unwrap();
    let lifecycle = health.lifecycle.expect("a managed lifecycle");
    let deadline = lifecycle.deadline.expect("a deadline");
    // Created with 60 s; moved to 600 s from the run.
    let left = deadline
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    assert!(left > Duration::from_secs(120), "{left:?}");
    assert!(managed.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_go_through_the_clients_events_and_refuse_a_bad_limit() {
    // The embedded local backend: its events API is the pipeline.
    let client = Client::local().await.expect("the local backend");
    let fleet = client.fleet();
    let err = fleet.events(None, 0).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid limit: get_events: limit is 0; pass 1 to 100"
    );
    // Deployed or not (the stack is the backend's, which other tests may
    // deploy), a sandbox that never existed has no events and no error.
    let events = fleet.events(Some("microvm-never-made"), 10).await.unwrap();
    assert!(events.is_empty(), "{events:?}");
    if client.events().status().await.unwrap().is_none() {
        assert!(fleet.events(None, 100).await.unwrap().is_empty());
    }
}
