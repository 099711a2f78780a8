//! The EFS operations, on the state and the directories: each takes what
//! the request carried (body bytes, query pairs, a path id) and answers
//! the status and JSON body of a success, or the error EFS answers.

use http::StatusCode;
use serde_json::{Value, json};

use super::error::EfsError;
use super::state::{AccessPoint, FileSystem, merge_tags};
use super::wire::{self, CreateAccessPointIn, CreateFileSystemIn, TagResourceIn};
use super::{LocalEfs, dirs, validate};
use crate::control::{decode_page_token, encode_page_token};

/// A success: its status and body (`None`: no body, e.g. 204).
pub(crate) type Done = Result<(StatusCode, Option<Value>), EfsError>;

/// The query's pairs.
pub(crate) type Query = [(String, String)];

/// A query parameter's value (the last one given).
fn param<'a>(query: &'a Query, name: &str) -> Option<&'a str> {
    query
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// `len` items paged from `marker` (an opaque token naming an index) by
/// `size`: the range, and the next page's token.
fn page(
    param_name: &str,
    marker: Option<&str>,
    size: usize,
    len: usize,
) -> Result<(std::ops::Range<usize>, Option<String>), EfsError> {
    let start = match marker {
        None => 0,
        Some(m) => decode_page_token(m).ok_or_else(|| {
            EfsError::bad_request(format!("{param_name} is not a token this service gave."))
        })?,
    };
    let start = start.min(len);
    let end = start.saturating_add(size).min(len);
    Ok((start..end, (end < len).then(|| encode_page_token(end))))
}

/// A random id: `<prefix>-` and 17 hex digits, as EFS's newer ids.
fn new_id(prefix: &str) -> String {
    use rand::RngCore as _;
    let mut b = [0u8; 9];
    rand::rng().fill_bytes(&mut b);
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{prefix}-{}", &hex[..17])
}

impl LocalEfs {
    /// A file system id from a request (an id or an ARN); `Ok(None)` for
    /// an ARN of another region or account.
    fn fs_id(&self, param: &str, value: &str) -> Result<Option<String>, EfsError> {
        let p = &self.inner.place;
        validate::resource_id(param, value, "file-system", "fs", &p.region, &p.account)
    }

    fn ap_id(&self, param: &str, value: &str) -> Result<Option<String>, EfsError> {
        let p = &self.inner.place;
        validate::resource_id(param, value, "access-point", "fsap", &p.region, &p.account)
    }

    /// `value` as an existing file system's id: FileSystemNotFound for an
    /// ARN elsewhere.
    fn known_fs(&self, param: &str, value: &str) -> Result<String, EfsError> {
        self.fs_id(param, value)?
            .ok_or_else(|| EfsError::file_system_not_found(value))
    }

    fn known_ap(&self, param: &str, value: &str) -> Result<String, EfsError> {
        self.ap_id(param, value)?
            .ok_or_else(|| EfsError::access_point_not_found(value))
    }

    /// A resource id of TagResource and friends: a file system or an
    /// access point, by id or ARN.
    fn resource(&self, value: &str) -> Result<String, EfsError> {
        if value.contains("access-point/") || value.starts_with("fsap-") {
            self.known_ap("ResourceId", value)
        } else {
            self.known_fs("ResourceId", value)
        }
    }

