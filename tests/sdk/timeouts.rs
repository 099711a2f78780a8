//! Every timeout scope through the SDK on the local backend, each produced
//! for real: the emulator's proxy stalls a call (`stall_proxy`) and the
//! SDK's own deadline has to end it. Each test pins the variant, its fields,
//! `classify()`, the exact message, and that the deadline fired near its
//! configured value (bounds generous for a loaded 2-core CI machine).

use crate::sdk_support;

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use rayito::error::{ErrorInfo, GrpcCode, TimeoutScope};
use rayito::{SandboxError, SandboxState};
use rayito_emulator::{MicrovmState, Operation, ProxyStall};
use sdk_support::{builder, emulator};

const STAT: &str = "/rayito.v1.FilesystemService/Stat";
const READ: &str = "/rayito.v1.FilesystemService/Read";
const HEALTH: &str = "/rayito.v1.HealthService/Health";

/// How late a deadline may fire on a loaded machine.
const LATE: Duration = Duration::from_secs(10);

fn timeout_info() -> ErrorInfo {
    ErrorInfo {
        kind: "timeout",
        retryable: false,
        retry_with_larger_limits: true,
        summary: "a deadline passed (the scope says which)",
    }
}

/// `err` is `Timeout { scope: Request }`, classified as a timeout.
fn assert_request_timeout(err: &SandboxError) {
    assert!(
        matches!(
            err,
            SandboxError::Timeout {
                scope: TimeoutScope::Request,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.classify(), timeout_info());
}

/// `elapsed` is at least `deadline` (less a little clock slack) and not
/// much later.
fn fired_near(elapsed: Duration, deadline: Duration) {
    assert!(
        elapsed + Duration::from_millis(50) >= deadline,
        "fired early: {elapsed:?} < {deadline:?}"
    );
    assert!(
        elapsed <= deadline + LATE,
        "fired late: {elapsed:?} > {deadline:?} + {LATE:?}"
    );
}

/// A unary call whose answer never comes ends at `request_timeout` with
/// `Timeout { Request }`, is not retried, and leaves the sandbox usable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unary_call_without_an_answer_ends_at_request_timeout() {
    let emu = emulator().await;
    let request_timeout = Duration::from_secs(2);
    let sbx = builder(&emu)
        .request_timeout(request_timeout)
        .create()
        .await
        .unwrap();
    emu.faults().stall_proxy(1, Some(STAT), ProxyStall::Request);

    let started = Instant::now();
    let err = sbx.files().get_info("/tmp").await.unwrap_err();
    fired_near(started.elapsed(), request_timeout);
    assert_request_timeout(&err);
    assert_eq!(
        err.to_string(),
        "the call files.get_info did not finish; raise request_timeout or retry"
    );
    assert_eq!(err.meta().grpc_code(), Some(GrpcCode::DeadlineExceeded));
    assert_eq!(err.meta().http_status(), None);
    assert_eq!(err.meta().attempts(), 1, "a deadline is never retried");

    // The stall was one request: the next call is answered.
    assert_eq!(
        sbx.files().get_info("/tmp").await.unwrap().path,
        "/tmp",
        "the sandbox is still usable"
    );
    assert!(sbx.kill().await.unwrap());
}

/// A stream that stalls after its first frames ends at the stream's own
/// deadline (files.read: `request_timeout` plus one second per MiB) with
/// `Timeout { Request }`, after the chunks that did arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_stream_ends_at_its_deadline() {
    let emu = emulator().await;
    let request_timeout = Duration::from_secs(2);
    let sbx = builder(&emu)
        .request_timeout(request_timeout)
        .create()
        .await
        .unwrap();
    let size = 3 * 1024 * 1024;
    sbx.files()
        .write("/home/user/big.bin", vec![7u8; size])
        .await
        .unwrap();
    // 40 frames carry at least the first 256 KiB chunk (h2 frames are at
    // most 16 KiB by default) and far less than the 3 MiB.
    emu.faults()
        .stall_proxy(1, Some(READ), ProxyStall::ResponseAfter { frames: 40 });

    let deadline = request_timeout + Duration::from_secs(3);
    let started = Instant::now();
    let mut chunks = sbx.files().read_stream("/home/user/big.bin").await.unwrap();
    let mut received = 0usize;
    let err = loop {
        match chunks.next().await {
            Some(Ok(chunk)) => received += chunk.len(),
            Some(Err(err)) => break err,
            None => panic!("the stalled stream ended without an error"),
        }
    };
    fired_near(started.elapsed(), deadline);
    assert!(
        received > 0 && received < size,
        "the stall came mid-stream: {received} of {size} bytes"
    );
    assert_request_timeout(&err);
    assert_eq!(
        err.to_string(),
        "the call files.read did not finish; raise request_timeout or retry"
    );
    assert_eq!(err.meta().grpc_code(), Some(GrpcCode::DeadlineExceeded));

    // The read works again once nothing stalls.
    assert_eq!(
        sbx.files().read("/home/user/big.bin").await.unwrap().len(),
        size
    );
    assert!(sbx.kill().await.unwrap());
}

