//! Matching on `SandboxError`: what a service does about each failure.
//!
//! Every error here is real: it is produced by a sandbox on the embedded local
//! backend (set `RAYITO_BACKEND=aws` to use your AWS account instead). Run with
//! `cargo run --example errors`.

use std::time::Duration;

use rayito::error::TimeoutScope;
use rayito::{CommandOptions, Sandbox, SandboxBuilder, SandboxError};

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
        SandboxError::FileNotFound { .. } => "create the file first".to_owned(),
        SandboxError::Authentication { .. } => "fix credentials; do not retry".to_owned(),
        e if e.is_retryable() => "retry later or on a fresh sandbox".to_owned(),
        e if e.classify().retry_with_larger_limits => "retry with larger limits".to_owned(),
        _ => "give up and report".to_owned(),
    }
}

fn show(what: &str, err: &SandboxError) {
    println!("{what}");
    println!("  kind:     {}", err.kind());
    println!("  classify: {}", err.classify().to_json());
    println!("  message:  {err}");
    println!("  decision: {}", decide(err));
    println!();
}

fn builder() -> SandboxBuilder {
    match std::env::var("RAYITO_BACKEND").as_deref() {
        Ok("aws") => Sandbox::builder(),
        _ => Sandbox::builder().local(),
    }
}

#[tokio::main]
async fn main() -> Result<(), SandboxError> {
    // Refused before any I/O: above the platform cap of 8 h.
    if let Err(err) = builder()
        .timeout(Duration::from_secs(36_000))
        .create()
        .await
    {
        show("a timeout above the cap", &err);
    }

    let sandbox = builder().create().await?;
    if let Err(err) = sandbox.commands().run("ls /nope").await {
        show("a command that exits non-zero", &err);
    }
    let one_second = CommandOptions::new().timeout(Duration::from_secs(1));
    if let Err(err) = sandbox.commands().run_with("sleep 5", one_second).await {
        show("a command past its timeout", &err);
    }
    if let Err(err) = sandbox.files().read("/home/user/missing.csv").await {
        show("a file that does not exist", &err);
    }
    // A kernel exception is data, not an error.
    let execution = sandbox.run_code("1 / 0").await?;
    if let Some(error) = &execution.error {
        println!(
            "a kernel exception is data: {}: {}\n",
            error.name, error.value
        );
    }

    sandbox.kill().await?;
    if let Err(err) = sandbox.run_code("1 + 1").await {
        show("a killed sandbox used again", &err);
    }
    Ok(())
}
