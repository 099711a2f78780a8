//! Templates: a sandbox image described in Rust (cargo feature
//! `templates`).
//!
//! A [`Template`] is a base image plus steps (copy, run, package
//! installs, environment, working directory, user) and a start command
//! with a ready check. It compiles to:
//!
//! - a Dockerfile layer ([`Template::to_dockerfile`]), composed before the
//!   base image's `CMD` ([`Template::to_dockerfile_over`]);
//! - the agent's `template.json` and `template-env.json`
//!   ([`Template::template_json`], [`Template::template_env_json`]);
//! - a stable JSON form of the template itself, the one the CLI reads
//!   ([`Template::to_json`], [`Template::from_json`]);
//! - the deterministic build artifact with its content-addressed key
//!   ([`Template::pack`], [`Artifact`]), with the build context filtered by
//!   `.dockerignore` with Docker's semantics ([`DockerIgnore`]).
//!
//! A failed build's BuildKit log is read by [`parse_build_log`].
//! [`Client::templates`](crate::Client::templates) builds templates into
//! images ([`Templates::build`]) on AWS and on the local backend.
//!
//! ```
//! use rayito::template::{ReadyCmd, StartCmd, Template};
//!
//! # fn main() -> Result<(), rayito::SandboxError> {
//! let template = Template::new()
//!     .run_cmd("mkdir -p /srv/www && echo hello > /srv/www/index.html")
//!     .set_envs([("GREETING", "hello")])
//!     .set_start_cmd(
//!         StartCmd::new("python3 -m http.server 8000 --directory /srv/www")
//!             .ready(ReadyCmd::port(8000)),
//!     );
//! let json = template.to_json()?;
//! assert_eq!(Template::from_json(&json)?, template);
//! # Ok(())
//! # }
//! ```

mod agent_files;
mod artifact;
mod base_dockerfile;
mod base_image;
mod build;
mod builder;
mod buildkit;
mod context;
mod dockerfile;
mod dockerignore;
mod json_text;
mod ready;
mod shell;
mod spec_json;
mod step;
mod validate;
mod variant;

pub use crate::sandbox::image_name::check_template_name;
pub use agent_files::{TEMPLATE_ENV_JSON_VERSION, TEMPLATE_JSON_VERSION};
pub use artifact::Artifact;
pub use base_dockerfile::{MOUNT_S3_VERSION, MOUNT_UID, MOUNT_USER, default_dockerfile};
pub use base_image::{
    AGENT_ENTRY, Arch, DEFAULT_DOCKERFILE, check_agent_binary, check_base_artifact,
    pack_base_image, pack_base_image_variant,
};
pub(crate) use build::TemplateServices;
pub use build::{
    BASELINE_MEMORY_ENV, BUCKET_ENV, BuildEvent, BuildHandle, BuildInfo, BuildOptions, BuildStatus,
    DEFAULT_BUILD_TIMEOUT, DEFAULT_MEMORY_MIB, DEFAULT_PRUNE_KEEP, DEFAULT_PRUNE_WAIT, HOOKS_PORT,
    ImageVersionSummary, Images, KeepReason, MANAGED_BASE_IMAGE, MANAGED_BY_TAG, MEMORY_SIZES_MIB,
    PRUNE_CONFLICT_BACKOFF, PRUNE_POLL_INTERVAL, ProgressFn, PruneOptions, PruneReport,
    PublishInfo, PublishOptions, RefusedReason, SizePublish, SizeStatus, TemplateSummary,
    Templates,
};
pub use builder::{DEFAULT_BASE_IMAGE, Template};
pub use buildkit::{BuildLogFailure, LOG_TAIL_LINES, parse_build_log};
pub use dockerfile::{LAYER_BEGIN, LAYER_END};
pub use dockerignore::DockerIgnore;
pub use ready::{DEFAULT_READY_TIMEOUT, READY_POLL_INTERVAL, ReadyCmd};
pub use spec_json::TEMPLATE_SPEC_VERSION;
pub use step::{DEFAULT_START_USER, StartCmd};
pub use variant::{
    ALL_OS_CAPABILITIES, EFS_MARKER, POLY_MARKER, SLIM_MARKER, Variant, check_artifact_variant,
};
