//! [`S3Mount`] and its checks. The fields are public, so a mount is checked
//! when `create` reads it (before any call), not when it is built; every
//! refusal is `InvalidArgument` naming `mounts` and the mount's path,
//! never its bucket or prefix.

use std::net::Ipv4Addr;

use crate::error::SandboxError;
use crate::error::messages::{self as m, Template};
use crate::mount_path::MOUNTS;

/// Where S3 mounts are documented.
pub(crate) const DOC: &str = "docs/mounts.md";

/// A prefix is this long or longer: refused (an S3 key is at most 1,024
/// bytes, and the agent refuses the same).
const MAX_PREFIX_BYTES: usize = 1_024;

/// A bucket, or a prefix of it, mounted into the sandbox by its agent
/// (docs/mounts.md): sandbox code reads (and, when writable, writes) the
/// objects as files, in place.
///
/// Read-only by default, the least privilege: `allow_overwrite` and
/// `allow_delete` are accepted only with `read_only(false)`. Building one
/// calls nothing; [`crate::SandboxBuilder::mount`] uses it, and `create`
/// checks it before any call.
///
/// ```
/// use rayito::mounts::S3Mount;
/// let data = S3Mount::new("my-bucket").prefix("team7/");
/// let out = S3Mount::new("my-bucket")
///     .prefix("results/")
///     .read_only(false)
///     .allow_overwrite(true);
/// assert!(data.read_only && !out.read_only && out.allow_overwrite);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct S3Mount {
    /// The bucket's name (S3's rules: 3 to 63 of `a-z`, `0-9`, `.`, `-`).
    pub bucket: String,
    /// The key prefix mounted, relative to the bucket (`team7/`, never
    /// `/team7/`); empty for the whole bucket. A prefix names a directory:
    /// the agent adds a missing trailing `/`.
    pub prefix: String,
    /// Writes refused with `EROFS` (the default).
    pub read_only: bool,
    /// A writable mount may replace an existing object (else only new
    /// files can be written).
    pub allow_overwrite: bool,
    /// A writable mount may delete objects (else `unlink` is refused).
    pub allow_delete: bool,
}

impl S3Mount {
    /// The whole bucket `bucket`, read-only.
    pub fn new(bucket: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            prefix: String::new(),
            read_only: true,
            allow_overwrite: false,
            allow_delete: false,
        }
    }

    /// Mounts only the keys under `prefix` (relative to the bucket).
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Read-only (`true`, the default) or writable (`false`).
    #[must_use]
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Lets a writable mount replace existing objects.
    #[must_use]
    pub fn allow_overwrite(mut self, allow: bool) -> Self {
        self.allow_overwrite = allow;
        self
    }

    /// Lets a writable mount delete objects.
    #[must_use]
    pub fn allow_delete(mut self, allow: bool) -> Self {
        self.allow_delete = allow;
        self
    }
}

pub(crate) fn refuse(template: Template, args: &[(&str, &str)]) -> SandboxError {
    SandboxError::invalid_argument(MOUNTS, template.render(args))
}

/// S3's rules for a general purpose or directory bucket's name: 3 to 63 of
/// `a-z 0-9 . -`, a letter or digit at both ends, no `..`, not an IPv4
/// address.
fn bucket_name(bucket: &str) -> bool {
    let bytes = bucket.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (3..=63).contains(&bytes.len())
        && bytes.iter().all(|b| alnum(b) || *b == b'.' || *b == b'-')
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
        && !bucket.contains("..")
        && bucket.parse::<Ipv4Addr>().is_err()
}

/// A prefix the agent accepts: empty, or relative segments (none empty,
/// `.` or `..`) with an optional trailing `/`, shorter than 1,024 bytes,
/// no control character. A leading `/` is refused on its own first.
fn prefix_ok(prefix: &str) -> bool {
    if prefix.is_empty() {
        return true;
    }
    let trimmed = prefix.strip_suffix('/').unwrap_or(prefix);
    prefix.len() < MAX_PREFIX_BYTES
        && !prefix.chars().any(char::is_control)
        && trimmed.split('/').all(|s| !matches!(s, "" | "." | ".."))
}

/// Checks the mount at `path` (its path is checked by the shared rules).
///
/// # Errors
/// `InvalidArgument` (`mounts`): an empty bucket, a bucket that is not an
/// S3 bucket name, a prefix starting with `/`, a prefix the agent would
/// refuse, or overwrite / delete on a read-only mount (in that order).
pub(crate) fn check(path: &str, mount: &S3Mount) -> Result<(), SandboxError> {
    let at = [("path", path)];
    if mount.bucket.is_empty() {
        return Err(refuse(m::MOUNT_BUCKET_EMPTY, &at));
    }
    if !bucket_name(&mount.bucket) {
        return Err(refuse(m::MOUNT_BUCKET_NAME, &at));
    }
    if mount.prefix.starts_with('/') {
        return Err(refuse(m::MOUNT_PREFIX_ABSOLUTE, &at));
    }
    if !prefix_ok(&mount.prefix) {
        return Err(refuse(m::MOUNT_PREFIX_BAD, &at));
    }
    if mount.read_only && (mount.allow_overwrite || mount.allow_delete) {
        return Err(refuse(m::MOUNT_WRITE_FLAGS, &at));
    }
    Ok(())
}
