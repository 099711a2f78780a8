//! Pruning an image's old versions (`rayito image prune`): keep the newest
//! launchable ones, every version MicroVMs run on and every version still
//! building; delete the rest oldest first, one at a time, each waited for
//! until it is gone.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::Client;
use crate::aws::microvms::images::{DeleteRefused, VersionInfo, major_version};
use crate::control::ListRequest;
use crate::error::SandboxError;
use crate::state::SandboxState;

use super::services::TemplateServices;

/// How many launchable versions a prune keeps unless told otherwise.
pub const DEFAULT_PRUNE_KEEP: usize = 5;
/// How long a prune waits for one deleted version to be gone.
pub const DEFAULT_PRUNE_WAIT: Duration = Duration::from_secs(600);
/// How often a prune reads whether a deleted version is gone.
pub const PRUNE_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// The waits between deletes the service refused with a conflict (a
/// MicroVM started on the version, or a build of it still running).
pub const PRUNE_CONFLICT_BACKOFF: [Duration; 5] = [
    Duration::from_secs(5),
    Duration::from_secs(10),
    Duration::from_secs(20),
    Duration::from_secs(40),
    Duration::from_secs(80),
];
/// The most ListMicrovms pages a prune reads for live MicroVMs.
const MAX_MICROVM_PAGES: usize = 100;

/// How a prune runs; `Default` is `rayito image prune`'s.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PruneOptions {
    /// How many of the newest launchable versions are kept (at least 1;
    /// default 5).
    pub keep: usize,
    /// Only report what would be deleted.
    pub dry_run: bool,
    /// How long to wait for one deleted version to be gone (default
    /// 600 s).
    pub wait_timeout: Duration,
    /// How often to read whether a deleted version is gone (default 5 s).
    pub poll_interval: Duration,
    /// The waits after each conflict on one version (default 5, 10, 20,
    /// 40, 80 s); when they are used up the version is refused.
    pub conflict_backoff: Vec<Duration>,
}

impl Default for PruneOptions {
    fn default() -> Self {
        Self {
            keep: DEFAULT_PRUNE_KEEP,
            dry_run: false,
            wait_timeout: DEFAULT_PRUNE_WAIT,
            poll_interval: PRUNE_POLL_INTERVAL,
            conflict_backoff: PRUNE_CONFLICT_BACKOFF.to_vec(),
        }
    }
}

impl PruneOptions {
    fn check(&self) -> Result<(), SandboxError> {
        if self.keep == 0 {
            return Err(SandboxError::invalid_argument(
                "keep",
                "must be at least 1: a prune never deletes every launchable version; pass how many to keep",
            ));
        }
        if self.wait_timeout.is_zero() {
            return Err(SandboxError::invalid_argument(
                "wait_timeout",
                "must be positive; pass how long to wait for a deleted version to go",
            ));
        }
        if self.poll_interval.is_zero() {
            return Err(SandboxError::invalid_argument(
                "poll_interval",
                "must be positive; pass how often to read whether a deleted version is gone",
            ));
        }
        Ok(())
    }
}

/// Why a version was kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeepReason {
    /// One of the `keep` newest launchable versions.
    Newest,
    /// MicroVMs run on it.
    LiveMicrovms,
    /// It is still building (or being deleted).
    InFlight,
}

impl KeepReason {
    /// `newest`, `live-microvms` or `in-flight`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Newest => "newest",
            Self::LiveMicrovms => "live-microvms",
            Self::InFlight => "in-flight",
        }
    }
}

/// Why the service kept a version the prune meant to delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusedReason {
    /// Every delete conflicted (MicroVMs started on it, or it builds).
    Conflict,
    /// The delete was refused even after the version was set INACTIVE.
    Refused,
    /// It was still there when `wait_timeout` ran out.
    WaitTimeout,
}

impl RefusedReason {
    /// `conflict`, `refused` or `wait-timeout`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Conflict => "conflict",
            Self::Refused => "refused",
            Self::WaitTimeout => "wait-timeout",
        }
    }
}

/// What a prune did (or, in a dry run, would do). Versions newest first
/// in `kept`, in deletion order (oldest first) in `deleted` and `refused`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct PruneReport {
    /// The image's ARN.
    pub image_arn: String,
    /// Nothing was deleted: `deleted` is what would have been.
    pub dry_run: bool,
    /// The versions kept, and why.
    pub kept: Vec<(String, KeepReason)>,
    /// The versions deleted (gone when the prune returned).
    pub deleted: Vec<String>,
    /// The versions the service kept, and why.
    pub refused: Vec<(String, RefusedReason)>,
}

/// The plan: each version kept with its reason, and those to delete,
/// oldest first. `versions` are newest first.
fn plan(
    versions: &[VersionInfo],
    live: &BTreeSet<String>,
    keep: usize,
) -> (Vec<(String, KeepReason)>, Vec<VersionInfo>) {
    let mut kept = Vec::new();
    let mut delete = Vec::new();
    let mut newest = 0usize;
    for v in versions {
        let settled = matches!(v.state.as_str(), "SUCCESSFUL" | "FAILED");
        if !settled {
            kept.push((v.version.clone(), KeepReason::InFlight));
        } else if v.is_usable() && newest < keep {
            newest += 1;
            kept.push((v.version.clone(), KeepReason::Newest));
        } else if live.contains(&major_version(&v.version)) {
            kept.push((v.version.clone(), KeepReason::LiveMicrovms));
        } else {
            delete.push(v.clone());
        }
    }
    delete.reverse();
    (kept, delete)
}

