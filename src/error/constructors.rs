//! Constructors for the errors the SDK detects itself (before or around a
//! call), and that users may build to test their own error handling.
//!
//! Errors that come from a server are built by [`super::map`] instead.

use std::borrow::Cow;
use std::time::Duration;

use super::codes::{
    BuildReason, CapturedText, GrpcCode, MAX_TOKEN_CHARS, MountCode, PersistenceCode,
    PersistenceOp, SandboxCode, StackCode, TimeoutScope, TransferCode, TransferDirection,
    TransferReason, VolumeMountCode, clean_token,
};
use super::map::index;
use super::messages::{self as m, Template};
use super::wire::{MAX_REASON_CHARS, clean_feature, clean_reason, line};
use super::{ErrorMeta, SandboxError};
use crate::state::SandboxState;

pub(crate) fn meta(template: Template, args: &[(&str, &str)]) -> Box<ErrorMeta> {
    Box::new(ErrorMeta::new(template.render(args)))
}

impl SandboxError {
    /// `InvalidArgument`: the SDK refused a value before any call.
    ///
    /// `reason` is our own text (what is wrong, what is allowed); it must not
    /// quote the value when the value could be a secret.
    pub fn invalid_argument(argument: &'static str, reason: impl AsRef<str>) -> Self {
        // Kept as the wire form keeps a name (a name that is already a
        // clean token, as every name of the SDK is, stays borrowed).
        let name = line(Some(argument), MAX_TOKEN_CHARS).map(|clean| {
            if clean == argument {
                Cow::Borrowed(argument)
            } else {
                Cow::Owned(clean)
            }
        });
        Self::InvalidArgument {
            argument: name,
            meta: meta(
                m::SDK_INVALID_ARGUMENT,
                &[("argument", argument), ("reason", reason.as_ref())],
            ),
        }
    }

    /// `Sandbox{closed}`: the handle was already killed or closed.
    pub fn closed() -> Self {
        Self::sandbox_with(SandboxCode::Closed, meta(m::SDK_CLOSED, &[]))
    }

    /// `Sandbox{cancelled}`: the caller cancelled `feature`.
    pub fn cancelled(feature: &str) -> Self {
        Self::sandbox_with(
            SandboxCode::Cancelled,
            meta(m::SDK_CANCELLED, &[("feature", feature)]),
        )
    }

    /// `Sandbox{protocol_violation}`: the agent sent something the SDK
    /// refuses. `what` is our own fixed description, never agent text.
    pub fn protocol_violation(feature: &str, what: &'static str) -> Self {
        Self::sandbox_with(
            SandboxCode::ProtocolViolation,
            meta(
                m::SDK_PROTOCOL_VIOLATION,
                &[("feature", feature), ("what", what)],
            ),
        )
    }

    /// `Sandbox{internal}`: an invariant of the SDK broke.
    pub fn internal(feature: &str, what: &'static str) -> Self {
        Self::sandbox_with(
            SandboxCode::Internal,
            meta(m::SDK_INTERNAL, &[("feature", feature), ("what", what)]),
        )
    }

    /// `Sandbox{connection_lost}`: the agent stopped answering and the
    /// transport's retries are spent. `detail` is transport text (never a token).
    pub fn connection_lost(feature: &str, detail: Option<&str>) -> Self {
        let detail = detail.map(|d| super::map::redact::sanitize_remote_text(d, 512));
        Self::sandbox_with(
            SandboxCode::ConnectionLost,
            meta(
                m::GRPC_CONNECTION_LOST,
                &[
                    ("feature", feature),
                    ("detail", &m::detail(detail.as_deref())),
                ],
            ),
        )
    }

    /// `Sandbox{agent_vm_lost}`: the MicroVM behind a session disappeared.
    pub fn agent_vm_lost(feature: &str) -> Self {
        Self::sandbox_with(
            SandboxCode::AgentVmLost,
            meta(m::SDK_AGENT_VM_LOST, &[("feature", feature)]),
        )
    }

    /// `SandboxNotReady`: the agent did not become ready within `waited`.
    ///
    /// `state` is the MicroVM state last seen, `state_reason` the control
    /// plane's reason for it (redacted before it is kept).
    pub fn not_ready(
        state: Option<SandboxState>,
        state_reason: Option<&str>,
        waited: Duration,
    ) -> Self {
        let clean = |s: &str| super::map::redact::sanitize_remote_text(s, 256);
        // A state the SDK does not know is server text: kept redacted.
        let state = state
            .map(|s| match s {
                SandboxState::Unknown(raw) => SandboxState::from(clean(raw.as_str()).as_str()),
                known => known,
            })
            .filter(|s| !s.as_str().is_empty());
        let shown = state
            .as_ref()
            .map_or_else(|| "unknown".to_owned(), |s| clean(s.as_str()));
        let state_reason = state_reason.map(clean).filter(|s| !s.is_empty());
        let text = m::SDK_NOT_READY.render(&[
            ("waited", &m::duration(waited)),
            ("state", &shown),
            ("detail", &m::detail(state_reason.as_deref())),
        ]);
        Self::SandboxNotReady {
            state,
            state_reason,
            meta: Box::new(ErrorMeta::new(text)),
        }
    }

    /// `SandboxLifetime`: `setting` (`timeout`, `max_lifetime`) of
    /// `requested` is above the platform cap `cap` (28,800 s on AWS).
    pub fn sandbox_lifetime(setting: &'static str, requested: Duration, cap: Duration) -> Self {
        Self::SandboxLifetime {
            meta: meta(
                m::SDK_LIFETIME,
                &[
                    ("setting", setting),
                    ("requested", &m::duration(requested)),
                    ("cap", &m::duration(cap)),
                ],
            ),
        }
    }

    /// `SandboxLifetime`: the sandbox `sandbox_id` was terminated because
    /// it reached its maximum duration (noticed while reconnecting).
    pub fn lifetime_reached(sandbox_id: &str) -> Self {
        let id = super::map::redact::sanitize_remote_text(sandbox_id, 128);
        Self::SandboxLifetime {
            meta: meta(m::SDK_LIFETIME_REACHED, &[("sandbox_id", &id)]),
        }
    }

    /// `Sandbox{connection_lost}` after the reconnect contract gave up:
    /// the sandbox did not answer Health within `waited` (`attempts`
    /// probes). Both are in the meta too: `meta().attempts()` and
    /// `meta().elapsed()`.
    pub fn reconnect_gave_up(feature: &str, waited: Duration, attempts: u32) -> Self {
        let mut err = Self::sandbox_with(
            SandboxCode::ConnectionLost,
            meta(
                m::SDK_RECONNECT_GAVE_UP,
                &[
                    ("feature", feature),
                    ("waited", &m::duration(waited)),
                    ("attempts", &attempts.to_string()),
                ],
            ),
        )
        .with_attempts(attempts);
        err.meta_mut().elapsed = Some(waited);
        err
    }

    /// `SandboxNotFound` for a sandbox id the SDK knows is gone.
    pub fn sandbox_not_found(sandbox_id: &str) -> Self {
        let id = super::map::redact::sanitize_remote_text(sandbox_id, 128);
        Self::SandboxNotFound {
            meta: meta(m::SDK_SANDBOX_NOT_FOUND, &[("sandbox_id", &id)]),
        }
    }

