//! `SandboxBuilder::keep_on_failure`: each failure of `create` after
//! RunMicrovm produced for real on the emulator (a proxy token refused, an
//! agent that never answers Health, a proxy that refuses the readiness
//! probe, an automatic restore that fails), with and without the option:
//! kept, the MicroVM is still running, the error names it (message and
//! `meta().kept_sandbox_id()`) and it can be connected to and killed;
//! without, it is terminated. A pool's builder refuses the option before
//! any call.

use crate::sdk_support;

use std::time::{Duration, Instant};

use rayito::persistence::S3Prefix;
use rayito::{PoolConfig, SandboxBuilder, SandboxError};
use rayito_emulator::{Emulator, MicrovmState, Operation, ProxyStall};
use sdk_support::{builder, emulator};

const HEALTH: &str = "/rayito.v1.HealthService/Health";
/// An access token the test knows (16 zero bytes, base64url).
const TOKEN: &str = "AAAAAAAAAAAAAAAAAAAAAA";
const ROLE: &str = "arn:aws:iam::000000000000:role/rayito-sandbox";

/// The one MicroVM `create` started on `emu` since `before`.
fn new_microvm(emu: &Emulator, before: &[String]) -> String {
    let new: Vec<String> = emu
        .microvm_ids()
        .into_iter()
        .filter(|id| !before.contains(id))
        .collect();
    assert_eq!(new.len(), 1, "{new:?}");
    new[0].clone()
}

/// Waits (bounded) until the MicroVM is TERMINATED.
async fn until_terminated(emu: &Emulator, id: &str) {
    let until = Instant::now() + Duration::from_secs(60);
    while emu.state(id) != Some(MicrovmState::Terminated) {
        assert!(Instant::now() < until, "still {:?}", emu.state(id));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits (bounded) until the MicroVM is RUNNING, failing at once if it
/// ends instead.
async fn until_running(emu: &Emulator, id: &str) {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        match emu.state(id) {
            Some(MicrovmState::Running) => return,
            Some(MicrovmState::Pending) => {}
            other => panic!("a kept sandbox must not end: {other:?}"),
        }
        assert!(Instant::now() < until, "still PENDING");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `create` on `make(keep)` twice, without and with keep on failure
/// (`setup` arms the fault before each): returns each error with its
/// MicroVM, after checking the first was terminated and the second is
/// still running, named by its error, and usable once the fault is gone.
async fn both_ways(
    emu: &Emulator,
    make: impl Fn(bool) -> SandboxBuilder,
    setup: impl Fn(&Emulator),
) -> [(SandboxError, String); 2] {
    // Without: terminated, and nothing kept on the error.
    setup(emu);
    let before = emu.microvm_ids();
    let terminated = make(false)
        .create()
        .await
        .expect_err("the fault fails create");
    emu.faults().clear();
    let gone = new_microvm(emu, &before);
    assert_eq!(terminated.meta().kept_sandbox_id(), None, "{terminated:?}");
    assert!(
        !terminated.to_string().contains("keep_on_failure"),
        "{terminated}"
    );
    until_terminated(emu, &gone).await;

    // With: still running, named by the error, and usable.
    setup(emu);
    let before = emu.microvm_ids();
    let terminations = emu.calls(Operation::TerminateMicrovm);
    let kept = make(true)
        .create()
        .await
        .expect_err("the fault fails create");
    emu.faults().clear();
    let id = new_microvm(emu, &before);
    assert_eq!(emu.calls(Operation::TerminateMicrovm), terminations);
    // A failure before readiness (the proxy token is minted right after
    // RunMicrovm) can come while the MicroVM is still PENDING: kept means
    // it goes on to RUNNING, never that it is already there.
    until_running(emu, &id).await;
    assert_eq!(emu.calls(Operation::TerminateMicrovm), terminations);
    assert_eq!(kept.meta().kept_sandbox_id(), Some(id.as_str()));
    assert_eq!(kept.kind(), terminated.kind(), "{kept:?} / {terminated:?}");
    // The wire form keeps the id.
    assert_eq!(SandboxError::from_wire(&kept.to_wire()).unwrap(), kept);
    let client = builder(emu).client().await.unwrap();
    let sbx = client.connect(&id, TOKEN).await.expect("the kept sandbox");
    let out = sbx.commands().run("echo kept").await.unwrap();
    assert_eq!(out.stdout, "kept\n");
    assert!(client.kill_by_id(&id).await.unwrap());
    [(terminated, gone), (kept, id)]
}

/// The kept error's message: the cause's, then the kept sandbox.
fn kept_message(cause: &str, id: &str) -> String {
    format!(
        "{cause}; the sandbox {id} was kept running (keep_on_failure): connect to it or kill it by id when done"
    )
}

/// An agent that never answers Health: `SandboxNotReady` at
/// `ready_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_never_ready_is_kept_on_failure() {
    let emu = emulator().await;
    let make = |keep| {
        builder(&emu)
            .access_token(TOKEN)
            .ready_timeout(Duration::from_secs(2))
            .keep_on_failure(keep)
    };
    let stall = |emu: &Emulator| {
        emu.faults()
            .stall_proxy(u32::MAX, Some(HEALTH), ProxyStall::Request);
    };
    let [(terminated, _), (kept, id)] = both_ways(&emu, make, stall).await;
    assert!(
        matches!(terminated, SandboxError::SandboxNotReady { .. }),
        "{terminated:?}"
    );
    assert_eq!(
        terminated.to_string(),
        "the sandbox was not ready within 2 s (state RUNNING); raise ready_timeout or check the image"
    );
    assert_eq!(kept.to_string(), kept_message(&terminated.to_string(), &id));
}

/// A proxy that refuses the readiness probe (HTTP 403, not a "not yet"):
/// the wait ends at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_readiness_probe_is_kept_on_failure() {
    let emu = emulator().await;
    let make = |keep| builder(&emu).access_token(TOKEN).keep_on_failure(keep);
    let refuse = |emu: &Emulator| assert!(emu.faults().proxy_status(1_000, 403));
    let [(terminated, _), (kept, id)] = both_ways(&emu, make, refuse).await;
    assert_eq!(kept.to_string(), kept_message(&terminated.to_string(), &id));
}

/// The proxy token for port 8080 cannot be minted
/// (CreateMicrovmAuthToken answers ConflictException).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_token_refused_is_kept_on_failure() {
    let emu = emulator().await;
    let make = |keep| builder(&emu).access_token(TOKEN).keep_on_failure(keep);
    let conflict = |emu: &Emulator| {
        emu.faults()
            .conflict(Operation::CreateMicrovmAuthToken, 1_000);
    };
    let [(terminated, _), (kept, id)] = both_ways(&emu, make, conflict).await;
    assert_eq!(kept.to_string(), kept_message(&terminated.to_string(), &id));
}

