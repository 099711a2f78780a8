//! Every status message and synthetic error text of the Code service, in one
//! place so that tests can pin them. None of them echoes code, paths or env
//! values; the only caller-provided text ever included is a language name that
//! passed validation.

/// INVALID_ARGUMENT: the cell's source is above the 1 MiB limit.
pub const CODE_TOO_LARGE: &str = "code is larger than 1 MiB; split it into smaller cells";
/// INVALID_ARGUMENT: `language` and `context_id` were both set.
pub const LANGUAGE_AND_CONTEXT: &str =
    "language and context_id are mutually exclusive; pass only one";
/// INVALID_ARGUMENT: a context id outside 1-64 `[A-Za-z0-9_-]`.
pub const INVALID_CONTEXT_ID: &str =
    "invalid context id; use 1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'";
/// INVALID_ARGUMENT: a language name that is not a plain identifier.
pub const INVALID_LANGUAGE: &str = "invalid language name";
/// INVALID_ARGUMENT: per-execution envs sent to a non-Python context.
pub const ENVS_NOT_PYTHON: &str = "per-execution envs are only supported in Python contexts";
/// INVALID_ARGUMENT: an env name that is empty or holds `=` or NUL.
pub const INVALID_ENV_NAME: &str = "invalid environment variable name";
/// INVALID_ARGUMENT: an env value holding NUL.
pub const INVALID_ENV_VALUE: &str = "invalid environment variable value";
/// INVALID_ARGUMENT: a context cwd that is not an absolute, clean path.
pub const CWD_NOT_ABSOLUTE: &str = "cwd must be an absolute path without '..'";
/// INVALID_ARGUMENT: a context cwd that does not name a directory.
pub const CWD_NOT_DIRECTORY: &str = "cwd is not a directory";
/// NOT_FOUND: no context with that id.
pub const CONTEXT_NOT_FOUND: &str = "context not found";
/// FAILED_PRECONDITION: DestroyContext on `default`.
pub const DEFAULT_PROTECTED: &str = "the default context cannot be destroyed";
/// RESOURCE_EXHAUSTED: the ninth context.
pub const TOO_MANY_CONTEXTS: &str = "too many code contexts (at most 8); destroy one first";
/// ABORTED: the context is in the middle of a RestartContext.
pub const CONTEXT_RESTARTING: &str = "context is being restarted; retry";
/// UNAVAILABLE: Execute could not start the context's kernel.
pub const KERNEL_NOT_READY: &str = "kernel not ready: the kernel failed to start";
/// INTERNAL: CreateContext or RestartContext could not start the kernel.
pub const KERNEL_START_FAILED: &str = "the kernel failed to start";
/// Health's `rayito-kernel-failure` header: python3 is not on the PATH (an
/// `envs` PATH override can hide it).
pub const KERNEL_NOT_ON_PATH: &str = "python3 was not found on the sandbox's PATH";
/// Health's `rayito-kernel-failure` header: the interpreter started and exited.
pub const KERNEL_EXITED_AT_START: &str = "the python kernel exited during start-up";
/// Health's `rayito-kernel-failure` header: the driver never said ready.
pub const KERNEL_START_TIMED_OUT: &str = "the python kernel did not become ready in time";
/// Health's `rayito-kernel-failure` header: any other start failure.
pub const KERNEL_START_OTHER: &str = "the python kernel could not be started";
/// UNAVAILABLE: the agent is shutting down its kernels.
pub const SHUTTING_DOWN: &str = rayito_proto::tokens::phase::TERMINATING;
/// NOT_FOUND: Reattach to an execution the agent does not keep (unknown,
/// of another context, or ended more than 30 s ago): its output is lost.
pub const EXECUTION_NOT_FOUND: &str = "execution not found";
/// OUT_OF_RANGE: Reattach from a `seq` the execution's log already dropped.
pub const EXECUTION_OUTPUT_DISCARDED: &str = "execution output already discarded";
/// INVALID_ARGUMENT: an execution id that is not `exec-` and 16 hex digits.
pub const INVALID_EXECUTION_ID: &str = "invalid execution id";
/// RESOURCE_EXHAUSTED: a ninth Reattach stream on one execution.
pub const TOO_MANY_SUBSCRIBERS: &str = "too many subscribers";

/// UNIMPLEMENTED: a well-formed language this agent has no kernel for.
pub fn language_not_installed(language: &str) -> String {
    format!(
        "language {language} is not installed in this image; use python, bash, javascript or typescript"
    )
}

