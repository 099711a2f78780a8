//! The images that exist at start (`rayito-base` and every name of
//! `EmulatorConfig::images`): version 1 SUCCESSFUL and ACTIVE, configured
//! as `rayito image publish` configures one, its code artifact a small
//! deterministic zip in the emulator's object store. Their base layer is
//! the host itself: they have no layer.

use std::io::{Cursor, Write as _};

use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

use super::super::registry::Shared;
use super::MANAGED_IMAGE;

/// The seeded artifact's Dockerfile: it ends with rayd as PID 1, as a
/// published base image's does.
const DOCKERFILE: &str = "\
# rayito base image, seeded by the local emulator: its base is the host.
COPY rayd /opt/rayito/rayd
CMD [\"/opt/rayito/rayd\"]
";

/// The seeded artifact: a `Dockerfile` dated 1980-01-01, mode 0644,
/// deflated, so that every start writes the same bytes (and key).
pub(crate) fn base_zip() -> std::io::Result<Vec<u8>> {
    let options = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .compression_level(Some(6))
        .last_modified_time(DateTime::default())
        .unix_permissions(0o644);
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    zip.start_file("Dockerfile", options)
        .map_err(std::io::Error::other)?;
    zip.write_all(DOCKERFILE.as_bytes())?;
    Ok(zip.finish().map_err(std::io::Error::other)?.into_inner())
}

/// `rayito/images/rayd-<12 hex of sha256>.zip`, as `image publish` names it.
pub(crate) fn artifact_key(zip: &[u8]) -> String {
    let hex: String = Sha256::digest(zip)
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("rayito/images/rayd-{hex}.zip")
}

/// A seeded version's config (spec: images-and-templates §1.2, §2.2).
fn config(shared: &Shared, name: &str, uri: &str) -> Map<String, Value> {
    let s = &shared.settings;
    let value = json!({
        "baseImageArn": format!("arn:aws:lambda:{}:aws:microvm-image:{MANAGED_IMAGE}", s.region),
        "baseImageVersion": "1.0",
        "buildRoleArn": format!("arn:aws:iam::{}:role/rayito-m0-build-{}", s.account_id, s.region),
        "codeArtifact": {"uri": uri},
        "resources": [{"minimumMemoryInMiB": 2048}],
        "cpuConfigurations": [{"architecture": "ARM_64"}],
        "hooks": {
            "port": 9000,
            "microvmImageHooks": {
                "ready": "ENABLED", "readyTimeoutInSeconds": 600,
                "validate": "ENABLED", "validateTimeoutInSeconds": 600,
            },
            "microvmHooks": {
                "run": "ENABLED", "runTimeoutInSeconds": 30,
                "resume": "ENABLED", "resumeTimeoutInSeconds": 30,
                "suspend": "ENABLED", "suspendTimeoutInSeconds": 30,
                "terminate": "ENABLED", "terminateTimeoutInSeconds": 10,
            },
        },
        "logging": {"cloudWatch": {"logGroup": format!("/rayito/{name}")}},
        "description": "rayd seeded by the local emulator",
    });
    value.as_object().cloned().unwrap_or_default()
}

/// Puts the base artifact in the artifact bucket (created if absent) and
/// registers every seeded image.
///
/// # Errors
/// The object store cannot be written.
pub(crate) async fn seed(shared: &Shared) -> std::io::Result<()> {
    let zip = base_zip()?;
    let key = artifact_key(&zip);
    let bucket = shared.settings.artifact_bucket();
    shared.objects.create_bucket(&bucket).await?;
    shared.objects.put(&bucket, &key, zip.into()).await?;
    let uri = format!("s3://{bucket}/{key}");
    let mut names = vec!["rayito-base".to_string()];
    for name in &shared.settings.images {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    for name in names {
        let arn = shared.settings.image_arn(&name);
        shared
            .images
            .insert_built(&name, &arn, config(shared, &name, &uri));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_base_zip_is_deterministic_and_ends_in_rayd() {
        let a = base_zip().unwrap();
        assert_eq!(a, base_zip().unwrap());
        let key = artifact_key(&a);
        assert!(key.starts_with("rayito/images/rayd-") && key.ends_with(".zip"));
        assert_eq!(key.len(), "rayito/images/rayd-".len() + 12 + 4);
        assert!(
            DOCKERFILE
                .trim_end()
                .ends_with("CMD [\"/opt/rayito/rayd\"]")
        );
    }
}
