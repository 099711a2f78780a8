//! The emulator's object store: the files behind its S3 endpoint, also read
//! and written directly by the emulator itself (a build fetches its code
//! artifact, the seeded base image's artifact is put at start).
//!
//! Objects are plain files at `<root>/<bucket>/<key>`.

use std::path::{Component, Path, PathBuf};

use bytes::Bytes;

/// The object store rooted at one directory.
#[derive(Clone, Debug)]
pub(crate) struct ObjectStore {
    root: PathBuf,
}

impl ObjectStore {
    /// The store under `root` (created on first write).
    pub(crate) fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// The directory holding every bucket.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Where `bucket`/`key` lives, or `None` for a key that would leave
    /// the bucket (`..`, an absolute path, an empty segment).
    fn path(&self, bucket: &str, key: &str) -> Option<PathBuf> {
        let plain = |s: &str| {
            !s.is_empty()
                && Path::new(s)
                    .components()
                    .all(|c| matches!(c, Component::Normal(_)))
        };
        (plain(bucket) && !bucket.contains('/') && plain(key))
            .then(|| self.root.join(bucket).join(key))
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
        // Whole or not at all: a reader never sees half an object.
        let tmp = path.with_extension(format!("part-{:016x}", rand::random::<u64>()));
        tokio::fs::write(&tmp, &body).await?;
        tokio::fs::rename(&tmp, &path).await
    }
}
