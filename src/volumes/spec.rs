//! [`EfsVolume`] and the checks `create` runs on a sandbox's volumes before
//! any call, in the reference's order (so the first refusal is the one the
//! caller can fix first): the count, each volume, the mount paths (with the
//! S3 mounts'), the image variant, the egress connector, the execution
//! role. Each refusal names `volumes`; none echoes an id.

use std::net::Ipv4Addr;

use crate::error::SandboxError;
use crate::error::messages::{self as m, Template};
use crate::sandbox::{NetworkConnector, SandboxBuilder};

/// The most volumes of one sandbox (with its S3 mounts, at most 4 mount
/// paths in all).
pub const MAX_VOLUMES: usize = 4;

/// The argument every refusal names.
pub(crate) const ARGUMENT: &str = "volumes";

/// Where volumes are documented.
pub(crate) const DOC: &str = "docs/volumes.md";

/// The image variant that can mount EFS (the caps image with
/// amazon-efs-utils).
const EFS_VARIANT: &str = "base-caps-efs";

/// The longest volume name (one component of an access point's root
/// directory).
const MAX_NAME_CHARS: usize = 100;

/// An EFS volume a sandbox mounts (docs/volumes.md): an access point of a
/// file system. `create` checks it before any call: the ids' shapes
/// (`fs-` / `fsap-` and 8 to 40 lowercase hex digits), the name's.
///
/// `name` and `region` are the caller's labels (a [`VolumeStore`] fills
/// them): only the ids, `read_only` and the mount target's address reach
/// the sandbox. Without [`EfsVolume::mount_target_ip`], `create` looks the
/// file system's mount target up (DescribeMountTargets, the caller's
/// credentials, in `region` when given, else the client's) before it
/// launches anything.
///
/// [`VolumeStore`]: crate::volumes
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct EfsVolume {
    /// The file system's id (`fs-...`).
    pub file_system_id: String,
    /// The access point's id (`fsap-...`): its POSIX user and root
    /// directory are what the sandbox sees.
    pub access_point_id: String,
    /// The volume's name (1 to 100 of `A-Z`, `a-z`, `0-9`, `-`), a label.
    pub name: Option<String>,
    /// The file system's region (`None`: the client's).
    pub region: Option<String>,
    /// Mounted read-only (default `false`). On AWS the access point's IAM
    /// policy is what refuses writes; on the local backend the bind mount
    /// is read-only.
    pub read_only: bool,
    /// The mount target's IPv4 address (`None`: looked up by `create`).
    pub mount_target_ip: Option<Ipv4Addr>,
}

impl EfsVolume {
    /// The access point `access_point_id` of the file system
    /// `file_system_id`, writable, its mount target looked up on `create`.
    pub fn new(file_system_id: impl Into<String>, access_point_id: impl Into<String>) -> Self {
        Self {
            file_system_id: file_system_id.into(),
            access_point_id: access_point_id.into(),
            name: None,
            region: None,
            read_only: false,
            mount_target_ip: None,
        }
    }

    /// The volume's name (a label: 1 to 100 of `A-Z`, `a-z`, `0-9`, `-`).
    #[must_use]
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The file system's region (default: the client's).
    #[must_use]
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Mounts the volume read-only (default `false`).
    #[must_use]
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// The mount target's IPv4 address: `create` then makes no
    /// DescribeMountTargets call for this volume.
    #[must_use]
    pub fn mount_target_ip(mut self, ip: Ipv4Addr) -> Self {
        self.mount_target_ip = Some(ip);
        self
    }
}

/// `InvalidArgument` naming `volumes`, from a template.
pub(crate) fn refuse(t: Template, args: &[(&str, &str)]) -> SandboxError {
    SandboxError::invalid_argument(ARGUMENT, t.render(args))
}