/// The versions of image `arn` that MicroVMs not yet terminated run on.
async fn live_versions(client: &Client, arn: &str) -> Result<BTreeSet<String>, SandboxError> {
    let control = client.backend().control.clone();
    let mut live = BTreeSet::new();
    let mut next = None;
    for _ in 0..MAX_MICROVM_PAGES {
        let page = control
            .list_microvms(ListRequest {
                image: Some(arn.to_owned()),
                image_version: None,
                max_results: 50,
                next_token: next.take(),
            })
            .await?;
        for item in page.items {
            if item.state != SandboxState::Terminated {
                live.insert(major_version(&item.image_version));
            }
        }
        match page.next_token {
            Some(token) if !token.is_empty() => next = Some(token),
            _ => break,
        }
    }
    Ok(live)
}

/// Deletes one version: conflicts wait out the backoff, a refusal of an
/// ACTIVE version sets it INACTIVE and deletes again; then waits until it
/// is gone.
async fn delete_one(
    services: &TemplateServices,
    arn: &str,
    version: &VersionInfo,
    options: &PruneOptions,
) -> Result<Result<(), RefusedReason>, SandboxError> {
    let mut backoff = options.conflict_backoff.iter();
    let mut made_inactive = false;
    loop {
        match services
            .images
            .delete_version(arn, &version.version)
            .await?
        {
            Ok(()) => break,
            Err(DeleteRefused::Conflict) => match backoff.next() {
                Some(wait) => {
                    tracing::info!(target: "rayito::template", version = %version.version, wait_secs = wait.as_secs_f64(), "image version delete conflicted; waiting");
                    tokio::time::sleep(*wait).await;
                }
                None => return Ok(Err(RefusedReason::Conflict)),
            },
            Err(DeleteRefused::Validation) if !made_inactive && version.status == "ACTIVE" => {
                services
                    .images
                    .set_version_status(arn, &version.version, false)
                    .await?;
                made_inactive = true;
            }
            Err(DeleteRefused::Validation) => return Ok(Err(RefusedReason::Refused)),
        }
    }
    let started = Instant::now();
    while services
        .images
        .version_exists(arn, &version.version)
        .await?
    {
        let elapsed = started.elapsed();
        if elapsed >= options.wait_timeout {
            return Ok(Err(RefusedReason::WaitTimeout));
        }
        tokio::time::sleep(options.poll_interval.min(options.wait_timeout - elapsed)).await;
    }
    Ok(Ok(()))
}

/// Prunes image `name` (a name or an ARN): see [`super::Images::prune`].
pub(crate) async fn prune(
    client: &Client,
    services: &TemplateServices,
    name: &str,
    options: &PruneOptions,
) -> Result<PruneReport, SandboxError> {
    options.check()?;
    let arn = services.image_arn(name).await?;
    if services.images.get_image(&arn).await?.is_none() {
        return Err(SandboxError::template_not_found());
    }
    let versions = services.images.list_versions(&arn).await?;
    let live = live_versions(client, &arn).await?;
    let (kept, delete) = plan(&versions, &live, options.keep);
    let mut report = PruneReport {
        image_arn: arn.clone(),
        dry_run: options.dry_run,
        kept,
        ..PruneReport::default()
    };
    if options.dry_run {
        report.deleted = delete.into_iter().map(|v| v.version).collect();
        return Ok(report);
    }
    for version in delete {
        match delete_one(services, &arn, &version, options).await? {
            Ok(()) => report.deleted.push(version.version),
            Err(reason) => report.refused.push((version.version, reason)),
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::microvms::images::ImageConfig;

    fn version(n: u32, state: &str, status: &str) -> VersionInfo {
        VersionInfo {
            arn: "arn".into(),
            version: n.to_string(),
            state: state.into(),
            status: status.into(),
            state_reason: None,
            created_at: f64::from(n),
            config: ImageConfig::default(),
        }
    }

    #[test]
    fn the_plan_keeps_the_newest_launchable_live_and_in_flight_and_deletes_oldest_first() {
        // Newest first, as list_versions gives them.
        let versions = [
            version(7, "IN_PROGRESS", "ACTIVE"),
            version(6, "SUCCESSFUL", "ACTIVE"),
            version(5, "FAILED", "ACTIVE"),
            version(4, "SUCCESSFUL", "INACTIVE"),
            version(3, "SUCCESSFUL", "ACTIVE"),
            version(2, "SUCCESSFUL", "ACTIVE"),
            version(1, "SUCCESSFUL", "ACTIVE"),
        ];
        let live = BTreeSet::from(["1".to_owned()]);
        let (kept, delete) = plan(&versions, &live, 2);
        assert_eq!(
            kept,
            [
                ("7".to_owned(), KeepReason::InFlight),
                ("6".to_owned(), KeepReason::Newest),
                ("3".to_owned(), KeepReason::Newest),
                ("1".to_owned(), KeepReason::LiveMicrovms),
            ]
        );
        let order: Vec<&str> = delete.iter().map(|v| v.version.as_str()).collect();
        assert_eq!(order, ["2", "4", "5"]);
    }

    #[test]
    fn keep_zero_and_zero_durations_are_refused() {
        let bad = |o: PruneOptions| o.check().unwrap_err().to_string();
        assert_eq!(
            bad(PruneOptions {
                keep: 0,
                ..PruneOptions::default()
            }),
            "invalid keep: must be at least 1: a prune never deletes every launchable version; pass how many to keep"
        );
        assert!(
            bad(PruneOptions {
                wait_timeout: Duration::ZERO,
                ..PruneOptions::default()
            })
            .starts_with("invalid wait_timeout: ")
        );
        assert_eq!(
            PruneOptions::default().conflict_backoff,
            [5, 10, 20, 40, 80].map(Duration::from_secs)
        );
    }
}
