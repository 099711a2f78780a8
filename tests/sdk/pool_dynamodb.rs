//! The pool with its slots in DynamoDB (a moto server on loopback) and
//! its sandboxes on the emulator: two pools sharing one table, as two
//! hosts would, never hand out one sandbox twice; a new pool adopts what
//! a dead host parked and reaps what it left warming; a missing table
//! fails the start with the store's pinned message.

use crate::sdk_support;

use std::time::{Duration, Instant};

use rayito::{AwsOptions, Pool, PoolConfig, PoolStats, PoolStore, SandboxError};
use rayito_emulator::MicrovmState;
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

/// Puts `item` (DynamoDB JSON) into `table` on `moto`, as another host's
/// pool process would have written it.
fn put_item(moto: &MotoServer, table: &str, item: &str) {
    let (status, answer) = sdk_support::moto::http_post(
        moto.port(),
        "/",
        &[
            ("X-Amz-Target", "DynamoDB_20120810.PutItem"),
            ("Content-Type", "application/x-amz-json-1.0"),
            (
                "Authorization",
                "AWS4-HMAC-SHA256 Credential=AKIDMOTOTEST/20260101/us-east-1/dynamodb/aws4_request, \
                 SignedHeaders=host, Signature=0",
            ),
        ],
        format!(r#"{{"TableName":"{table}","Item":{item}}}"#).as_bytes(),
    )
    .expect("moto's DynamoDB answers");
    assert_eq!(status, 200, "PutItem: {answer}");
}

/// What a killed process on another host left in the table: its parked
/// sandbox is adopted (handed out), its warming one is reaped once its
/// lease ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_pool_adopts_parked_slots_and_reaps_expired_warming_ones() {
    let Some(moto) = MotoServer::start() else {
        return;
    };
    let emu = emulator().await;
    PoolStore::create_dynamodb_table("rayito-pools", dynamodb(&moto))
        .await
        .unwrap();
    let image = emu.image_arn("rayito-base");
    let parked = builder(&emu).create().await.unwrap();
    assert!(parked.pause().await.unwrap());
    let warming = builder(&emu).create().await.unwrap();
    // Expiring in about two hours from now.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let started = 1_796_083_200u64;
    let max = now - started + 7_200;
    let item = |sbx: &rayito::Sandbox, state: &str, extra: &str| {
        let record = format!(
            r#"{{"sandbox_id":"{}","access_token":"{}","endpoint":"x","template":"{image}","template_version":"1","started_at":"2026-12-01T00:00:00Z","maximum_duration_seconds":{max},"region":"us-east-1","state":"{state}","idle":{{"max_idle_seconds":300,"suspended_duration_seconds":3000,"auto_resume":true}},"execution_role_arn":null,"ingress":[],"egress":[],"parked_at":null}}"#,
            sbx.id(),
            sbx.access_token().expose(),
        );
        let record = serde_json::Value::String(record).to_string();
        format!(
            r#"{{"pk":{{"S":"pool#shared"}},"sk":{{"S":"slot#{}"}},"state":{{"S":"{state}"}},"image_arn":{{"S":"{image}"}},"expires_at":{{"N":"{}"}},"ttl":{{"N":"{}"}},"record":{{"S":{record}}}{extra}}}"#,
            sbx.id(),
            started + max,
            started + max + 3_600,
        )
    };
    put_item(&moto, "rayito-pools", &item(&parked, "ready", ""));
    put_item(
        &moto,
        "rayito-pools",
        &item(
            &warming,
            "warming",
            r#","owner":{"S":"dead-host:1:0"},"lease_until":{"N":"1767225600"}"#,
        ),
    );
    let pool = builder(&emu)
        .pool(
            config(
                1,
                PoolStore::dynamodb_with("rayito-pools", "shared", dynamodb(&moto)),
            )
            .min_remaining(Duration::from_secs(600)),
        )
        .unwrap();
    pool.start().await.unwrap();
    // The counter and the store are two reads of stats, not one
    // transaction: wait until both show the reaped slot.
    let warming_id = warming.id().to_owned();
    let stats = stats_until(&pool, "the dead owner's warming slot reaped", |s| {
        s.lost == 1 && !s.slots.iter().any(|slot| slot.sandbox_id == warming_id)
    })
    .await;
    assert!(
        !stats.slots.iter().any(|s| s.sandbox_id == warming.id()),
        "{stats:?}"
    );
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
