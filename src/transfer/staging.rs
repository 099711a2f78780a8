//! [`S3Staging`]: where S3-staged transfers put their objects (spec C2), and
//! the checks of every field, made before any call and naming the field.
//! The staging is the caller's: the SDK signs every URL with the caller's
//! credentials and the agent only calls those URLs.

use std::time::Duration;

use crate::error::SandboxError;

/// Default key prefix of the staging objects.
pub const DEFAULT_PREFIX: &str = "rayito-transfer";
/// Default and largest URL lifetime cap (seconds).
const DEFAULT_MAX_EXPIRES_IN: Duration = Duration::from_secs(86_400);
const LONGEST_EXPIRES_IN: Duration = Duration::from_secs(604_800);
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

crate::checks::reasons! {
    BUCKET_BAD = "bucket" =>
        "the staging bucket must be a DNS name without dots of 3 to 63 lowercase letters, digits or '-', starting and ending with a letter or digit, not starting with xn-- nor ending with -s3alias; pass the bucket's name";
    PREFIX_BAD = "prefix" =>
        "the staging prefix must be '/'-separated segments of letters, digits, '_', '.' or '-' (no empty, '.' or '..' segment), at most 256 bytes; pass a prefix like rayito-transfer";
    PREFIX_RESERVED = "prefix" =>
        "the staging prefix overlaps rayito/ or the checkpoint prefix in the same bucket; pass a prefix of its own like rayito-transfer";
    REGION_BAD = "region" =>
        "the staging region must be labels of 1 to 63 lowercase letters, digits or '-' (like us-east-1); pass the bucket's region";
    MAX_EXPIRES_IN_BAD = "max_expires_in" =>
        "max_expires_in must be 1 to 604,800 seconds; pass at most 7 days";
    THRESHOLD_BAD = "threshold_bytes" =>
        "threshold_bytes must be 1 MiB to 5 GiB";
    MULTIPART_THRESHOLD_BAD = "multipart_threshold_bytes" =>
        "multipart_threshold_bytes must be 16 MiB to 5 GiB";
    CHUNK_BAD = "chunk_bytes" =>
        "chunk_bytes must be 64 KiB to 512 MiB";
    EXPIRES_IN_BAD = "expires_in" =>
        "expires_in must be at least 1 second; pass how long the URL may be used";
    MAX_BYTES_BAD = "max_bytes" =>
        "max_bytes must be 1 byte to 5 GiB; pass the largest upload to accept";
    FILENAME_BAD = "filename" =>
        "the download filename must be 1 to 255 bytes without '/', '\\', '\"' or control characters; pass a plain file name";
}

fn refuse(reason: (&'static str, &'static str)) -> SandboxError {
    SandboxError::invalid_argument(reason.0, reason.1)
}

/// Where S3-staged transfers keep their objects: keys
/// `<prefix>/<sandbox_id>/{up|down}/<32 hex>` in `bucket`. The bucket
/// should expire objects after a day and abort stale multipart uploads
/// (docs/transfers.md).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct S3Staging {
    /// The bucket (no dots: URLs are virtual-hosted over HTTPS).
    pub bucket: String,
    /// Key prefix, default [`DEFAULT_PREFIX`].
    pub prefix: String,
    /// The bucket's region; `None`: the sandbox's.
    pub region: Option<String>,
    /// Cap on every URL's lifetime (default 1 day, at most 7 days).
    pub max_expires_in: Duration,
    /// Reads and writes of at least this many bytes go through S3
    /// (default 8 MiB, 1 MiB to 5 GiB).
    pub threshold_bytes: u64,
    /// Exports of at least this many bytes use a multipart upload
    /// (default 5 GiB, 16 MiB to 5 GiB).
    pub multipart_threshold_bytes: u64,
    /// A chunked staged write (an agent that announces it) sends its
    /// bytes as objects of this many, one uploading while the next fills,
    /// so about twice this is held (default 16 MiB, 64 KiB to 512 MiB);
    /// past 318 chunks the rest goes as one multipart object.
    pub chunk_bytes: u64,
}

impl std::fmt::Debug for S3Staging {
    // The bucket and prefix are the caller's configuration, not secrets,
    // but no error or log may hold them: Debug shows only the shape.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Staging")
            .field("region", &self.region)
            .field("max_expires_in", &self.max_expires_in)
            .field("threshold_bytes", &self.threshold_bytes)
            .field("multipart_threshold_bytes", &self.multipart_threshold_bytes)
            .field("chunk_bytes", &self.chunk_bytes)
            .finish_non_exhaustive()
    }
}