    /// `SandboxState`: the sandbox is in `state` (e.g. `suspended`);
    /// `remedy` says what to do (e.g. `call resume()`).
    pub fn sandbox_state(state: &'static str, remedy: &'static str) -> Self {
        Self::SandboxState {
            meta: meta(
                m::SDK_SANDBOX_STATE,
                &[("state", state), ("remedy", remedy)],
            ),
        }
    }

    /// `Timeout` of `scope` detected by the SDK.
    ///
    /// `feature` names the call (`request`), the operation waited for
    /// (`state_wait`: `pause`, `resume`) or the command (`command`);
    /// `after` is the limit, when known.
    pub fn timeout(scope: TimeoutScope, feature: &str, after: Option<Duration>) -> Self {
        let within = m::within(after);
        let text = match &scope {
            TimeoutScope::Execution => m::TIMEOUT_EXECUTION.render(&[("within", &within)]),
            TimeoutScope::StateWait => {
                m::TIMEOUT_STATE_WAIT.render(&[("feature", feature), ("within", &within)])
            }
            TimeoutScope::Sandbox => m::GRPC_SANDBOX_TIMEOUT.render(&[("feature", feature)]),
            TimeoutScope::Command => m::END_TIMEOUT.render(&[("program", feature)]),
            TimeoutScope::Request | TimeoutScope::Unknown(_) => {
                m::TIMEOUT_REQUEST.render(&[("feature", feature), ("within", &within)])
            }
        };
        Self::Timeout {
            scope,
            meta: Box::new(ErrorMeta::new(text)),
        }
    }

    /// `Unimplemented`: `feature` is not available; `reason` says why;
    /// `doc` points at the page that documents it.
    pub fn unimplemented(
        feature: impl Into<Box<str>>,
        reason: impl Into<Box<str>>,
        doc: Option<&str>,
    ) -> Self {
        let feature = clean_feature(&feature.into());
        let reason = clean_reason(&reason.into());
        let doc = line(doc, MAX_REASON_CHARS);
        let see = doc
            .as_ref()
            .map_or_else(String::new, |d| format!("; see {d}"));
        let text = m::SDK_UNIMPLEMENTED.render(&[
            ("feature", &feature),
            ("reason", &reason),
            ("see", &see),
        ]);
        Self::Unimplemented {
            feature,
            reason,
            doc: doc.map(Into::into),
            meta: Box::new(ErrorMeta::new(text)),
        }
    }

    /// `LifecycleUnsupported`: this sandbox cannot do the lifecycle
    /// operation `feature` (e.g. `pause`).
    pub fn lifecycle_unsupported(
        feature: impl Into<Box<str>>,
        reason: impl Into<Box<str>>,
    ) -> Self {
        let feature = clean_feature(&feature.into());
        let reason = clean_reason(&reason.into());
        let text =
            m::SDK_LIFECYCLE_UNSUPPORTED.render(&[("feature", &feature), ("reason", &reason)]);
        Self::LifecycleUnsupported {
            feature,
            reason,
            meta: Box::new(ErrorMeta::new(text)),
        }
    }

    /// `Sandbox{kernel_failed}`: the agent said (Health's
    /// `rayito-kernel-failure` header) that its kernel cannot start.
    /// `reason` is the agent's text, cleaned and bounded.
    pub(crate) fn kernel_failed(reason: &str) -> Self {
        let reason = super::map::redact::sanitize_remote_text(reason, 256);
        Self::sandbox_with(
            SandboxCode::KernelFailed,
            meta(m::SDK_KERNEL_FAILED, &[("reason", &reason)]),
        )
    }

    /// `LifecycleUnsupported`: `set_timeout` on a sandbox created without a
    /// managed lifecycle.
    pub(crate) fn lifecycle_unmanaged() -> Self {
        Self::lifecycle_unsupported("set_timeout", m::SDK_LIFECYCLE_UNMANAGED_REASON.text)
    }

    /// The same error, its message saying that a kill of `sandbox_id`
    /// failed and the MicroVM may still be running (the variant, and so
    /// what to do about it, is kept).
    pub(crate) fn kill_failed(mut self, sandbox_id: &str) -> Self {
        let meta = self.meta_mut();
        let cause = std::mem::take(&mut meta.message);
        meta.set_message(
            &m::SDK_KILL_FAILED.render(&[("sandbox_id", sandbox_id), ("cause", &cause)]),
        );
        self
    }

    /// The same error, from a `create` that kept its MicroVM
    /// `sandbox_id` running (keep on failure): the id in
    /// [`ErrorMeta::kept_sandbox_id`] and, unless the message already
    /// names it (an index write's), in the message.
    pub(crate) fn kept_on_failure(mut self, sandbox_id: &str) -> Self {
        let id = super::map::redact::sanitize_remote_text(sandbox_id, 256);
        let meta = self.meta_mut();
        if !meta.message.contains(&id) {
            let cause = std::mem::take(&mut meta.message);
            meta.set_message(
                &m::SDK_KEPT_ON_FAILURE.render(&[("cause", &cause), ("sandbox_id", &id)]),
            );
        }
        meta.kept_sandbox_id = Some(id);
        self
    }

    /// The error a `run_code` Reattach failed with, after a cut: NOT_FOUND
    /// (the agent no longer keeps the execution) and OUT_OF_RANGE (it
    /// dropped the output since the cut) stay `NotFound` (errors.md 3.2)
    /// with a message saying that the cell's later output is lost and the
    /// cell was not run again; anything else is kept as it is.
    pub(crate) fn reattach_failed(mut self) -> Self {
        let template = match (&self, self.meta().grpc_code()) {
            (Self::NotFound { .. }, Some(GrpcCode::NotFound)) => m::SDK_CELL_EXPIRED,
            (Self::NotFound { .. }, Some(GrpcCode::OutOfRange)) => m::SDK_CELL_OUTPUT_DROPPED,
            _ => return self,
        };
        self.meta_mut().set_message(&template.render(&[]));
        self
    }

    /// `Build` without a failed step: only `reason` says why.
    fn build_because(reason: BuildReason, meta: Box<ErrorMeta>) -> Self {
        Self::Build {
            reason: Some(reason),
            step: None,
            command: None,
            exit_code: None,
            log_tail: CapturedText::default(),
            meta,
        }
    }

    /// `Build`: step `step` of the build failed (BuildKit's `[step/n]`),
    /// running `command`, with `exit_code` when the log says it;
    /// `log_tail` is the end of the build log. Neither the command nor
    /// the log is in the message: they may hold anything the step printed.
    pub fn build_step_failed(
        step: u32,
        command: Option<&str>,
        exit_code: Option<i32>,
        log_tail: impl Into<String>,
    ) -> Self {
        let exit = exit_code.map_or_else(String::new, |c| {
            format!(" with exit code {}", m::group_i64(i64::from(c)))
        });
        Self::Build {
            reason: None,
            step: Some(step),
            command: command.map(CapturedText::new),
            exit_code,
            log_tail: CapturedText::new(log_tail),
            meta: meta(
                m::BUILD_STEP_FAILED,
                &[("step", &m::group(u64::from(step))), ("exit", &exit)],
            ),
        }
    }

