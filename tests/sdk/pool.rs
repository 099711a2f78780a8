//! The pool of suspended sandboxes against the emulator: fill, take (hit
//! and miss), warm-up steps, a slot gone behind the pool's back, failed
//! warm-ups, close and drain, the file store shared by two pools, and
//! recovery of what a dead process left in its pool file.

use crate::sdk_support;

use std::time::{Duration, Instant};

use rayito::{Pool, PoolConfig, PoolStats, PoolStore, SandboxError, SandboxState, WarmupStep};
use rayito_emulator::{Emulator, MicrovmState, Operation};
use sdk_support::{builder, emulator};

/// A small, quick pool config for tests.
fn config(size: u32) -> PoolConfig {
    PoolConfig::new(size)
        .ready_timeout(Duration::from_secs(60))
        .sweep_interval(Duration::from_secs(5))
        .fill_retry_base(Duration::from_millis(200))
}

/// Waits (bounded) until `check` holds for the pool's stats; returns them.
async fn stats_until(pool: &Pool, what: &str, check: impl Fn(&PoolStats) -> bool) -> PoolStats {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let stats = pool.stats().await.unwrap();
        if check(&stats) {
            return stats;
        }
        assert!(Instant::now() < deadline, "{what}: {stats:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn ids(stats: &PoolStats) -> Vec<String> {
    stats.slots.iter().map(|s| s.sandbox_id.clone()).collect()
}

fn pool(emu: &Emulator, config: PoolConfig) -> Pool {
    builder(emu).pool(config).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_fills_hands_out_parked_sandboxes_and_refills() {
    let emu = emulator().await;
    let pool = pool(
        &emu,
        config(2).warmup(WarmupStep::run("echo warmed > ~/warm.txt")),
    );
    let err = pool.take().await.unwrap_err();
    assert!(matches!(err, SandboxError::PoolClosed { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the pool is not started; call start() first, or create the sandbox without the pool"
    );
    pool.start().await.unwrap();
    pool.start().await.unwrap();
    let stats = stats_until(&pool, "two parked", |s| s.ready == 2).await;
    assert_eq!((stats.size, stats.warming, stats.launched), (2, 0, 2));
    for id in ids(&stats) {
        assert_eq!(
            emu.state(&id),
            Some(MicrovmState::Suspended),
            "{id} is parked suspended"
        );
    }
    let parked = ids(&stats);

    let sbx = pool.take().await.unwrap();
    assert!(
        parked.contains(&sbx.id().to_owned()),
        "a parked sandbox is handed out"
    );
    assert_eq!(emu.state(sbx.id()), Some(MicrovmState::Running));
    // The warm-up ran before it was parked.
    assert_eq!(
        sbx.files()
            .read_to_string("/home/user/warm.txt")
            .await
            .unwrap(),
        "warmed\n"
    );
    let exec = sbx.run_code("1 + 1").await.unwrap();
    assert_eq!(exec.text(), Some("2"));

    // The filler parks a new one in its place.
    let stats = stats_until(&pool, "refilled", |s| s.ready == 2).await;
    assert_eq!((stats.takes, stats.hits, stats.misses), (1, 1, 0));
    assert!(!ids(&stats).contains(&sbx.id().to_owned()));
    sbx.kill().await.unwrap();

    pool.close(true).await.unwrap();
    for id in ids(&stats) {
        assert!(
            matches!(
                emu.state(&id),
                Some(MicrovmState::Terminated) | Some(MicrovmState::Terminating) | None
            ),
            "{id} is terminated by the drain"
        );
    }
    let err = pool.take().await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "the pool is closed; create the sandbox without the pool, or use another pool"
    );
    assert!(matches!(
        pool.start().await.unwrap_err(),
        SandboxError::PoolClosed { .. }
    ));
    pool.close(true).await.unwrap();
}

/// With no parked slot, a take creates a sandbox the normal way; a slot
/// terminated behind the pool's back is counted lost and the take is
/// served by a create.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_without_a_usable_slot_creates_one() {
    let emu = emulator().await;
    let pool = pool(&emu, config(1).fill_concurrency(1));
    pool.start().await.unwrap();
    let stats = stats_until(&pool, "one parked", |s| s.ready == 1).await;
    let parked = ids(&stats).remove(0);
    // Gone behind the pool's back.
    let client = rayito::Client::builder()
        .aws(sdk_support::aws(&emu))
        .build()
        .await
        .unwrap();
    assert!(client.kill_by_id(&parked).await.unwrap());
    let sbx = pool.take().await.unwrap();
    assert_ne!(sbx.id(), parked);
    assert_eq!(sbx.run_code("40 + 2").await.unwrap().text(), Some("42"));
    let stats = pool.stats().await.unwrap();
    assert_eq!(
        (stats.hits, stats.misses, stats.lost),
        (0, 1, 1),
        "{stats:?}"
    );
    sbx.kill().await.unwrap();
    pool.close(true).await.unwrap();
}

/// A warm-up step that fails terminates its sandbox and the filler backs
/// off; takes still get sandboxes (by create).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_warm_up_is_terminated_and_never_parked() {
    let emu = emulator().await;
    let pool = pool(&emu, config(1).warmup(WarmupStep::run("exit 3")));
    pool.start().await.unwrap();
    let stats = stats_until(&pool, "two failures", |s| s.failed >= 2).await;
    assert_eq!(stats.ready, 0);
    let sbx = pool.take().await.unwrap();
    assert_eq!(sbx.get_info().await.unwrap().state, SandboxState::Running);
    assert_eq!(pool.stats().await.unwrap().misses, 1);
    pool.close(true).await.unwrap();
    // Every sandbox the failed warm-ups made is gone; only the taken one runs.
    let running: Vec<_> = emu
        .microvm_ids()
        .into_iter()
        .filter(|id| emu.state(id) == Some(MicrovmState::Running))
        .collect();
    assert_eq!(running, vec![sbx.id().to_owned()]);
    sbx.kill().await.unwrap();
}

/// Two pools on one pool file (as two processes would share it) hand out
/// each parked sandbox once; a memory pool refuses to close without a
/// drain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_sharing_a_file_never_hand_out_one_sandbox_twice() {
    let emu = emulator().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pool.json");
    let a = pool(&emu, config(2).store(PoolStore::file(&file)));
    let b = pool(&emu, config(2).store(PoolStore::file(&file)));
    a.start().await.unwrap();
    stats_until(&a, "two parked", |s| s.ready == 2).await;
    b.start().await.unwrap();
    let mut taken = Vec::new();
    for p in [&a, &b, &a, &b] {
        taken.push(p.take_within(Duration::from_secs(60)).await.unwrap());
    }
    let mut seen: Vec<_> = taken.iter().map(|s| s.id().to_owned()).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 4, "every take got its own sandbox");
    for s in &taken {
        s.kill().await.unwrap();
    }
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.starts_with("{\n  \"schema\": \"rayito.pool/1\""),
        "{text}"
    );
    a.close(false).await.unwrap();
    b.close(true).await.unwrap();

    let memory = pool(&emu, config(1));
    let err = memory.close(false).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid drain: a pool whose slots live in memory must drain when it closes, or its parked sandboxes are lost; close with drain, or use a file store"
    );
    memory.close(true).await.unwrap();
}