/// A sandbox whose agent never answers Health within `ready_timeout`:
/// `SandboxNotReady` with the state last seen, and the SDK terminated the
/// MicroVM it made (exactly one TerminateMicrovm, the MicroVM TERMINATED).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_never_ready_is_not_ready_and_terminated() {
    let emu = emulator().await;
    emu.faults()
        .stall_proxy(u32::MAX, Some(HEALTH), ProxyStall::Request);
    let ready_timeout = Duration::from_secs(3);

    let started = Instant::now();
    let err = builder(&emu)
        .ready_timeout(ready_timeout)
        .create()
        .await
        .unwrap_err();
    // The wait may overrun by its shortest probe (0.5 s), then GetMicrovm
    // and TerminateMicrovm.
    fired_near(started.elapsed(), ready_timeout);
    match &err {
        SandboxError::SandboxNotReady {
            state,
            state_reason,
            ..
        } => {
            assert_eq!(state, &Some(SandboxState::Running));
            assert_eq!(state_reason, &None);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        err.classify(),
        ErrorInfo {
            kind: "sandbox_not_ready",
            retryable: true,
            retry_with_larger_limits: true,
            summary: "the agent did not become ready in `ready_timeout`",
        }
    );
    assert_eq!(
        err.to_string(),
        "the sandbox was not ready within 3 s (state RUNNING); raise ready_timeout or check the image"
    );
    assert!(err.meta().attempts() >= 1, "{err:?}");

    assert_eq!(emu.calls(Operation::RunMicrovm), 1);
    assert_eq!(emu.calls(Operation::TerminateMicrovm), 1);
    let ids = emu.microvm_ids();
    assert_eq!(ids.len(), 1, "{ids:?}");
    // Terminating runs the MicroVM's hook first: wait for the state.
    let until = Instant::now() + Duration::from_secs(60);
    while emu.state(&ids[0]) != Some(MicrovmState::Terminated) {
        assert!(Instant::now() < until, "still {:?}", emu.state(&ids[0]));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Nothing is left to release the stalls for; clear them anyway.
    emu.faults().clear();
}

/// AWS options pointing at `addr` with test credentials and short,
/// distinct control-plane timeouts.
fn aws_at(addr: std::net::SocketAddr) -> rayito::AwsOptions {
    rayito::AwsOptions::new()
        .endpoint_url(format!("http://{addr}"))
        .region("us-east-1")
        .static_credentials("AKIDTESTTESTTEST", "test-secret")
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
}

const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
const READ_TIMEOUT: Duration = Duration::from_secs(3);

/// `create` against `aws`: its error and how long it took.
async fn failed_create(aws: rayito::AwsOptions) -> (SandboxError, Duration) {
    let started = Instant::now();
    let err = tokio::time::timeout(
        Duration::from_secs(120),
        rayito::Sandbox::builder()
            .aws(aws)
            .template("arn:aws:lambda:us-east-1:123456789012:microvm-image:rayito-base")
            .create(),
    )
    .await
    .expect("create ends on its own")
    .expect_err("no control plane answers");
    (err, started.elapsed())
}

const CONTROL_TIMEOUT_MESSAGE: &str = "control plane call RunMicrovm got no response before its deadline; retry it, or raise AwsOptions::read_timeout or connect_timeout";

/// An endpoint that accepts the connection and never answers: RunMicrovm
/// ends at the read timeout with `Timeout { Request }`, not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_control_plane_ends_at_the_read_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = accepted.clone();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(stream);
        }
    });

    let (err, elapsed) = failed_create(aws_at(addr)).await;
    fired_near(elapsed, READ_TIMEOUT);
    assert_request_timeout(&err);
    assert_eq!(err.to_string(), CONTROL_TIMEOUT_MESSAGE);
    assert_eq!(err.meta().http_status(), None);
    assert_eq!(
        accepted.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "one connection, one attempt: a deadline is not retried"
    );
    silent.abort();
}

/// An endpoint whose accept queue is full (the SYN goes unanswered):
/// RunMicrovm ends at the connect timeout with `Timeout { Request }`, not
/// after the operating system's minutes of SYN retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_connect_ends_at_the_connect_timeout() {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    // Fill the accept queue (never accepted) until a connect hangs.
    let mut fillers = Vec::new();
    loop {
        match tokio::time::timeout(
            Duration::from_millis(500),
            tokio::net::TcpStream::connect(addr),
        )
        .await
        {
            Ok(Ok(stream)) => fillers.push(stream),
            Ok(Err(err)) => panic!("filling the queue: {err}"),
            Err(_) => break,
        }
        assert!(fillers.len() < 64, "the accept queue never filled");
    }

    let (err, elapsed) = failed_create(aws_at(addr)).await;
    fired_near(elapsed, CONNECT_TIMEOUT);
    // Not the default 5 s, nor the read timeout.
    assert!(elapsed < READ_TIMEOUT, "{elapsed:?}");
    assert_request_timeout(&err);
    assert_eq!(err.to_string(), CONTROL_TIMEOUT_MESSAGE);
    drop((listener, fillers));
}

