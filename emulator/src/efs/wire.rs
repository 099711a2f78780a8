//! The JSON shapes of the EFS operations the emulator serves: request
//! bodies read leniently (unknown members ignored, as a newer client may
//! send them), descriptions written as botocore's `efs` 2015-02-01 model
//! names their members (timestamps in epoch seconds, restJson1's default).

use serde::Deserialize;
use serde_json::{Value, json};

use super::error::EfsError;
use super::state::{AccessPoint, FileSystem, PosixUser, RootDirectory, Tag, name_of};

/// Where the emulator's one mount target of each file system says it is.
pub(crate) const MOUNT_TARGET_IP: &str = "127.0.0.1";

/// CreateFileSystem's body.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct CreateFileSystemIn {
    pub(crate) creation_token: Option<String>,
    pub(crate) performance_mode: Option<String>,
    pub(crate) encrypted: Option<bool>,
    pub(crate) kms_key_id: Option<String>,
    pub(crate) throughput_mode: Option<String>,
    pub(crate) provisioned_throughput_in_mibps: Option<f64>,
    pub(crate) availability_zone_name: Option<String>,
    #[serde(default)]
    pub(crate) tags: Vec<Tag>,
}

/// CreateAccessPoint's body.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct CreateAccessPointIn {
    pub(crate) client_token: Option<String>,
    pub(crate) file_system_id: Option<String>,
    pub(crate) posix_user: Option<PosixUser>,
    pub(crate) root_directory: Option<RootDirectory>,
    #[serde(default)]
    pub(crate) tags: Vec<Tag>,
}

/// TagResource's body.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub(crate) struct TagResourceIn {
    pub(crate) tags: Option<Vec<Tag>>,
}

/// A JSON body (empty = `{}`) as `T`.
///
/// # Errors
/// BadRequest for a body that is not JSON of that shape.
pub(crate) fn parse<T: for<'de> Deserialize<'de> + Default>(body: &[u8]) -> Result<T, EfsError> {
    if body.is_empty() {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|_| {
        EfsError::bad_request("The request body is not valid JSON of this operation's shape.")
    })
}

/// Where the emulator is: the parts of ARNs and descriptions that depend
/// on it.
#[derive(Clone, Debug)]
pub(crate) struct Place {
    pub(crate) region: String,
    pub(crate) account: String,
}

impl Place {
    pub(crate) fn file_system_arn(&self, id: &str) -> String {
        format!(
            "arn:aws:elasticfilesystem:{}:{}:file-system/{id}",
            self.region, self.account
        )
    }

    pub(crate) fn access_point_arn(&self, id: &str) -> String {
        format!(
            "arn:aws:elasticfilesystem:{}:{}:access-point/{id}",
            self.region, self.account
        )
    }

    /// The availability zone the mount targets are in: `<region>a`.
    fn zone_name(&self) -> String {
        format!("{}a", self.region)
    }

    /// A zone id in AWS's form (`use1-az1` for `us-east-1`): the
    /// region's parts abbreviated. Not AWS's mapping of names to ids
    /// (which differs per account), only its shape.
    fn zone_id(&self) -> String {
        let mut parts = self.region.split('-');
        let (geo, dir, num) = (parts.next(), parts.next(), parts.next());
        match (geo, dir, num) {
            (Some(g), Some(d), Some(n)) => {
                format!("{g}{}{n}-az1", d.chars().next().unwrap_or('x'))
            }
            _ => format!("{}-az1", self.region),
        }
    }

    /// `<prefix>-` and 17 hex digits derived from `seed`: the ids of the
    /// emulator's network (its VPC and subnet), the same every time.
    fn derived_id(&self, prefix: &str, seed: &str) -> String {
        use sha2::{Digest as _, Sha256};
        let digest = Sha256::digest(format!("rayito-emulator:{prefix}:{}:{seed}", self.region));
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("{prefix}-{}", &hex[..17])
    }
}

/// A file system's id without `fs-`: its mount target's and network
/// interface's ids reuse it, so they never change.
fn fs_hex(id: &str) -> &str {
    id.strip_prefix("fs-").unwrap_or(id)
}

