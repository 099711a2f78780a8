//! E2B's exception classes, over the SDK's kind graph.
//!
//! A Python user writes `except NotFoundException`; a Rust user of this crate
//! writes `is_instance(&err, E2bClass::NotFoundException)`. The answer comes
//! from [`SandboxError::is`], so a `FileNotFound` is also a `NotFoundException`
//! and a `SandboxException`, exactly as E2B's class tree says, and a missing
//! feature is never a `SandboxException`.

use rayito::{ErrorKind, SandboxError};

/// Declares [`E2bClass`]: each class with its Python name and the SDK
/// kinds it catches (each with every kind under it).
macro_rules! classes {
    ($($(#[$doc:meta])* $class:ident => [$($kind:ident),*],)*) => {
        /// An E2B exception class (`e2b.exceptions`), as a value.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum E2bClass {
            $($(#[$doc])* $class,)*
        }

        impl E2bClass {
            /// Every class, in the order of the table in `docs/e2b-compat.md`.
            pub const ALL: &'static [E2bClass] = &[$(Self::$class,)*];

            /// The Python class name (`NotFoundException`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$class => stringify!($class),)*
                }
            }

            /// The SDK kinds this class catches, each with every kind under
            /// it (empty for a class nothing here raises).
            pub const fn kinds(self) -> &'static [ErrorKind] {
                match self {
                    $(Self::$class => &[$(ErrorKind::$kind),*],)*
                }
            }
        }
    };
}

classes! {
    /// `SandboxException`: every failure about a sandbox.
    SandboxException => [Sandbox],
    /// `TimeoutException`, with E2B's two subclasses below it.
    TimeoutException => [Timeout, SandboxState, SandboxNotReady],
    /// `SandboxNotRunningException` (a `TimeoutException`): the sandbox
    /// is suspending, resuming or terminating.
    SandboxNotRunningException => [SandboxState],
    /// `SandboxUnreachableException` (a `TimeoutException`): its agent
    /// did not become ready.
    SandboxUnreachableException => [SandboxNotReady],
    /// `InvalidArgumentException`.
    InvalidArgumentException => [InvalidArgument],
    /// `NotFoundException`: anything not found, files and sandboxes included.
    NotFoundException => [NotFound],
    /// `FileNotFoundException`.
    FileNotFoundException => [FileNotFound],
    /// `SandboxNotFoundException`.
    SandboxNotFoundException => [SandboxNotFound],
    /// `NotEnoughSpaceException`.
    NotEnoughSpaceException => [DiskFull],
    /// `RateLimitException`.
    RateLimitException => [RateLimit],
    /// `CommandExitException`.
    CommandExitException => [CommandExit],
    /// `GuestUnresponsiveException`: never raised here (a suspended
    /// MicroVM always resumes with its memory).
    GuestUnresponsiveException => [],
    /// `TemplateException`: the image's agent is too old, or a template
    /// failure.
    TemplateException => [Template],
    /// `GitUpstreamException`.
    GitUpstreamException => [GitUpstream],
    /// `AuthenticationException` (not a `SandboxException`).
    AuthenticationException => [Authentication],
    /// `GitAuthException` (an `AuthenticationException`).
    GitAuthException => [GitAuth],
    /// `ServiceBusyException` (not a `SandboxException`): no capacity now.
    ServiceBusyException => [Capacity],
    /// `QuotaExceededException` (not a `SandboxException`; rayito's
    /// own: E2B has no such class).
    QuotaExceededException => [QuotaExceeded],
    /// `BuildException`: an image build failed (outside `SandboxException`
    /// in E2B; rayito's `build` kind sits under `sandbox`).
    BuildException => [Build, FileUpload],
    /// `FileUploadException` (a `BuildException`).
    FileUploadException => [FileUpload],
    /// `DockerfileSyntaxError`: never raised here (a template's
    /// Dockerfile is refused as `InvalidArgumentException`).
    DockerfileSyntaxError => [],
    /// `SecretException` (not a `SandboxException` in E2B; rayito's
    /// `secret` kind sits under `sandbox`).
    SecretException => [Secret],
    /// `SecretNotFoundException`.
    SecretNotFoundException => [SecretNotFound],
    /// `VolumeException`: never raised here (volumes are `Unimplemented`).
    VolumeException => [],
    /// `VolumeNotFoundException`: never raised here.
    VolumeNotFoundException => [],
    /// `VolumePathNotFoundException`: never raised here.
    VolumePathNotFoundException => [],
    /// `UnimplementedError` (rayito's own; not a `SandboxException`): a
    /// missing feature.
    UnimplementedError => [Unimplemented],
}

impl E2bClass {
    /// The SDK kind this class is named after (its first), `None` for a
    /// class nothing here raises.
    pub const fn kind(self) -> Option<ErrorKind> {
        match self.kinds() {
            [first, ..] => Some(*first),
            [] => None,
        }
    }

    /// Whether E2B defines this class (false for rayito's own:
    /// `QuotaExceededException`, `UnimplementedError`).
    pub const fn is_e2b(self) -> bool {
        !matches!(
            self,
            Self::QuotaExceededException | Self::UnimplementedError
        )
    }
}

/// `isinstance(err, class)`: true when `err`'s kind is one of `class`'s
/// kinds or descends from one.
pub fn is_instance(err: &SandboxError, class: E2bClass) -> bool {
    class.kinds().iter().any(|kind| err.is(*kind))
}

/// The most specific E2B class of `err` (the one `type(err)` would name):
/// the class whose matching kind is deepest, the narrower class (fewer
/// kinds) on a tie.
pub fn class_of(err: &SandboxError) -> E2bClass {
    class_of_kind(err.kind())
}

/// The most specific E2B class of an error of `kind` (the last column of
/// the kind table of `docs/errors.md`).
pub fn class_of_kind(of: ErrorKind) -> E2bClass {
    E2bClass::ALL
        .iter()
        .copied()
        .filter_map(|class| {
            let deepest = class
                .kinds()
                .iter()
                .filter(|kind| of.is_a(**kind))
                .map(|kind| depth(*kind))
                .max()?;
            Some((class, deepest, usize::MAX - class.kinds().len()))
        })
        .max_by_key(|(_, deepest, narrow)| (*deepest, *narrow))
        .map_or(E2bClass::SandboxException, |(class, _, _)| class)
}

/// How far a kind is from its root (roots are 0).
fn depth(kind: ErrorKind) -> usize {
    kind.parents()
        .iter()
        .map(|p| depth(*p) + 1)
        .max()
        .unwrap_or(0)
}
