//! Where a checkpoint lives: [`S3Prefix`] and its checks (spec B2), made
//! before any I/O. A refusal names the argument and never quotes the value
//! (a bucket or a prefix is not a secret, but it is never put into an
//! error either, by the persistence rule).

use crate::error::SandboxError;

/// The default prefix, the reference IAM template's (`rayito-home`; the
/// reference SDK's `rayito` is forbidden by that template).
pub const DEFAULT_PREFIX: &str = "rayito-home";

/// The archive's name under the key prefix.
pub const ARCHIVE_OBJECT: &str = "home.tar.gz";
/// The manifest's name under the key prefix (written last: a manifest
/// means a complete archive).
pub const MANIFEST_OBJECT: &str = "manifest.json";

/// Longest prefix (and key prefix) in bytes.
const MAX_PREFIX_BYTES: usize = 900;

/// A checkpoint location in S3: `s3://<bucket>/<prefix>/<name>/`, holding
/// `home.tar.gz` and `manifest.json`.
///
/// Built with [`S3Prefix::new`] and the setters; [`S3Prefix::validate`]
/// (called by every operation before any I/O) checks it.
#[derive(Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct S3Prefix {
    /// The bucket: 3 to 63 of `[a-z0-9.-]`, alphanumeric at both ends, no
    /// `..`, not an IPv4 address.
    pub bucket: String,
    /// The prefix above the names (default `rayito-home`): at most 900
    /// bytes, no leading or trailing `/`, no empty, `.` or `..` segment,
    /// only letters, digits and `!_.*'()-/`.
    pub prefix: String,
    /// The checkpoint's name (the last segment of the key prefix). `None`
    /// where an operation supplies it (the sandbox id, or the name a
    /// sandbox was created with).
    pub name: Option<String>,
    /// The bucket's region; `None` for the sandbox's own.
    pub region: Option<String>,
}

// Debug prints the shape only: bucket and key never go to logs (the same
// rule as errors).
crate::secret::redacted_debug! {
    S3Prefix |o| bucket_len = o.bucket.len(), prefix_len = o.prefix.len(),
    named = o.name.is_some(), region
}

impl S3Prefix {
    /// A location in `bucket` under the default prefix `rayito-home`, with
    /// no name yet and the sandbox's region.
    pub fn new(bucket: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            prefix: DEFAULT_PREFIX.to_owned(),
            name: None,
            region: None,
        }
    }

    crate::setters::setters! {
        /// The prefix above the names.
        prefix: impl String;
        /// The checkpoint's name.
        name: Some impl String;
        /// The bucket's region.
        region: Some impl String;
    }

    /// The same location with `name` when it has none.
    #[must_use]
    pub fn or_name(mut self, name: &str) -> Self {
        if self.name.is_none() {
            self.name = Some(name.to_owned());
        }
        self
    }

    /// Checks the bucket, the prefix, the name and the region (spec B2).
    ///
    /// # Errors
    /// `InvalidArgument` naming `bucket`, `prefix`, `name` or `region`.
    pub fn validate(&self) -> Result<(), SandboxError> {
        check_bucket(&self.bucket)?;
        check_prefix("prefix", &self.prefix)?;
        if let Some(name) = &self.name {
            check_prefix("name", name)?;
            if name.contains('/') {
                return Err(SandboxError::invalid_argument(
                    "name",
                    "a checkpoint name is one segment; it must not contain `/`",
                ));
            }
        }
        if let Some(region) = &self.region {
            check_region(region)?;
        }
        if self.key_prefix_len() > MAX_PREFIX_BYTES {
            return Err(SandboxError::invalid_argument(
                "prefix",
                "prefix and name together are longer than 900 bytes",
            ));
        }
        Ok(())
    }

    fn key_prefix_len(&self) -> usize {
        self.prefix.len() + self.name.as_ref().map_or(0, |n| n.len() + 1)
    }

    /// `prefix/name` (the key prefix of the objects); `None` without a name.
    pub fn key_prefix(&self) -> Option<String> {
        self.name.as_ref().map(|n| format!("{}/{n}", self.prefix))
    }

    /// `s3://bucket/prefix/name/`; `None` without a name. For the caller:
    /// the SDK never puts it into an error or a log.
    pub fn uri(&self) -> Option<String> {
        self.key_prefix()
            .map(|k| format!("s3://{}/{k}/", self.bucket))
    }
}

fn check_bucket(bucket: &str) -> Result<(), SandboxError> {
    let refuse = |why: &'static str| Err(SandboxError::invalid_argument("bucket", why));
    if !(3..=63).contains(&bucket.len()) {
        return refuse("a bucket name has 3 to 63 characters");
    }
    if !bucket
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
    {
        return refuse("a bucket name has only a-z, 0-9, `.` and `-`");
    }
    let ends_ok = |b: Option<&u8>| b.is_some_and(u8::is_ascii_alphanumeric);
    if !ends_ok(bucket.as_bytes().first()) || !ends_ok(bucket.as_bytes().last()) {
        return refuse("a bucket name starts and ends with a letter or a digit");
    }
    if bucket.contains("..") {
        return refuse("a bucket name has no `..`");
    }
    if bucket.parse::<std::net::Ipv4Addr>().is_ok() {
        return refuse("a bucket name is not an IPv4 address");
    }
    Ok(())
}

