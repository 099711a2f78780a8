//! Property tests: every builder and options type driven with arbitrary
//! durations, sizes and strings. Nothing panics, and every refusal happens
//! before any I/O:
//!
//! - the builder points at a TCP endpoint that counts connections (and
//!   closes them): a refused option must leave the count unchanged, an
//!   accepted one must reach it;
//! - per-call options run on a killed handle, whose calls fail with
//!   `Sandbox { closed }` at the first I/O: a refused value must be
//!   `InvalidArgument`, an accepted one must reach that I/O and be `closed`.

use crate::sdk_support;

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use proptest::prelude::*;
use rayito::error::{Backoff, RetryPolicy, SandboxCode};
use rayito::{
    AwsOptions, CommandOptions, ErrorKind, IdlePolicy, OnTimeout, RunCodeOptions, Sandbox,
    SandboxError, WriteEntry,
};
use sdk_support::{emulator, sandbox};

/// A runtime shared by the cases of one property.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// A loopback endpoint that accepts and drops every connection, counting them.
fn counting_endpoint() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            seen.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (format!("http://{addr}"), count)
}

fn any_duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        Just(Duration::MAX),
        Just(Duration::new(u64::MAX, 0)),
        (0u64..100_000, 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
    ]
}

/// Strings that hit the edges: empty, NUL, '=', control characters, very
/// long, non-ASCII.
fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("\0".to_owned()),
        Just("A=B".to_owned()),
        Just("dir/".to_owned()),
        Just("é€\u{1F600}".to_owned()),
        "[a-zA-Z0-9_./=-]{1,40}",
        "\\PC{0,40}",
        any::<String>(),
        (1usize..300_000).prop_map(|n| "x".repeat(n)),
    ]
}

fn refused_before_io(err: &SandboxError) -> bool {
    matches!(
        err.kind(),
        ErrorKind::InvalidArgument | ErrorKind::SandboxLifetime
    )
}

#[derive(Debug, Clone)]
struct BuilderInput {
    timeout: Duration,
    max_lifetime: Option<Duration>,
    on_timeout: Option<bool>,
    idle: Option<Duration>,
    ready: Duration,
    request: Duration,
    envs: Vec<(String, String)>,
    metadata: Vec<(String, String)>,
    ports: Vec<u16>,
    template: String,
    region: String,
    policy: RetryPolicy,
}

/// Any backoff: the driver must take every value without a panic.
fn any_backoff() -> impl Strategy<Value = Backoff> {
    (
        any_duration(),
        any_duration(),
        any::<u32>(),
        any::<u8>(),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any_duration()),
    )
        .prop_map(
            |(initial, max_delay, multiplier, jitter, attempts, budget)| {
                let mut b = Backoff::doubling(initial, max_delay);
                b.multiplier = multiplier;
                b.jitter_percent = jitter;
                b.max_attempts = attempts;
                b.total_budget = budget;
                b
            },
        )
}

fn any_policy() -> impl Strategy<Value = RetryPolicy> {
    (
        any_backoff(),
        any_backoff(),
        any_backoff(),
        any_backoff(),
        any::<u32>(),
    )
        .prop_map(
            |(capacity, rate_limit, service_error, not_established, remints)| {
                let mut p = RetryPolicy::default();
                p.capacity = capacity;
                p.rate_limit = rate_limit;
                p.service_error = service_error;
                // The connect ladder waits for real on every refused connection
                // of the counting endpoint: keep it short.
                p.not_established = not_established;
                p.not_established.max_attempts = Some(2);
                p.not_established.initial = Duration::ZERO;
                p.not_established.max_delay = Duration::ZERO;
                p.proxy_remint_retries = remints;
                p
            },
        )
}

/// Mostly plausible values, so that both refusals and accepted options
/// are common; the edges come from [`any_duration`] and [`any_text`].
fn mostly(valid: impl Strategy<Value = Duration> + 'static) -> BoxedStrategy<Duration> {
    prop_oneof![3 => valid, 1 => any_duration()].boxed()
}

fn mostly_text() -> BoxedStrategy<String> {
    prop_oneof![3 => "[A-Za-z_][A-Za-z0-9_]{0,15}", 1 => any_text()].boxed()
}