/// The mount target id of file system `fs_id`.
pub(crate) fn mount_target_id(fs_id: &str) -> String {
    format!("fsmt-{}", fs_hex(fs_id))
}

/// A FileSystemDescription; `size` in bytes.
pub(crate) fn file_system(place: &Place, fs: &FileSystem, size: u64, now: f64) -> Value {
    let mut v = json!({
        "OwnerId": place.account,
        "CreationToken": fs.creation_token,
        "FileSystemId": fs.id,
        "FileSystemArn": place.file_system_arn(&fs.id),
        "CreationTime": fs.created,
        "LifeCycleState": "available",
        "NumberOfMountTargets": u32::from(fs.mount_target),
        "SizeInBytes": {"Value": size, "Timestamp": now, "ValueInStandard": size, "ValueInIA": 0, "ValueInArchive": 0},
        "PerformanceMode": fs.performance_mode,
        "Encrypted": fs.encrypted,
        "ThroughputMode": fs.throughput_mode,
        "Tags": fs.tags,
        "FileSystemProtection": {"ReplicationOverwriteProtection": "ENABLED"},
    });
    let obj = v.as_object_mut().expect("an object");
    if let Some(name) = name_of(&fs.tags) {
        obj.insert("Name".into(), json!(name));
    }
    if let Some(key) = &fs.kms_key_id {
        obj.insert("KmsKeyId".into(), json!(key));
    }
    if let Some(mibps) = fs.provisioned_mibps {
        obj.insert("ProvisionedThroughputInMibps".into(), json!(mibps));
    }
    if let Some(zone) = &fs.availability_zone_name {
        obj.insert("AvailabilityZoneName".into(), json!(zone));
        obj.insert("AvailabilityZoneId".into(), json!(place.zone_id()));
    }
    v
}

/// An AccessPointDescription.
pub(crate) fn access_point(place: &Place, ap: &AccessPoint) -> Value {
    let mut v = json!({
        "ClientToken": ap.client_token,
        "Tags": ap.tags,
        "AccessPointId": ap.id,
        "AccessPointArn": place.access_point_arn(&ap.id),
        "FileSystemId": ap.file_system_id,
        "RootDirectory": ap.root_directory,
        "OwnerId": place.account,
        "LifeCycleState": "available",
    });
    let obj = v.as_object_mut().expect("an object");
    if let Some(name) = name_of(&ap.tags) {
        obj.insert("Name".into(), json!(name));
    }
    if let Some(user) = &ap.posix_user {
        obj.insert("PosixUser".into(), json!(user));
    }
    v
}

/// The MountTargetDescription of file system `fs_id`'s one mount target:
/// available, at 127.0.0.1, in the emulator's one VPC, subnet and zone.
pub(crate) fn mount_target(place: &Place, fs_id: &str) -> Value {
    json!({
        "OwnerId": place.account,
        "MountTargetId": mount_target_id(fs_id),
        "FileSystemId": fs_id,
        "SubnetId": place.derived_id("subnet", "mount-targets"),
        "LifeCycleState": "available",
        "IpAddress": MOUNT_TARGET_IP,
        "NetworkInterfaceId": format!("eni-{}", fs_hex(fs_id)),
        "AvailabilityZoneId": place.zone_id(),
        "AvailabilityZoneName": place.zone_name(),
        "VpcId": place.derived_id("vpc", "mount-targets"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_targets_have_stable_ids_of_the_models_shapes() {
        let place = Place {
            region: "us-east-1".into(),
            account: "000000000000".into(),
        };
        let a = mount_target(&place, "fs-0123456789abcdef0");
        assert_eq!(a, mount_target(&place, "fs-0123456789abcdef0"));
        assert_eq!(a["MountTargetId"], "fsmt-0123456789abcdef0");
        assert_eq!(a["AvailabilityZoneId"], "use1-az1");
        assert_eq!(a["AvailabilityZoneName"], "us-east-1a");
        for (key, prefix) in [("SubnetId", "subnet-"), ("VpcId", "vpc-")] {
            let id = a[key].as_str().unwrap();
            let hex = id.strip_prefix(prefix).unwrap();
            assert_eq!(hex.len(), 17, "{id}");
            assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        }
    }
}
