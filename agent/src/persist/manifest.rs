//! `manifest.json`, written after the archive so that a manifest means a
//! complete archive:
//!
//! ```json
//! {"schema":"rayito.checkpoint/1","sha256":"<64 hex>","archive_bytes":123,
//!  "files":10,"bytes":4567,"excludes":["data"],"created_at":"2026-12-01T20:00:00Z"}
//! ```
//!
//! `sha256` and `archive_bytes` are the archive's (`home.tar.gz`), `files`
//! and `bytes` what it holds (files and symlinks; bytes read from files),
//! `excludes` the request's, normalised. Restore accepts only this schema.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

/// The schema this agent writes and reads.
pub(crate) const SCHEMA: &str = "rayito.checkpoint/1";

/// A checkpoint's manifest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Manifest {
    pub schema: String,
    pub sha256: String,
    pub archive_bytes: u64,
    pub files: u64,
    pub bytes: u64,
    pub excludes: Vec<String>,
    pub created_at: String,
}

impl Manifest {
    /// A manifest of now.
    pub(crate) fn new(
        sha256: String,
        archive_bytes: u64,
        files: u64,
        bytes: u64,
        excludes: Vec<String>,
    ) -> Self {
        Self {
            schema: SCHEMA.to_owned(),
            sha256,
            archive_bytes,
            files,
            bytes,
            excludes,
            created_at: super::time::format_rfc3339_utc(std::time::SystemTime::now()),
        }
    }

    pub(crate) fn to_bytes(&self) -> Bytes {
        Bytes::from(serde_json::to_vec(self).unwrap_or_default())
    }

    /// A manifest of this schema with a well-formed sha256, else `None`.
    pub(crate) fn parse(body: &[u8]) -> Option<Self> {
        let m: Manifest = serde_json::from_slice(body).ok()?;
        let hex_ok = m.sha256.len() == 64
            && m.sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        (m.schema == SCHEMA && hex_ok).then_some(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_round_trip_and_other_schemas_are_refused() {
        let m = Manifest::new("ab".repeat(32), 10, 2, 3, vec!["data".into()]);
        let back = Manifest::parse(&m.to_bytes()).unwrap();
        assert_eq!(back, m);
        let text = String::from_utf8(m.to_bytes().to_vec()).unwrap();
        assert!(
            text.starts_with("{\"schema\":\"rayito.checkpoint/1\",\"sha256\":"),
            "{text}"
        );
        let other = text.replace("rayito.checkpoint/1", "rayito.checkpoint/2");
        assert!(Manifest::parse(other.as_bytes()).is_none());
        let bad_hash = text.replace(&"ab".repeat(32), "zz");
        assert!(Manifest::parse(bad_hash.as_bytes()).is_none());
        assert!(Manifest::parse(b"{}").is_none());
    }
}