/// The automatic restore of a named persistence prefix fails (its
/// manifest is not JSON): the builder's keep_on_failure keeps the sandbox
/// as `persist_keep_on_failure` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_restore_is_kept_on_failure() {
    const BUCKET: &str = "rayito-keep-on-failure";
    let emu = emulator().await;
    let s3 = sdk_support::moto_seed::s3_client(&emu.s3_endpoint_url(), emu.access_key());
    s3.create_bucket()
        .bucket(BUCKET)
        .send()
        .await
        .expect("bucket");
    s3.put_object()
        .bucket(BUCKET)
        .key("rayito-home/home/manifest.json")
        .body(b"not a manifest".to_vec().into())
        .send()
        .await
        .expect("manifest");
    let make = |keep| {
        builder(&emu)
            .access_token(TOKEN)
            .execution_role_arn(ROLE)
            .persist(S3Prefix::new(BUCKET).name("home"))
            .keep_on_failure(keep)
    };
    let [(terminated, _), (kept, id)] = both_ways(&emu, make, |_| {}).await;
    assert!(
        matches!(terminated, SandboxError::Persistence { .. }),
        "{terminated:?}"
    );
    assert_eq!(kept.to_string(), kept_message(&terminated.to_string(), &id));
}

/// An egress policy the agent cannot enforce terminates the sandbox even
/// with keep_on_failure (tests/sdk/network.rs pins the error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unenforceable_egress_policy_terminates_even_when_kept() {
    let emu = rayito_emulator::Emulator::start(rayito_emulator::EmulatorConfig {
        agent_egress: false,
        ..rayito_emulator::EmulatorConfig::default()
    })
    .await
    .expect("the emulator starts");
    let err = builder(&emu)
        .allow_internet_access(false)
        .keep_on_failure(true)
        .create()
        .await
        .expect_err("the gate refuses");
    assert!(matches!(err, SandboxError::Unimplemented { .. }), "{err:?}");
    assert_eq!(err.meta().kept_sandbox_id(), None);
    let id = new_microvm(&emu, &[]);
    until_terminated(&emu, &id).await;
}

/// A pool's builder refuses keep_on_failure before any call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_refuses_keep_on_failure() {
    let emu = emulator().await;
    let Err(err) = builder(&emu).keep_on_failure(true).pool(PoolConfig::new(1)) else {
        panic!("a pool with keep_on_failure");
    };
    assert!(
        matches!(&err, SandboxError::InvalidArgument { argument: Some(a), .. } if a == "keep_on_failure"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "invalid keep_on_failure: a pool terminates a warming sandbox that fails (nobody holds its id); drop keep_on_failure from the pool's builder"
    );
    assert!(
        include_str!("../../docs/sandbox-options.md").contains(&err.to_string()),
        "docs/sandbox-options.md transcribes {err}"
    );
    assert_eq!(emu.calls(Operation::RunMicrovm), 0);
}