/// A closed port: RunMicrovm fails at once (well within the connect
/// timeout) with a retryable `Sandbox { ConnectionLost }`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_control_plane_fails_at_once_as_connection_lost() {
    // A port nobody listens on: bound, then closed.
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let (err, elapsed) = failed_create(aws_at(addr)).await;
    assert!(
        elapsed < CONNECT_TIMEOUT,
        "a refused connection is not waited for: {elapsed:?}"
    );
    assert!(
        matches!(
            err,
            SandboxError::Sandbox {
                code: Some(rayito::error::SandboxCode::ConnectionLost),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.classify(),
        ErrorInfo {
            kind: "connection_lost",
            retryable: true,
            retry_with_larger_limits: false,
            summary: "the agent or the control plane stopped answering (a reset, a connection never established once its retries are spent, proxy 429/502/503/504)",
        }
    );
    assert_eq!(
        err.to_string(),
        "control plane call RunMicrovm could not connect to the service; check the network, the region and the endpoint, then retry"
    );
    assert_eq!(err.meta().http_status(), None);
}

/// A zero control-plane timeout is refused before any call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_control_plane_timeouts_are_refused() {
    let addr = "127.0.0.1:9".parse().unwrap();
    for (options, argument, text) in [
        (
            aws_at(addr).connect_timeout(Duration::ZERO),
            "connect_timeout",
            "invalid connect_timeout: connect timeout must be positive; pass a positive duration",
        ),
        (
            aws_at(addr).read_timeout(Duration::ZERO),
            "read_timeout",
            "invalid read_timeout: read timeout must be positive; pass a positive duration",
        ),
    ] {
        let (err, _) = failed_create(options).await;
        assert!(
            matches!(&err, SandboxError::InvalidArgument { argument: Some(a), .. } if a == argument),
            "{err:?}"
        );
        assert_eq!(err.to_string(), text);
    }
}

/// `Duration::MAX` as a control-plane timeout is saturated, not a panic:
/// the call goes out and meets the closed port.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_largest_control_plane_timeouts_are_saturated() {
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let options = aws_at(addr)
        .connect_timeout(Duration::MAX)
        .read_timeout(Duration::MAX);
    let (err, _) = failed_create(options).await;
    assert_eq!(
        err.to_string(),
        "control plane call RunMicrovm could not connect to the service; check the network, the region and the endpoint, then retry"
    );
}

/// A command's own `request_timeout` bounds the wait for the agent to start
/// it, even with no command timeout at all (without it the stalled Start
/// would wait forever): `Timeout { Request }` near that deadline, not the
/// sandbox's longer request timeout; so does a git call's. Zero is refused
/// by name before any I/O.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_without_an_answer_ends_at_the_calls_request_timeout() {
    const START: &str = "/rayito.v1.ProcessService/Start";
    let emu = emulator().await;
    let sbx = builder(&emu)
        .request_timeout(Duration::from_secs(120))
        .create()
        .await
        .unwrap();
    let per_call = Duration::from_secs(2);

    emu.faults()
        .stall_proxy(1, Some(START), ProxyStall::Request);
    let started = Instant::now();
    let err = sbx
        .commands()
        .run_with(
            "true",
            rayito::CommandOptions::new()
                .no_timeout()
                .request_timeout(per_call),
        )
        .await
        .unwrap_err();
    fired_near(started.elapsed(), per_call);
    assert_request_timeout(&err);
    assert_eq!(
        err.to_string(),
        "the call commands.run did not finish; raise request_timeout or retry"
    );

    emu.faults()
        .stall_proxy(1, Some(START), ProxyStall::Request);
    let started = Instant::now();
    let err = sbx
        .git()
        .with_options(
            rayito::git::GitOptions::new()
                .no_timeout()
                .request_timeout(per_call),
        )
        .init("/home/user/repo", rayito::git::InitOptions::default())
        .await
        .unwrap_err();
    fired_near(started.elapsed(), per_call);
    assert_request_timeout(&err);

    // Refused by name, before anything is sent (the proxy is not stalled:
    // a call that went out would succeed).
    for err in [
        sbx.commands()
            .run_with(
                "true",
                rayito::CommandOptions::new().request_timeout(Duration::ZERO),
            )
            .await
            .unwrap_err(),
        sbx.git()
            .with_options(rayito::git::GitOptions::new().request_timeout(Duration::ZERO))
            .init("/home/user/repo", rayito::git::InitOptions::default())
            .await
            .unwrap_err(),
    ] {
        assert!(
            matches!(&err, SandboxError::InvalidArgument { argument: Some(a), .. } if a == "request_timeout"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "invalid request_timeout: request timeout must be positive; pass a positive duration"
        );
    }

    // The stalls were one request each: the sandbox still answers.
    let done = sbx
        .commands()
        .run_with(
            "echo ok",
            rayito::CommandOptions::new().request_timeout(per_call),
        )
        .await
        .unwrap();
    assert_eq!(done.stdout, "ok\n");
    assert!(sbx.kill().await.unwrap());
}
