//! E2B's exception classes, over the SDK's kind graph.
//!
//! A Python user writes `except NotFoundException`; a Rust user of this crate
//! writes `is_instance(&err, E2bClass::NotFoundException)`. The answer comes
//! from [`SandboxError::is`], so a `FileNotFound` is also a `NotFoundException`
//! and a `SandboxException`, exactly as E2B's class tree says, and a missing
//! feature is never a `SandboxException`.

use rayito::{ErrorKind, SandboxError};

/// An E2B exception class (`e2b.exceptions`), as a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum E2bClass {
    /// `SandboxException`: every failure about a sandbox.
    SandboxException,
    /// `TimeoutException`.
    TimeoutException,
    /// `InvalidArgumentException`.
    InvalidArgumentException,
    /// `NotFoundException`: anything not found, files and sandboxes included.
    NotFoundException,
    /// `FileNotFoundException`.
    FileNotFoundException,
    /// `SandboxNotFoundException`.
    SandboxNotFoundException,
    /// `NotEnoughSpaceException`.
    NotEnoughSpaceException,
    /// `RateLimitException`.
    RateLimitException,
    /// `CommandExitException`.
    CommandExitException,
    /// `AuthenticationException` (not a `SandboxException`).
    AuthenticationException,
    /// `ServiceBusyException` (not a `SandboxException`): no capacity now.
    ServiceBusyException,
    /// `QuotaExceededException` (not a `SandboxException`).
    QuotaExceededException,
    /// `UnimplementedError` (not a `SandboxException`): a missing feature.
    UnimplementedError,
}

impl E2bClass {
    /// Every class, in the order of the table in `docs/e2b-compat.md`.
    pub const ALL: &'static [E2bClass] = &[
        Self::SandboxException,
        Self::TimeoutException,
        Self::InvalidArgumentException,
        Self::NotFoundException,
        Self::FileNotFoundException,
        Self::SandboxNotFoundException,
        Self::NotEnoughSpaceException,
        Self::RateLimitException,
        Self::CommandExitException,
        Self::AuthenticationException,
        Self::ServiceBusyException,
        Self::QuotaExceededException,
        Self::UnimplementedError,
    ];

    /// The Python class name (`NotFoundException`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::SandboxException => "SandboxException",
            Self::TimeoutException => "TimeoutException",
            Self::InvalidArgumentException => "InvalidArgumentException",
            Self::NotFoundException => "NotFoundException",
            Self::FileNotFoundException => "FileNotFoundException",
            Self::SandboxNotFoundException => "SandboxNotFoundException",
            Self::NotEnoughSpaceException => "NotEnoughSpaceException",
            Self::RateLimitException => "RateLimitException",
            Self::CommandExitException => "CommandExitException",
            Self::AuthenticationException => "AuthenticationException",
            Self::ServiceBusyException => "ServiceBusyException",
            Self::QuotaExceededException => "QuotaExceededException",
            Self::UnimplementedError => "UnimplementedError",
        }
    }

    /// The SDK kind this class catches (with every kind under it).
    pub const fn kind(self) -> ErrorKind {
        match self {
            Self::SandboxException => ErrorKind::Sandbox,
            Self::TimeoutException => ErrorKind::Timeout,
            Self::InvalidArgumentException => ErrorKind::InvalidArgument,
            Self::NotFoundException => ErrorKind::NotFound,
            Self::FileNotFoundException => ErrorKind::FileNotFound,
            Self::SandboxNotFoundException => ErrorKind::SandboxNotFound,
            Self::NotEnoughSpaceException => ErrorKind::DiskFull,
            Self::RateLimitException => ErrorKind::RateLimit,
            Self::CommandExitException => ErrorKind::CommandExit,
            Self::AuthenticationException => ErrorKind::Authentication,
            Self::ServiceBusyException => ErrorKind::Capacity,
            Self::QuotaExceededException => ErrorKind::QuotaExceeded,
            Self::UnimplementedError => ErrorKind::Unimplemented,
        }
    }
}

/// `isinstance(err, class)`: true when `err`'s kind is `class`'s kind or
/// one of its descendants.
pub fn is_instance(err: &SandboxError, class: E2bClass) -> bool {
    err.is(class.kind())
}

/// The most specific E2B class of `err` (the one `type(err)` would name).
pub fn class_of(err: &SandboxError) -> E2bClass {
    E2bClass::ALL
        .iter()
        .copied()
        .filter(|class| is_instance(err, *class))
        .max_by_key(|class| depth(class.kind()))
        .unwrap_or(E2bClass::SandboxException)
}

/// How far a kind is from its root (roots are 0).
fn depth(kind: ErrorKind) -> usize {
    kind.parents()
        .iter()
        .map(|p| depth(*p) + 1)
        .max()
        .unwrap_or(0)
}
