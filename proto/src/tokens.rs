//! Text tokens of the wire contract that the `.proto` files cannot type:
//! the exact status details, stream codes, end statuses and header names
//! that the agent writes and the SDK matches (wire-contract.md §1.3, §1.5,
//! §5.2-§5.4). Both sides name them from here, so neither can drift; their
//! values are a contract with released agents and SDKs, pinned by
//! `tests/tokens.rs`, and never change.
//!
//! The same word can play several roles (`suspending` is a gate detail, an
//! end status and a stream code): each role has its own module, so a use
//! says which one it means.

/// The exact detail of the UNAVAILABLE status the phase gate returns, the
/// name of the phase that refused the call (§5.2). A client re-subscribes
/// after `SUSPENDING`; `TERMINATING` is final.
pub mod phase {
    /// `/suspend` was received.
    pub const SUSPENDING: &str = "suspending";
    /// `/terminate` was received.
    pub const TERMINATING: &str = "terminating";
}

/// Exact details of other gRPC statuses the agent returns.
pub mod detail {
    /// FAILED_PRECONDITION past the logical deadline (and during the
    /// resume grace): terminal, never UNAVAILABLE (§5.3).
    pub const SANDBOX_TIMEOUT: &str = "sandbox_timeout";
    /// FAILED_PRECONDITION of `SetTimeout` on a sandbox created without a
    /// managed lifecycle.
    pub const LIFECYCLE_UNMANAGED: &str = "lifecycle_unmanaged";
    /// RESOURCE_EXHAUSTED: a write would eat into the disk reserve.
    pub const DISK_RESERVE: &str = "disk_reserve";
    /// RESOURCE_EXHAUSTED: the disk filled up (ENOSPC, EDQUOT) during a
    /// write.
    pub const DISK_FULL: &str = "disk_full";
    /// The prefix of the UNAVAILABLE detail of the kernel gate
    /// (`kernel not ready: <reason>`): the agent is alive, its code kernel
    /// is not, and a client does not reconnect for it.
    pub const KERNEL_NOT_READY_PREFIX: &str = "kernel not ready";
}

/// `EndEvent.status` of a process and `PtyExited.status` of a terminal
/// (§1.5, §5.2).
pub mod end_status {
    /// The process exited by itself.
    pub const EXITED: &str = "exited";
    /// The process died by a signal (`exit_code = 128 + signal`).
    pub const SIGNALED: &str = "signaled";
    /// The agent's timeout for the process fired (SIGTERM, then SIGKILL).
    pub const TIMEOUT: &str = "timeout";
    /// `/suspend` closed the stream; the process is still alive.
    pub const SUSPENDING: &str = "suspending";
    /// The subscriber did not drain for 30 s and was detached; the process
    /// is still alive.
    pub const OUTPUT_TRUNCATED: &str = "output_truncated";
    /// The sandbox's logical deadline closed the stream.
    pub const SANDBOX_TIMEOUT: &str = "sandbox_timeout";
}

/// The closed set of `StreamError.code` values inside streams (§1.3). A
/// client treats any other code as [`INTERNAL`](stream_code::INTERNAL).
pub mod stream_code {
    /// The thing asked for does not exist.
    pub const NOT_FOUND: &str = "not_found";
    /// The sandbox's user may not do it.
    pub const PERMISSION_DENIED: &str = "permission_denied";
    /// A value was refused.
    pub const INVALID_ARGUMENT: &str = "invalid_argument";
    /// This agent cannot do it.
    pub const UNIMPLEMENTED: &str = "unimplemented";
    /// A deadline passed (the process's own timeout included).
    pub const DEADLINE_EXCEEDED: &str = "deadline_exceeded";
    /// The subscriber was detached for not draining.
    pub const OUTPUT_TRUNCATED: &str = "output_truncated";
    /// `/suspend` closed the stream.
    pub const SUSPENDING: &str = "suspending";
    /// After a resume the state the stream needed was gone.
    pub const RESUMED_STATE_LOST: &str = "resumed_state_lost";
    /// The code kernel died.
    pub const KERNEL_DIED: &str = "kernel_died";
    /// An invariant broke (and any unknown code).
    pub const INTERNAL: &str = "internal";
    /// A limit was reached.
    pub const RESOURCE_EXHAUSTED: &str = "resource_exhausted";
    /// The call is not possible in the current state.
    pub const FAILED_PRECONDITION: &str = "failed_precondition";
    /// The agent cannot serve it now.
    pub const UNAVAILABLE: &str = "unavailable";
    /// The call was cancelled.
    pub const CANCELLED: &str = "cancelled";
    /// The sandbox's logical deadline closed the stream.
    pub const SANDBOX_TIMEOUT: &str = "sandbox_timeout";

    /// Every code of the closed set, in the contract's order.
    pub const ALL: &[&str] = &[
        NOT_FOUND,
        PERMISSION_DENIED,
        INVALID_ARGUMENT,
        UNIMPLEMENTED,
        DEADLINE_EXCEEDED,
        OUTPUT_TRUNCATED,
        SUSPENDING,
        RESUMED_STATE_LOST,
        KERNEL_DIED,
        INTERNAL,
        RESOURCE_EXHAUSTED,
        FAILED_PRECONDITION,
        UNAVAILABLE,
        CANCELLED,
        SANDBOX_TIMEOUT,
    ];
}

/// Header names of the agent's HTTP/2 answers and requests (lower-case, as
/// HTTP/2 sends them).
pub mod header {
    /// The request header carrying the sandbox's access token.
    pub const ACCESS_TOKEN: &str = "x-access-token";
    /// The response header of `Health` saying why the code kernel cannot
    /// start (the agent runs, its kernel does not): this project's own
    /// addition, documented in docs/errors.md, "Handle lifecycle errors".
    pub const KERNEL_FAILURE: &str = "rayito-kernel-failure";
}
