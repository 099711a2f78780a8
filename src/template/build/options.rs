//! What a build is told: [`BuildOptions`], and what it reports as it goes:
//! [`BuildEvent`].

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::aws::s3::artifacts::check_bucket;
use crate::error::SandboxError;

/// The memory sizes an image can have, in MiB.
pub const MEMORY_SIZES_MIB: [u32; 5] = [512, 1024, 2048, 4096, 8192];
/// The memory of a template's image unless told otherwise (MiB).
pub const DEFAULT_MEMORY_MIB: u32 = 2048;
/// How long [`Templates::build`](super::Templates::build) waits for the
/// build to settle unless told otherwise (30 minutes).
pub const DEFAULT_BUILD_TIMEOUT: Duration = Duration::from_secs(1800);
/// The environment variable naming the S3 bucket of build artifacts.
pub const BUCKET_ENV: &str = "RAYITO_BUCKET";

/// Called with each [`BuildEvent`] as the build goes.
pub type ProgressFn = Arc<dyn Fn(&BuildEvent) + Send + Sync>;

/// How to build a template; `Default` is the usual build.
#[derive(Clone)]
pub struct BuildOptions {
    /// The image's memory in MiB: one of [`MEMORY_SIZES_MIB`]
    /// (default [`DEFAULT_MEMORY_MIB`]).
    pub memory_mib: u32,
    /// Build even when an identical version exists (as does
    /// [`Template::skip_cache`](crate::template::Template::skip_cache)).
    pub force: bool,
    /// How long [`Templates::build`](super::Templates::build) waits for the
    /// build to settle (default [`DEFAULT_BUILD_TIMEOUT`]); past it the
    /// build goes on in the service.
    pub timeout: Duration,
    /// The base image's version (default: the template's, else the newest
    /// usable one).
    pub base_image_version: Option<u32>,
    /// The directory `copy` sources are relative to (default: the current
    /// directory).
    pub context_dir: Option<PathBuf>,
    /// The S3 bucket of the build artifact (default: `RAYITO_BUCKET`; the
    /// local backend has its own).
    pub bucket: Option<String>,
    /// How often the build's state is read while waiting (default: 10 s
    /// on AWS, 200 ms on the local backend).
    pub poll_interval: Option<Duration>,
    /// Called with each [`BuildEvent`].
    pub on_event: Option<ProgressFn>,
}

impl Default for BuildOptions {
    fn default() -> Self {
        Self {
            memory_mib: DEFAULT_MEMORY_MIB,
            force: false,
            timeout: DEFAULT_BUILD_TIMEOUT,
            base_image_version: None,
            context_dir: None,
            bucket: None,
            poll_interval: None,
            on_event: None,
        }
    }
}

crate::secret::redacted_debug! {
    BuildOptions |o| memory_mib, force, timeout, base_image_version,
    context_dir = o.context_dir.is_some(), bucket = o.bucket.is_some(), poll_interval,
    on_event = o.on_event.is_some()
}

impl BuildOptions {
    crate::setters::setters! {
        /// Sets [`BuildOptions::on_event`].
        on_event: shared callback(&BuildEvent);
    }

    /// Checks every option before any call.
    ///
    /// # Errors
    /// `InvalidArgument` naming the option.
    pub(crate) fn check(&self) -> Result<(), SandboxError> {
        if !MEMORY_SIZES_MIB.contains(&self.memory_mib) {
            return Err(SandboxError::invalid_argument(
                "memory_mib",
                "an image's memory must be 512, 1024, 2048, 4096 or 8192 MiB; pass one of them",
            ));
        }
        if self.timeout.is_zero() {
            return Err(SandboxError::invalid_argument(
                "timeout",
                "must be positive; pass how long to wait for the build",
            ));
        }
        if self.poll_interval.is_some_and(|p| p.is_zero()) {
            return Err(SandboxError::invalid_argument(
                "poll_interval",
                "must be positive; pass how often to read the build's state",
            ));
        }
        if let Some(bucket) = &self.bucket {
            check_bucket(bucket)?;
        }
        Ok(())
    }

    pub(crate) fn emit(&self, event: BuildEvent) {
        tracing::info!(target: "rayito::template", event = %event, "template build");
        if let Some(f) = &self.on_event {
            f(&event);
        }
    }
}

/// What a build reports as it goes. Its `Debug` never shows a log line
/// (build output may hold anything the build printed).
#[derive(Clone, PartialEq)]
#[non_exhaustive]
pub enum BuildEvent {
    /// The artifact is packed: its size, and the first 12 hex digits of
    /// its SHA-256 (what identifies it).
    Packed {
        /// The zip's size in bytes.
        bytes: u64,
        /// The first 12 hex digits of its SHA-256.
        digest: String,
    },
    /// The artifact was uploaded (`true`) or was already there (`false`).
    Uploaded(bool),
    /// An identical version exists and is used: no build.
    Reused {
        /// The version used.
        version: String,
    },
    /// The build was submitted as a new version.
    Submitted {
        /// The new version.
        version: String,
    },
    /// The build's state, read while waiting (once per change).
    State {
        /// The image's state (`CREATING`, `UPDATED`, ...).
        image: String,
        /// The version's state (`PENDING`, `IN_PROGRESS`, ...).
        version: String,
        /// How long the wait has lasted.
        elapsed: Duration,
    },
    /// A line of the build log (read when the build failed).
    Log(String),
}

impl fmt::Debug for BuildEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Packed { bytes, digest } => f
                .debug_struct("Packed")
                .field("bytes", bytes)
                .field("digest", digest)
                .finish(),
            Self::Uploaded(uploaded) => f.debug_tuple("Uploaded").field(uploaded).finish(),
            Self::Reused { version } => f.debug_struct("Reused").field("version", version).finish(),
            Self::Submitted { version } => f
                .debug_struct("Submitted")
                .field("version", version)
                .finish(),
            Self::State {
                image,
                version,
                elapsed,
            } => f
                .debug_struct("State")
                .field("image", image)
                .field("version", version)
                .field("elapsed", elapsed)
                .finish(),
            Self::Log(line) => write!(f, "Log(<{} bytes>)", line.len()),
        }
    }
}

impl fmt::Display for BuildEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Packed { bytes, digest } => write!(f, "packed {bytes} bytes ({digest})"),
            Self::Uploaded(true) => f.write_str("artifact uploaded"),
            Self::Uploaded(false) => f.write_str("artifact already uploaded"),
            Self::Reused { version } => write!(f, "reusing version {version}"),
            Self::Submitted { version } => write!(f, "building version {version}"),
            Self::State {
                image,
                version,
                elapsed,
            } => write!(
                f,
                "image {image}, version {version} ({}s)",
                elapsed.as_secs()
            ),
            Self::Log(_) => f.write_str("build log line"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_a_log_line() {
        let event = BuildEvent::Log("#5 RUN echo AKIAEXAMPLESECRET".into());
        assert_eq!(format!("{event:?}"), "Log(<29 bytes>)");
        assert_eq!(event.to_string(), "build log line");
        assert_eq!(
            format!(
                "{:?}",
                BuildEvent::Submitted {
                    version: "3".into()
                }
            ),
            r#"Submitted { version: "3" }"#
        );
    }
}