    /// `Build`: the build failed and its log names no failed step.
    /// `detail` is our own text (never the service's raw state reason).
    pub fn build_failed(detail: Option<&'static str>, log_tail: impl Into<String>) -> Self {
        Self::Build {
            reason: None,
            step: None,
            command: None,
            exit_code: None,
            log_tail: CapturedText::new(log_tail),
            meta: meta(m::BUILD_FAILED, &[("detail", &m::detail(detail))]),
        }
    }

    /// `Build { build_quota }`: `limit` builds are already running.
    pub fn build_quota(limit: u32) -> Self {
        Self::build_because(
            BuildReason::BuildQuota,
            meta(m::BUILD_QUOTA, &[("limit", &m::group(u64::from(limit)))]),
        )
    }

    /// `Build { aws_error }`: the image service refused the image create
    /// or update with error `code` (its message is not kept: it may
    /// quote the request).
    pub fn build_rejected(code: &str) -> Self {
        let code = crate::error::map::aws::sanitize_aws_code(code);
        // A peer's word: only an error code's shape goes into the message.
        let plain =
            !code.is_empty() && code.len() <= 64 && code.bytes().all(|b| b.is_ascii_alphanumeric());
        let code = if plain { code } else { "an unrecognised error" };
        Self::build_because(
            BuildReason::AwsError,
            meta(m::BUILD_REJECTED, &[("code", code)]),
        )
    }

    /// `Build { ready_server_error | ready_client_error }`: the built
    /// image's ready hook answered HTTP 5xx (`server_error`) or 4xx.
    pub fn build_ready_failed(server_error: bool) -> Self {
        let (reason, status) = if server_error {
            (BuildReason::ReadyServerError, "5xx")
        } else {
            (BuildReason::ReadyClientError, "4xx")
        };
        Self::build_because(reason, meta(m::BUILD_READY, &[("status", status)]))
    }

    /// `Build { build_timeout }`: the build did not settle within `waited`.
    pub fn build_timeout(waited: Duration) -> Self {
        Self::build_because(
            BuildReason::BuildTimeout,
            meta(m::BUILD_TIMEOUT, &[("waited", &m::duration(waited))]),
        )
    }

    /// `Build { base_image_missing_entrypoint }`: the base Dockerfile has
    /// no `CMD` / `ENTRYPOINT` line to put the template's layer before.
    pub fn base_image_missing_entrypoint() -> Self {
        Self::build_because(
            BuildReason::BaseImageMissingEntrypoint,
            meta(m::BUILD_BASE_MISSING_ENTRYPOINT, &[]),
        )
    }

    /// `Build { base_image_not_s3 }`: the base image's artifact is not in S3.
    pub fn base_image_not_s3() -> Self {
        Self::build_because(BuildReason::BaseImageNotS3, meta(m::BUILD_BASE_NOT_S3, &[]))
    }

    /// `Build { base_image_missing_artifact }`: the base image's artifact
    /// is gone.
    pub fn base_image_missing_artifact() -> Self {
        Self::build_because(
            BuildReason::BaseImageMissingArtifact,
            meta(m::BUILD_BASE_MISSING_ARTIFACT, &[]),
        )
    }

    /// `Build { context_path_outside }`: the source of the template's
    /// `step`-th step (a `copy`, counted from 1) lies outside the build
    /// context. The path is not in the message.
    pub fn context_path_outside(step: usize) -> Self {
        Self::build_because(
            BuildReason::ContextPathOutside,
            meta(
                m::BUILD_CONTEXT_OUTSIDE,
                &[("step", &m::group(step as u64))],
            ),
        )
    }

    /// `Build { context_path_missing }`: the source of the template's
    /// `step`-th step (a `copy`, counted from 1) does not exist in the
    /// build context, or `.dockerignore` excludes it.
    pub fn context_path_missing(step: usize) -> Self {
        Self::build_because(
            BuildReason::ContextPathMissing,
            meta(
                m::BUILD_CONTEXT_MISSING,
                &[("step", &m::group(step as u64))],
            ),
        )
    }

    /// `Template`: a template name was refused; `reason` is our own text
    /// (it never quotes the name).
    pub fn template_name(reason: &'static str) -> Self {
        Self::Template {
            meta: meta(m::TEMPLATE_NAME, &[("reason", reason)]),
        }
    }

    /// `NotFound`: the base image of a build has no usable version.
    pub fn base_image_no_version() -> Self {
        Self::NotFound {
            meta: meta(m::TEMPLATE_BASE_NO_VERSION, &[]),
        }
    }

    /// `NotFound`: no template (image) of that name exists.
    pub fn template_not_found() -> Self {
        Self::NotFound {
            meta: meta(m::TEMPLATE_NOT_FOUND, &[]),
        }
    }

    /// `NotFound`: sandbox `sandbox_id` has no log stream in `log_group`
    /// (the group does not exist, or no stream of it is the sandbox's):
    /// logging was disabled, the sandbox had no execution role, or it logs
    /// to another group. Both names are cleaned like server text.
    pub fn no_logs(sandbox_id: &str, log_group: &str) -> Self {
        Self::NotFound {
            meta: meta(
                m::LOGS_NONE,
                &[
                    (
                        "sandbox_id",
                        &super::map::redact::sanitize_remote_text(sandbox_id, 256),
                    ),
                    (
                        "resource",
                        &super::map::redact::sanitize_remote_text(log_group, 512),
                    ),
                ],
            ),
        }
    }

    /// `PoolClosed`: a take from a pool that was never started.
    pub fn pool_not_started() -> Self {
        Self::PoolClosed {
            meta: meta(m::POOL_NOT_STARTED, &[]),
        }
    }

    /// `PoolClosed`: a take from, or a start of, a closed pool.
    pub fn pool_closed() -> Self {
        Self::PoolClosed {
            meta: meta(m::POOL_CLOSED, &[]),
        }
    }

    /// `SandboxIndex`: the index call `operation` (e.g. `BatchGetItem`)
    /// failed with the AWS error code `aws_code` (`None`: no usable answer).
    /// The message says what the code means, never AWS's text; a code of an
    /// unexpected shape is not kept.
    pub fn sandbox_index(operation: &str, aws_code: Option<&str>) -> Self {
        let code = index::plain_code(aws_code);
        let (cause, remedy) = index::cause(aws_code);
        let mut meta = meta(
            m::INDEX_FAILED,
            &[
                ("operation", operation),
                ("cause", &cause),
                ("remedy", remedy),
            ],
        );
        meta.aws_code = code.map(str::to_owned);
        Self::SandboxIndex {
            aws_code: code.map(str::to_owned),
            meta,
        }
    }

    /// `SandboxIndex { aws_code: "UnprocessedKeys" }`: DynamoDB still left
    /// keys unprocessed after `attempts` attempts of `operation`, so a list
    /// would have been incomplete.
    pub fn index_unprocessed(operation: &str, attempts: u32) -> Self {
        let meta = meta(
            m::INDEX_UNPROCESSED,
            &[
                ("operation", operation),
                ("attempts", &attempts.to_string()),
            ],
        );
        Self::SandboxIndex {
            aws_code: Some(index::UNPROCESSED_KEYS.to_owned()),
            meta,
        }
    }

