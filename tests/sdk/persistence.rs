//! Persistence end to end on the local backend: the emulator runs the
//! agent, gives role-bearing sandboxes its S3 endpoint (s3s-fs) and key,
//! and the SDK checkpoints, restores, creates with a name and
//! reincarnates. No error carries the bucket or a key.

use crate::sdk_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use aws_sdk_s3 as s3;
use rayito::error::{ErrorKind, PersistenceCode};
use rayito::persistence::{CheckpointOptions, RestoreOptions, S3Prefix};
use rayito::{Sandbox, SandboxBuilder, SandboxError};
use rayito_emulator::Emulator;

const BUCKET: &str = "rayito-ckpt-sdk";
const ROLE: &str = "arn:aws:iam::000000000000:role/rayito-sandbox";

fn s3_client(emu: &Emulator) -> s3::Client {
    sdk_support::moto_seed::s3_client(&emu.s3_endpoint_url(), emu.access_key())
}

/// An emulator with the checkpoint bucket.
async fn emulator() -> (Emulator, s3::Client) {
    let emu = sdk_support::emulator().await;
    let s3 = s3_client(&emu);
    s3.create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("bucket");
    (emu, s3)
}

fn with_role(emu: &Emulator) -> SandboxBuilder {
    sdk_support::builder(emu).execution_role_arn(ROLE)
}