/// A take resumes its parked sandbox, mints its proxy token and finds
/// its endpoint (one call of each, in flight together), and asks for
/// nothing else; then the sandbox answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_resumes_mints_and_finds_its_slot_once_each() {
    let emu = emulator().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pool.json");
    let filler = pool(&emu, config(1).store(PoolStore::file(&file)));
    filler.start().await.unwrap();
    let parked = ids(&stats_until(&filler, "one parked", |s| s.ready == 1).await);
    // Nothing else calls the emulator from here: no filler, no sweep.
    filler.close(false).await.unwrap();
    let taker = pool(&emu, config(1).store(PoolStore::file(&file)).filler(false));
    taker.start().await.unwrap();
    let calls = |op| emu.calls(op);
    let before = [
        calls(Operation::GetMicrovm),
        calls(Operation::ResumeMicrovm),
        calls(Operation::CreateMicrovmAuthToken),
    ];
    let sbx = taker.take().await.unwrap();
    let after = [
        calls(Operation::GetMicrovm),
        calls(Operation::ResumeMicrovm),
        calls(Operation::CreateMicrovmAuthToken),
    ];
    assert_eq!(
        parked,
        [sbx.id().to_owned()],
        "the parked one is handed out"
    );
    assert_eq!(
        [
            after[0] - before[0],
            after[1] - before[1],
            after[2] - before[2]
        ],
        [1, 1, 1],
        "GetMicrovm, ResumeMicrovm, CreateMicrovmAuthToken of one take"
    );
    assert_eq!(emu.state(sbx.id()), Some(MicrovmState::Running));
    assert_eq!(sbx.run_code("1 + 1").await.unwrap().text(), Some("2"));
    let stats = taker.stats().await.unwrap();
    assert_eq!((stats.hits, stats.misses, stats.lost), (1, 0, 0));
    sbx.kill().await.unwrap();
    taker.close(true).await.unwrap();
}

