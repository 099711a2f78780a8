//! Errors of the Configure contract (`crate::configure`): a section the
//! agent refused (INVALID) or could not apply (FAILED) is a `Sandbox` error
//! `<section>: <error_class>`; a section this agent cannot do at all is
//! `Unimplemented` naming the section. The agent's `error_class` is peer
//! data: only a short class-like token is kept (see [`error_class`]).

use crate::error::SandboxError;
use crate::error::constructors::meta;
use crate::error::messages as m;

/// Where the Configure contract is documented.
pub(crate) const DOC: &str = "docs/configure.md";

/// Longest `error_class` kept as the agent sent it.
const MAX_CLASS_CHARS: usize = 64;

/// The agent's `error_class` as it may appear in a message: a class name
/// (ASCII letters, digits, `_ . : -`, at most 64 characters) is kept; an
/// empty one reads `unspecified`; anything else (free text, which could
/// hold a path, a bucket or a value) reads `unrecognized_error_class`.
pub(crate) fn error_class(raw: &str) -> &str {
    if raw.is_empty() {
        return "unspecified";
    }
    let class_like = raw.chars().count() <= MAX_CLASS_CHARS
        && raw
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-'));
    if class_like {
        raw
    } else {
        "unrecognized_error_class"
    }
}

/// Why a section is not available: the reason templates of
/// [`SandboxError::configure_unimplemented`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NotAvailable {
    /// Health carries no `features` (an agent older than Configure).
    NoFeatures,
    /// Health's flag for the section is false.
    SectionOff,
    /// The agent answered the section UNSUPPORTED.
    Unsupported,
}

impl SandboxError {
    /// `Sandbox`: the agent answered `section` INVALID with `class`.
    pub(crate) fn configure_invalid(section: &str, class: &str) -> Self {
        Self::Sandbox {
            code: None,
            meta: meta(
                m::CONFIGURE_INVALID,
                &[("feature", section), ("cause", error_class(class))],
            ),
        }
    }

    /// `Sandbox`: the agent answered `section` FAILED with `class` (in
    /// Configure, or later in ConfigureStatus while it was PENDING).
    pub(crate) fn configure_failed(section: &str, class: &str) -> Self {
        Self::Sandbox {
            code: None,
            meta: meta(
                m::CONFIGURE_FAILED,
                &[("feature", section), ("cause", error_class(class))],
            ),
        }
    }

    /// `Unimplemented { feature: section }`, saying why.
    pub(crate) fn configure_unimplemented(section: &str, why: NotAvailable) -> Self {
        let reason = match why {
            NotAvailable::NoFeatures => m::CONFIGURE_NO_FEATURES_REASON,
            NotAvailable::SectionOff => m::CONFIGURE_SECTION_OFF_REASON,
            NotAvailable::Unsupported => m::CONFIGURE_UNSUPPORTED_REASON,
        };
        Self::unimplemented(section, reason.text, Some(DOC))
    }
}
