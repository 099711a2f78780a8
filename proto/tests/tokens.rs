//! Golden values of the wire contract's text tokens (wire-contract.md §1.3,
//! §1.5, §5.2-§5.4). A released agent writes these exact bytes and a
//! released SDK matches them: a change here breaks one against the other,
//! so this test fails on any change, however small.

use rayito_proto::tokens::{detail, end_status, header, phase, stream_code};

#[test]
fn phase_gate_details() {
    assert_eq!(phase::SUSPENDING, "suspending");
    assert_eq!(phase::TERMINATING, "terminating");
}

#[test]
fn status_details() {
    assert_eq!(detail::SANDBOX_TIMEOUT, "sandbox_timeout");
    assert_eq!(detail::LIFECYCLE_UNMANAGED, "lifecycle_unmanaged");
    assert_eq!(detail::DISK_RESERVE, "disk_reserve");
    assert_eq!(detail::DISK_FULL, "disk_full");
    assert_eq!(detail::KERNEL_NOT_READY_PREFIX, "kernel not ready");
}

#[test]
fn end_statuses() {
    assert_eq!(end_status::EXITED, "exited");
    assert_eq!(end_status::SIGNALED, "signaled");
    assert_eq!(end_status::TIMEOUT, "timeout");
    assert_eq!(end_status::SUSPENDING, "suspending");
    assert_eq!(end_status::OUTPUT_TRUNCATED, "output_truncated");
    assert_eq!(end_status::SANDBOX_TIMEOUT, "sandbox_timeout");
}

#[test]
fn stream_codes_are_the_closed_set_in_order() {
    assert_eq!(
        stream_code::ALL,
        [
            "not_found",
            "permission_denied",
            "invalid_argument",
            "unimplemented",
            "deadline_exceeded",
            "output_truncated",
            "suspending",
            "resumed_state_lost",
            "kernel_died",
            "internal",
            "resource_exhausted",
            "failed_precondition",
            "unavailable",
            "cancelled",
            "sandbox_timeout",
        ]
    );
    let named = [
        (stream_code::NOT_FOUND, "not_found"),
        (stream_code::PERMISSION_DENIED, "permission_denied"),
        (stream_code::INVALID_ARGUMENT, "invalid_argument"),
        (stream_code::UNIMPLEMENTED, "unimplemented"),
        (stream_code::DEADLINE_EXCEEDED, "deadline_exceeded"),
        (stream_code::OUTPUT_TRUNCATED, "output_truncated"),
        (stream_code::SUSPENDING, "suspending"),
        (stream_code::RESUMED_STATE_LOST, "resumed_state_lost"),
        (stream_code::KERNEL_DIED, "kernel_died"),
        (stream_code::INTERNAL, "internal"),
        (stream_code::RESOURCE_EXHAUSTED, "resource_exhausted"),
        (stream_code::FAILED_PRECONDITION, "failed_precondition"),
        (stream_code::UNAVAILABLE, "unavailable"),
        (stream_code::CANCELLED, "cancelled"),
        (stream_code::SANDBOX_TIMEOUT, "sandbox_timeout"),
    ];
    for (constant, golden) in named {
        assert_eq!(constant, golden);
    }
}

#[test]
fn header_names() {
    assert_eq!(header::ACCESS_TOKEN, "x-access-token");
    assert_eq!(header::KERNEL_FAILURE, "rayito-kernel-failure");
}
