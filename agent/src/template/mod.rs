//! Templates: an image built from a `Template` carries two files the agent
//! reads when it starts ([`files`]): the image's environment, which every
//! command, terminal and kernel gets, and a start command, which the agent
//! runs as a managed process and whose ready command gates `/ready`
//! ([`start`]).
//!
//! `/ready` answers from [`TemplateGate`]: 200 without a template or once
//! the ready command exited 0 (or at once without one), 503 while it has
//! not yet (AWS retries), 500 with the reason once its deadline passed or
//! when the template was refused (a malformed file, a user other than the
//! sandbox's, a start command that cannot start): a retry cannot mend any
//! of those, so the build fails at once instead of after its hook timeout.

mod files;
mod start;

use axum::http::StatusCode;
use tokio::sync::watch;

pub use self::files::{
    IMAGE_TEMPLATE_DIR, MAX_TEMPLATE_FILE_BYTES, TEMPLATE_ENV_FILE, TEMPLATE_FILE,
};
pub(crate) use self::files::{StartSpec, load};
pub(crate) use self::start::start;

/// The tag of the template's start command in `Process.List`.
pub const TEMPLATE_START_TAG: &str = "rayito-template-start";

/// `/ready`'s body while the ready command has not exited 0 yet (HTTP 503).
pub const READY_WAITING: &str = "waiting for the template's ready command";

/// Where the template's readiness stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// No template: `/ready` answers as it always did.
    Absent,
    /// The ready command has not exited 0 yet.
    Pending,
    /// The start command runs and its ready check passed.
    Ready,
    /// Refused or failed, for good; the reason names no value.
    Failed(String),
}

/// The template's readiness, shared by the hooks, Health and the ready check.
#[derive(Clone, Debug)]
pub(crate) struct TemplateGate {
    state: std::sync::Arc<watch::Sender<Readiness>>,
}

impl Default for TemplateGate {
    fn default() -> Self {
        Self {
            state: std::sync::Arc::new(watch::channel(Readiness::Absent).0),
        }
    }
}

impl TemplateGate {
    pub(crate) fn set(&self, readiness: Readiness) {
        self.state.send_replace(readiness);
    }

    /// Refuses the template (or records that it failed) with `reason`,
    /// logged once here.
    pub(crate) fn fail(&self, reason: String) {
        tracing::error!(%reason, "template failed; /ready answers 500");
        self.set(Readiness::Failed(reason));
    }

    /// Whether the ready check is still running: Health then reports the
    /// agent as not ready, as a sandbox restored from an AWS snapshot
    /// (taken after `/ready` passed) never is.
    pub(crate) fn is_pending(&self) -> bool {
        *self.state.borrow() == Readiness::Pending
    }

    /// `/ready`'s answer.
    pub(crate) fn ready_answer(&self) -> (StatusCode, String) {
        match &*self.state.borrow() {
            Readiness::Absent | Readiness::Ready => (StatusCode::OK, "ok".to_owned()),
            Readiness::Pending => (StatusCode::SERVICE_UNAVAILABLE, READY_WAITING.to_owned()),
            Readiness::Failed(reason) => (StatusCode::INTERNAL_SERVER_ERROR, reason.clone()),
        }
    }
}
