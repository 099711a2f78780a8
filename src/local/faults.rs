//! [`LocalFaults`]: the failures of AWS and of a sandbox, injected on the
//! embedded local backend so that a service's own tests can meet them.
//!
//! A thin, stable face over the emulator's fault injection: its names and
//! arguments are the SDK's (a sandbox id, a count, a `Duration`), never the
//! emulator's types, so the emulator may change underneath. Each method's
//! doc names the [`SandboxError`] kind the SDK then returns (docs/errors.md,
//! docs/testing.md); `tests/local_faults.rs` produces each one for real.

use std::time::Duration;

use rayito_emulator::{Faults, Operation};

use crate::error::SandboxError;

/// Fault injection on the embedded local backend: what a service's tests
/// use to meet throttling, capacity and quota errors, a cut connection, a
/// sandbox whose agent dies, a full disk, without an AWS account.
///
/// Get one from a local client: [`Client::local_faults`](crate::Client::local_faults).
/// Every method acts at once and never blocks.
///
/// The backend is one per process, so the counted faults (throttling,
/// capacity, quota, proxy statuses, held builds) apply to every client and
/// sandbox of the process that makes the calls they name: a test that
/// injects them wants a process of its own (cargo-nextest runs each test in
/// one) or tests that do not run at the same time. The faults that name a
/// sandbox touch only that sandbox. docs/testing.md is the guide.
///
/// Only with the `local` cargo feature (on by default).
#[derive(Clone)]
pub struct LocalFaults {
    faults: Faults,
}

crate::secret::redacted_debug!(non_exhaustive LocalFaults);

/// Whole seconds, as the `Retry-After` header carries them.
fn whole_seconds(wait: Duration) -> u32 {
    u32::try_from(wait.as_secs()).unwrap_or(u32::MAX)
}

impl LocalFaults {
    pub(crate) fn new(faults: Faults) -> Self {
        Self { faults }
    }

    /// The next `count` creates (RunMicrovm calls) are throttled
    /// (ThrottlingException, `Retry-After: retry_after` in whole seconds)
    /// and create nothing.
    ///
    /// The SDK retries a throttled call after `retry_after` (5 attempts in
    /// all by default, [`RetryPolicy`](crate::error::RetryPolicy)'s
    /// `rate_limit`): up to 4 throttles, a create still succeeds, only
    /// later. Past its attempts, create fails with
    /// [`SandboxError::RateLimit`] (kind `rate_limit`, retryable,
    /// `retry_after` set): "control plane call RunMicrovm was throttled:
    /// Rate exceeded; retry after N s".
    pub fn throttle_creates(&self, count: u32, retry_after: Duration) {
        self.faults
            .throttle(Operation::RunMicrovm, count, whole_seconds(retry_after));
    }

    /// The next `count` calls of the control-plane operation named
    /// `operation` (its AWS name: `RunMicrovm` for a create, `GetMicrovm`
    /// for `get_info` and the readiness wait, `ListMicrovms`,
    /// `TerminateMicrovm` for a kill, `SuspendMicrovm`, `ResumeMicrovm`,
    /// `CreateMicrovmAuthToken` for a connect...) are throttled, as in
    /// [`LocalFaults::throttle_creates`]: retried, then
    /// [`SandboxError::RateLimit`] (kind `rate_limit`).
    ///
    /// # Errors
    /// [`SandboxError::InvalidArgument`] (`operation`) for a name the
    /// local backend does not serve; nothing is injected.
    pub fn throttle(
        &self,
        operation: &str,
        count: u32,
        retry_after: Duration,
    ) -> Result<(), SandboxError> {
        let op = Operation::from_name(operation).ok_or_else(|| {
            SandboxError::invalid_argument(
                "operation",
                "not a control-plane operation of the local backend (an AWS name such as RunMicrovm or GetMicrovm)",
            )
        })?;
        self.faults.throttle(op, count, whole_seconds(retry_after));
        Ok(())
    }

    /// The next `count` creates find no capacity (InsufficientCapacityException)
    /// and create nothing.
    ///
    /// The SDK retries with backoff inside its capacity budget (60 s by
    /// default; [`RetryPolicy`](crate::error::RetryPolicy)'s `capacity`),
    /// with one client token, so a create succeeds once the faults are
    /// spent. Past the budget: [`SandboxError::Capacity`] (kind
    /// `capacity`, retryable, `code: None`): "control plane call RunMicrovm
    /// found no capacity: Insufficient capacity to run the MicroVM. Retry
    /// later.; retry later or use another region".
    pub fn insufficient_capacity(&self, count: u32) {
        self.faults.insufficient_capacity(count);
    }

    /// The next `count` creates meet a spent account quota
    /// (ServiceQuotaExceededException) and create nothing. Never retried:
    /// create fails at once with [`SandboxError::QuotaExceeded`] (kind
    /// `quota_exceeded`, not retryable, `retry_with_larger_limits`):
    /// "control plane call RunMicrovm hit an account quota: Concurrent
    /// MicroVMs quota exceeded.; free resources or ask AWS for a higher
    /// quota".
    pub fn quota_exceeded(&self, count: u32) {
        self.faults.quota_exceeded(count);
    }

