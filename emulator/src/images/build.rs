//! One version's build, driven as AWS drives one: PENDING until it starts,
//! IN_PROGRESS while the code artifact is fetched from the object store,
//! unpacked under `<root>/images/<name>/<version>/artifact` and built by
//! [`super::super::build::run`], then SUCCESSFUL or FAILED. Every log line
//! lands in the log group `/rayito/<name>`, stream
//! `YYYY/MM/DD[<version>]build-<buildId>`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::super::build::{self, BuildResult, LocalBuild};
use super::super::registry::Shared;
use super::Outcome;
use super::unzip;

/// stateReason for a code artifact URI that is not `s3://bucket/key`.
pub(crate) const REASON_NOT_S3: &str = "The code artifact URI must be an s3:// URI.";
/// stateReason for a code artifact that is not in the bucket.
pub(crate) const REASON_MISSING: &str =
    "The code artifact could not be read from S3: no such object.";

/// The directory of one version's files.
pub(crate) fn version_dir(shared: &Shared, name: &str, version: u32) -> PathBuf {
    shared
        .settings
        .root
        .join("images")
        .join(name)
        .join(version.to_string())
}

/// `YYYY/MM/DD` of a Unix time in seconds (UTC, proleptic Gregorian).
pub(crate) fn utc_date(epoch_seconds: i64) -> String {
    // Howard Hinnant's days-to-civil algorithm.
    let z = epoch_seconds.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}/{month:02}/{day:02}")
}

/// The build's log stream name.
pub(crate) fn stream_name(created_at: f64, version: u32, build_id: &str) -> String {
    format!("{}[{version}]build-{build_id}", utc_date(created_at as i64))
}

/// Starts the build of `name` version `version` on the emulator's tasks.
pub(crate) fn spawn(shared: &Arc<Shared>, name: String, version: u32) {
    let s = shared.clone();
    shared.spawn(async move {
        let outcome = drive(&s, &name, version).await;
        s.images.finish_build(&name, version, outcome);
    });
}

async fn drive(shared: &Arc<Shared>, name: &str, number: u32) -> Outcome {
    let Some(version) = shared.images.for_build(name, number) else {
        return Outcome::Failed {
            reason: "The image version was deleted.".into(),
        };
    };
    shared.images.start_build(name, number);
    // Held by a test (`Faults::hold_builds`): stay IN_PROGRESS.
    shared.faults.builds_released().await;
    let group = format!("/rayito/{name}");
    let stream = stream_name(version.created_at, number, &version.build_id);
    let log = |line: String| shared.logs.append(&group, &stream, [line]);
    log(format!(
        "rayito emulator: build {} of {name} version {number} started",
        version.build_id
    ));
    let outcome = run(shared, name, &version, &log).await;
    match &outcome {
        Outcome::Succeeded { .. } => log("rayito emulator: build SUCCESSFUL".into()),
        Outcome::Failed { reason } => log(format!("rayito emulator: build FAILED: {reason}")),
    }
    outcome
}

async fn run(
    shared: &Arc<Shared>,
    name: &str,
    version: &super::Version,
    log: &(impl Fn(String) + Sync),
) -> Outcome {
    let failed = |reason: &str| Outcome::Failed {
        reason: reason.to_string(),
    };
    let Some((bucket, key)) = version
        .artifact_uri()
        .and_then(|u| u.strip_prefix("s3://"))
        .and_then(|rest| rest.split_once('/'))
    else {
        return failed(REASON_NOT_S3);
    };
    let zip = match shared.objects.get(bucket, key).await {
        Ok(Some(zip)) => zip,
        Ok(None) => return failed(REASON_MISSING),
        Err(e) => {
            tracing::warn!(error = %e, "emulator: cannot read a code artifact");
            return failed("The code artifact could not be read from S3.");
        }
    };
    let version_dir = version_dir(shared, name, version.number);
    // A leftover of an earlier image of the same name goes first.
    let _ = tokio::fs::remove_dir_all(&version_dir).await;
    let artifact_dir = version_dir.join("artifact");
    let dest = artifact_dir.clone();
    let unpacked = tokio::task::spawn_blocking(move || unzip::unpack(&zip, &dest)).await;
    match unpacked {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return failed(&format!("Invalid code artifact: {e}.")),
        Err(_) => return failed("The code artifact could not be unpacked."),
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let hook_timeout = ready_timeout(version).unwrap_or(shared.settings.hook_timeout);
    let build = build::run(LocalBuild {
        artifact_dir,
        version_dir,
        hook_timeout,
        log: tx,
    });
    tokio::pin!(build);
    // Forward lines as they come; after the build ends, the rest.
    let result = loop {
        tokio::select! {
            result = &mut build => break result,
            Some(line) = rx.recv() => log(line),
        }
    };
    while let Ok(line) = rx.try_recv() {
        log(line);
    }
    match result {
        BuildResult::Succeeded { layer } => Outcome::Succeeded { layer: Some(layer) },
        BuildResult::Failed { state_reason } => Outcome::Failed {
            reason: state_reason,
        },
    }
}

/// The version's `readyTimeoutInSeconds`, if it set one.
fn ready_timeout(version: &super::Version) -> Option<Duration> {
    let secs = version
        .config
        .get("hooks")?
        .get("microvmImageHooks")?
        .get("readyTimeoutInSeconds")?
        .as_u64()?;
    Some(Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_names_carry_the_utc_date_version_and_build() {
        assert_eq!(utc_date(0), "1970/01/01");
        assert_eq!(utc_date(951_782_400), "2000/02/29");
        assert_eq!(utc_date(1_796_083_200), "2026/12/01");
        assert_eq!(stream_name(1_796_083_200.5, 3, "b"), "2026/12/01[3]build-b");
    }
}
