//! The SDK's one retry layer, against faults injected in the emulator:
//! capacity backoff with one clientToken, the capacity budget, throttling
//! with Retry-After, and the proxy 403 re-mint.

use crate::sdk_support;

use std::time::{Duration, Instant};

use rayito::SandboxError;
use rayito::error::RetryPolicy;
use rayito_emulator::Operation;
use sdk_support::{builder, emulator};

/// The default policy with short capacity delays, so tests run in ms.
fn quick_policy(capacity_budget: Duration) -> RetryPolicy {
    let mut policy = RetryPolicy::default();
    policy.capacity.initial = Duration::from_millis(10);
    policy.capacity.max_delay = Duration::from_millis(20);
    policy.capacity.total_budget = Some(capacity_budget);
    policy
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_twice_then_success_reuses_one_client_token() {
    let emu = emulator().await;
    emu.faults().insufficient_capacity(2);
    let sbx = builder(&emu)
        .retry_policy(quick_policy(Duration::from_secs(5)))
        .create()
        .await
        .expect("the third attempt succeeds");
    assert_eq!(emu.calls(Operation::RunMicrovm), 3);
    let tokens = emu.run_client_tokens();
    assert_eq!(tokens.len(), 3);
    let first = tokens[0].clone().expect("a client token is sent");
    // A real version-4 UUID, the same on every attempt.
    let uuid = uuid::Uuid::parse_str(&first).expect("a UUID");
    assert_eq!(uuid.get_version(), Some(uuid::Version::Random));
    assert!(tokens.iter().all(|t| t.as_deref() == Some(first.as_str())));
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_past_the_budget_is_capacity_and_retryable() {
    let emu = emulator().await;
    emu.faults().insufficient_capacity(1_000);
    let started = Instant::now();
    let err = builder(&emu)
        .retry_policy(quick_policy(Duration::from_secs(1)))
        // Attempts every 10-20 ms: above the default RunMicrovm pace.
        .pacing(rayito::Pacing::unlimited())
        .create()
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(matches!(err, SandboxError::Capacity { .. }), "{err:?}");
    assert!(err.classify().retryable);
    assert!(emu.calls(Operation::RunMicrovm) >= 3);
    assert_eq!(
        err.to_string(),
        "control plane call RunMicrovm found no capacity: Insufficient capacity to run the MicroVM. Retry later.; retry later or use another region"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_honours_retry_after() {
    let emu = emulator().await;
    emu.faults().throttle(Operation::RunMicrovm, 1, 1);
    let started = Instant::now();
    let sbx = builder(&emu).create().await.expect("the retry succeeds");
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited {:?}",
        started.elapsed()
    );
    assert_eq!(emu.calls(Operation::RunMicrovm), 2);
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttling_past_its_attempts_is_rate_limit_with_retry_after() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    // Counted from here: how many GetMicrovm calls create made (a slow
    // readiness makes more) does not matter.
    let before = emu.calls(Operation::GetMicrovm);
    emu.faults().throttle(Operation::GetMicrovm, 100, 0);
    let err = sbx.get_info().await.unwrap_err();
    match &err {
        SandboxError::RateLimit { retry_after, .. } => {
            assert_eq!(*retry_after, Some(Duration::ZERO));
        }
        other => panic!("{other:?}"),
    }
    // The default policy: 5 attempts in all, and the error says so.
    assert_eq!(emu.calls(Operation::GetMicrovm) - before, 5);
    assert_eq!(err.meta().attempts(), 5);
    assert_eq!(
        err.to_string(),
        "control plane call GetMicrovm was throttled: Rate exceeded; retry after 0 s"
    );
    emu.faults().clear();
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_proxy_403_is_invisible_two_are_proxy_rejected() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    let mints_before = emu.calls(Operation::CreateMicrovmAuthToken);

    assert!(emu.faults().proxy_status(1, 403));
    let out = sbx
        .commands()
        .run("echo fine")
        .await
        .expect("one 403 is retried");
    assert_eq!(out.stdout, "fine\n");
    assert_eq!(
        emu.calls(Operation::CreateMicrovmAuthToken),
        mints_before + 1
    );

    assert!(emu.faults().proxy_status(2, 403));
    let err = sbx.commands().run("echo never").await.unwrap_err();
    assert!(
        matches!(
            err,
            SandboxError::Authentication {
                proxy_rejected: true,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the AWS proxy refused the sandbox's token for commands.run even after a fresh one; check the IAM permission to create MicroVM auth tokens"
    );
    // Classified by type (an HTTP 403 without grpc-status): the first try
    // and the one after the re-mint.
    assert_eq!(err.meta().http_status(), Some(403));
    assert_eq!(err.meta().attempts(), 2);
    assert!(sbx.kill().await.unwrap());
}

/// A really expired proxy token (the emulator's token TTL): a burst of calls
/// all meet the proxy's 403, the SDK mints one fresh token for the whole
/// burst and stores it, and every call succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_proxy_token_is_reminted_once_for_a_burst() {
    const TTL: Duration = Duration::from_secs(6);
    let emu = rayito_emulator::Emulator::start(rayito_emulator::EmulatorConfig {
        auth_token_ttl: Some(TTL),
        ..Default::default()
    })
    .await
    .unwrap();
    let sbx = builder(&emu).create().await.unwrap();
    let mints = emu.calls(Operation::CreateMicrovmAuthToken);
    // The token minted during create is now past its TTL.
    tokio::time::sleep(TTL + Duration::from_millis(500)).await;

    let burst: Vec<_> = (0..20)
        .map(|i| {
            let sbx = sbx.clone();
            tokio::spawn(async move { sbx.commands().run(&format!("echo {i}")).await })
        })
        .collect();
    for (i, call) in burst.into_iter().enumerate() {
        let out = call.await.unwrap().expect("each call succeeds");
        assert_eq!(out.stdout, format!("{i}\n"));
    }
    assert_eq!(
        emu.calls(Operation::CreateMicrovmAuthToken),
        mints + 1,
        "one re-mint for the burst"
    );
    // The fresh token was stored: the next call needs no mint.
    assert_eq!(
        sbx.commands().run("echo again").await.unwrap().stdout,
        "again\n"
    );
    assert_eq!(emu.calls(Operation::CreateMicrovmAuthToken), mints + 1);
    assert!(sbx.kill().await.unwrap());
}

/// The agent behind a sandbox is gone (the guest crashed): nothing listens
/// any more, and the reconnect contract asks the control plane instead of
/// climbing the not-established ladder: the sandbox is reported gone, at
/// once and not retryable (before the reconnect contract, this was 7.8 s of
/// ladder and a retryable `connection_lost`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_agent_is_reported_gone_without_the_ladder() {
    let emu = emulator().await;
    let sbx = builder(&emu).create().await.unwrap();
    assert!(emu.faults().kill_agent(sbx.id()));
    for _ in 0..2 {
        let started = std::time::Instant::now();
        let err = tokio::time::timeout(Duration::from_secs(120), sbx.commands().run("true"))
            .await
            .expect("no hang")
            .expect_err("the agent is gone");
        assert!(
            matches!(err, rayito::SandboxError::SandboxNotFound { .. }),
            "{err:?}"
        );
        assert!(!err.is_retryable());
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            err.to_string(),
            format!(
                "the sandbox {} does not exist or has terminated; create a new sandbox",
                sbx.id()
            )
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_retry_after_is_capped_per_wait() {
    // `Retry-After: 4294967295` (136 years): the wait is capped at the
    // rate-limit schedule's max_delay, so the retry comes at once.
    let emu = emulator().await;
    emu.faults().throttle(Operation::RunMicrovm, 1, u32::MAX);
    let mut policy = RetryPolicy::default();
    policy.rate_limit.max_delay = Duration::from_millis(200);
    let started = Instant::now();
    let sbx = builder(&emu)
        .retry_policy(policy)
        .create()
        .await
        .expect("the capped retry succeeds");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "waited {:?}",
        started.elapsed()
    );
    assert_eq!(emu.calls(Operation::RunMicrovm), 2);
    assert!(sbx.kill().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_retries_end_at_their_total_budget() {
    // Retry-After 1 s on every call, no attempt limit, a 2.5 s budget: two
    // waits fit (2 s), a third would not.
    let emu = emulator().await;
    emu.faults().throttle(Operation::RunMicrovm, 1_000, 1);
    let mut policy = RetryPolicy::default();
    policy.rate_limit.max_attempts = None;
    policy.rate_limit.total_budget = Some(Duration::from_millis(2_500));
    let started = Instant::now();
    let err = builder(&emu)
        .retry_policy(policy)
        .create()
        .await
        .unwrap_err();
    assert!(
        matches!(err, SandboxError::RateLimit { retry_after: Some(d), .. } if d == Duration::from_secs(1)),
        "{err:?}"
    );
    assert_eq!(emu.calls(Operation::RunMicrovm), 3);
    assert_eq!(err.meta().attempts(), 3);
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(30),
        "{took:?}"
    );
}
