//! The pool with its slots in DynamoDB (a moto server on loopback) and
//! its sandboxes on the emulator: two pools sharing one table, as two
//! hosts would, never hand out one sandbox twice; a missing table fails
//! the start with the store's pinned message.

mod sdk_support;

use std::time::{Duration, Instant};

use rayito::{AwsOptions, Pool, PoolConfig, PoolStats, PoolStore, SandboxError};
use sdk_support::moto::MotoServer;
use sdk_support::{builder, emulator};

fn config(size: u32, store: PoolStore) -> PoolConfig {
    PoolConfig::new(size)
        .ready_timeout(Duration::from_secs(60))
        .sweep_interval(Duration::from_secs(5))
        .fill_retry_base(Duration::from_millis(200))
        .store(store)
}

/// moto's DynamoDB, with credentials it accepts.
fn dynamodb(moto: &MotoServer) -> AwsOptions {
    AwsOptions::new()
        .endpoint_url(moto.endpoint_url())
        .region("us-east-1")
        .static_credentials("AKIDMOTOTEST", "moto-test-secret")
}

async fn stats_until(pool: &Pool, what: &str, check: impl Fn(&PoolStats) -> bool) -> PoolStats {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stats = pool.stats().await.unwrap();
        if check(&stats) {
            return stats;
        }
        assert!(Instant::now() < deadline, "{what}: {stats:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_sharing_a_dynamodb_table_hand_out_distinct_sandboxes() {
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let emu = emulator().await;
    assert!(
        PoolStore::create_dynamodb_table("rayito-pools", dynamodb(&moto))
            .await
            .unwrap()
    );
    let store = || PoolStore::dynamodb_with("rayito-pools", "shared", dynamodb(&moto));
    assert!(store().is_persistent());
    let a = builder(&emu).pool(config(2, store())).unwrap();
    let b = builder(&emu).pool(config(2, store())).unwrap();
    a.start().await.unwrap();
    let parked = stats_until(&a, "two parked", |s| s.ready >= 2).await;
    b.start().await.unwrap();
    // b sees what a parked: the slots live in the table.
    assert!(b.stats().await.unwrap().ready >= 2);
    let mut taken = Vec::new();
    for p in [&a, &b, &a, &b] {
        taken.push(p.take_within(Duration::from_secs(30)).await.unwrap());
    }
    let mut seen: Vec<_> = taken.iter().map(|s| s.id().to_owned()).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 4, "every take got its own sandbox");
    let hits = a.stats().await.unwrap().hits + b.stats().await.unwrap().hits;
    assert!(hits >= 2, "parked sandboxes served takes");
    assert!(
        parked
            .slots
            .iter()
            .filter(|s| s.state == rayito::SlotState::Ready)
            .all(|s| seen.contains(&s.sandbox_id)),
        "the first two parked were handed out"
    );
    for s in &taken {
        s.kill().await.unwrap();
    }
    a.close(false).await.unwrap();
    b.close(true).await.unwrap();
    assert_eq!(
        b.stats().await.unwrap().ready,
        0,
        "the drain emptied the table"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_on_a_missing_table_fails_to_start() {
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let emu = emulator().await;
    let store = PoolStore::dynamodb_with("no-such-table", "p", dynamodb(&moto));
    let pool = builder(&emu).pool(config(1, store)).unwrap();
    let err = pool.start().await.unwrap_err();
    assert!(
        matches!(err, SandboxError::InvalidArgument { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "invalid store: the pool's DynamoDB table does not exist; create it (PoolStore::create_dynamodb_table) or name another table"
    );
}