/// What a killed process left in its pool file: its parked sandbox is
/// adopted (handed out), its warming one is reaped once its lease ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_process_adopts_parked_slots_and_reaps_expired_warming_ones() {
    let emu = emulator().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pool.json");
    let image = emu.image_arn("rayito-base");
    let parked = builder(&emu).create().await.unwrap();
    assert!(parked.pause().await.unwrap());
    let warming = builder(&emu).create().await.unwrap();
    let slot = |sbx: &rayito::Sandbox, state: &str, extra: &str| {
        format!(
            r#"{{"sandbox_id":"{}","access_token":"{}","endpoint":"x","template":"{image}","template_version":"1",
            "started_at":"2026-12-01T00:00:00Z","maximum_duration_seconds":{},"region":"us-east-1","state":"{state}",
            "idle":{{"max_idle_seconds":300,"suspended_duration_seconds":3000,"auto_resume":true}},
            "execution_role_arn":null,"ingress":[],"egress":[],"parked_at":null{extra}}}"#,
            sbx.id(),
            sbx.access_token().expose(),
            // Expiring in about two hours from now.
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs()
                - 1_796_083_200
                + 7_200,
        )
    };
    std::fs::write(
        &file,
        format!(
            r#"{{"schema":"rayito.pool/1","slots":[{},{}]}}"#,
            slot(&parked, "ready", ""),
            slot(
                &warming,
                "warming",
                r#","owner":"dead-host:1:0","lease_until":"2026-01-01T00:00:00Z""#
            )
        ),
    )
    .unwrap();
    // As the pool itself writes it: the store refuses a file other users
    // may read (it holds access tokens).
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let pool = pool(
        &emu,
        config(1)
            .store(PoolStore::file(&file))
            .min_remaining(Duration::from_secs(600)),
    );
    pool.start().await.unwrap();
    let stats = stats_until(&pool, "the dead owner's warming slot reaped", |s| {
        s.lost == 1
    })
    .await;
    assert!(!ids(&stats).contains(&warming.id().to_owned()));
    assert!(matches!(
        emu.state(warming.id()),
        Some(MicrovmState::Terminated) | Some(MicrovmState::Terminating) | None
    ));
    let taken = pool.take().await.unwrap();
    assert_eq!(taken.id(), parked.id(), "the parked slot is adopted");
    assert_eq!(pool.stats().await.unwrap().hits, 1);
    taken.kill().await.unwrap();
    pool.close(true).await.unwrap();
}

/// `persist` on a pool's builder: a pooled sandbox is made before anyone
/// names it, so the pool refuses the prefix before any I/O. Here and not
/// in either feature's unit tests: it names both.
#[test]
fn a_pool_refuses_persist() {
    let err = rayito::Sandbox::builder()
        .persist(rayito::persistence::S3Prefix::new("bkt").name("a"))
        .pool(PoolConfig::new(1))
        .expect_err("not with a pool");
    assert_eq!(
        err.to_string(),
        "invalid persist: a pooled sandbox is made before anyone names it; bind a persistence prefix with persistence() calls on the taken sandbox instead"
    );
}