    pub(crate) fn create_file_system(&self, body: &[u8]) -> Done {
        let input: CreateFileSystemIn = wire::parse(body)?;
        let creation_token = validate::token("CreationToken", input.creation_token.as_deref())?;
        let performance_mode = validate::one_of(
            "PerformanceMode",
            input.performance_mode.as_deref(),
            &["generalPurpose", "maxIO"],
            "generalPurpose",
        )?;
        let throughput_mode = validate::one_of(
            "ThroughputMode",
            input.throughput_mode.as_deref(),
            &["bursting", "provisioned", "elastic"],
            "bursting",
        )?;
        match (
            throughput_mode.as_str(),
            input.provisioned_throughput_in_mibps,
        ) {
            ("provisioned", None) => {
                return Err(EfsError::bad_request(
                    "ProvisionedThroughputInMibps is required with ThroughputMode provisioned.",
                ));
            }
            ("provisioned", Some(m)) if m < 1.0 => {
                return Err(EfsError::bad_request(
                    "ProvisionedThroughputInMibps must be at least 1.",
                ));
            }
            (mode, Some(_)) if mode != "provisioned" => {
                return Err(EfsError::bad_request(
                    "ProvisionedThroughputInMibps is only taken with ThroughputMode provisioned.",
                ));
            }
            _ => {}
        }
        if performance_mode == "maxIO" && throughput_mode == "elastic" {
            return Err(EfsError::bad_request(
                "PerformanceMode maxIO does not go with ThroughputMode elastic.",
            ));
        }
        let encrypted = input.encrypted.unwrap_or(false);
        if input.kms_key_id.is_some() && !encrypted {
            return Err(EfsError::bad_request("KmsKeyId needs Encrypted true."));
        }
        validate::tags(&input.tags)?;
        let fs = FileSystem {
            id: new_id("fs"),
            creation_token,
            created: crate::ids::epoch_seconds_now(),
            performance_mode,
            throughput_mode,
            provisioned_mibps: input.provisioned_throughput_in_mibps,
            encrypted,
            kms_key_id: input.kms_key_id,
            availability_zone_name: input.availability_zone_name,
            tags: input.tags,
            mount_target: true,
        };
        let dir = self.inner.dir.join(&fs.id);
        self.store().change(|s| {
            s.create_file_system(fs.clone())?;
            dirs::create_file_system(&dir).map_err(|err| {
                tracing::warn!(path = %dir.display(), %err, "could not make an EFS file system's directory");
                EfsError::internal("The file system's storage could not be made.")
            })
        })?;
        let out = wire::file_system(&self.inner.place, &fs, 0, fs.created);
        Ok((StatusCode::CREATED, Some(out)))
    }

    pub(crate) fn describe_file_systems(&self, query: &Query) -> Done {
        let size = validate::page_size("MaxItems", param(query, "MaxItems"), 100)?;
        let marker = param(query, "Marker");
        let by_id = param(query, "FileSystemId");
        let by_token = param(query, "CreationToken");
        if by_id.is_some() && by_token.is_some() {
            return Err(EfsError::bad_request(
                "Give FileSystemId or CreationToken, not both.",
            ));
        }
        let id = by_id
            .map(|v| self.known_fs("FileSystemId", v))
            .transpose()?;
        let matching: Vec<FileSystem> = self.store().read(|s| {
            if let Some(id) = &id {
                s.file_system(id).cloned().map(|f| vec![f])
            } else {
                Ok(s.file_systems
                    .iter()
                    .filter(|f| by_token.is_none_or(|t| f.creation_token == t))
                    .cloned()
                    .collect())
            }
        })?;
        let (range, next) = page("Marker", marker, size, matching.len())?;
        let now = crate::ids::epoch_seconds_now();
        let items: Vec<Value> = matching[range]
            .iter()
            .map(|f| {
                let bytes = dirs::size(&self.inner.dir.join(&f.id));
                wire::file_system(&self.inner.place, f, bytes, now)
            })
            .collect();
        let mut out = json!({ "FileSystems": items });
        if let Some(m) = marker {
            out["Marker"] = json!(m);
        }
        if let Some(n) = next {
            out["NextMarker"] = json!(n);
        }
        Ok((StatusCode::OK, Some(out)))
    }

    pub(crate) fn delete_file_system(&self, id: &str) -> Done {
        let id = self.known_fs("FileSystemId", id)?;
        self.store().change(|s| s.delete_file_system(&id))?;
        dirs::remove_file_system(&self.inner.dir.join(&id));
        Ok((StatusCode::NO_CONTENT, None))
    }

