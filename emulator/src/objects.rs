//! The emulator's object store: the files behind its S3 endpoint
//! ([`super::s3`]), also read and written directly by the emulator itself
//! (a build fetches its code artifact, the seeded base image's artifact is
//! put at start).
//!
//! One layout for both views, s3s-fs's: an object is the plain file
//! `<root>/<bucket>/<key>`; what S3 adds to it (ETag, checksums,
//! content type, user metadata) sits in sidecar files at the root,
//! `.bucket-<b64 bucket>.object-<b64 key>.{metadata,internal}.json`
//! (base64url without padding), and writes go through a temporary
//! `.tmp.*.internal.part` at the root, renamed into place. A direct
//! [`ObjectStore::put`] drops the object's sidecars before its bytes land,
//! so the endpoint never serves a stale ETag or checksum with new bytes
//! (it computes the MD5 again for an object without them).

use std::path::{Component, Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;

/// The object store rooted at one directory.
#[derive(Clone, Debug)]
pub(crate) struct ObjectStore {
    root: PathBuf,
}

/// Whether `key` can be stored as a file below its bucket: every
/// `/`-separated segment a plain name: no empty (a leading, doubled or
/// trailing `/`), `.` or `..` segment. S3 itself takes any key; the
/// emulator refuses the others (a trailing `/` would make the object a
/// directory, which s3s-fs cannot serve as one).
pub(crate) fn storable_key(key: &str) -> bool {
    key.split('/').all(|s| !matches!(s, "" | "." | ".."))
}

/// The store's directory below the emulator's root.
const DIR: &str = "s3";

impl ObjectStore {
    /// The store under `root` (created on first write).
    pub(crate) fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// The emulator's store: `<emulator root>/s3`.
    pub(crate) fn under(emulator_root: &Path) -> Self {
        Self::new(emulator_root.join(DIR))
    }

    /// The directory holding every bucket.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Where `bucket`/`key` lives, or `None` for a key that would leave
    /// the bucket (`..`, an absolute path, an empty segment).
    fn path(&self, bucket: &str, key: &str) -> Option<PathBuf> {
        let plain_bucket = !bucket.is_empty()
            && !bucket.starts_with('.')
            && Path::new(bucket)
                .components()
                .all(|c| matches!(c, Component::Normal(_)))
            && !bucket.contains('/');
        (plain_bucket && storable_key(key)).then(|| self.root.join(bucket).join(key))
    }

    /// The sidecar files S3 keeps beside `bucket`/`key` (s3s-fs's names).
    pub(crate) fn sidecars(&self, bucket: &str, key: &str) -> [PathBuf; 2] {
        let stem = format!(
            ".bucket-{}.object-{}",
            URL_SAFE_NO_PAD.encode(bucket),
            URL_SAFE_NO_PAD.encode(key)
        );
        [
            self.root.join(format!("{stem}.metadata.json")),
            self.root.join(format!("{stem}.internal.json")),
        ]
    }

    /// Removes the sidecars of `bucket`/`key`, if any.
    ///
    /// # Errors
    /// A removal fails for another reason than absence.
    pub(crate) async fn remove_sidecars(&self, bucket: &str, key: &str) -> std::io::Result<()> {
        for path in self.sidecars(bucket, key) {
            match tokio::fs::remove_file(&path).await {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// Creates `bucket` if it does not exist.
    ///
    /// # Errors
    /// The directory cannot be created or the name is not a plain one.
    pub(crate) async fn create_bucket(&self, bucket: &str) -> std::io::Result<()> {
        if bucket.is_empty() || bucket.contains('/') || bucket.starts_with('.') {
            return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
        }
        tokio::fs::create_dir_all(self.root.join(bucket)).await
    }

    /// The object's bytes, `None` when it does not exist.
    ///
    /// # Errors
    /// Reading fails for another reason than absence.
    pub(crate) async fn get(&self, bucket: &str, key: &str) -> std::io::Result<Option<Bytes>> {
        let Some(path) = self.path(bucket, key) else {
            return Ok(None);
        };
        match tokio::fs::read(&path).await {
            Ok(bytes) => Ok(Some(Bytes::from(bytes))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Writes the object (its bucket must exist).
    ///
    /// # Errors
    /// No such bucket, a key that leaves it, or the write fails.
    pub(crate) async fn put(&self, bucket: &str, key: &str, body: Bytes) -> std::io::Result<()> {
        let path = self
            .path(bucket, key)
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
        if !tokio::fs::try_exists(self.root.join(bucket)).await? {
            return Err(std::io::Error::from(std::io::ErrorKind::NotFound));
        }
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        // Whole or not at all: a reader never sees half an object. The
        // temporary file sits at the root, out of every bucket's listing,
        // named so that the S3 endpoint's start removes one left behind.
        let tmp = self.root.join(format!(
            ".tmp.rayito-{:016x}.internal.part",
            rand::random::<u64>()
        ));
        if let Err(e) = tokio::fs::write(&tmp, &body).await {
            let _ = tokio::fs::remove_file(&tmp).await;
            return Err(e);
        }
        // Old bytes without sidecars are still served right (the ETag
        // computed again); new bytes with old sidecars would not be.
        let renamed = match self.remove_sidecars(bucket, key).await {
            Ok(()) => tokio::fs::rename(&tmp, &path).await,
            Err(e) => Err(e),
        };
        if renamed.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        renamed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_with_empty_dot_or_dotdot_segments_are_not_storable() {
        for ok in ["a", "rayito/templates/0123.zip", ".hidden", "a..b", "a/.x"] {
            assert!(storable_key(ok), "{ok}");
        }
        for bad in [
            "", "/a", "a//b", "a/b/", "./a", "a/./b", "../a", "a/../b", "a/..", "//", "/",
        ] {
            assert!(!storable_key(bad), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_direct_put_drops_the_sidecars_and_replaces_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let store = ObjectStore::new(dir.path().to_path_buf());
        store.create_bucket("b").await.unwrap();
        store
            .put("b", "k/x", Bytes::from_static(b"one"))
            .await
            .unwrap();
        for sidecar in store.sidecars("b", "k/x") {
            std::fs::write(&sidecar, b"{\"e_tag\":\"stale\"}").unwrap();
        }
        store
            .put("b", "k/x", Bytes::from_static(b"two"))
            .await
            .unwrap();
        assert_eq!(store.get("b", "k/x").await.unwrap().unwrap(), "two");
        for sidecar in store.sidecars("b", "k/x") {
            assert!(!sidecar.exists(), "{}", sidecar.display());
        }
        // Nothing else left at the root: the bucket only.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["b"]);
        assert!(store.put("b", "../escape", Bytes::new()).await.is_err());
        assert!(store.put("nobucket", "k", Bytes::new()).await.is_err());
        assert_eq!(store.get("b", "a//b").await.unwrap(), None);
    }
}
