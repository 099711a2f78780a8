//! Pause, resume, connect to a paused sandbox, kill and info by id, list
//! (with its metadata filter over several pages) and the proxy-token
//! refresher, through the real AWS client against the emulator.

use crate::sdk_support;

use std::collections::BTreeSet;
use std::time::Duration;

use futures_util::TryStreamExt as _;
use rayito::{ListQuery, SandboxError, SandboxState};
use rayito_emulator::{MicrovmState, Operation};
use sdk_support::{builder, emulator};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_then_resume_keeps_the_files_and_bumps_the_generation() {
    let emu = emulator().await;
    let sbx = builder(&emu).no_idle_policy().create().await.unwrap();
    sbx.files()
        .write("/tmp/kept.txt", "still here")
        .await
        .unwrap();
    let generation = sbx.resume_generation();

    assert!(sbx.pause().await.unwrap(), "the first pause suspends");
    assert_eq!(emu.state(sbx.id()), Some(MicrovmState::Suspended));
    assert_eq!(sbx.get_info().await.unwrap().state, SandboxState::Suspended);
    assert!(!sbx.pause().await.unwrap(), "already suspended: false");

    sbx.resume().await.unwrap();
    assert_eq!(emu.state(sbx.id()), Some(MicrovmState::Running));
    assert_eq!(sbx.resume_generation(), generation + 1);
    assert_eq!(
        sbx.files().read_to_string("/tmp/kept.txt").await.unwrap(),
        "still here"
    );
    assert!(sbx.kill().await.unwrap());
    let err = sbx.pause().await.unwrap_err();
    assert!(matches!(err, SandboxError::Sandbox { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the sandbox handle is closed; create a new sandbox or connect to it again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_resumes_a_sandbox_paused_without_auto_resume() {
    let emu = emulator().await;
    let sbx = builder(&emu).no_idle_policy().create().await.unwrap();
    let generation = sbx.resume_generation();
    assert!(sbx.pause().await.unwrap());

    let again = builder(&emu)
        .connect(sbx.id(), sbx.access_token().clone())
        .await
        .expect("connect resumes it");
    assert_eq!(emu.state(sbx.id()), Some(MicrovmState::Running));
    assert_eq!(again.resume_generation(), generation + 1);
    assert_eq!(emu.calls(Operation::ResumeMicrovm), 1);
    let out = again.commands().run("echo awake").await.unwrap();
    assert_eq!(out.stdout, "awake\n");
    assert!(again.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_by_id_waits_for_running_and_by_id_calls_need_no_handle() {
    let emu = emulator().await;
    let sbx = builder(&emu).no_idle_policy().create().await.unwrap();
    let id = sbx.id().to_owned();
    assert!(sbx.pause().await.unwrap());
    drop(sbx);

    builder(&emu)
        .client()
        .await
        .unwrap()
        .resume_by_id(&id)
        .await
        .unwrap();
    assert_eq!(emu.state(&id), Some(MicrovmState::Running));
    let info = builder(&emu)
        .client()
        .await
        .unwrap()
        .get_info_by_id(&id)
        .await
        .unwrap();
    assert_eq!(info.state, SandboxState::Running);
    assert_eq!(info.sandbox_id, id);

    assert!(
        builder(&emu)
            .client()
            .await
            .unwrap()
            .kill_by_id(&id)
            .await
            .unwrap()
    );
    let info = builder(&emu)
        .client()
        .await
        .unwrap()
        .get_info_by_id(&id)
        .await
        .unwrap();
    assert!(info.state.is_terminal(), "{:?}", info.state);
    let err = builder(&emu)
        .client()
        .await
        .unwrap()
        .resume_by_id(&id)
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::SandboxNotFound { .. }),
        "{err:?}"
    );

    assert!(
        !builder(&emu)
            .client()
            .await
            .unwrap()
            .kill_by_id("microvm-nope")
            .await
            .unwrap(),
        "an unknown id is not found: false"
    );
    let err = builder(&emu)
        .client()
        .await
        .unwrap()
        .get_info_by_id("")
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid sandbox_id: a sandbox id must be 1 to 256 characters; pass the id the sandbox was created with"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_with_a_metadata_filter_returns_exactly_the_matches_over_several_pages() {
    let emu = emulator().await;
    let mut wanted = BTreeSet::new();
    let mut all = BTreeSet::new();
    let mut handles = Vec::new();
    for i in 0..5 {
        let team = if i % 2 == 0 { "red" } else { "blue" };
        let sbx = builder(&emu)
            .metadata([("team", team), ("n", &i.to_string())])
            .create()
            .await
            .unwrap();
        if team == "red" {
            wanted.insert(sbx.id().to_owned());
        }
        all.insert(sbx.id().to_owned());
        handles.push(sbx);
    }
    // One more, ended: listed by the control plane, left out by default.
    let ended = builder(&emu).create().await.unwrap();
    assert!(ended.kill().await.unwrap());

    let listed: Vec<_> = builder(&emu)
        .client()
        .await
        .unwrap()
        .list(ListQuery::new().page_size(2))
        .try_collect()
        .await
        .unwrap();
    let ids: BTreeSet<_> = listed.iter().map(|s| s.sandbox_id.clone()).collect();
    assert_eq!(ids, all);
    assert!(listed.iter().all(|s| s.metadata.is_none()));
    assert!(
        listed
            .iter()
            .all(|s| s.template == emu.image_arn("rayito-base"))
    );

    let before = emu.calls(Operation::ListMicrovms);
    let red: Vec<_> = builder(&emu)
        .client()
        .await
        .unwrap()
        .list(ListQuery::new().page_size(2).metadata([("team", "red")]))
        .try_collect()
        .await
        .unwrap();
    // 6 VMs in pages of 2: three ListMicrovms calls.
    assert_eq!(emu.calls(Operation::ListMicrovms) - before, 3);
    let ids: BTreeSet<_> = red.iter().map(|s| s.sandbox_id.clone()).collect();
    assert_eq!(ids, wanted);
    for summary in &red {
        let metadata = summary.metadata.as_ref().expect("probed");
        assert_eq!(metadata.get("team").map(String::as_str), Some("red"));
        assert_eq!(summary.state, SandboxState::Running);
    }
    let none: Vec<_> = builder(&emu)
        .client()
        .await
        .unwrap()
        .list(ListQuery::new().metadata([("team", "red"), ("n", "1")]))
        .try_collect()
        .await
        .unwrap();
    assert!(none.is_empty());

    for sbx in handles {
        assert!(sbx.kill().await.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_metadata_probe_is_an_error_not_a_silent_drop() {
    let emu = emulator().await;
    let sbx = builder(&emu)
        .metadata([("team", "red")])
        .create()
        .await
        .unwrap();
    assert!(emu.faults().proxy_status(1, 502));
    let err = builder(&emu)
        .client()
        .await
        .unwrap()
        .list(ListQuery::new().metadata([("team", "red")]))
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err();
    assert!(matches!(err, SandboxError::Sandbox { .. }), "{err:?}");
    assert_eq!(err.meta().http_status(), Some(502));
    assert_eq!(
        err.to_string(),
        "the AWS proxy could not reach the sandbox for health (http 502); retry, or check that the sandbox is still running"
    );
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_refuses_bad_queries_before_any_call() {
    let emu = emulator().await;
    let err = builder(&emu)
        .client()
        .await
        .unwrap()
        .list(
            ListQuery::new()
                .metadata([("team", "red")])
                .states([SandboxState::Suspended]),
        )
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid states: a metadata filter only considers RUNNING sandboxes (probing a suspended one would wake it); ask for RUNNING only, or drop the metadata filter"
    );
    let err = builder(&emu)
        .client()
        .await
        .unwrap()
        .list(ListQuery::new().page_size(51))
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid page_size: a list page holds 1 to 50 sandboxes; pass a page size in that range"
    );
    assert_eq!(emu.calls(Operation::ListMicrovms), 0);
}

/// Waits until `emu` has served at least `n` CreateMicrovmAuthToken calls.
async fn wait_for_mints(emu: &rayito_emulator::Emulator, n: u64) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while emu.calls(Operation::CreateMicrovmAuthToken) < n {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the refresher re-mints");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_refresher_re_mints_and_stops_with_the_last_handle_or_kill() {
    let emu = emulator().await;
    let every = Duration::from_millis(50);
    let sbx = builder(&emu)
        .proxy_token_refresh(every)
        .create()
        .await
        .unwrap();
    let id = sbx.id().to_owned();
    let at_start = emu.calls(Operation::CreateMicrovmAuthToken);
    wait_for_mints(&emu, at_start + 3).await;
    // Calls still work with the re-minted tokens.
    assert_eq!(sbx.commands().run("echo ok").await.unwrap().stdout, "ok\n");

    // A clone keeps it going; dropping the last handle stops it.
    let clone = sbx.clone();
    drop(sbx);
    let n = emu.calls(Operation::CreateMicrovmAuthToken);
    wait_for_mints(&emu, n + 2).await;
    drop(clone);
    // An abort takes effect at the task's next await point: let it land.
    tokio::time::sleep(every * 2).await;
    let after_drop = emu.calls(Operation::CreateMicrovmAuthToken);
    tokio::time::sleep(every * 10).await;
    assert_eq!(emu.calls(Operation::CreateMicrovmAuthToken), after_drop);

    let sbx = builder(&emu)
        .proxy_token_refresh(every)
        .create()
        .await
        .unwrap();
    let n = emu.calls(Operation::CreateMicrovmAuthToken);
    wait_for_mints(&emu, n + 2).await;
    assert!(sbx.kill().await.unwrap());
    tokio::time::sleep(every * 2).await;
    let after_kill = emu.calls(Operation::CreateMicrovmAuthToken);
    tokio::time::sleep(every * 10).await;
    assert_eq!(emu.calls(Operation::CreateMicrovmAuthToken), after_kill);
    assert!(
        builder(&emu)
            .client()
            .await
            .unwrap()
            .kill_by_id(&id)
            .await
            .unwrap()
    );
}

/// Every future and stream of the lifecycle API is `Send` (compile time).
#[allow(dead_code, clippy::let_underscore_future)]
fn lifecycle_futures_and_streams_are_send(sbx: rayito::Sandbox, b: rayito::SandboxBuilder) {
    fn send<T: Send>(_: T) {}
    send(sbx.pause());
    send(sbx.resume());
    send(rayito::Sandbox::kill_by_id("id"));
    send(rayito::Sandbox::get_info_by_id("id"));
    send(rayito::Sandbox::resume_by_id("id"));
    send(rayito::Sandbox::list(ListQuery::new()));
    send(b.client());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pacing_is_shared_by_every_handle_of_one_client_configuration() {
    use rayito::Pacing;
    use std::time::Instant;

    let emu = emulator().await;
    let pacing = Pacing::new().get_microvm(20);
    // Two handles from two builders with the same settings share buckets.
    let a = builder(&emu).pacing(pacing).create().await.unwrap();
    let b = builder(&emu).pacing(pacing).create().await.unwrap();
    // Let the GetMicrovm bucket fill up (burst: 20).
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let before = emu.calls(Operation::GetMicrovm);
    let started = Instant::now();
    let calls = (0..20).flat_map(|_| [a.get_info(), b.get_info()]);
    for info in futures_util::future::join_all(calls).await {
        info.unwrap();
    }
    // 40 calls, 20 at once and 20 more at 20/s: about one second. Each
    // handle alone would have stayed within its own burst.
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(850), "{elapsed:?}");
    assert_eq!(emu.calls(Operation::GetMicrovm) - before, 40);
    assert!(a.kill().await.unwrap());
    assert!(b.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_payload_limit_counts_non_ascii_as_the_reference_does() {
    let emu = emulator().await;
    // 1,000 'é' are 1,000 characters, but 6,000 once escaped as \u00e9.
    let err = builder(&emu)
        .metadata([("note", "é".repeat(1_000))])
        .create()
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid metadata: the run payload is 6,149 characters, above the limit of 4,096; pass fewer or shorter envs and metadata"
    );
    assert_eq!(emu.calls(Operation::RunMicrovm), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_at_a_short_timeout_without_an_idle_policy_launches() {
    let emu = emulator().await;
    let sbx = builder(&emu)
        .timeout(Duration::from_secs(60))
        .on_timeout(rayito::OnTimeout::Pause)
        .create()
        .await
        .expect("an idle window is derived from the timeout");
    let info = sbx.get_info().await.unwrap();
    assert_eq!(info.max_duration, Duration::from_secs(120));
    // The managed lifecycle is on: the timeout can be moved.
    sbx.set_timeout(Duration::from_secs(30)).await.unwrap();
    assert!(sbx.kill().await.unwrap());
}