/// `prefix` then 8 to 40 lowercase hex digits.
pub(crate) fn id_ok(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix).is_some_and(|hex| {
        (8..=40).contains(&hex.len())
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// 1 to 100 of `A-Z`, `a-z`, `0-9`, `-`.
pub(crate) fn name_ok(name: &str) -> bool {
    (1..=MAX_NAME_CHARS).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// Checks one volume (the path names it in the message; its ids never
/// appear).
///
/// # Errors
/// `InvalidArgument` (`volumes`).
pub(crate) fn check_volume(path: &str, volume: &EfsVolume) -> Result<(), SandboxError> {
    let at = [("path", path)];
    if !id_ok(&volume.file_system_id, "fs-") {
        return Err(refuse(m::VOLUME_FILE_SYSTEM_ID, &at));
    }
    if !id_ok(&volume.access_point_id, "fsap-") {
        return Err(refuse(m::VOLUME_ACCESS_POINT_ID, &at));
    }
    if volume.name.as_deref().is_some_and(|n| !name_ok(n)) {
        return Err(refuse(m::VOLUME_NAME, &at));
    }
    if volume
        .region
        .as_deref()
        .is_some_and(|r| crate::checks::region(r).is_err())
    {
        return Err(refuse(m::VOLUME_REGION, &at));
    }
    Ok(())
}

/// The count: at most [`MAX_VOLUMES`] (none is no volume at all, which
/// the builder cannot pass as an empty map).
fn check_count(count: usize) -> Result<(), SandboxError> {
    if count > MAX_VOLUMES {
        return Err(refuse(m::VOLUME_TOO_MANY, &[("count", &count.to_string())]));
    }
    Ok(())
}

/// The image gate: an official image name whose variant is not
/// `base-caps-efs` cannot mount EFS, so nothing is launched; any other name
/// is left to the agent's Health.
///
/// # Errors
/// `Unimplemented { feature: "volumes" }`.
pub(crate) fn check_variant(image: Option<&str>) -> Result<(), SandboxError> {
    match crate::sandbox::image_variant::official_variant(image) {
        Some(variant) if variant != EFS_VARIANT => Err(SandboxError::unimplemented(
            ARGUMENT,
            m::VOLUME_VARIANT_REASON.render(&[("variant", variant)]),
            Some(DOC),
        )),
        _ => Ok(()),
    }
}

/// The egress connector: exactly one of the caller's own (a MicroVM takes
/// one egress connector, and the volume's traffic must leave through the
/// VPC of its mount targets).
fn check_egress(egress: Option<&[NetworkConnector]>) -> Result<(), SandboxError> {
    let egress = egress.unwrap_or_default();
    let internet = egress.iter().any(|c| match c {
        NetworkConnector::InternetEgress => true,
        NetworkConnector::Arn(arn) => arn.rsplit(':').next() == Some("INTERNET_EGRESS"),
        _ => false,
    });
    match egress.len() {
        0 => Err(refuse(m::VOLUME_EGRESS_MISSING, &[])),
        _ if internet => Err(refuse(m::VOLUME_EGRESS_INTERNET, &[])),
        1 => Ok(()),
        n => Err(refuse(m::VOLUME_EGRESS_MANY, &[("count", &n.to_string())])),
    }
}

/// Every check of a `create` with `volumes`, in order; `mount_paths` are
/// the builder's S3 mounts' (the paths of both share the rules and the
/// count).
///
/// # Errors
/// `InvalidArgument` (`volumes`, or `mounts` for a mount's path);
/// `Unimplemented` (`volumes`) for an official image of another variant.
pub(crate) fn check_all(
    builder: &SandboxBuilder,
    volumes: &[(String, EfsVolume)],
    mount_paths: &[&str],
) -> Result<(), SandboxError> {
    check_count(volumes.len())?;
    for (path, volume) in volumes {
        check_volume(path, volume)?;
    }
    let paths: Vec<&str> = volumes.iter().map(|(p, _)| p.as_str()).collect();
    crate::mount_path::check_all(mount_paths, &paths)?;
    check_variant(builder.image_name()?.as_deref())?;
    check_egress(builder.egress_connectors())?;
    if !builder.has_execution_role() {
        return Err(refuse(m::VOLUME_ROLE, &[]));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_their_prefix_and_8_to_40_lowercase_hex_digits() {
        assert!(id_ok("fs-0123abcd", "fs-"));
        assert!(id_ok(&format!("fs-{}", "a".repeat(40)), "fs-"));
        assert!(id_ok("fsap-0123456789abcdef0", "fsap-"));
        for bad in [
            "fs-0123abc",
            "fs-0123ABCD",
            "fs-0123abcg",
            "fsap-0123abcd",
            "fs0123abcd",
            "",
        ] {
            assert!(!id_ok(bad, "fs-"), "{bad}");
        }
        assert!(!id_ok(&format!("fs-{}", "a".repeat(41)), "fs-"));
    }

    #[test]
    fn names_are_1_to_100_letters_digits_and_dashes() {
        assert!(name_ok("data-1"));
        assert!(name_ok(&"A".repeat(100)));
        for bad in ["", "a b", "a_b", "é", &"a".repeat(101)] {
            assert!(!name_ok(bad), "{bad}");
        }
    }
}