    pub(crate) fn create_access_point(&self, body: &[u8]) -> Done {
        let input: CreateAccessPointIn = wire::parse(body)?;
        let client_token = validate::token("ClientToken", input.client_token.as_deref())?;
        let fs_value = input
            .file_system_id
            .as_deref()
            .ok_or_else(|| EfsError::bad_request("FileSystemId is required."))?;
        let file_system_id = self.known_fs("FileSystemId", fs_value)?;
        if let Some(user) = &input.posix_user {
            validate::posix_user(user)?;
        }
        let root_directory = input.root_directory.unwrap_or_default();
        validate::root_path(&root_directory.path)?;
        if let Some(info) = &root_directory.creation_info {
            validate::creation_info(info)?;
        }
        validate::tags(&input.tags)?;
        let ap = AccessPoint {
            id: new_id("fsap"),
            file_system_id,
            client_token,
            posix_user: input.posix_user,
            root_directory,
            tags: input.tags,
        };
        self.store().change(|s| s.create_access_point(ap.clone()))?;
        Ok((
            StatusCode::OK,
            Some(wire::access_point(&self.inner.place, &ap)),
        ))
    }

    pub(crate) fn describe_access_points(&self, query: &Query) -> Done {
        let size = validate::page_size("MaxResults", param(query, "MaxResults"), 100)?;
        let token = param(query, "NextToken");
        let by_ap = param(query, "AccessPointId");
        let by_fs = param(query, "FileSystemId");
        if by_ap.is_some() && by_fs.is_some() {
            return Err(EfsError::bad_request(
                "Give AccessPointId or FileSystemId, not both.",
            ));
        }
        let ap_id = by_ap
            .map(|v| self.known_ap("AccessPointId", v))
            .transpose()?;
        let fs_id = by_fs
            .map(|v| self.known_fs("FileSystemId", v))
            .transpose()?;
        // A lookup by id is always current; a listing may be stale.
        let stale = ap_id
            .is_none()
            .then(|| self.stale_access_points())
            .flatten();
        let matching: Vec<AccessPoint> = self.store().read(|s| {
            if let Some(id) = &ap_id {
                return s.access_point(id).cloned().map(|a| vec![a]);
            }
            if let Some(id) = &fs_id {
                s.file_system(id)?;
            }
            Ok(stale
                .as_deref()
                .unwrap_or(&s.access_points)
                .iter()
                .filter(|a| fs_id.as_ref().is_none_or(|f| &a.file_system_id == f))
                .cloned()
                .collect())
        })?;
        let (range, next) = page("NextToken", token, size, matching.len())?;
        let items: Vec<Value> = matching[range]
            .iter()
            .map(|a| wire::access_point(&self.inner.place, a))
            .collect();
        let mut out = json!({ "AccessPoints": items });
        if let Some(n) = next {
            out["NextToken"] = json!(n);
        }
        Ok((StatusCode::OK, Some(out)))
    }

    pub(crate) fn delete_access_point(&self, id: &str) -> Done {
        let id = self.known_ap("AccessPointId", id)?;
        self.store().change(|s| s.delete_access_point(&id))?;
        Ok((StatusCode::NO_CONTENT, None))
    }

