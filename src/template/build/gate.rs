//! The version gate: one read of the image and its version, whether the
//! version is launchable or settled, and the error a failed build gives.

use std::time::{Duration, Instant};

use crate::aws::microvms::images::{ImageInfo, VersionInfo};
use crate::error::SandboxError;
use crate::template::parse_build_log;

use super::options::{BuildEvent, BuildOptions};
use super::pipeline::log_group;
use super::services::TemplateServices;

/// How many log streams and lines a failed template build reads.
const FAILED_LOG_STREAMS: i32 = 1;
const FAILED_LOG_LINES: i32 = 500;

/// One read of the gate.
#[derive(Debug, Clone)]
pub(crate) struct GateRead {
    pub image: ImageInfo,
    pub version: VersionInfo,
}

impl GateRead {
    /// Image CREATED/UPDATED, version SUCCESSFUL and ACTIVE.
    pub(crate) fn launchable(&self) -> bool {
        matches!(self.image.state.as_str(), "CREATED" | "UPDATED") && self.version.is_usable()
    }

    /// Done either way: the version SUCCESSFUL or FAILED and the image
    /// out of its transition, or the version FAILED.
    pub(crate) fn settled(&self) -> bool {
        let version_done = matches!(self.version.state.as_str(), "SUCCESSFUL" | "FAILED");
        let image_done = matches!(
            self.image.state.as_str(),
            "CREATED" | "UPDATED" | "CREATE_FAILED" | "UPDATE_FAILED"
        );
        (version_done && image_done) || self.version.state == "FAILED"
    }
}

/// Reads the gate once.
///
/// # Errors
/// `NotFound` when the image is gone; a failed read, mapped.
pub(crate) async fn read(
    services: &TemplateServices,
    arn: &str,
    version: &str,
) -> Result<GateRead, SandboxError> {
    let image = services
        .images
        .get_image(arn)
        .await?
        .ok_or_else(SandboxError::template_not_found)?;
    let version = services.images.get_version(arn, version).await?;
    Ok(GateRead { image, version })
}

/// Reads the gate until it settles or `options.timeout` passes; a read
/// that fails with a retryable error is read again at the next tick.
///
/// # Errors
/// `Build { build_timeout }` when it did not settle in time (the build
/// goes on); the last read's error when reads keep failing past it.
pub(crate) async fn wait(
    services: &TemplateServices,
    arn: &str,
    version: &str,
    options: &BuildOptions,
) -> Result<GateRead, SandboxError> {
    let started = Instant::now();
    let interval = options.poll_interval.unwrap_or(if services.is_local() {
        Duration::from_millis(200)
    } else {
        Duration::from_secs(10)
    });
    // Each change of state is reported once, not every read.
    let mut last: Option<(String, String)> = None;
    loop {
        match read(services, arn, version).await {
            Ok(gate) => {
                let now = (gate.image.state.clone(), gate.version.state.clone());
                if last.as_ref() != Some(&now) {
                    options.emit(BuildEvent::State {
                        image: now.0.clone(),
                        version: now.1.clone(),
                        elapsed: started.elapsed(),
                    });
                    last = Some(now);
                }
                if gate.settled() {
                    return Ok(gate);
                }
            }
            Err(e) if e.classify().retryable => {
                tracing::debug!(target: "rayito::template", error = %e, "reading the build state failed; reading again");
            }
            Err(e) => return Err(e),
        }
        let elapsed = started.elapsed();
        if elapsed >= options.timeout {
            return Err(SandboxError::build_timeout(elapsed));
        }
        tokio::time::sleep(interval.min(options.timeout - elapsed)).await;
    }
}

/// The error of a settled, not launchable build: the ready hook's status
/// class when the version's reason names one, else the failed step the
/// log names, else a failure with the log's tail. The service's own reason is never quoted.
pub(crate) async fn failure(
    services: &TemplateServices,
    name: &str,
    gate: &GateRead,
    options: &BuildOptions,
) -> SandboxError {
    let lines = services
        .logs
        .latest(&log_group(name), FAILED_LOG_STREAMS, FAILED_LOG_LINES)
        .await
        .unwrap_or_default();
    for line in &lines {
        options.emit(BuildEvent::Log(line.clone()));
    }
    // The ready hook's verdict first (5xx before 4xx): a build whose steps
    // all ran has step lines in its log too.
    let reason = gate.version.state_reason.as_deref().unwrap_or_default();
    if reason.contains("HTTP 5") {
        return SandboxError::build_ready_failed(true);
    }
    if reason.contains("HTTP 4") {
        return SandboxError::build_ready_failed(false);
    }
    let parsed = parse_build_log(&lines);
    if parsed.step.is_some() {
        return parsed.into_error();
    }
    if gate.version.state == "SUCCESSFUL" {
        // Built, but not launchable (inactive, or the image failed).
        return SandboxError::build_failed(
            Some("the version built but is not launchable"),
            parsed.log_tail,
        );
    }
    parsed.into_error()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::microvms::images::ImageConfig;

    fn gate(image: &str, version: &str, status: &str) -> GateRead {
        GateRead {
            image: ImageInfo {
                arn: "arn".into(),
                name: "n".into(),
                state: image.into(),
                latest_active_version: None,
                latest_failed_version: None,
                tags: Default::default(),
            },
            version: VersionInfo {
                arn: "arn".into(),
                version: "1".into(),
                state: version.into(),
                status: status.into(),
                state_reason: None,
                created_at: 0.0,
                config: ImageConfig::default(),
            },
        }
    }

    /// Launchable: image CREATED or UPDATED, version SUCCESSFUL and
    /// ACTIVE. Settled: the version done and the image out of its
    /// transition, or the version FAILED whatever the image says.
    #[test]
    fn launchable_and_settled_follow_the_spec_table() {
        let rows = [
            // image, version, status, launchable, settled
            ("CREATED", "SUCCESSFUL", "ACTIVE", true, true),
            ("UPDATED", "SUCCESSFUL", "ACTIVE", true, true),
            ("UPDATED", "SUCCESSFUL", "INACTIVE", false, true),
            ("CREATING", "SUCCESSFUL", "ACTIVE", false, false),
            ("UPDATING", "IN_PROGRESS", "ACTIVE", false, false),
            ("CREATING", "PENDING", "ACTIVE", false, false),
            ("CREATE_FAILED", "SUCCESSFUL", "ACTIVE", false, true),
            ("UPDATE_FAILED", "FAILED", "ACTIVE", false, true),
            ("UPDATING", "FAILED", "ACTIVE", false, true),
            ("CREATED", "DELETING", "ACTIVE", false, false),
        ];
        for (image, version, status, launchable, settled) in rows {
            let g = gate(image, version, status);
            assert_eq!(
                (g.launchable(), g.settled()),
                (launchable, settled),
                "{image} / {version} / {status}"
            );
        }
    }
}