    /// `IndexWrite`: create could not write the row of `sandbox_id` (AWS
    /// error code `aws_code`, `None` without a usable answer); its MicroVM
    /// was terminated, or `kept` (keep on failure).
    pub fn index_write(sandbox_id: &str, aws_code: Option<&str>, kept: bool) -> Self {
        let outcome = if kept {
            index::WriteOutcome::Kept
        } else {
            index::WriteOutcome::Terminated
        };
        Self::index_write_with(sandbox_id, aws_code, outcome)
    }

    /// [`SandboxError::index_write`] with every outcome, including a
    /// terminate that failed too.
    pub(crate) fn index_write_with(
        sandbox_id: &str,
        aws_code: Option<&str>,
        outcome: index::WriteOutcome,
    ) -> Self {
        let code = index::plain_code(aws_code);
        let (cause, _) = index::cause(aws_code);
        let template = match outcome {
            index::WriteOutcome::Terminated => m::INDEX_WRITE_TERMINATED,
            index::WriteOutcome::Kept => m::INDEX_WRITE_KEPT,
            index::WriteOutcome::TerminateFailed => m::INDEX_WRITE_TERMINATE_FAILED,
        };
        let mut meta = meta(template, &[("sandbox_id", sandbox_id), ("cause", &cause)]);
        meta.aws_code = code.map(str::to_owned);
        let err = Self::IndexWrite {
            aws_code: code.map(str::to_owned),
            meta,
        };
        match outcome {
            index::WriteOutcome::Kept => err.kept_on_failure(sandbox_id),
            _ => err,
        }
    }

    /// `Template`: the image's agent is too old for templates.
    pub fn template_too_old() -> Self {
        Self::Template {
            meta: meta(m::TEMPLATE_TOO_OLD, &[]),
        }
    }

    fn stack(code: StackCode, meta: Box<ErrorMeta>) -> Self {
        Self::Stack { code, meta }
    }

    /// The command that deploys stack `stack` (`{deploy}`) and the
    /// sentence that runs it again (`{again}`): `rayito setup --yes` for
    /// setup's stacks (`rayito-m0-*`), the optional stacks' own command
    /// otherwise (`rayito mounts policy deploy` for an s3-mounts stack).
    fn stack_commands(stack: &str) -> (&'static str, &'static str) {
        if stack.starts_with("rayito-m0-") {
            ("rayito setup --yes", "run rayito setup --yes again")
        } else if stack.starts_with("rayito-s3-mounts") {
            (
                "rayito mounts policy deploy",
                "run rayito mounts policy deploy again",
            )
        } else {
            ("its deploy command", "deploy it again")
        }
    }

    /// `Stack { failed }`: a resource of stack `stack` failed; `resource`
    /// is its logical id and `status` its CloudFormation status (e.g.
    /// `CREATE_FAILED`). Both are cleaned as tokens; CloudFormation's
    /// reason text is never taken.
    pub fn stack_failed(stack: &str, resource: &str, status: &str) -> Self {
        Self::stack(
            StackCode::Failed,
            meta(
                m::STACK_FAILED,
                &[
                    ("stack", &clean_token(stack)),
                    ("again", Self::stack_commands(stack).1),
                    ("resource", &clean_token(resource)),
                    ("status", &clean_token(status)),
                ],
            ),
        )
    }

    /// `Stack { failed }`: CloudFormation refused `operation` (e.g.
    /// `CreateStack`) for stack `stack` with the error code `aws_code`
    /// (e.g. `AlreadyExistsException`); the error's text is not kept.
    pub fn stack_refused(stack: &str, operation: &str, aws_code: &str) -> Self {
        Self::stack(
            StackCode::Failed,
            meta(
                m::STACK_REFUSED,
                &[
                    ("stack", &clean_token(stack)),
                    ("again", Self::stack_commands(stack).1),
                    ("operation", &clean_token(operation)),
                    ("aws_code", &clean_token(aws_code)),
                ],
            ),
        )
    }

    /// `Stack { blocked }`: stack `stack` is in `status` (e.g.
    /// `ROLLBACK_COMPLETE`), from which CloudFormation cannot update it.
    pub fn stack_blocked(stack: &str, status: &str) -> Self {
        Self::stack(
            StackCode::Blocked,
            meta(
                m::STACK_BLOCKED,
                &[
                    ("stack", &clean_token(stack)),
                    ("again", Self::stack_commands(stack).1),
                    ("status", &clean_token(status)),
                ],
            ),
        )
    }

    /// `Stack { in_progress }`: stack `stack` is still changing (`status`,
    /// e.g. `UPDATE_IN_PROGRESS`), by another operation or past the wait.
    pub fn stack_in_progress(stack: &str, status: &str) -> Self {
        Self::stack(
            StackCode::InProgress,
            meta(
                m::STACK_IN_PROGRESS,
                &[
                    ("stack", &clean_token(stack)),
                    ("again", Self::stack_commands(stack).1),
                    ("status", &clean_token(status)),
                ],
            ),
        )
    }

    /// `Stack { not_found }`: stack `stack` does not exist.
    pub fn stack_not_found(stack: &str) -> Self {
        Self::stack(
            StackCode::NotFound,
            meta(
                m::STACK_NOT_FOUND,
                &[
                    ("stack", &clean_token(stack)),
                    ("deploy", Self::stack_commands(stack).0),
                ],
            ),
        )
    }

    /// `Stack { failed }`: stack `stack` exists but lacks the output
    /// `output` (it was deployed by an older tool or edited by hand).
    pub fn stack_output_missing(stack: &str, output: &str) -> Self {
        Self::stack(
            StackCode::Failed,
            meta(
                m::STACK_OUTPUT_MISSING,
                &[
                    ("stack", &clean_token(stack)),
                    ("deploy", Self::stack_commands(stack).0),
                    ("output", &clean_token(output)),
                ],
            ),
        )
    }

    /// `Persistence { code }`: the checkpoint or restore `op` failed with
    /// `code`, with the message the SDK gives that code (an `interrupted`
    /// one says the connection was cut).
    pub fn persistence(op: PersistenceOp, code: PersistenceCode) -> Self {
        super::map::persistence::persistence(op, code)
    }

    /// `Transfer { code, reason }`: an S3-staged export (a download link, a
    /// large read) failed; the message is `<reason>: <sentence>`.
    pub fn transfer(code: TransferCode, reason: TransferReason) -> Self {
        super::map::transfer::staged(TransferDirection::Export, code, reason)
    }

    /// `FileUpload { code, reason }`: the import of an upload ticket or of
    /// a staged large write failed; the message is `<reason>: <sentence>`.
    pub fn file_upload(code: TransferCode, reason: TransferReason) -> Self {
        super::map::transfer::staged(TransferDirection::Import, code, reason)
    }

