//! What an EFS failure of the volume store and of `EfsVolumes` means
//! (docs/volumes.md, "Failures"): a fixed text per code, naming the IAM
//! action of the call, never EFS's own text (which repeats the file
//! system's and the access point's ids).

use crate::error::SandboxError;
use crate::error::map::aws::{AwsFailure, THROTTLING_CODES, from_aws};
use crate::error::messages::{self as m};

/// A volume's access point or its file system does not exist.
pub(crate) const NOT_FOUND_CODES: [&str; 2] = ["AccessPointNotFound", "FileSystemNotFound"];
/// CreateAccessPoint with a client token already used: the access point
/// exists (EFS does not return it).
pub(crate) const ALREADY_EXISTS: &str = "AccessPointAlreadyExists";
/// DescribeFileSystems / DescribeMountTargets / DeleteFileSystem on a file
/// system that is gone.
pub(crate) const FILE_SYSTEM_NOT_FOUND: &str = "FileSystemNotFound";

/// The IAM action of an EFS operation (the messages name it).
pub(crate) fn iam_action(operation: &str) -> &'static str {
    match operation {
        "CreateAccessPoint" => "elasticfilesystem:CreateAccessPoint",
        "DescribeAccessPoints" => "elasticfilesystem:DescribeAccessPoints",
        "DeleteAccessPoint" => "elasticfilesystem:DeleteAccessPoint",
        "DescribeFileSystems" => "elasticfilesystem:DescribeFileSystems",
        "DescribeMountTargets" => "elasticfilesystem:DescribeMountTargets",
        "DeleteFileSystem" => "elasticfilesystem:DeleteFileSystem",
        _ => "elasticfilesystem:*",
    }
}

/// The error of a failed EFS call: `VolumeNotFound` for a missing access
/// point or file system, `RateLimit` when throttled and the connection
/// kinds when no answer came (the general AWS mapping), `Volume` with a
/// fixed text otherwise.
pub(crate) fn from_efs(failure: AwsFailure) -> SandboxError {
    let code = failure.code.clone().unwrap_or_default();
    let action = iam_action(failure.operation);
    let text = |t: m::Template| t.render(&[("action", action)]);
    if NOT_FOUND_CODES.contains(&code.as_str()) {
        return SandboxError::volume_not_found(text(m::VOLUME_STORE_GONE));
    }
    if failure.no_response.is_some() || THROTTLING_CODES.contains(&code.as_str()) {
        return from_aws(failure);
    }
    let template = match code.as_str() {
        "AccessDeniedException" | "AccessDenied" => m::VOLUME_STORE_DENIED,
        ALREADY_EXISTS => m::VOLUME_STORE_EXISTS,
        "AccessPointLimitExceeded" => m::VOLUME_STORE_LIMIT,
        "IncorrectFileSystemLifeCycleState" => m::VOLUME_STORE_STATE,
        "FileSystemInUse" => m::VOLUME_STORE_IN_USE,
        _ => {
            let code = if code.is_empty() { "no code" } else { &code };
            return SandboxError::volume(
                m::VOLUME_STORE_FAILED.render(&[("action", action), ("code", code)]),
            );
        }
    };
    SandboxError::volume(text(template))
}

#[cfg(test)]
mod tests {
    use super::from_efs;
    use crate::error::ErrorKind;
    use crate::error::map::aws::AwsFailure;

    fn failed(operation: &'static str, code: &str) -> AwsFailure {
        let mut f = AwsFailure::new(operation);
        f.code = Some(code.to_owned());
        f.http_status = Some(400);
        f.message = Some("fs-0123456789abcdef0 secret text".to_owned());
        f
    }

    /// Every row of docs/volumes.md's failure table, with its exact text;
    /// EFS's own message is never kept.
    #[test]
    fn every_efs_code_has_its_kind_and_text() {
        let cases: [(&str, &str, ErrorKind, &str); 9] = [
            (
                "DeleteAccessPoint",
                "AccessPointNotFound",
                ErrorKind::VolumeNotFound,
                "the access point or the file system does not exist",
            ),
            (
                "DescribeAccessPoints",
                "FileSystemNotFound",
                ErrorKind::VolumeNotFound,
                "the access point or the file system does not exist",
            ),
            (
                "CreateAccessPoint",
                "AccessDeniedException",
                ErrorKind::Volume,
                "no IAM permission elasticfilesystem:CreateAccessPoint on the file system (the caller's credentials); grant it to the caller",
            ),
            (
                "CreateAccessPoint",
                "AccessPointAlreadyExists",
                ErrorKind::Volume,
                "an access point with that name already exists",
            ),
            (
                "CreateAccessPoint",
                "AccessPointLimitExceeded",
                ErrorKind::Volume,
                "the file system has reached its limit of access points; destroy a volume first",
            ),
            (
                "CreateAccessPoint",
                "IncorrectFileSystemLifeCycleState",
                ErrorKind::Volume,
                "the file system is not in the 'available' state; retry once it is",
            ),
            (
                "DeleteFileSystem",
                "FileSystemInUse",
                ErrorKind::Volume,
                "the file system still has mount targets; retry once they are deleted",
            ),
            (
                "DeleteAccessPoint",
                "BadRequest",
                ErrorKind::Volume,
                "the EFS call elasticfilesystem:DeleteAccessPoint failed (BadRequest)",
            ),
            (
                "DescribeAccessPoints",
                "ThrottlingException",
                ErrorKind::RateLimit,
                "",
            ),
        ];
        for (op, code, kind, text) in cases {
            let err = from_efs(failed(op, code));
            assert_eq!(err.kind(), kind, "{code}");
            if !text.is_empty() {
                assert_eq!(err.to_string(), text, "{code}");
            }
            assert!(!err.to_string().contains("fs-0123456789abcdef0"), "{code}");
        }
    }
}
