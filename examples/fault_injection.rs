//! Testing a service against sandbox failures: a small "job runner"
//! service, and the checks its own test suite would make, each against a
//! failure injected on the embedded local backend (`LocalFaults`, guide in
//! docs/testing.md): throttled creates that its retries absorb, an account
//! throttled for good, a connection cut mid-command, a sandbox that dies
//! mid-command, a full disk.
//!
//! ```text
//! cargo run --example fault_injection
//! ```
//!
//! In a real suite each check is a `#[tokio::test]`; here they run one
//! after the other in `main`, because the counted faults (throttling) apply
//! to the whole process's local backend. No AWS account is needed: faults
//! exist on the local backend only.

use std::time::Duration;

use rayito::{Client, LocalFaults, Sandbox, SandboxError};

/// The service under test: runs a job's script in a sandbox, and decides
/// what each failure means for its caller.
struct JobRunner {
    client: Client,
}

/// What the service tells its own caller.
#[derive(Debug, PartialEq)]
enum JobOutcome {
    /// The script's output.
    Done(String),
    /// Try again later (the platform is busy); after this long if known.
    Busy(Option<Duration>),
    /// The job's data does not fit.
    TooBig,
}

impl JobRunner {
    /// Runs `script` in `sandbox`; when the sandbox dies under the job, runs
    /// it once more on a fresh sandbox (the job is idempotent).
    async fn run_in(&self, sandbox: &Sandbox, script: &str) -> Result<JobOutcome, SandboxError> {
        match sandbox.commands().run(script).await {
            Ok(out) => Ok(JobOutcome::Done(out.stdout)),
            Err(SandboxError::SandboxNotFound { .. }) => {
                let fresh = self.client.sandbox().create().await?;
                let out = fresh.commands().run(script).await;
                let _ = fresh.kill().await;
                Ok(JobOutcome::Done(out?.stdout))
            }
            Err(err) => Err(err),
        }
    }

    /// Creates a sandbox for a job, or says the platform is busy.
    async fn start(&self) -> Result<Result<Sandbox, JobOutcome>, SandboxError> {
        match self.client.sandbox().create().await {
            Ok(sandbox) => Ok(Ok(sandbox)),
            Err(SandboxError::RateLimit { retry_after, .. }) => {
                Ok(Err(JobOutcome::Busy(retry_after)))
            }
            Err(err @ SandboxError::Capacity { .. }) if err.is_retryable() => {
                Ok(Err(JobOutcome::Busy(None)))
            }
            Err(err) => Err(err),
        }
    }

    /// Stores the job's input in the sandbox.
    async fn upload(&self, sandbox: &Sandbox, data: &str) -> Result<JobOutcome, SandboxError> {
        match sandbox.files().write("/home/user/input", data).await {
            Ok(_) => Ok(JobOutcome::Done(String::new())),
            Err(SandboxError::DiskFull { .. }) => Ok(JobOutcome::TooBig),
            Err(err) => Err(err),
        }
    }
}

/// A failed check of the service's test suite.
fn check(what: &str, ok: bool, detail: &dyn std::fmt::Debug) -> Result<(), String> {
    if ok {
        println!("ok: {what}");
        Ok(())
    } else {
        Err(format!("FAILED: {what}: {detail:?}"))
    }
}

async fn scenarios(
    service: &JobRunner,
    faults: &LocalFaults,
) -> Result<(), Box<dyn std::error::Error>> {
    // Retries: two throttled creates are absorbed by the SDK's retries.
    faults.throttle_creates(2, Duration::ZERO);
    let sandbox = service.start().await?;
    check("throttled creates are retried", sandbox.is_ok(), &"")?;
    let sandbox = sandbox.map_err(|outcome| format!("{outcome:?}"))?;

    // A throttled account: every create throttled, the service says busy.
    faults.throttle_creates(1_000, Duration::from_secs(0));
    let outcome = service.start().await?;
    let busy = matches!(&outcome, Err(JobOutcome::Busy(Some(_))));
    check("a throttled account is reported busy", busy, &outcome.err())?;
    faults.clear();

    // Reconnects: a cut mid-command is invisible to the service.
    let job = service.run_in(&sandbox, "sleep 1; echo reconnected");
    let cut = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        faults.cut_connections(sandbox.id())
    };
    let (outcome, cut) = tokio::join!(job, cut);
    cut?;
    let outcome = outcome?;
    check(
        "a cut connection is reconnected",
        outcome == JobOutcome::Done("reconnected\n".into()),
        &outcome,
    )?;

    // A sandbox that dies mid-command: the service re-runs on a fresh one.
    let doomed = service.client.sandbox().create().await?;
    let job = service.run_in(&doomed, "sleep 2; echo survived");
    let kill = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        faults.kill_agent(doomed.id())
    };
    let (outcome, kill) = tokio::join!(job, kill);
    kill?;
    let outcome = outcome?;
    check(
        "a sandbox that dies mid-command is replaced",
        outcome == JobOutcome::Done("survived\n".into()),
        &outcome,
    )?;

    // A full disk: the service says the job is too big.
    faults.fill_disk(sandbox.id())?;
    let outcome = service.upload(&sandbox, "a,b\n1,2\n").await?;
    check(
        "a full disk is reported",
        outcome == JobOutcome::TooBig,
        &outcome,
    )?;

    sandbox.kill().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let client = Client::local().await?;
    let faults = client.local_faults()?;
    let service = JobRunner { client };
    scenarios(&service, &faults).await?;
    println!("all fault scenarios passed");
    Ok(())
}
