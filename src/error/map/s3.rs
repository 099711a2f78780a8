//! The SDK's own S3 calls (spec C4: checkpoint listing and deletion, staged
//! transfers), made with the caller's credentials: a missing bucket or the
//! wrong region is the caller's argument, anything else the control plane's
//! mapping. AWS's error text is never kept (it can name the bucket or a key).

use crate::error::SandboxError;

use super::aws::{AwsFailure, from_aws};

/// Maps a failure of the SDK's own S3 call; AWS's text is dropped first.
pub(crate) fn s3_failure(mut failure: AwsFailure) -> SandboxError {
    failure.message = None;
    match failure.code.as_deref() {
        Some("NoSuchBucket") => SandboxError::invalid_argument(
            "bucket",
            "the bucket does not exist (NoSuchBucket); create it or name another",
        ),
        Some(
            "PermanentRedirect"
            | "AuthorizationHeaderMalformed"
            | "IllegalLocationConstraintException",
        ) => SandboxError::invalid_argument(
            "region",
            "the bucket is in another region; pass its region",
        ),
        _ => from_aws(failure),
    }
}
