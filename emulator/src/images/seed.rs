//! The images that exist at start (the official `rayito-base`,
//! `rayito-base-caps` and `rayito-base-caps-efs`, and every name of
//! `EmulatorConfig::images`): version 1 SUCCESSFUL and ACTIVE, configured
//! as `rayito image publish` configures one, its code artifact a small
//! deterministic zip in the emulator's object store. Their base layer is
//! the host itself: they have no layer, and the same agent runs them all.
//!
//! The caps images are configured as AWS's are (`additionalOsCapabilities:
//! ["ALL"]`; caps-efs's artifact carries the efs marker), so that a local
//! user picks them by name for S3 mounts and EFS volumes as on AWS (the
//! SDK refuses mounts on an official image of another variant).

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

/// The official images seeded whatever the configuration says, with
/// whether each is a caps image and whether its artifact is the efs one.
const OFFICIAL: [(&str, bool, bool); 3] = [
    ("rayito-base", false, false),
    ("rayito-base-caps", true, false),
    ("rayito-base-caps-efs", true, true),
];

/// The marker of an artifact whose image installs amazon-efs-utils
/// (`rayito::template::EFS_MARKER`).
const EFS_MARKER: &str = "kernel-sidecar/efs_variant";

/// The seeded artifact: a `Dockerfile` dated 1980-01-01, mode 0644,
/// deflated, so that every start writes the same bytes (and key); with
/// the efs marker when `efs` (the caps-efs image's).
fn zip_of(efs: bool) -> std::io::Result<Vec<u8>> {
    let options = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .compression_level(Some(6))
        .last_modified_time(DateTime::default())
        .unix_permissions(0o644);
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    zip.start_file("Dockerfile", options)
        .map_err(std::io::Error::other)?;
    zip.write_all(DOCKERFILE.as_bytes())?;
    if efs {
        zip.start_file(EFS_MARKER, options)
            .map_err(std::io::Error::other)?;
        zip.write_all(b"efs\n")?;
    }
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

/// A seeded version's config (spec: images-and-templates §1.2, §2.2),
/// with `additionalOsCapabilities: ["ALL"]` for a caps image.
fn config(shared: &Shared, name: &str, uri: &str, caps: bool) -> Map<String, Value> {
    let s = &shared.settings;
    let mut value = json!({
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
    if caps && let Some(map) = value.as_object_mut() {
        map.insert("additionalOsCapabilities".into(), json!(["ALL"]));
    }
    value.as_object().cloned().unwrap_or_default()
}

/// Puts the base artifact in the artifact bucket (created if absent) and
/// registers every seeded image.
///
/// # Errors
/// The object store cannot be written.
pub(crate) async fn seed(shared: &Shared) -> std::io::Result<()> {
    let bucket = shared.settings.artifact_bucket();
    shared.objects.create_bucket(&bucket).await?;
    let mut uris = Vec::new();
    for efs in [false, true] {
        let zip = zip_of(efs)?;
        let key = artifact_key(&zip);
        shared.objects.put(&bucket, &key, zip.into()).await?;
        uris.push(format!("s3://{bucket}/{key}"));
    }
    let mut names: Vec<(String, bool, bool)> = OFFICIAL
        .iter()
        .map(|&(name, caps, efs)| (name.to_owned(), caps, efs))
        .collect();
    for name in &shared.settings.images {
        if !names.iter().any(|(n, ..)| n == name) {
            names.push((name.clone(), false, false));
        }
    }
    for (name, caps, efs) in names {
        let arn = shared.settings.image_arn(&name);
        let uri = &uris[usize::from(efs)];
        shared
            .images
            .insert_built(&name, &arn, config(shared, &name, uri, caps));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_efs_zip_carries_the_marker_and_differs_from_the_base_one() {
        let efs = zip_of(true).unwrap();
        assert_eq!(efs, zip_of(true).unwrap());
        assert_ne!(artifact_key(&efs), artifact_key(&zip_of(false).unwrap()));
        let mut archive = zip::ZipArchive::new(Cursor::new(efs)).unwrap();
        let mut marker = String::new();
        std::io::Read::read_to_string(&mut archive.by_name(EFS_MARKER).unwrap(), &mut marker)
            .unwrap();
        assert_eq!(marker, "efs\n");
    }

    #[test]
    fn the_base_zip_is_deterministic_and_ends_in_rayd() {
        let a = zip_of(false).unwrap();
        assert_eq!(a, zip_of(false).unwrap());
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