fn check_prefix(argument: &'static str, prefix: &str) -> Result<(), SandboxError> {
    let refuse = |why: &'static str| Err(SandboxError::invalid_argument(argument, why));
    if prefix.is_empty() {
        return refuse("it must not be empty");
    }
    if prefix.len() > MAX_PREFIX_BYTES {
        return refuse("it is longer than 900 bytes");
    }
    if prefix.starts_with('/') || prefix.ends_with('/') {
        return refuse("it must not start or end with `/`");
    }
    if !prefix
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"!_.*'()-/".contains(&b))
    {
        return refuse("only letters, digits and !_.*'()-/ are allowed");
    }
    if prefix
        .split('/')
        .any(|segment| segment.is_empty() || segment == "." || segment == "..")
    {
        return refuse("no segment may be empty, `.` or `..`");
    }
    Ok(())
}

fn check_region(region: &str) -> Result<(), SandboxError> {
    let ok = !region.is_empty()
        && region.len() <= 32
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(SandboxError::invalid_argument(
            "region",
            "a region is 1 to 32 of a-z, 0-9 and `-` (e.g. us-east-1)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn refused(p: &S3Prefix) -> (String, String) {
        let e = p.validate().expect_err("refused");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let SandboxError::InvalidArgument {
            argument: Some(a), ..
        } = &e
        else {
            panic!("{e:?}")
        };
        (a.to_string(), e.to_string())
    }

    #[test]
    fn a_good_location_passes_and_builds_its_key_prefix_and_uri() {
        let p = S3Prefix::new("my-bucket.data").name("alice");
        p.validate().unwrap();
        assert_eq!(p.prefix, "rayito-home");
        assert_eq!(p.key_prefix().as_deref(), Some("rayito-home/alice"));
        assert_eq!(
            p.uri().as_deref(),
            Some("s3://my-bucket.data/rayito-home/alice/")
        );
        assert_eq!(S3Prefix::new("abc").key_prefix(), None);
        assert_eq!(
            S3Prefix::new("abc").or_name("sbx-1").name.as_deref(),
            Some("sbx-1")
        );
        S3Prefix::new("abc")
            .prefix("team/a!_.*'()-b")
            .region("eu-west-1")
            .validate()
            .unwrap();
        // Debug never shows the bucket or the prefix.
        let debug = format!(
            "{:?}",
            S3Prefix::new("secret-bucket").prefix("secret-prefix")
        );
        assert!(!debug.contains("secret"), "{debug}");
    }

    /// Every rule of spec B2, its argument and its pinned message; the
    /// value is never quoted.
    #[test]
    fn every_rule_is_refused_with_its_argument_and_message() {
        let b = |bucket: &str| S3Prefix::new(bucket);
        let cases = [
            (
                b("ab"),
                "bucket",
                "invalid bucket: a bucket name has 3 to 63 characters",
            ),
            (
                b(&"a".repeat(64)),
                "bucket",
                "invalid bucket: a bucket name has 3 to 63 characters",
            ),
            (
                b("My-Bucket"),
                "bucket",
                "invalid bucket: a bucket name has only a-z, 0-9, `.` and `-`",
            ),
            (
                b("bucket_x"),
                "bucket",
                "invalid bucket: a bucket name has only a-z, 0-9, `.` and `-`",
            ),
            (
                b("-bucket"),
                "bucket",
                "invalid bucket: a bucket name starts and ends with a letter or a digit",
            ),
            (
                b("bucket."),
                "bucket",
                "invalid bucket: a bucket name starts and ends with a letter or a digit",
            ),
            (
                b("my..bucket"),
                "bucket",
                "invalid bucket: a bucket name has no `..`",
            ),
            (
                b("192.168.1.1"),
                "bucket",
                "invalid bucket: a bucket name is not an IPv4 address",
            ),
            (
                b("abc").prefix(""),
                "prefix",
                "invalid prefix: it must not be empty",
            ),
            (
                b("abc").prefix("/a"),
                "prefix",
                "invalid prefix: it must not start or end with `/`",
            ),
            (
                b("abc").prefix("a/"),
                "prefix",
                "invalid prefix: it must not start or end with `/`",
            ),
            (
                b("abc").prefix("a//b"),
                "prefix",
                "invalid prefix: no segment may be empty, `.` or `..`",
            ),
            (
                b("abc").prefix("a/../b"),
                "prefix",
                "invalid prefix: no segment may be empty, `.` or `..`",
            ),
            (
                b("abc").prefix("a/./b"),
                "prefix",
                "invalid prefix: no segment may be empty, `.` or `..`",
            ),
            (
                b("abc").prefix("a b"),
                "prefix",
                "invalid prefix: only letters, digits and !_.*'()-/ are allowed",
            ),
            (
                b("abc").prefix("ä"),
                "prefix",
                "invalid prefix: only letters, digits and !_.*'()-/ are allowed",
            ),
            (
                b("abc").prefix("x".repeat(901)),
                "prefix",
                "invalid prefix: it is longer than 900 bytes",
            ),
            (
                b("abc").prefix("x".repeat(900)).name("n"),
                "prefix",
                "invalid prefix: prefix and name together are longer than 900 bytes",
            ),
            (
                b("abc").name("a/b"),
                "name",
                "invalid name: a checkpoint name is one segment; it must not contain `/`",
            ),
            (
                b("abc").name(".."),
                "name",
                "invalid name: no segment may be empty, `.` or `..`",
            ),
            (
                b("abc").name(""),
                "name",
                "invalid name: it must not be empty",
            ),
            (
                b("abc").region("US_EAST"),
                "region",
                "invalid region: a region is 1 to 32 of a-z, 0-9 and `-` (e.g. us-east-1)",
            ),
        ];
        for (p, argument, message) in cases {
            let (a, m) = refused(&p);
            assert_eq!((a.as_str(), m.as_str()), (argument, message), "{p:?}");
        }
    }
}