fn builder_input() -> impl Strategy<Value = BuilderInput> {
    let secs = |lo: u64, hi: u64| (lo..hi).prop_map(Duration::from_secs);
    (
        mostly(secs(1, 28_800)),
        proptest::option::of(mostly(secs(120, 28_800))),
        proptest::option::of(any::<bool>()),
        proptest::option::of(mostly(secs(60, 3_600))),
        mostly(secs(1, 600)),
        mostly(secs(1, 600)),
        proptest::collection::vec((mostly_text(), mostly_text()), 0..3),
        proptest::collection::vec((mostly_text(), mostly_text()), 0..3),
        proptest::collection::vec(any::<u16>(), 0..2),
        mostly_text(),
        prop_oneof![3 => Just("us-east-1".to_owned()), 1 => any_text()],
        any_policy(),
    )
        .prop_map(
            |(
                timeout,
                max_lifetime,
                on_timeout,
                idle,
                ready,
                request,
                envs,
                metadata,
                ports,
                template,
                region,
                policy,
            )| {
                BuilderInput {
                    timeout,
                    max_lifetime,
                    on_timeout,
                    idle,
                    ready,
                    request,
                    envs,
                    metadata,
                    ports,
                    template,
                    region,
                    policy,
                }
            },
        )
}

#[test]
fn builder_options_never_panic_and_refuse_before_io() {
    let rt = runtime();
    let (endpoint, connections) = counting_endpoint();
    let mut config = ProptestConfig::with_cases(96);
    config.failure_persistence = None;
    let (refused, sent) = (AtomicUsize::new(0), AtomicUsize::new(0));
    proptest!(config, |(input in builder_input())| {
        let mut builder = Sandbox::builder()
            .aws(
                AwsOptions::new()
                    .endpoint_url(endpoint.clone())
                    .region(input.region.clone())
                    .static_credentials("AKIDPROPTEST", "secret"),
            )
            .template(format!("arn:aws:lambda:us-east-1:0:microvm-image:{}", input.template))
            .timeout(input.timeout)
            .ready_timeout(input.ready)
            .request_timeout(input.request)
            .envs(input.envs.clone())
            .metadata(input.metadata.clone())
            .allowed_ports(input.ports.clone())
            .retry_policy(input.policy);
        if let Some(cap) = input.max_lifetime {
            builder = builder.max_lifetime(cap);
        }
        match input.on_timeout {
            Some(true) => builder = builder.on_timeout(OnTimeout::Pause),
            Some(false) => builder = builder.on_timeout(OnTimeout::Kill),
            None => {}
        }
        if let Some(idle) = input.idle {
            builder = builder.idle_policy(IdlePolicy::new(idle).auto_resume(false));
        }
        let before = connections.load(Ordering::SeqCst);
        let err = rt.block_on(builder.create()).expect_err("the endpoint never answers");
        let after = connections.load(Ordering::SeqCst);
        if refused_before_io(&err) {
            refused.fetch_add(1, Ordering::SeqCst);
            prop_assert_eq!(before, after, "refused after I/O: {:?}", err);
        } else {
            sent.fetch_add(1, Ordering::SeqCst);
            // Accepted: the call reached the endpoint, which dropped it.
            prop_assert!(after > before, "neither refused nor sent: {:?}", err);
            prop_assert_eq!(err.kind(), ErrorKind::Sandbox, "{:?}", err);
        }
    });
    // Both branches were exercised.
    assert!(refused.load(Ordering::SeqCst) > 0 && sent.load(Ordering::SeqCst) > 0);
}

/// An independent statement of the rules of `CommandOptions` and `cmd`.
fn command_is_valid(cmd: &str, envs: &BTreeMap<String, String>, cwd: &str, user: &str) -> bool {
    let env_ok = envs.iter().all(|(k, v)| {
        !k.is_empty()
            && k.chars().count() <= 256
            && !k.chars().any(char::is_control)
            && !k.contains('=')
            && !v.contains('\0')
            && k.len() + 1 + v.len() < 128 * 1024
    });
    !cmd.contains('\0')
        && cmd.len() < 128 * 1024
        && env_ok
        && !cwd.contains('\0')
        && !user.contains('\0')
}

fn is_closed(err: &SandboxError) -> bool {
    err.sandbox_code() == Some(&SandboxCode::Closed)
}