/// UNIMPLEMENTED: a javascript or typescript context on a host without node
/// on the sandbox PATH.
pub fn node_missing(language: &str) -> String {
    format!("language {language} needs node, which is not installed on this host")
}

/// UNIMPLEMENTED: a typescript context whose node cannot strip types.
pub const TYPESCRIPT_NEEDS_NEWER_NODE: &str = "language typescript needs node 22.13 or newer (type stripping); the node on this host is older";

/// The status for a kernel that failed to start: what is missing for
/// node-based languages, else `otherwise`.
pub(crate) fn kernel_start_status(
    language: super::validate::Language,
    err: &std::io::Error,
    otherwise: tonic::Status,
) -> tonic::Status {
    use super::validate::Language;
    match (language, err.kind()) {
        (Language::JavaScript | Language::TypeScript, std::io::ErrorKind::NotFound) => {
            tonic::Status::unimplemented(node_missing(language.as_str()))
        }
        (Language::TypeScript, std::io::ErrorKind::Unsupported) => {
            tonic::Status::unimplemented(TYPESCRIPT_NEEDS_NEWER_NODE)
        }
        _ => otherwise,
    }
}

/// `ExecutionError.name` when the timeout fired.
pub const TIMEOUT_NAME: &str = "ExecutionTimeout";
/// `ExecutionError.name` when the kernel process died mid-cell.
pub const KERNEL_DIED_NAME: &str = "KernelDied";
/// `ExecutionError.value` for [`KERNEL_DIED_NAME`].
pub const KERNEL_DIED_VALUE: &str =
    "the kernel exited during the execution; the context was restarted and its state lost";
/// `ExecutionError.name` when RestartContext interrupted the cell.
pub const KERNEL_RESTARTED_NAME: &str = "KernelRestarted";
/// `ExecutionError.value` for [`KERNEL_RESTARTED_NAME`].
pub const KERNEL_RESTARTED_VALUE: &str = "the context was restarted during the execution";
/// `ExecutionError.name` when nobody followed the cell (no Execute or
/// Reattach stream) for [`super::DETACH_GRACE`] and it was interrupted.
pub const DETACHED_NAME: &str = "ExecutionAborted";
/// `ExecutionError.value` for [`DETACHED_NAME`].
pub const DETACHED_VALUE: &str = "no client followed the execution for 10 s, so it was interrupted";
/// `ExecutionError.name` when DestroyContext (or shutdown) ended the cell.
pub const CONTEXT_DESTROYED_NAME: &str = "ContextDestroyed";
/// `ExecutionError.value` for [`CONTEXT_DESTROYED_NAME`].
pub const CONTEXT_DESTROYED_VALUE: &str = "the context was destroyed during the execution";

/// `ExecutionError.value` for [`TIMEOUT_NAME`], e.g. `execution did not
/// finish within its timeout of 1,500 ms`.
pub fn timeout_value(timeout_ms: u64) -> String {
    format!(
        "execution did not finish within its timeout of {} ms",
        crate::text::group_thousands(timeout_ms)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_value_is_pinned() {
        assert_eq!(
            timeout_value(1500),
            "execution did not finish within its timeout of 1,500 ms"
        );
    }

    /// The SDK tells the kernel gate by this prefix (the contract's token).
    #[test]
    fn kernel_not_ready_carries_the_kernel_gate_prefix() {
        assert!(
            KERNEL_NOT_READY.starts_with(rayito_proto::tokens::detail::KERNEL_NOT_READY_PREFIX)
        );
    }

    #[test]
    fn reattach_statuses_are_pinned() {
        assert_eq!(EXECUTION_NOT_FOUND, "execution not found");
        assert_eq!(
            EXECUTION_OUTPUT_DISCARDED,
            "execution output already discarded"
        );
        assert_eq!(INVALID_EXECUTION_ID, "invalid execution id");
        assert_eq!(TOO_MANY_SUBSCRIBERS, "too many subscribers");
        assert_eq!(DETACHED_NAME, "ExecutionAborted");
        assert_eq!(
            DETACHED_VALUE,
            "no client followed the execution for 10 s, so it was interrupted"
        );
        assert_eq!(super::super::DETACH_GRACE.as_secs(), 10);
    }

    #[test]
    fn language_message_is_pinned() {
        assert_eq!(
            language_not_installed("ruby"),
            "language ruby is not installed in this image; use python, bash, javascript or typescript"
        );
        assert_eq!(
            node_missing("javascript"),
            "language javascript needs node, which is not installed on this host"
        );
    }
}