impl S3Staging {
    /// Staging in `bucket` with every default.
    pub fn new(bucket: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            prefix: DEFAULT_PREFIX.to_owned(),
            region: None,
            max_expires_in: DEFAULT_MAX_EXPIRES_IN,
            threshold_bytes: 8 * MIB,
            multipart_threshold_bytes: 5 * GIB,
            chunk_bytes: 16 * MIB,
        }
    }

    crate::setters::setters! {
        /// The key prefix.
        prefix: impl String;
        /// The bucket's region.
        region: Some impl String;
        /// The cap on every URL's lifetime.
        max_expires_in: Duration;
        /// The size from which reads and writes go through S3.
        threshold_bytes: u64;
        /// The size from which exports use a multipart upload.
        multipart_threshold_bytes: u64;
        /// The size of a chunked write's chunks.
        chunk_bytes: u64;
    }

    /// From `RAYITO_TRANSFER_BUCKET` (absent or empty: `None`, staging
    /// off), `RAYITO_TRANSFER_PREFIX` and `RAYITO_TRANSFER_REGION`.
    ///
    /// # Errors
    /// `InvalidArgument` naming the field a variable holds a bad value for.
    pub fn from_env() -> Result<Option<Self>, SandboxError> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let Some(bucket) = var("RAYITO_TRANSFER_BUCKET") else {
            return Ok(None);
        };
        let mut staging = Self::new(bucket);
        if let Some(prefix) = var("RAYITO_TRANSFER_PREFIX") {
            staging.prefix = prefix;
        }
        staging.region = var("RAYITO_TRANSFER_REGION");
        staging.check(None)?;
        Ok(Some(staging))
    }

    /// Checks every field; `persist_prefix` is the checkpoint prefix when
    /// checkpoints use the same bucket.
    ///
    /// # Errors
    /// `InvalidArgument` naming the first bad field.
    pub fn check(&self, persist_prefix: Option<&str>) -> Result<(), SandboxError> {
        if !bucket_ok(&self.bucket) {
            return Err(refuse(BUCKET_BAD));
        }
        if !prefix_ok(&self.prefix) {
            return Err(refuse(PREFIX_BAD));
        }
        let overlaps = |a: &str, b: &str| {
            let (a, b) = (format!("{a}/"), format!("{b}/"));
            a.starts_with(&b) || b.starts_with(&a)
        };
        if overlaps(&self.prefix, "rayito")
            || persist_prefix.is_some_and(|p| overlaps(&self.prefix, p))
        {
            return Err(refuse(PREFIX_RESERVED));
        }
        if let Some(region) = &self.region
            && !region_ok(region)
        {
            return Err(refuse(REGION_BAD));
        }
        if self.max_expires_in < Duration::from_secs(1) || self.max_expires_in > LONGEST_EXPIRES_IN
        {
            return Err(refuse(MAX_EXPIRES_IN_BAD));
        }
        if !(MIB..=5 * GIB).contains(&self.threshold_bytes) {
            return Err(refuse(THRESHOLD_BAD));
        }
        if !(16 * MIB..=5 * GIB).contains(&self.multipart_threshold_bytes) {
            return Err(refuse(MULTIPART_THRESHOLD_BAD));
        }
        if !(64 << 10..=512 * MIB).contains(&self.chunk_bytes) {
            return Err(refuse(CHUNK_BAD));
        }
        Ok(())
    }

    /// A URL's lifetime: `min(expires_in, max_expires_in, 7 days)`.
    pub(crate) fn lifetime(&self, expires_in: Duration) -> Result<Duration, SandboxError> {
        if expires_in < Duration::from_secs(1) {
            return Err(refuse(EXPIRES_IN_BAD));
        }
        Ok(expires_in.min(self.max_expires_in).min(LONGEST_EXPIRES_IN))
    }

    /// A fresh staging key of `sandbox_id`, `dir` `up` or `down`.
    pub(crate) fn key(&self, sandbox_id: &str, dir: &str) -> String {
        format!(
            "{}/{sandbox_id}/{dir}/{:032x}",
            self.prefix,
            rand::random::<u128>()
        )
    }
}