    /// The next `count` requests to any sandbox (its proxy) answer the
    /// plain HTTP `status`, as the AWS proxy in front of a MicroVM does:
    ///
    /// - `403` (the proxy refused the sandbox's token): once is invisible
    ///   (the SDK mints a fresh token and retries); twice in a row is
    ///   [`SandboxError::Authentication`] with `proxy_rejected: true`.
    /// - `429`, `502`, `503`, `504`: a call the SDK may repeat (files,
    ///   info, a stream's reconnect) waits them out inside its reconnect
    ///   budget, so a few are invisible; past the budget, and at once for a
    ///   command's start (never sent twice: it may have run), the call
    ///   fails with [`SandboxError::Sandbox`] of code `connection_lost`
    ///   (retryable): "the AWS proxy could not reach the sandbox for
    ///   commands.run (http 502); retry, or check that the sandbox is still
    ///   running".
    ///
    /// # Errors
    /// [`SandboxError::InvalidArgument`] (`status`) for a status outside
    /// 400..=599; nothing is injected.
    pub fn proxy_status(&self, count: u32, status: u16) -> Result<(), SandboxError> {
        if self.faults.proxy_status(count, status) {
            Ok(())
        } else {
            Err(SandboxError::invalid_argument(
                "status",
                "a proxy status must be an HTTP error, in 400..=599",
            ))
        }
    }

    /// Drops every live connection to the sandbox at once (its callers see
    /// a reset mid-stream; new connections are accepted). The SDK
    /// reconnects: a unary call is retried, a running command's output
    /// stream is resumed where it stopped, so the caller sees no error.
    ///
    /// # Errors
    /// [`SandboxError::SandboxNotFound`] when no sandbox `sandbox_id` runs
    /// on the local backend.
    pub fn cut_connections(&self, sandbox_id: &str) -> Result<(), SandboxError> {
        found(self.faults.cut_connections(sandbox_id), sandbox_id)
    }

    /// Kills the sandbox's agent abruptly, as if the MicroVM crashed: its
    /// processes die, it goes TERMINATED. A command running in it, and
    /// every later call on it, fails with [`SandboxError::SandboxNotFound`]
    /// (kind `sandbox_not_found`, not retryable): "the sandbox ID does not
    /// exist or has terminated; create a new sandbox".
    ///
    /// # Errors
    /// [`SandboxError::SandboxNotFound`] when no sandbox `sandbox_id` runs
    /// on the local backend.
    pub fn kill_agent(&self, sandbox_id: &str) -> Result<(), SandboxError> {
        found(self.faults.kill_agent(sandbox_id), sandbox_id)
    }

    /// Makes the sandbox's disk full for writes: every later file write
    /// through [`Sandbox::files`](crate::Sandbox::files) fails with
    /// [`SandboxError::DiskFull`] (kind `disk_full`, not retryable,
    /// `retry_with_larger_limits`): "the sandbox has less than 256 MiB of
    /// free disk (files.write); free space or use a larger disk". For the
    /// life of the sandbox;
    /// [`LocalFaults::clear`] does not undo it.
    ///
    /// # Errors
    /// [`SandboxError::SandboxNotFound`] when no sandbox `sandbox_id` runs
    /// on the local backend.
    pub fn fill_disk(&self, sandbox_id: &str) -> Result<(), SandboxError> {
        found(
            self.faults.set_disk_reserve(sandbox_id, u64::MAX),
            sandbox_id,
        )
    }

    /// Makes the sandbox's own deadline (its `timeout`) pass now, as it
    /// would on AWS: its agent stops serving and the next call fails with
    /// [`SandboxError::Timeout`] of scope `sandbox` (kind `timeout`, not
    /// retryable): "the sandbox reached its timeout (commands.run); extend
    /// it with set_timeout before it expires, or create a new sandbox".
    ///
    /// # Errors
    /// [`SandboxError::SandboxNotFound`] when no sandbox `sandbox_id` runs
    /// on the local backend.
    pub fn expire_deadline(&self, sandbox_id: &str) -> Result<(), SandboxError> {
        found(self.faults.expire_deadline(sandbox_id), sandbox_id)
    }

    /// Holds template builds (`true`): every build started or waiting
    /// stays in progress until `hold_builds(false)` or
    /// [`LocalFaults::clear`]. No error: a build's caller waits (and meets
    /// its own build timeout, kind `build` with reason `build_timeout`),
    /// and an eleventh build at once meets the account's build quota (kind
    /// `build`, reason `build_quota`).
    pub fn hold_builds(&self, hold: bool) {
        self.faults.hold_builds(hold);
    }

    /// The local Service Quotas answers `value` for the quota `code` (a
    /// Lambda MicroVMs quota: `L-CD1C0CC4` is the memory in GB), or leaves
    /// it out of its listing with `None`, until changed again or
    /// [`LocalFaults::clear`]: an account with a reduced quota, or one
    /// Service Quotas does not list, as [`Client::quotas`](crate::Client::quotas)
    /// then reports it (docs/quotas.md). Without it every quota is the
    /// region's default.
    pub fn applied_quota(&self, code: &str, value: Option<f64>) {
        self.faults.applied_quota(code, value);
    }

    /// Forgets every pending counted fault (throttling, capacity, quota,
    /// proxy statuses, applied quotas) and releases held builds. A killed agent, an expired
    /// deadline or a filled disk stays: those sandboxes are done, create
    /// new ones.
    pub fn clear(&self) {
        self.faults.clear();
    }
}

/// `Ok` when the emulator found the sandbox, else `SandboxNotFound`.
fn found(applied: bool, sandbox_id: &str) -> Result<(), SandboxError> {
    if applied {
        Ok(())
    } else {
        Err(SandboxError::sandbox_not_found(sandbox_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_after_is_whole_seconds_saturated() {
        assert_eq!(whole_seconds(Duration::from_millis(1_900)), 1);
        assert_eq!(whole_seconds(Duration::MAX), u32::MAX);
    }
}