#[test]
fn call_options_never_panic_and_refuse_before_io() {
    let rt = runtime();
    let (emu, killed) = rt.block_on(async {
        let emu = emulator().await;
        let sbx = sandbox(&emu).await;
        assert!(sbx.kill().await.unwrap());
        (emu, sbx)
    });
    let mut config = ProptestConfig::with_cases(128);
    config.failure_persistence = None;
    let (refused, reached) = (AtomicUsize::new(0), AtomicUsize::new(0));
    proptest!(config, |(
        cmd in any_text(),
        envs in proptest::collection::btree_map(any_text(), any_text(), 0..3),
        cwd in any_text(),
        user in any_text(),
        timeout in any_duration(),
        stdin in proptest::collection::vec(any::<u8>(), 0..64),
    )| {
        let options = CommandOptions::new()
            .envs_for_test(&envs)
            .cwd(cwd.clone())
            .user(user.clone())
            .timeout(timeout)
            .stdin(stdin);
        let err = rt
            .block_on(killed.commands().run_with(&cmd, options))
            .expect_err("a killed handle");
        if command_is_valid(&cmd, &envs, &cwd, &user) {
            reached.fetch_add(1, Ordering::SeqCst);
            prop_assert!(is_closed(&err), "{:?}", err);
        } else {
            refused.fetch_add(1, Ordering::SeqCst);
            prop_assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{:?}", err);
        }
    });
    assert!(refused.load(Ordering::SeqCst) > 0 && reached.load(Ordering::SeqCst) > 0);

    proptest!(config, |(
        code in prop_oneof![any_text(), (1usize..2_000_000).prop_map(|n| "1".repeat(n))],
        envs in proptest::collection::btree_map(any_text(), any_text(), 0..3),
        language in proptest::option::of(any_text()),
        timeout in any_duration(),
    )| {
        let mut options = RunCodeOptions::new().timeout(timeout).on_stdout(|_| {});
        for (k, v) in &envs {
            options = options.env(k.clone(), v.clone());
        }
        if let Some(language) = &language {
            options = options.language(language.clone());
        }
        let err = rt
            .block_on(killed.run_code_with(&code, options))
            .expect_err("a killed handle");
        let env_ok = command_is_valid("", &envs, "", "");
        let language_ok = language.as_deref().is_none_or(|l| !l.is_empty() && !l.contains('\0'));
        if code.len() <= 1024 * 1024 && env_ok && language_ok {
            prop_assert!(is_closed(&err), "{:?}", err);
        } else {
            prop_assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{:?}", err);
        }
    });

    proptest!(config, |(path in any_text(), other in any_text(), size in 0usize..3_000_000)| {
        let files = killed.files();
        let path_ok = !path.is_empty() && !path.contains('\0');
        let write_ok = path_ok && !path.ends_with('/');
        let outcomes = [
            (path_ok, rt.block_on(files.read(&path)).map(|_| ())),
            (path_ok, rt.block_on(files.list_with_depth(&path, u32::MAX)).map(|_| ())),
            (path_ok, rt.block_on(files.remove(&path))),
            (path_ok, rt.block_on(files.make_dir(&path)).map(|_| ())),
            (write_ok, rt.block_on(files.write(&path, vec![0u8; size])).map(|_| ())),
            (
                write_ok,
                rt.block_on(files.write_files(vec![WriteEntry::new(path.clone(), "x")])).map(|_| ()),
            ),
            (
                path_ok && !other.is_empty() && !other.contains('\0'),
                rt.block_on(files.rename(&path, &other)).map(|_| ()),
            ),
        ];
        for (valid, outcome) in outcomes {
            let err = outcome.expect_err("a killed handle");
            if valid {
                prop_assert!(is_closed(&err), "{:?}", err);
            } else {
                prop_assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{:?}", err);
            }
        }
    });
    drop(emu);
}

/// `CommandOptions::env` for every pair of a map (a helper for the property).
trait EnvsForTest {
    fn envs_for_test(self, envs: &BTreeMap<String, String>) -> Self;
}

impl EnvsForTest for CommandOptions {
    fn envs_for_test(mut self, envs: &BTreeMap<String, String>) -> Self {
        for (k, v) in envs {
            self = self.env(k.clone(), v.clone());
        }
        self
    }
}