    pub(crate) fn describe_mount_targets(&self, query: &Query) -> Done {
        let size = validate::page_size("MaxItems", param(query, "MaxItems"), 10)?;
        let marker = param(query, "Marker");
        let by_fs = param(query, "FileSystemId");
        let by_mt = param(query, "MountTargetId");
        let by_ap = param(query, "AccessPointId");
        let given = [by_fs, by_mt, by_ap].iter().flatten().count();
        if given != 1 {
            return Err(EfsError::bad_request(
                "Give exactly one of FileSystemId, MountTargetId or AccessPointId.",
            ));
        }
        let fs_with_target: Vec<String> = if let Some(v) = by_fs {
            let id = self.known_fs("FileSystemId", v)?;
            self.store()
                .read(|s| s.file_system(&id).map(|f| vec![f.clone()]))?
        } else if let Some(v) = by_ap {
            let id = self.known_ap("AccessPointId", v)?;
            self.store().read(|s| {
                let ap = s.access_point(&id)?;
                s.file_system(&ap.file_system_id).map(|f| vec![f.clone()])
            })?
        } else {
            let mt = by_mt.unwrap_or_default();
            validate::mount_target_id(mt)?;
            let found = self.store().read(|s| {
                s.file_systems
                    .iter()
                    .find(|f| f.mount_target && wire::mount_target_id(&f.id) == mt)
                    .cloned()
            });
            vec![found.ok_or_else(|| EfsError::mount_target_not_found(mt))?]
        }
        .into_iter()
        .filter(|f| f.mount_target)
        .map(|f| f.id)
        .collect();
        let (range, next) = page("Marker", marker, size, fs_with_target.len())?;
        let items: Vec<Value> = fs_with_target[range]
            .iter()
            .map(|id| wire::mount_target(&self.inner.place, id))
            .collect();
        let mut out = json!({ "MountTargets": items });
        if let Some(m) = marker {
            out["Marker"] = json!(m);
        }
        if let Some(n) = next {
            out["NextMarker"] = json!(n);
        }
        Ok((StatusCode::OK, Some(out)))
    }

    pub(crate) fn delete_mount_target(&self, id: &str) -> Done {
        validate::mount_target_id(id)?;
        self.store().change(|s| {
            let fs = s
                .file_systems
                .iter_mut()
                .find(|f| f.mount_target && wire::mount_target_id(&f.id) == id)
                .ok_or_else(|| EfsError::mount_target_not_found(id))?;
            fs.mount_target = false;
            Ok(())
        })?;
        Ok((StatusCode::NO_CONTENT, None))
    }

    pub(crate) fn tag_resource(&self, id: &str, body: &[u8]) -> Done {
        let id = self.resource(id)?;
        let input: TagResourceIn = wire::parse(body)?;
        let tags = input
            .tags
            .ok_or_else(|| EfsError::bad_request("Tags is required."))?;
        validate::tags(&tags)?;
        self.store().change(|s| {
            let current = s.tags_mut(&id)?;
            let mut merged = current.clone();
            merge_tags(&mut merged, tags);
            validate::tags(&merged)?;
            *current = merged;
            Ok(())
        })?;
        Ok((StatusCode::OK, None))
    }

    pub(crate) fn list_tags_for_resource(&self, id: &str, query: &Query) -> Done {
        let id = self.resource(id)?;
        let size = validate::page_size("MaxResults", param(query, "MaxResults"), 100)?;
        let token = param(query, "NextToken");
        let tags = self.store().read(|s| s.tags(&id).map(<[_]>::to_vec))?;
        let (range, next) = page("NextToken", token, size, tags.len())?;
        let mut out = json!({ "Tags": tags[range] });
        if let Some(n) = next {
            out["NextToken"] = json!(n);
        }
        Ok((StatusCode::OK, Some(out)))
    }

    pub(crate) fn untag_resource(&self, id: &str, query: &Query) -> Done {
        let id = self.resource(id)?;
        let keys: Vec<&str> = query
            .iter()
            .filter(|(k, _)| k == "tagKeys")
            .map(|(_, v)| v.as_str())
            .collect();
        if keys.is_empty() || keys.len() > 50 {
            return Err(EfsError::bad_request("Give 1 to 50 tagKeys."));
        }
        self.store().change(|s| {
            s.tags_mut(&id)?.retain(|t| !keys.contains(&t.key.as_str()));
            Ok(())
        })?;
        Ok((StatusCode::OK, None))
    }
}