    /// `Mount { code }`: an S3 mount failed or did not settle. `message`
    /// is our own, rendered from a `mount.*` template (src/mounts/); it
    /// names the mount path and the code, never the bucket or agent text.
    #[allow(
        dead_code,
        reason = "built by the mounts and volumes parts of issue 46"
    )]
    pub(crate) fn mount(code: MountCode, message: impl AsRef<str>) -> Self {
        Self::Mount {
            code,
            meta: Box::new(ErrorMeta::new(message)),
        }
    }

    /// `Volume`: an EFS volume store operation failed, or a volume's state
    /// after start. `message` is our own, from a `volume.*` template.
    #[allow(
        dead_code,
        reason = "built by the mounts and volumes parts of issue 46"
    )]
    pub(crate) fn volume(message: impl AsRef<str>) -> Self {
        Self::Volume {
            meta: Box::new(ErrorMeta::new(message)),
        }
    }

    /// `VolumeMount { code }`: an EFS volume did not mount. `message` is
    /// our own, from a `volume.*` template; never the helper's text.
    #[allow(
        dead_code,
        reason = "built by the mounts and volumes parts of issue 46"
    )]
    pub(crate) fn volume_mount(code: VolumeMountCode, message: impl AsRef<str>) -> Self {
        Self::VolumeMount {
            code,
            meta: Box::new(ErrorMeta::new(message)),
        }
    }

    /// `VolumeNotFound`: no such volume. `message` is our own, from a
    /// `volume.*` template.
    #[allow(
        dead_code,
        reason = "built by the mounts and volumes parts of issue 46"
    )]
    pub(crate) fn volume_not_found(message: impl AsRef<str>) -> Self {
        Self::VolumeNotFound {
            meta: Box::new(ErrorMeta::new(message)),
        }
    }

    /// `Webhook { aws_code }`: lifecycle events' stack could not be read or
    /// written. `message` is our own, from an `events.*` template.
    #[allow(dead_code, reason = "built with the events feature")]
    pub(crate) fn webhook(aws_code: Option<String>, message: impl AsRef<str>) -> Self {
        Self::Webhook {
            aws_code,
            meta: Box::new(ErrorMeta::new(message)),
        }
    }

    /// `Agent { failure }`: an agent run failed; the message is the
    /// reason's fixed sentence (with a safe detail code).
    #[allow(dead_code, reason = "built with the agent feature")]
    pub(crate) fn agent(failure: super::AgentFailure) -> Self {
        let message = failure.message();
        Self::Agent {
            failure: Box::new(failure),
            meta: Box::new(ErrorMeta::new(message)),
        }
    }

    pub(crate) fn sandbox_with(code: SandboxCode, meta: Box<ErrorMeta>) -> Self {
        Self::Sandbox {
            code: Some(code),
            meta,
        }
    }
}