fn bucket_ok(b: &str) -> bool {
    let bytes = b.as_bytes();
    (3..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        && !b.starts_with("xn--")
        && !b.ends_with("-s3alias")
}

fn prefix_ok(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 256
        && p.split('/').all(|seg| {
            !seg.is_empty()
                && seg != "."
                && seg != ".."
                && seg
                    .bytes()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
        })
}

fn region_ok(r: &str) -> bool {
    !r.is_empty()
        && r.len() <= 63
        && r.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !r.starts_with('-')
}

/// `max_bytes` of an upload ticket: 1 byte to 5 GiB.
pub(crate) fn check_max_bytes(n: u64) -> Result<u64, SandboxError> {
    if (1..=5 * GIB).contains(&n) {
        Ok(n)
    } else {
        Err(refuse(MAX_BYTES_BAD))
    }
}

/// A download's attachment filename.
pub(crate) fn check_filename(name: &str) -> Result<(), SandboxError> {
    let ok = (1..=255).contains(&name.len())
        && !name
            .chars()
            .any(|c| c.is_control() || matches!(c, '/' | '\\' | '"'));
    if ok {
        Ok(())
    } else {
        Err(refuse(FILENAME_BAD))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg(e: &SandboxError) -> Option<&str> {
        match e {
            SandboxError::InvalidArgument { argument, .. } => argument.as_deref(),
            _ => None,
        }
    }

    /// docs/transfers.md transcribes every reason.
    #[test]
    fn the_docs_list_every_reason() {
        let doc = include_str!("../../docs/transfers.md");
        for (argument, reason) in REASONS {
            assert!(
                doc.contains(&format!("| `{argument}` | `{reason}` |")),
                "{argument}: {reason}"
            );
        }
    }

    #[test]
    fn defaults_are_the_spec_s() {
        let s = S3Staging::new("my-bucket");
        assert_eq!(s.prefix, "rayito-transfer");
        assert_eq!(s.max_expires_in, Duration::from_secs(86_400));
        assert_eq!(s.threshold_bytes, 8 << 20);
        assert_eq!(s.multipart_threshold_bytes, 5 << 30);
        assert_eq!(s.chunk_bytes, 16 << 20);
        s.check(None).expect("valid");
        for edge in [64 << 10, 512 << 20] {
            S3Staging::new("abc")
                .chunk_bytes(edge)
                .check(None)
                .expect("an edge of chunk_bytes");
        }
    }

    #[test]
    fn every_field_is_checked_and_named() {
        let cases: Vec<(S3Staging, &str)> = vec![
            (S3Staging::new("my.bucket"), "bucket"),
            (S3Staging::new("ab"), "bucket"),
            (S3Staging::new("xn--abc"), "bucket"),
            (S3Staging::new("abc-s3alias"), "bucket"),
            (S3Staging::new("-abc"), "bucket"),
            (S3Staging::new("Abc"), "bucket"),
            (S3Staging::new("abc").prefix("a//b"), "prefix"),
            (S3Staging::new("abc").prefix("a/../b"), "prefix"),
            (S3Staging::new("abc").prefix("a b"), "prefix"),
            (S3Staging::new("abc").prefix("x".repeat(257)), "prefix"),
            (S3Staging::new("abc").prefix("rayito"), "prefix"),
            (S3Staging::new("abc").prefix("rayito/x"), "prefix"),
            (S3Staging::new("abc").region("US_EAST"), "region"),
            (
                S3Staging::new("abc").max_expires_in(Duration::ZERO),
                "max_expires_in",
            ),
            (
                S3Staging::new("abc").max_expires_in(Duration::from_secs(604_801)),
                "max_expires_in",
            ),
            (
                S3Staging::new("abc").threshold_bytes((1 << 20) - 1),
                "threshold_bytes",
            ),
            (
                S3Staging::new("abc").threshold_bytes((5 << 30) + 1),
                "threshold_bytes",
            ),
            (
                S3Staging::new("abc").multipart_threshold_bytes((16 << 20) - 1),
                "multipart_threshold_bytes",
            ),
            (
                S3Staging::new("abc").chunk_bytes((64 << 10) - 1),
                "chunk_bytes",
            ),
            (
                S3Staging::new("abc").chunk_bytes((512 << 20) + 1),
                "chunk_bytes",
            ),
        ];
        for (s, field) in cases {
            let e = s.check(None).expect_err(field);
            assert_eq!(arg(&e), Some(field), "{e}");
            assert!(!e.to_string().contains("xn--abc"));
        }
        // The checkpoint prefix in the same bucket.
        let e = S3Staging::new("abc")
            .prefix("homes/x")
            .check(Some("homes"))
            .expect_err("overlap");
        assert_eq!(arg(&e), Some("prefix"));
        S3Staging::new("abc")
            .prefix("rayito-transfer")
            .check(Some("rayito-home"))
            .expect("no overlap");
    }

    #[test]
    fn lifetimes_are_capped() {
        let s = S3Staging::new("abc").max_expires_in(Duration::from_secs(100));
        assert_eq!(
            s.lifetime(Duration::from_secs(3600)).unwrap(),
            Duration::from_secs(100)
        );
        assert_eq!(
            s.lifetime(Duration::from_secs(5)).unwrap(),
            Duration::from_secs(5)
        );
        assert_eq!(
            arg(&s.lifetime(Duration::ZERO).unwrap_err()),
            Some("expires_in")
        );
        let key = s.key("sbx-1", "up");
        assert!(
            key.starts_with("rayito-transfer/sbx-1/up/") && key.len() == 25 + 32,
            "{key}"
        );
    }
}
