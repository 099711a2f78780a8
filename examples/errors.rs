//! Matching on `SandboxError`: what a service does about each failure.
//!
//! For now the errors are built through the SDK's pure mapping functions
//! (the same ones the transport and control layers call), so the example
//! needs no sandbox. Run with `cargo run --example errors`.

use std::time::Duration;

use rayito::error::map::agent::{CommandOutput, EndEventData, from_end_event};
use rayito::error::map::aws::{AwsFailure, from_aws, no_credentials};
use rayito::error::map::grpc::{CallContext, GrpcFailure, from_grpc};
use rayito::error::{GrpcCode, SandboxError, TimeoutScope};

/// What a caller would do, decided by matching on variants, never on text.
fn decide(err: &SandboxError) -> String {
    match err {
        SandboxError::CommandExit {
            exit_code, stderr, ..
        } => format!(
            "command failed with {exit_code}; show its stderr ({} bytes)",
            stderr.len()
        ),
        SandboxError::Timeout {
            scope: TimeoutScope::Command,
            ..
        } => "raise the command timeout".to_owned(),
        SandboxError::RateLimit {
            retry_after: Some(wait),
            ..
        } => format!("wait {wait:?}, then retry"),
        SandboxError::Authentication { .. } => "fix credentials; do not retry".to_owned(),
        e if e.is_retryable() => "retry later or on a fresh sandbox".to_owned(),
        e if e.classify().retry_with_larger_limits => "retry with larger limits".to_owned(),
        _ => "give up and report".to_owned(),
    }
}

fn examples() -> Vec<SandboxError> {
    let mut throttled = AwsFailure::new("RunMicrovm");
    throttled.code = Some("ThrottlingException".to_owned());
    throttled.http_status = Some(429);
    throttled.retry_after = Some(Duration::from_secs(2));

    let mut quota = AwsFailure::new("RunMicrovm");
    quota.code = Some("ServiceQuotaExceededException".to_owned());
    quota.http_status = Some(402);
    quota.quota_code = Some("L-1234ABCD".to_owned());

    let exit = from_end_event(
        EndEventData {
            status: "exited".to_owned(),
            exit_code: 2,
            signal: None,
            error: None,
        },
        CommandOutput {
            stdout: String::new(),
            stderr: "ls: cannot access '/nope'".to_owned(),
            truncated: false,
        },
        "ls /nope",
    );

    vec![
        exit.expect_err("a non-zero exit is an error"),
        from_aws(throttled),
        from_aws(quota),
        from_grpc(GrpcFailure::new(
            GrpcCode::NotFound,
            "missing path",
            true,
            CallContext::filesystem("files.read"),
        )),
        from_grpc(GrpcFailure::new(
            GrpcCode::Unavailable,
            "suspending",
            true,
            CallContext::new("commands.run"),
        )),
        from_grpc(GrpcFailure::new(
            GrpcCode::ResourceExhausted,
            "disk_full",
            true,
            CallContext::filesystem("files.write"),
        )),
        no_credentials("no providers in chain provided credentials"),
        SandboxError::sandbox_lifetime(
            "timeout",
            Duration::from_secs(36_000),
            Duration::from_secs(28_800),
        ),
    ]
}

fn main() {
    for err in examples() {
        println!("kind:     {}", err.kind());
        println!("classify: {}", err.classify().to_json());
        println!("message:  {err}");
        println!("decision: {}", decide(&err));
        println!();
    }
}