impl SandboxError {
    /// This error with each of `secrets` (longest first, empty ones skipped)
    /// replaced by `***` in our message and the server's message and, for a
    /// `CommandExit`, in its stdout and stderr; the redacted cause (the
    /// source chain) is dropped, so no unredacted text stays reachable.
    /// The git helpers use it for a failed command that was given a
    /// password.
    pub(crate) fn redact_secrets(mut self, secrets: &[&str]) -> Self {
        let mut secrets: Vec<&str> = secrets.iter().copied().filter(|s| !s.is_empty()).collect();
        if secrets.is_empty() {
            return self;
        }
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        let scrub = |text: &str| {
            secrets
                .iter()
                .fold(text.to_owned(), |acc, secret| acc.replace(secret, "***"))
        };
        if let Self::CommandExit { stdout, stderr, .. } = &mut self {
            *stdout = super::CapturedText::new(scrub(stdout.as_str()));
            *stderr = super::CapturedText::new(scrub(stderr.as_str()));
        }
        let meta = self.meta_mut();
        meta.message = scrub(&meta.message);
        meta.server_message = meta.server_message.as_deref().map(scrub);
        meta.cause = None;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Variant, fields, kind, parents, aws_code in the metadata and the
    /// message of each index error, in one table.
    #[test]
    fn index_errors_are_pinned() {
        use crate::error::ErrorKind;
        let cases: Vec<(SandboxError, ErrorKind, Option<&str>, &str)> = vec![
            (
                SandboxError::sandbox_index(
                    "BatchGetItem",
                    Some("aws.dynamodb#ResourceNotFoundException:x"),
                ),
                ErrorKind::SandboxIndex,
                Some("ResourceNotFoundException"),
                "the sandbox index call BatchGetItem failed: the table does not exist in this region (ResourceNotFoundException); create it (SandboxIndex::create_table) or name an existing table",
            ),
            (
                SandboxError::index_unprocessed("BatchGetItem", 6),
                ErrorKind::SandboxIndex,
                Some("UnprocessedKeys"),
                "the sandbox index left keys unprocessed after 6 attempts of BatchGetItem, so the list would be incomplete; list again later",
            ),
            (
                SandboxError::index_write("vm-1", Some("ResourceNotFoundException"), false),
                ErrorKind::IndexWrite,
                Some("ResourceNotFoundException"),
                "could not write the index row of sandbox vm-1: the table does not exist in this region (ResourceNotFoundException); its MicroVM was terminated, fix the index (docs/sandbox-index.md) and create the sandbox again",
            ),
            (
                SandboxError::index_write("vm-1", None, true),
                ErrorKind::IndexWrite,
                None,
                "could not write the index row of sandbox vm-1: no usable answer from DynamoDB; its MicroVM was kept (keep on failure) but indexed lists will not show it, kill it when done",
            ),
        ];
        for (err, kind, code, message) in cases {
            let field = match &err {
                SandboxError::SandboxIndex { aws_code, .. }
                | SandboxError::IndexWrite { aws_code, .. } => aws_code.clone(),
                other => panic!("not an index variant: {other:?}"),
            };
            assert_eq!(err.kind(), kind);
            assert!(err.is(ErrorKind::SandboxIndex) && err.is_sandbox_error());
            assert_eq!(field.as_deref(), code, "{err:?}");
            if code != Some("UnprocessedKeys") {
                assert_eq!(err.meta().aws_code(), code);
            }
            assert_eq!(err.to_string(), message);
            assert!(!err.is_retryable());
        }
        assert_eq!(ErrorKind::IndexWrite.parents(), &[ErrorKind::SandboxIndex]);
        assert_eq!(ErrorKind::SandboxIndex.parents(), &[ErrorKind::Sandbox]);
    }

    #[test]
    fn self_detected_messages_are_exact() {
        let cases: Vec<(SandboxError, &str)> = vec![
            (
                SandboxError::invalid_argument("timeout", "must not be negative"),
                "invalid timeout: must not be negative",
            ),
            (
                SandboxError::closed(),
                "the sandbox handle is closed; create a new sandbox or connect to it again",
            ),
            (
                SandboxError::cancelled("commands.run"),
                "the call commands.run was cancelled by the caller; start it again if still needed",
            ),
            (
                SandboxError::protocol_violation(
                    "commands.run",
                    "the first event was not a start event",
                ),
                "the agent broke the protocol during commands.run: the first event was not a start event; the call was abandoned, report this with the image version",
            ),
            (
                SandboxError::internal("files.read", "a chunk arrived after the end"),
                "internal error in files.read: a chunk arrived after the end; please report this",
            ),
            (
                SandboxError::connection_lost("commands.run", Some("connection reset")),
                "lost the connection to the agent during commands.run: connection reset; retry, or check that the sandbox is still running",
            ),
            (
                SandboxError::connection_lost("files.read", None),
                "lost the connection to the agent during files.read; retry, or check that the sandbox is still running",
            ),
            (
                SandboxError::agent_vm_lost("run_code"),
                "the MicroVM behind the sandbox disappeared during run_code; create a new sandbox",
            ),
            (
                SandboxError::not_ready(
                    Some(SandboxState::Pending),
                    Some("restoring snapshot"),
                    Duration::from_secs(90),
                ),
                "the sandbox was not ready within 90 s (state PENDING): restoring snapshot; raise ready_timeout or check the image",
            ),
            (
                SandboxError::not_ready(None, None, Duration::from_millis(2_500)),
                "the sandbox was not ready within 2,500 ms (state unknown); raise ready_timeout or check the image",
            ),
            (
                SandboxError::sandbox_lifetime(
                    "timeout",
                    Duration::from_secs(36_000),
                    Duration::from_secs(28_800),
                ),
                "sandbox timeout of 36,000 s is above the platform cap of 28,800 s; pass a smaller timeout",
            ),
            (
                SandboxError::sandbox_not_found("microvm-123"),
                "the sandbox microvm-123 does not exist or has terminated; create a new sandbox",
            ),
            (
                SandboxError::sandbox_state("suspended", "call resume() first"),
                "the sandbox is suspended; call resume() first",
            ),
            (
                SandboxError::timeout(
                    TimeoutScope::Request,
                    "files.write",
                    Some(Duration::from_secs(60)),
                ),
                "the call files.write did not finish within 60 s; raise request_timeout or retry",
            ),
            (
                SandboxError::timeout(TimeoutScope::Request, "files.write", None),
                "the call files.write did not finish; raise request_timeout or retry",
            ),
            (
                SandboxError::timeout(
                    TimeoutScope::Execution,
                    "run_code",
                    Some(Duration::from_secs(300)),
                ),
                "the code cell did not finish within 300 s; raise its timeout or split the work",
            ),
            (
                SandboxError::timeout(
                    TimeoutScope::StateWait,
                    "pause",
                    Some(Duration::from_secs(30)),
                ),
                "the sandbox did not finish pause within 30 s; check its state, then retry",
            ),
            (
                SandboxError::timeout(TimeoutScope::Sandbox, "files.read", None),
                "the sandbox reached its timeout (files.read); extend it with set_timeout before it expires, or create a new sandbox",
            ),
            (
                SandboxError::timeout(TimeoutScope::Command, "python3", None),
                "command python3 reached its timeout and was stopped; raise the command timeout, or pass 0 for no limit",
            ),
            (
                SandboxError::unimplemented(
                    "fork",
                    "MicroVMs cannot be forked",
                    Some("docs/e2b-compat.md"),
                ),
                "feature fork is not available: MicroVMs cannot be forked; see docs/e2b-compat.md",
            ),
            (
                SandboxError::unimplemented("mcp", "no MCP gateway on AWS", None),
                "feature mcp is not available: no MCP gateway on AWS",
            ),
            (
                SandboxError::lifecycle_unsupported("pause", "the image has no suspend hook"),
                "this sandbox cannot pause: the image has no suspend hook",
            ),
            (
                SandboxError::build_step_failed(3, Some("RUN exit 3"), Some(3), "tail"),
                "template build step 3 failed with exit code 3; fix that step (its command and the end of the build log are in the error)",
            ),
            (
                SandboxError::build_step_failed(12, None, None, ""),
                "template build step 12 failed; fix that step (its command and the end of the build log are in the error)",
            ),
            (
                SandboxError::build_failed(None, ""),
                "template build failed; the end of the build log is in the error",
            ),
            (
                SandboxError::build_quota(10),
                "too many template builds are running at once (at most 10); wait for one to finish, then build again",
            ),
            (
                SandboxError::build_rejected("ValidationException"),
                "the image service refused the template build (ValidationException); check the build's settings and your permissions, then build again",
            ),
            (
                SandboxError::build_rejected("Bad code <with> text"),
                "the image service refused the template build (an unrecognised error); check the build's settings and your permissions, then build again",
            ),
            (
                SandboxError::base_image_no_version(),
                "the base image has no usable version to build on; publish the base image first, or name a version that built",
            ),
            (
                SandboxError::template_not_found(),
                "no template of that name exists in this account and region; build it first",
            ),
            (
                SandboxError::no_logs("vm-1", "/rayito/py"),
                "no logs (logging disabled, no execution role, or another group) for sandbox vm-1 in log group /rayito/py; create the sandbox with SandboxLogging::cloudwatch() and an execution role that may write there, or pass the group it logs to",
            ),
            (
                SandboxError::pool_not_started(),
                "the pool is not started; call start() first, or create the sandbox without the pool",
            ),
            (
                SandboxError::pool_closed(),
                "the pool is closed; create the sandbox without the pool, or use another pool",
            ),
            (
                SandboxError::sandbox_index("BatchGetItem", Some("ResourceNotFoundException")),
                "the sandbox index call BatchGetItem failed: the table does not exist in this region (ResourceNotFoundException); create it (SandboxIndex::create_table) or name an existing table",
            ),
            (
                SandboxError::sandbox_index("DeleteItem", Some("AccessDeniedException")),
                "the sandbox index call DeleteItem failed: the AWS credentials may not use the table (AccessDeniedException); grant the IAM actions of docs/sandbox-index.md on the table",
            ),
            (
                SandboxError::sandbox_index("BatchGetItem", None),
                "the sandbox index call BatchGetItem failed: no usable answer from DynamoDB; check the network, the region and the endpoint, then retry",
            ),
            (
                SandboxError::index_unprocessed("BatchGetItem", 6),
                "the sandbox index left keys unprocessed after 6 attempts of BatchGetItem, so the list would be incomplete; list again later",
            ),
            (
                SandboxError::index_write("vm-1", Some("ResourceNotFoundException"), false),
                "could not write the index row of sandbox vm-1: the table does not exist in this region (ResourceNotFoundException); its MicroVM was terminated, fix the index (docs/sandbox-index.md) and create the sandbox again",
            ),
            (
                SandboxError::index_write(
                    "vm-1",
                    Some("ProvisionedThroughputExceededException"),
                    true,
                ),
                "could not write the index row of sandbox vm-1: DynamoDB throttled the call after the SDK's retries (ProvisionedThroughputExceededException); its MicroVM was kept (keep on failure) but indexed lists will not show it, kill it when done",
            ),
            (
                SandboxError::index_write_with(
                    "vm-1",
                    Some("not a code/arn:aws:dynamodb:us-east-1:123:table/t"),
                    index::WriteOutcome::TerminateFailed,
                ),
                "could not write the index row of sandbox vm-1: an unrecognised AWS error; terminating its MicroVM failed too, so it may still be running, kill it by id",
            ),
            (
                SandboxError::build_ready_failed(true),
                "the built image did not become ready: its ready hook answered HTTP 5xx; check the start command and its ready check, then build again",
            ),
            (
                SandboxError::build_ready_failed(false),
                "the built image did not become ready: its ready hook answered HTTP 4xx; check the start command and its ready check, then build again",
            ),
            (
                SandboxError::build_timeout(Duration::from_secs(1_800)),
                "the template build did not settle within 1,800 s; it goes on in the service, read its status later or wait longer",
            ),
            (
                SandboxError::base_image_missing_entrypoint(),
                "the base image's Dockerfile has no CMD or ENTRYPOINT line to start the agent; use a base image whose Dockerfile ends by starting rayd",
            ),
            (
                SandboxError::base_image_not_s3(),
                "the base image's code artifact is not an s3:// location; publish the base image from an S3 artifact",
            ),
            (
                SandboxError::base_image_missing_artifact(),
                "the base image's code artifact is missing; publish the base image again",
            ),
            (
                SandboxError::context_path_outside(2),
                "the source of copy step 2 lies outside the build context; copy only paths under the context directory",
            ),
            (
                SandboxError::context_path_missing(1),
                "the source of copy step 1 does not exist in the build context or .dockerignore excludes it; fix the path or the .dockerignore",
            ),
            (
                SandboxError::template_name("it holds a :tag"),
                "invalid template name: it holds a :tag; use 1 to 64 of A-Z, a-z, 0-9, _ and - (no :tag), or an image ARN",
            ),
            (
                SandboxError::template_too_old(),
                "the agent in this image is too old for templates (it reports no template_start feature); build the template again on a current base image",
            ),
        ];
        for (err, expected) in cases {
            assert_eq!(err.to_string(), expected, "{:?}", err.kind());
            assert_eq!(err.meta().attempts(), 0);
        }
    }

    #[test]
    fn no_logs_is_not_found_naming_the_sandbox_and_the_group() {
        let e = SandboxError::no_logs("vm-1", "/rayito/py");
        let SandboxError::NotFound { meta } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(
            meta.message,
            "no logs (logging disabled, no execution role, or another group) for sandbox vm-1 \
             in log group /rayito/py; create the sandbox with SandboxLogging::cloudwatch() and \
             an execution role that may write there, or pass the group it logs to"
        );
        assert_eq!(e.kind(), crate::ErrorKind::NotFound);
        let info = e.classify();
        assert_eq!(info.kind, "not_found");
        assert!(!info.retryable && e.is_not_found() && e.is_sandbox_error());
        let back = SandboxError::from_wire(&e.to_wire()).expect("wire form parses");
        assert_eq!(back, e);
        // Names are cleaned like server text: one line, bounded.
        let e = SandboxError::no_logs("vm\n1", &format!("/g\n{}", "x".repeat(5_000)));
        let text = e.to_string();
        assert!(!text.contains('\n') && text.len() < 1_000, "{text}");
    }

    #[test]
    fn stack_errors_say_the_stack_resource_and_status_and_carry_their_code() {
        let cases = [
            (
                SandboxError::stack_failed("rayito-m0-iam", "BuildRole", "CREATE_FAILED"),
                StackCode::Failed,
                "stack rayito-m0-iam failed: resource BuildRole ended CREATE_FAILED; read the stack's events in CloudFormation, fix the cause, then run rayito setup --yes again",
            ),
            (
                SandboxError::stack_refused(
                    "rayito-m0-iam",
                    "CreateStack",
                    "AlreadyExistsException",
                ),
                StackCode::Failed,
                "the CloudFormation call CreateStack for stack rayito-m0-iam was refused (AlreadyExistsException); check your permissions and that no resource of that name exists outside the stack, then run rayito setup --yes again",
            ),
            (
                SandboxError::stack_blocked("rayito-m0-iam", "ROLLBACK_COMPLETE"),
                StackCode::Blocked,
                "stack rayito-m0-iam is ROLLBACK_COMPLETE and cannot be updated; delete the stack, then run rayito setup --yes again",
            ),
            (
                SandboxError::stack_in_progress("rayito-m0-iam", "UPDATE_IN_PROGRESS"),
                StackCode::InProgress,
                "stack rayito-m0-iam is still changing (UPDATE_IN_PROGRESS); wait until it settles, then run rayito setup --yes again",
            ),
            (
                SandboxError::stack_not_found("rayito-m0-artifacts"),
                StackCode::NotFound,
                "stack rayito-m0-artifacts does not exist in this account and region; create it with rayito setup --yes",
            ),
            (
                SandboxError::stack_output_missing("rayito-m0-iam", "BuildRoleArn"),
                StackCode::Failed,
                "stack rayito-m0-iam has no output BuildRoleArn; update it with rayito setup --yes",
            ),
        ];
        for (err, code, message) in cases {
            assert_eq!(err.to_string(), message);
            assert_eq!(err.kind().as_str(), "stack");
            assert!(err.is_sandbox_error() && !err.is_retryable());
            let SandboxError::Stack { code: got, .. } = &err else {
                panic!("{err:?}")
            };
            assert_eq!(got, &code);
            let back = SandboxError::from_wire(&err.to_wire()).expect("wire form parses");
            assert_eq!(back, err);
        }
        // A token is cleaned: no line break or megabyte gets into a message.
        let e = SandboxError::stack_failed("s", "Bad\nResource", &"X".repeat(10_000));
        assert!(
            !e.to_string().contains('\n') && e.to_string().len() < 400,
            "{e}"
        );
    }

    #[test]
    fn build_errors_keep_their_fields_and_reasons() {
        let e = SandboxError::build_step_failed(3, Some("RUN exit 3"), Some(3), "a\nb");
        let SandboxError::Build {
            reason: None,
            step: Some(3),
            command: Some(command),
            exit_code: Some(3),
            log_tail,
            ..
        } = &e
        else {
            panic!("{e:?}")
        };
        assert_eq!(command.as_str(), "RUN exit 3");
        assert_eq!(log_tail.as_str(), "a\nb");
        // Debug shows lengths, never the command or the log.
        assert!(!format!("{e:?}").contains("exit 3"), "{e:?}");
        let reason = |e: SandboxError| match e {
            SandboxError::Build { reason, .. } => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            reason(SandboxError::build_quota(10)),
            Some(BuildReason::BuildQuota)
        );
        assert_eq!(
            reason(SandboxError::build_rejected("AccessDeniedException")),
            Some(BuildReason::AwsError)
        );
        assert!(matches!(
            SandboxError::base_image_no_version(),
            SandboxError::NotFound { .. }
        ));
        assert!(matches!(
            SandboxError::template_not_found(),
            SandboxError::NotFound { .. }
        ));
        assert_eq!(
            reason(SandboxError::build_ready_failed(true)),
            Some(BuildReason::ReadyServerError)
        );
        assert_eq!(
            reason(SandboxError::build_ready_failed(false)),
            Some(BuildReason::ReadyClientError)
        );
        assert_eq!(
            reason(SandboxError::context_path_outside(1)),
            Some(BuildReason::ContextPathOutside)
        );
        assert_eq!(
            reason(SandboxError::context_path_missing(1)),
            Some(BuildReason::ContextPathMissing)
        );
        assert_eq!(
            reason(SandboxError::base_image_missing_entrypoint()),
            Some(BuildReason::BaseImageMissingEntrypoint)
        );
        let t = SandboxError::template_too_old();
        assert!(t.is_sandbox_error() && !t.is_retryable());
        assert_eq!(t.kind().as_str(), "template");
    }

    /// The four kinds of issue 46: variant, code field, kind, parents,
    /// classification, message kept as given, and the wire form.
    #[test]
    fn mount_and_volume_errors_are_pinned() {
        use super::super::ErrorKind as K;
        /// (error, kind, parents, code, message)
        type Case = (
            SandboxError,
            K,
            &'static [K],
            Option<&'static str>,
            &'static str,
        );
        let cases: Vec<Case> = vec![
            (
                SandboxError::mount(MountCode::NotAllowed, "mounts: m"),
                K::Mount,
                &[K::Sandbox],
                Some("not_allowed"),
                "mounts: m",
            ),
            (
                SandboxError::mount(MountCode::from("brand_new"), "mounts: n"),
                K::Mount,
                &[K::Sandbox],
                Some("brand_new"),
                "mounts: n",
            ),
            (
                SandboxError::volume("volumes: v"),
                K::Volume,
                &[K::Sandbox],
                None,
                "volumes: v",
            ),
            (
                SandboxError::volume_mount(VolumeMountCode::Tls, "volumes: t"),
                K::VolumeMount,
                &[K::Volume],
                Some("tls"),
                "volumes: t",
            ),
            (
                SandboxError::volume_not_found("no volume"),
                K::VolumeNotFound,
                &[K::Volume],
                None,
                "no volume",
            ),
        ];
        for (e, kind, parents, code, message) in cases {
            assert_eq!(e.kind(), kind, "{e:?}");
            assert_eq!(kind.parents(), parents, "{e:?}");
            assert!(e.is_sandbox_error() && !e.is_retryable() && !e.is_not_found());
            assert_eq!(e.classify(), kind.info());
            assert_eq!(e.to_string(), message);
            let got = e
                .mount_code()
                .map(MountCode::as_str)
                .or(e.volume_mount_code().map(VolumeMountCode::as_str));
            assert_eq!(got, code, "{e:?}");
            assert_eq!(SandboxError::from_wire(&e.to_wire()).as_ref(), Ok(&e));
        }
        let e = SandboxError::volume_mount(VolumeMountCode::Timeout, "v");
        assert!(e.is(K::Volume) && !e.is(K::Mount));
        assert!(
            e.to_wire()
                .starts_with(r#"{"kind":"volume_mount","message":"v","code":"timeout","#),
            "{}",
            e.to_wire()
        );
        assert!(
            SandboxError::mount(MountCode::Timeout, "m")
                .to_wire()
                .starts_with(r#"{"kind":"mount","message":"m","code":"timeout","#)
        );
        assert!(matches!(
            SandboxError::from_wire(r#"{"kind":"volume_not_found","message":"x"}"#),
            Ok(SandboxError::VolumeNotFound { .. })
        ));
        assert_eq!(
            MountCode::VALUES,
            [
                "network",
                "iam_denied",
                "not_found",
                "not_allowed",
                "invalid_path",
                "helper_missing",
                "timeout"
            ]
        );
        assert_eq!(
            VolumeMountCode::VALUES,
            [
                "network",
                "iam_denied",
                "not_found",
                "tls",
                "helper_missing",
                "timeout",
                "invalid_path"
            ]
        );
    }

    #[test]
    fn self_detected_fields_are_set() {
        let e = SandboxError::invalid_argument("envs", "a name is empty");
        assert!(matches!(
            &e,
            SandboxError::InvalidArgument { argument: Some(a), .. } if a == "envs"
        ));
        let e = SandboxError::not_ready(Some(SandboxState::Pending), None, Duration::from_secs(1));
        assert!(matches!(
            &e,
            SandboxError::SandboxNotReady {
                state: Some(SandboxState::Pending),
                state_reason: None,
                ..
            }
        ));
        let e = SandboxError::not_ready(Some(SandboxState::from("FROZEN")), None, Duration::ZERO);
        assert!(matches!(
            &e,
            SandboxError::SandboxNotReady { state: Some(SandboxState::Unknown(v)), .. }
                if v.as_str() == "FROZEN"
        ));
        assert_eq!(
            SandboxError::closed().sandbox_code(),
            Some(&SandboxCode::Closed)
        );
        let e = SandboxError::unimplemented("fork", "no", Some("docs/e2b-compat.md"));
        assert!(matches!(
            &e,
            SandboxError::Unimplemented { feature, doc: Some(d), .. }
                if &**feature == "fork" && &**d == "docs/e2b-compat.md"
        ));
        assert_eq!(SandboxError::closed().with_attempts(3).meta().attempts(), 3);
    }

    /// A Reattach refused after a cut: NOT_FOUND and OUT_OF_RANGE are
    /// `NotFound` with their own message (the agent's status kept in
    /// meta); any other failure is what the mapping made of it.
    #[test]
    fn reattach_failures_are_not_found_saying_the_output_is_lost() {
        use crate::error::map::grpc::{CallContext, GrpcFailure, from_grpc};
        let call = CallContext::new("run_code");
        let rows: [(GrpcCode, &str, &str, &str); 2] = [
            (
                GrpcCode::NotFound,
                "execution not found",
                "not_found",
                "the run_code cell ran on after the connection was cut, but the agent no longer keeps it, so its output from then on is lost; the cell was not run again, run it again if still needed",
            ),
            (
                GrpcCode::OutOfRange,
                "execution output already discarded",
                "not_found",
                "the run_code cell ran on after the connection was cut, but the agent already dropped the output it produced meanwhile (more than its 4 MiB log); the cell was not run again, run it again if still needed",
            ),
        ];
        for (code, server, kind, message) in rows {
            let e = from_grpc(GrpcFailure::agent(code, server, call)).reattach_failed();
            assert!(matches!(e, SandboxError::NotFound { .. }), "{e:?}");
            assert_eq!(e.to_string(), message);
            let info = e.classify();
            assert_eq!(info.kind, kind);
            assert!(!info.retryable);
            assert!(!info.retry_with_larger_limits);
            assert_eq!(e.meta().grpc_code(), Some(code));
            assert_eq!(e.meta().server_message(), Some(server));
        }
        // Anything else is left as mapped.
        let other = from_grpc(GrpcFailure::agent(
            GrpcCode::InvalidArgument,
            "invalid execution id",
            call,
        ));
        assert_eq!(other.clone().reattach_failed(), other);
    }

    /// A reconnect that gave up says how many Health probes it made and
    /// how long it waited, in the message and in the meta (and on the wire).
    #[test]
    fn a_reconnect_that_gave_up_carries_attempts_and_elapsed_in_meta() {
        let e = SandboxError::reconnect_gave_up("run_code", Duration::from_millis(1_500), 4);
        assert!(matches!(
            &e,
            SandboxError::Sandbox {
                code: Some(SandboxCode::ConnectionLost),
                ..
            }
        ));
        assert_eq!(
            e.to_string(),
            "lost the connection to the sandbox during run_code and it did not come back within 1,500 ms (4 health probes); retry later, or check that the sandbox is still running"
        );
        assert_eq!(e.meta().attempts(), 4);
        assert_eq!(e.meta().elapsed(), Some(Duration::from_millis(1_500)));
        let info = e.classify();
        assert_eq!(info.kind, "connection_lost");
        assert!(info.retryable);
        let wire: serde_json::Value = serde_json::from_str(&e.to_wire()).unwrap();
        assert_eq!(
            wire["meta"]["elapsed"],
            serde_json::json!({"secs": 1, "nanos": 500_000_000})
        );
        assert_eq!(SandboxError::from_wire(&e.to_wire()).unwrap(), e);
        assert_eq!(
            e.meta().to_string(),
            "no server answer, 4 attempts, 1500 ms"
        );
        // Errors that did not wait say nothing.
        assert_eq!(SandboxError::closed().meta().elapsed(), None);
        let wire: serde_json::Value =
            serde_json::from_str(&SandboxError::closed().to_wire()).unwrap();
        assert!(wire["meta"].get("elapsed").is_none());
    }
}