/// No error of persistence may carry the bucket or a key.
fn assert_no_location(err: &SandboxError) {
    let all = format!("{err} {err:?} {}", err.to_wire());
    for secret in [BUCKET, "rayito-home/", "s3://"] {
        assert!(!all.contains(secret), "{secret} in {all}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_restores_into_another_sandbox() {
    let (emu, s3) = emulator().await;
    let a = with_role(&emu).create().await.expect("sandbox a");
    a.files()
        .write("notes/a.txt", "hello from a")
        .await
        .unwrap();
    let at = S3Prefix::new(BUCKET).name("shared");
    let events = Arc::new(AtomicU32::new(0));
    let seen = events.clone();
    let done = a
        .persistence()
        .checkpoint(
            CheckpointOptions::new(at.clone())
                .exclude("scratch")
                .on_progress(move |_| {
                    seen.fetch_add(1, Ordering::Relaxed);
                }),
        )
        .await
        .expect("checkpoint");
    assert!(done.files >= 1, "{done:?}");
    assert_eq!(done.sha256.len(), 64);
    assert!(done.archive_bytes > 0);
    assert_eq!(
        (
            done.bucket.as_str(),
            done.key_prefix.as_str(),
            done.uri.as_str()
        ),
        (
            BUCKET,
            "rayito-home/shared",
            "s3://rayito-ckpt-sdk/rayito-home/shared/"
        )
    );
    // The manifest is there, written last.
    s3.head_object()
        .bucket(BUCKET)
        .key("rayito-home/shared/manifest.json")
        .send()
        .await
        .expect("the manifest");

    let b = with_role(&emu).create().await.expect("sandbox b");
    let restored = b
        .persistence()
        .restore(RestoreOptions::new(at).timeout(Duration::from_secs(120)))
        .await
        .expect("restore");
    assert_eq!(restored.sha256, done.sha256);
    assert_eq!(
        b.files().read("notes/a.txt").await.unwrap(),
        b"hello from a"
    );
    a.kill().await.unwrap();
    b.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_with_a_name_restores_its_second_life() {
    let (emu, _s3) = emulator().await;
    let at = S3Prefix::new(BUCKET).name("alice");
    // First life: no checkpoint yet, and that is fine.
    let first = with_role(&emu)
        .persist(at.clone())
        .create()
        .await
        .expect("first life");
    assert_eq!(
        first
            .persist_prefix()
            .and_then(S3Prefix::key_prefix)
            .as_deref(),
        Some("rayito-home/alice")
    );
    first
        .files()
        .write("work/state.json", "{\"step\":3}")
        .await
        .unwrap();
    first
        .persistence()
        .checkpoint(CheckpointOptions::default())
        .await
        .expect("checkpoint to the bound prefix");
    first.kill().await.unwrap();

    let second = with_role(&emu)
        .persist(at)
        .create()
        .await
        .expect("second life");
    assert_eq!(
        second.files().read("work/state.json").await.unwrap(),
        b"{\"step\":3}"
    );
    second.kill().await.unwrap();

    // Without a name the prefix binds to the sandbox id and nothing is
    // restored.
    let unnamed = with_role(&emu)
        .persist(S3Prefix::new(BUCKET))
        .create()
        .await
        .unwrap();
    assert_eq!(
        unnamed
            .persist_prefix()
            .and_then(|p| p.name.clone())
            .as_deref(),
        Some(unnamed.id())
    );
    unnamed.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reincarnate_moves_the_home_to_a_new_sandbox_and_kills_the_old() {
    let (emu, _s3) = emulator().await;
    let old = with_role(&emu)
        .persist(S3Prefix::new(BUCKET).name("phoenix"))
        .create()
        .await
        .unwrap();
    old.files().write("keep.txt", "ashes").await.unwrap();
    let new = old.reincarnate().await.expect("reincarnate");
    assert_ne!(new.id(), old.id());
    assert_eq!(new.files().read("keep.txt").await.unwrap(), b"ashes");
    // The old handle is killed.
    let err = old.files().read("keep.txt").await.expect_err("killed");
    assert!(err.is_sandbox_error(), "{err:?}");
    new.kill().await.unwrap();

    // A sandbox without a bound prefix cannot.
    let plain = sdk_support::sandbox(&emu).await;
    let err = plain.reincarnate().await.expect_err("no prefix");
    assert_eq!(
        err.to_string(),
        "invalid persist: reincarnate needs a sandbox created with SandboxBuilder::persist"
    );
    plain.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_execution_role_it_is_permission_denied() {
    let (emu, _s3) = emulator().await;
    let sbx = sdk_support::sandbox(&emu).await;
    let err = sbx
        .persistence()
        .checkpoint(CheckpointOptions::new(S3Prefix::new(BUCKET).name("x")))
        .await
        .expect_err("no role");
    assert!(
        matches!(
            &err,
            SandboxError::Persistence {
                code: PersistenceCode::PermissionDenied,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the checkpoint was refused access to S3 (permission_denied): the sandbox has no execution role, or the role may not use the prefix; create the sandbox with an execution role that may (docs/persistence.md), then run it again"
    );
    assert!(!err.is_retryable());
    assert_no_location(&err);

    // A restore with a role but no checkpoint: NotFound.
    let with = with_role(&emu).create().await.unwrap();
    let err = with
        .persistence()
        .restore(RestoreOptions::new(S3Prefix::new(BUCKET).name("nobody")))
        .await
        .expect_err("no checkpoint");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    assert_no_location(&err);

    // create with a prefix but no role: refused before any I/O.
    let err = sdk_support::builder(&emu)
        .persist(S3Prefix::new(BUCKET).name("x"))
        .create()
        .await
        .expect_err("no role");
    assert_eq!(
        err.to_string(),
        "invalid persist: persistence needs an execution role (the agent reaches S3 with it); set execution_role_arn"
    );
    sbx.kill().await.unwrap();
    with.kill().await.unwrap();
}

/// A home large enough that a checkpoint takes a while (random bytes do
/// not compress).
async fn big_home(sbx: &Sandbox) {
    sbx.commands()
        .run("head -c 67108864 /dev/urandom > $HOME/big.bin")
        .await
        .expect("a big file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_operations_at_once_one_is_failed_precondition() {
    let (emu, _s3) = emulator().await;
    let sbx = with_role(&emu).create().await.unwrap();
    big_home(&sbx).await;
    let p = sbx.persistence();
    let (one, two) = tokio::join!(
        p.checkpoint(CheckpointOptions::new(S3Prefix::new(BUCKET).name("one"))),
        async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            p.checkpoint(CheckpointOptions::new(S3Prefix::new(BUCKET).name("two")))
                .await
        }
    );
    one.expect("the first runs");
    let err = two.expect_err("the second is refused");
    assert!(
        matches!(
            &err,
            SandboxError::Persistence {
                code: PersistenceCode::FailedPrecondition,
                ..
            }
        ),
        "{err:?}"
    );
    assert_no_location(&err);
    sbx.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspend_mid_checkpoint_is_interrupted_and_retryable() {
    let (emu, _s3) = emulator().await;
    let sbx = with_role(&emu).create().await.unwrap();
    big_home(&sbx).await;
    let p = sbx.persistence();
    let (result, paused) = tokio::join!(
        p.checkpoint(CheckpointOptions::new(S3Prefix::new(BUCKET).name("cut"))),
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            sbx.pause().await
        }
    );
    paused.expect("paused");
    let err = result.expect_err("cut by the suspend");
    assert!(
        matches!(
            &err,
            SandboxError::Persistence {
                code: PersistenceCode::Interrupted,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable());
    assert_no_location(&err);
    sbx.kill().await.unwrap();
}

/// A client whose AWS calls (S3 included) go to `endpoint`.
async fn client_on(endpoint: &str, key_id: &str, secret: &str) -> rayito::Client {
    rayito::Client::builder()
        .aws(
            rayito::AwsOptions::new()
                .endpoint_url(endpoint)
                .s3_endpoint_url(endpoint)
                .region("us-east-1")
                .static_credentials(key_id, secret),
        )
        .build()
        .await
        .expect("a client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_and_delete_checkpoints_on_the_emulators_s3() {
    let (emu, _s3) = emulator().await;
    let sbx = with_role(&emu).create().await.unwrap();
    sbx.files().write("a.txt", "a").await.unwrap();
    let at = S3Prefix::new(BUCKET).name("listed");
    let done = sbx
        .persistence()
        .checkpoint(CheckpointOptions::new(at.clone()))
        .await
        .unwrap();
    let key = emu.access_key();
    let client = client_on(&emu.s3_endpoint_url(), &key.id, &key.secret).await;
    let listed = rayito::persistence::list(&client, &S3Prefix::new(BUCKET))
        .await
        .expect("list");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].name, "listed");
    assert_eq!(listed[0].key_prefix, "rayito-home/listed");
    assert_eq!(listed[0].archive_bytes, Some(done.archive_bytes));
    assert!(listed[0].created_at.is_some());
    rayito::persistence::delete(&client, &at)
        .await
        .expect("delete");
    assert!(
        rayito::persistence::list(&client, &S3Prefix::new(BUCKET))
            .await
            .unwrap()
            .is_empty()
    );
    let err = sbx
        .persistence()
        .restore(RestoreOptions::new(at))
        .await
        .expect_err("deleted");
    assert_eq!(err.kind(), ErrorKind::NotFound);
    // delete needs a name, before any I/O.
    let err = rayito::persistence::delete(&client, &S3Prefix::new(BUCKET))
        .await
        .expect_err("no name");
    assert_eq!(
        err.to_string(),
        "invalid name: delete needs the checkpoint's name"
    );
    sbx.kill().await.unwrap();
}

/// The same calls against moto, an S3 that is not ours: only names with a
/// manifest are checkpoints; a missing bucket is `InvalidArgument` naming
/// `bucket`, without AWS's text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_and_delete_checkpoints_on_moto() {
    let Some(moto) = tokio::task::spawn_blocking(sdk_support::moto::MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let endpoint = moto.endpoint_url();
    let conf = s3::Config::builder()
        .behavior_version(s3::config::BehaviorVersion::latest())
        .region(s3::config::Region::new("us-east-1"))
        .credentials_provider(s3::config::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .endpoint_url(&endpoint)
        .force_path_style(true)
        .build();
    let raw = s3::Client::from_conf(conf);
    raw.create_bucket().bucket(BUCKET).send().await.unwrap();
    for key in [
        "rayito-home/a/home.tar.gz",
        "rayito-home/a/manifest.json",
        "rayito-home/b/home.tar.gz",
        "rayito-home/c/manifest.json",
        "other/d/manifest.json",
    ] {
        raw.put_object()
            .bucket(BUCKET)
            .key(key)
            .body(s3::primitives::ByteStream::from_static(b"12345"))
            .send()
            .await
            .unwrap();
    }
    let client = client_on(&endpoint, "testing", "testing").await;
    let listed = rayito::persistence::list(&client, &S3Prefix::new(BUCKET))
        .await
        .expect("list");
    let names: Vec<(&str, Option<u64>)> = listed
        .iter()
        .map(|c| (c.name.as_str(), c.archive_bytes))
        .collect();
    assert_eq!(names, [("a", Some(5)), ("c", None)]);
    rayito::persistence::delete(&client, &S3Prefix::new(BUCKET).name("a"))
        .await
        .expect("delete");
    let listed = rayito::persistence::list(&client, &S3Prefix::new(BUCKET))
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert!(
        raw.head_object()
            .bucket(BUCKET)
            .key("rayito-home/a/home.tar.gz")
            .send()
            .await
            .is_err()
    );
    let err = rayito::persistence::list(&client, &S3Prefix::new("no-such-bucket-here"))
        .await
        .expect_err("no bucket");
    assert_eq!(
        err.to_string(),
        "invalid bucket: the bucket does not exist (NoSuchBucket); create it or name another"
    );
    assert_no_location(&err);
}

/// What a persistence failure shows its caller, field by field: the
/// variant's code (`None` for another variant), the kind, the message, the
/// gRPC status behind it, the stream's code token, the server's message,
/// and whether it may be retried.
#[derive(Debug, PartialEq, Eq)]
struct Shown {
    code: Option<PersistenceCode>,
    kind: ErrorKind,
    message: String,
    grpc_code: Option<rayito::error::GrpcCode>,
    reason: Option<String>,
    server_message: Option<String>,
    retryable: bool,
}

fn shown(err: &SandboxError) -> Shown {
    Shown {
        code: match err {
            SandboxError::Persistence { code, .. } => Some(code.clone()),
            _ => None,
        },
        kind: err.kind(),
        message: err.to_string(),
        grpc_code: err.meta().grpc_code(),
        reason: err.meta().reason().map(str::to_owned),
        server_message: err.meta().server_message().map(str::to_owned),
        retryable: err.is_retryable(),
    }
}

/// The agent's own words (agent/src/persist, mod `messages`) stay in the
/// sandbox: an S3 failure's text can name the bucket, a key or the role,
/// so the SDK keeps the status code and shows its own message. Checked
/// for every message the agent has, on every error pinned below.
fn assert_no_agent_text(err: &SandboxError) {
    use rayito_agent::persist::messages as agent;
    let all = format!("{err} {err:?} {}", err.to_wire());
    for text in [
        agent::BUSY,
        agent::NO_REGION,
        agent::NO_CREDENTIALS,
        agent::DENIED,
        agent::NO_CHECKPOINT,
        agent::NO_BUCKET,
        agent::NO_ARCHIVE,
        agent::BAD_MANIFEST,
        agent::S3_FAILED,
        agent::ARCHIVE_FAILED,
        agent::TOO_LARGE,
        agent::EXTRACT_FAILED,
        agent::CHECKSUM,
        agent::DISK_FULL,
        agent::HEADER_TOO_LONG,
        agent::TOO_MANY_ENTRIES,
        agent::NO_ROOM,
    ] {
        assert!(!all.contains(text), "the agent's {text:?} in {all}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_denied_without_a_role_is_pinned() {
    use rayito::error::GrpcCode;
    let (emu, _s3) = emulator().await;
    let sbx = sdk_support::sandbox(&emu).await;
    let at = S3Prefix::new(BUCKET).name("pinned");
    let checkpoint = sbx
        .persistence()
        .checkpoint(CheckpointOptions::new(at.clone()))
        .await
        .expect_err("no role");
    let restore = sbx
        .persistence()
        .restore(RestoreOptions::new(at))
        .await
        .expect_err("no role");
    for (err, op) in [(&checkpoint, "checkpoint"), (&restore, "restore")] {
        assert_eq!(
            shown(err),
            Shown {
                code: Some(PersistenceCode::PermissionDenied),
                kind: ErrorKind::Persistence,
                message: format!(
                    "the {op} was refused access to S3 (permission_denied): the sandbox has no execution role, or the role may not use the prefix; create the sandbox with an execution role that may (docs/persistence.md), then run it again"
                ),
                grpc_code: Some(GrpcCode::PermissionDenied),
                reason: None,
                server_message: None,
                retryable: false,
            }
        );
        assert_no_agent_text(err);
        assert_no_location(err);
    }
    sbx.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_operation_at_once_is_pinned() {
    use rayito::error::GrpcCode;
    let (emu, _s3) = emulator().await;
    let sbx = with_role(&emu).create().await.unwrap();
    big_home(&sbx).await;
    let p = sbx.persistence();
    let (one, two, three) = tokio::join!(
        p.checkpoint(CheckpointOptions::new(S3Prefix::new(BUCKET).name("first"))),
        async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            p.checkpoint(CheckpointOptions::new(S3Prefix::new(BUCKET).name("second")))
                .await
        },
        async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            p.restore(RestoreOptions::new(S3Prefix::new(BUCKET).name("first")))
                .await
        }
    );
    one.expect("the first runs");
    for (result, op) in [
        (two.map(|_| ()), "checkpoint"),
        (three.map(|_| ()), "restore"),
    ] {
        let err = result.expect_err("refused while the first runs");
        assert_eq!(
            shown(&err),
            Shown {
                code: Some(PersistenceCode::FailedPrecondition),
                kind: ErrorKind::Persistence,
                message: format!(
                    "the {op} could not start (failed_precondition): another checkpoint or restore is running in this sandbox, or the region is unknown; wait for the other operation or fix the region, then run it again"
                ),
                grpc_code: Some(GrpcCode::FailedPrecondition),
                reason: None,
                server_message: None,
                retryable: false,
            }
        );
        assert_no_agent_text(&err);
        assert_no_location(&err);
    }
    sbx.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_by_a_suspend_is_pinned() {
    let (emu, _s3) = emulator().await;
    let sbx = with_role(&emu).create().await.unwrap();
    big_home(&sbx).await;
    let p = sbx.persistence();
    let (result, paused) = tokio::join!(
        p.checkpoint(CheckpointOptions::new(
            S3Prefix::new(BUCKET).name("pinned-cut")
        )),
        async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            sbx.pause().await
        }
    );
    paused.expect("paused");
    let err = result.expect_err("cut by the suspend");
    assert_eq!(
        shown(&err),
        Shown {
            code: Some(PersistenceCode::Interrupted),
            kind: ErrorKind::Persistence,
            message: "the checkpoint was interrupted: the sandbox is suspending; it is not resumed, run it again".to_owned(),
            grpc_code: None,
            reason: Some("suspending".to_owned()),
            server_message: None,
            retryable: true,
        }
    );
    assert_no_agent_text(&err);
    assert_no_location(&err);
    sbx.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_without_a_checkpoint_is_pinned() {
    use rayito::error::GrpcCode;
    let (emu, _s3) = emulator().await;
    let sbx = with_role(&emu).create().await.unwrap();
    // No checkpoint at the name, then no bucket at all: both are "nothing
    // to restore" to the caller.
    for at in [
        S3Prefix::new(BUCKET).name("never-checkpointed"),
        S3Prefix::new("rayito-no-such-bucket").name("x"),
    ] {
        let err = sbx
            .persistence()
            .restore(RestoreOptions::new(at))
            .await
            .expect_err("nothing to restore");
        assert_eq!(
            shown(&err),
            Shown {
                code: None,
                kind: ErrorKind::NotFound,
                message: "there is no checkpoint at the prefix to restore from; checkpoint first (a first life has none)".to_owned(),
                grpc_code: Some(GrpcCode::NotFound),
                reason: None,
                server_message: None,
                retryable: false,
            }
        );
        assert!(matches!(err, SandboxError::NotFound { .. }), "{err:?}");
        assert_no_agent_text(&err);
        assert_no_location(&err);
    }
    sbx.kill().await.unwrap();
}
