//! Local image builds: a template's Dockerfile layer run for real over the
//! host's root, and the result checked the way AWS checks a build (an agent
//! started on it answers the `ready` and `validate` hooks).
//!
//! The image API (`super::images`) drives a version through its states and
//! calls [`run`] once per version.

use std::path::PathBuf;
use std::time::Duration;

/// One version's build.
#[derive(Debug)]
pub(crate) struct LocalBuild {
    /// The unpacked code artifact: `Dockerfile` at the root, the context
    /// under `__rayito_context/`, the template's JSON files at the root.
    pub(crate) artifact_dir: PathBuf,
    /// The version's own directory (created by the caller, empty); the
    /// build keeps the image layer in `<version_dir>/layer`.
    pub(crate) version_dir: PathBuf,
    /// How long the `ready` and `validate` hooks may take, each.
    pub(crate) hook_timeout: Duration,
    /// Each BuildKit-shaped log line, as it is produced.
    pub(crate) log: tokio::sync::mpsc::UnboundedSender<String>,
}

/// How a build ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BuildResult {
    /// The layer is complete and an agent on it passed both hooks.
    Succeeded {
        /// The image layer: mounted read-only under every sandbox of the
        /// version (`AgentConfig::image_layer`).
        layer: PathBuf,
    },
    /// The version is FAILED with this `stateReason`.
    Failed {
        /// The version's `stateReason`, in AWS's words.
        state_reason: String,
    },
}

/// Runs one build to its end.
pub(crate) async fn run(build: LocalBuild) -> BuildResult {
    drop(build);
    BuildResult::Failed {
        state_reason: "local builds are not available in this version of the emulator".to_string(),
    }
}
