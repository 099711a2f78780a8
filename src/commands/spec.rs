//! What every option type that starts a process in the sandbox shares
//! (commands, terminals, code cells and contexts, git): its environment,
//! working directory, user, timeouts and secrets, in one [`ProcessSpec`]
//! that each option type embeds, and their setters, written once by
//! [`spec_setters!`] with each type's own docs.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The process part of an option type. Each type uses the fields its
/// setters set; the others stay at their defaults.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct ProcessSpec {
    pub(crate) envs: BTreeMap<String, String>,
    pub(crate) cwd: Option<String>,
    pub(crate) user: Option<String>,
    /// The process's own limit (`None`: none).
    pub(crate) timeout: Option<Duration>,
    /// The call's own request timeout (else the sandbox's).
    pub(crate) request_timeout: Option<Duration>,
    /// Environment variables from Secrets Manager (references only).
    #[cfg(feature = "secrets")]
    pub(crate) secrets: crate::secret::SecretEnv,
}

impl ProcessSpec {
    /// No setting but a default timeout.
    pub(crate) fn with_timeout(timeout: Duration) -> Self {
        Self {
            timeout: Some(timeout),
            ..Self::default()
        }
    }

    /// Adds the fields to an option type's `Debug`: env values may be
    /// secret, so names only (and no secret at all).
    pub(crate) fn debug_fields<'a, 'f, 'b>(
        &self,
        f: &'a mut fmt::DebugStruct<'f, 'b>,
    ) -> &'a mut fmt::DebugStruct<'f, 'b> {
        f.field("envs", &self.envs.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("user", &self.user)
            .field("timeout", &self.timeout)
            .field("request_timeout", &self.request_timeout)
    }
}

/// The setters of an option type with a `spec: ProcessSpec` field, each
/// with the docs given before its name (`env`, `cwd`, `user`, `timeout`,
/// `no_timeout`, `request_timeout`, `secret`), in an `impl` block:
///
/// ```text
/// impl PtyOptions {
///     spec_setters! {
///         /// An environment variable for the shell.
///         env;
///     }
/// }
/// ```
macro_rules! spec_setters {
    () => {};
    ($(#[$doc:meta])* env; $($rest:tt)*) => {
        $(#[$doc])*
        #[must_use]
        pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
            self.spec.envs.insert(name.into(), value.into());
            self
        }
        spec_setters!($($rest)*);
    };
    ($(#[$doc:meta])* cwd; $($rest:tt)*) => {
        $(#[$doc])*
        #[must_use]
        pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
            self.spec.cwd = Some(cwd.into());
            self
        }
        spec_setters!($($rest)*);
    };
    ($(#[$doc:meta])* user; $($rest:tt)*) => {
        $(#[$doc])*
        #[must_use]
        pub fn user(mut self, user: impl Into<String>) -> Self {
            self.spec.user = Some(user.into());
            self
        }
        spec_setters!($($rest)*);
    };
    ($(#[$doc:meta])* timeout; $($rest:tt)*) => {
        $(#[$doc])*
        #[must_use]
        pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
            self.spec.timeout = (!timeout.is_zero()).then_some(timeout);
            self
        }
        spec_setters!($($rest)*);
    };
    ($(#[$doc:meta])* no_timeout; $($rest:tt)*) => {
        $(#[$doc])*
        #[must_use]
        pub fn no_timeout(mut self) -> Self {
            self.spec.timeout = None;
            self
        }
        spec_setters!($($rest)*);
    };
    ($(#[$doc:meta])* request_timeout; $($rest:tt)*) => {
        $(#[$doc])*
        #[must_use]
        pub fn request_timeout(mut self, request_timeout: std::time::Duration) -> Self {
            self.spec.request_timeout = Some(request_timeout);
            self
        }
        spec_setters!($($rest)*);
    };
    ($(#[$doc:meta])* secret; $($rest:tt)*) => {
        $(#[$doc])*
        ///
        /// The value is read through the sandbox's secret cache when the
        /// process starts (it overrides a secret the sandbox's builder bound
        /// to the same variable) and travels only in its environment; a
        /// variable also given to `env` is refused. See
        /// [`crate::SandboxBuilder::secret`].
        ///
        /// Only with the `secrets` cargo feature.
        #[cfg(feature = "secrets")]
        #[must_use]
        pub fn secret(
            mut self,
            variable: impl Into<String>,
            reference: impl Into<crate::secret::SecretRef>,
        ) -> Self {
            self.spec.secrets.insert(variable.into(), reference.into());
            self
        }
        spec_setters!($($rest)*);
    };
}

pub(crate) use spec_setters;
