//! `sandbox.files()`: the sandbox's filesystem.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime};

use crate::error::{ErrorKind, GrpcCode, SandboxError};
use crate::pb;
use crate::sandbox::Sandbox;

/// Largest chunk of one Write message (the agent refuses more).
const WRITE_CHUNK_BYTES: usize = 1024 * 1024;
/// Extra deadline per MiB moved.
const PER_MIB: Duration = Duration::from_secs(1);

/// The type of a filesystem entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FileType {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (never followed).
    Symlink,
    /// Anything else (FIFO, socket, device).
    Other,
}

/// A file or directory in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EntryInfo {
    /// Its name.
    pub name: String,
    /// Its absolute path.
    pub path: String,
    /// Its type.
    pub file_type: FileType,
    /// Size in bytes.
    pub size: u64,
    /// `st_mode & 0o7777`.
    pub mode: u32,
    /// `ls -l` form (`-rw-r--r--`).
    pub permissions: String,
    /// Owner name.
    pub owner: String,
    /// Group name.
    pub group: String,
    /// Last modification.
    pub modified_time: Option<SystemTime>,
    /// Where a symlink points.
    pub symlink_target: Option<String>,
    /// File metadata (extended attributes `user.rayito.*`).
    pub metadata: BTreeMap<String, String>,
}

impl From<pb::EntryInfo> for EntryInfo {
    fn from(e: pb::EntryInfo) -> Self {
        let file_type = match pb::FileType::try_from(e.r#type) {
            Ok(pb::FileType::File) => FileType::File,
            Ok(pb::FileType::Directory) => FileType::Directory,
            Ok(pb::FileType::Symlink) => FileType::Symlink,
            _ => FileType::Other,
        };
        let modified_time = u64::try_from(e.modified_time_unix_ms)
            .ok()
            .and_then(|ms| SystemTime::UNIX_EPOCH.checked_add(Duration::from_millis(ms)));
        Self {
            name: e.name,
            path: e.path,
            file_type,
            size: e.size,
            mode: e.mode,
            permissions: e.permissions,
            owner: e.owner,
            group: e.group,
            modified_time,
            symlink_target: e.symlink_target,
            metadata: e.metadata.into_iter().collect(),
        }
    }
}

/// One file of [`Files::write_files`].
#[derive(Clone, PartialEq, Eq)]
pub struct WriteEntry {
    path: String,
    data: Vec<u8>,
}

impl fmt::Debug for WriteEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // File contents never go to a log.
        f.debug_struct("WriteEntry")
            .field("path", &self.path)
            .field("bytes", &self.data.len())
            .finish()
    }
}

impl WriteEntry {
    /// A file to write at `path` with `data` (bytes or a string).
    pub fn new(path: impl Into<String>, data: impl Into<Vec<u8>>) -> Self {
        Self {
            path: path.into(),
            data: data.into(),
        }
    }
}

/// The sandbox's filesystem (a borrowed view: `sandbox.files()`). Relative
/// paths are relative to `/home/user`.
#[derive(Debug, Clone, Copy)]
pub struct Files<'a> {
    sandbox: &'a Sandbox,
}

fn deadline_for(base: Duration, bytes: u64) -> Duration {
    base + PER_MIB * u32::try_from(bytes / (1024 * 1024)).unwrap_or(u32::MAX)
}

impl<'a> Files<'a> {
    pub(crate) fn new(sandbox: &'a Sandbox) -> Self {
        Self { sandbox }
    }

    fn timeout(&self) -> Duration {
        self.sandbox.request_timeout()
    }

    /// Reads a regular file.
    ///
    /// # Errors
    /// `FileNotFound`; `InvalidArgument` (`path`) when it is not a regular
    /// file; `Authentication` for a denied path; transport failures.
    pub async fn read(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        let entry = self.stat(path, "files.read").await?;
        if entry.file_type != FileType::File {
            return Err(SandboxError::invalid_argument(
                "path",
                "the path is not a regular file; pass the path of a file",
            ));
        }
        let conn = self.sandbox.conn();
        let mut stream = conn
            .read_file(
                pb::ReadRequest {
                    path: path.to_owned(),
                    user: None,
                },
                Some(deadline_for(self.timeout(), entry.size)),
            )
            .await?;
        let mut data = Vec::with_capacity(usize::try_from(entry.size).unwrap_or(0));
        while let Some(chunk) = stream.message().await? {
            data.extend_from_slice(&chunk.chunk);
        }
        Ok(data)
    }

    /// Reads a regular file as UTF-8 text.
    ///
    /// # Errors
    /// As [`Files::read`], and `InvalidArgument` (`path`) when the file is not
    /// valid UTF-8.
    pub async fn read_to_string(&self, path: &str) -> Result<String, SandboxError> {
        String::from_utf8(self.read(path).await?).map_err(|_| {
            SandboxError::invalid_argument("path", "the file is not valid UTF-8; read it as bytes")
        })
    }

    /// Writes one file (parents are created; mode 0644).
    ///
    /// # Errors
    /// `DiskFull` (the agent's disk reserve or ENOSPC); `InvalidArgument`
    /// (bad path); `Authentication` for a denied path; transport failures.
    pub async fn write(
        &self,
        path: &str,
        data: impl Into<Vec<u8>>,
    ) -> Result<EntryInfo, SandboxError> {
        let mut entries = self.write_files(vec![WriteEntry::new(path, data)]).await?;
        entries.pop().ok_or_else(|| {
            SandboxError::protocol_violation("files.write", "the write answered no entry")
        })
    }

    /// Writes several files in one stream; one entry per file, in order.
    ///
    /// # Errors
    /// As [`Files::write`]; `InvalidArgument` (`files`) for an empty list.
    pub async fn write_files(
        &self,
        files: Vec<WriteEntry>,
    ) -> Result<Vec<EntryInfo>, SandboxError> {
        if files.is_empty() {
            return Err(SandboxError::invalid_argument(
                "files",
                "no files to write; pass at least one file",
            ));
        }
        let count = files.len();
        let total: usize = files.iter().map(|f| f.data.len()).sum();
        let mut messages = Vec::new();
        for file in files {
            let mut chunks = file.data.chunks(WRITE_CHUNK_BYTES);
            // The first message names the file and carries its first chunk
            // (possibly empty); the rest carry only chunks.
            messages.push(pb::WriteRequest {
                path: Some(file.path),
                user: None,
                mode: None,
                chunk: chunks.next().unwrap_or_default().to_vec(),
                metadata: Default::default(),
            });
            messages.extend(chunks.map(|chunk| pb::WriteRequest {
                path: None,
                user: None,
                mode: None,
                chunk: chunk.to_vec(),
                metadata: Default::default(),
            }));
        }
        let response = self
            .sandbox
            .conn()
            .write_files(
                messages,
                deadline_for(self.timeout(), u64::try_from(total).unwrap_or(u64::MAX)),
            )
            .await?;
        if response.entries.len() != count {
            return Err(SandboxError::protocol_violation(
                "files.write",
                "the write answered a different number of entries than files sent",
            ));
        }
        Ok(response.entries.into_iter().map(EntryInfo::from).collect())
    }

    /// Lists a directory (one level).
    ///
    /// # Errors
    /// `FileNotFound`; `InvalidArgument` (not a directory); transport failures.
    pub async fn list(&self, path: &str) -> Result<Vec<EntryInfo>, SandboxError> {
        self.list_with_depth(path, 1).await
    }

    /// Lists a directory down to `depth` levels (symlinks never followed).
    ///
    /// # Errors
    /// As [`Files::list`]; `RateLimit` above 10,000 entries.
    pub async fn list_with_depth(
        &self,
        path: &str,
        depth: u32,
    ) -> Result<Vec<EntryInfo>, SandboxError> {
        let response = self
            .sandbox
            .conn()
            .list_dir(
                pb::ListDirRequest {
                    path: path.to_owned(),
                    depth: depth.max(1),
                    user: None,
                },
                self.timeout(),
            )
            .await?;
        Ok(response.entries.into_iter().map(EntryInfo::from).collect())
    }

    /// Whether something exists at `path`.
    ///
    /// # Errors
    /// Failures other than not-found.
    pub async fn exists(&self, path: &str) -> Result<bool, SandboxError> {
        match self.stat(path, "files.exists").await {
            Ok(_) => Ok(true),
            Err(err) if err.kind() == ErrorKind::FileNotFound => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// What is at `path` (symlinks are not followed).
    ///
    /// # Errors
    /// `FileNotFound`; transport failures.
    pub async fn get_info(&self, path: &str) -> Result<EntryInfo, SandboxError> {
        self.stat(path, "files.get_info").await
    }

    async fn stat(&self, path: &str, feature: &'static str) -> Result<EntryInfo, SandboxError> {
        let response = self
            .sandbox
            .conn()
            .stat(
                pb::StatRequest {
                    path: path.to_owned(),
                    user: None,
                },
                feature,
                self.timeout(),
            )
            .await?;
        response.entry.map(EntryInfo::from).ok_or_else(|| {
            SandboxError::protocol_violation("files.get_info", "stat answered no entry")
        })
    }

    /// Removes a file or a directory with everything in it.
    ///
    /// # Errors
    /// `FileNotFound`; transport failures.
    pub async fn remove(&self, path: &str) -> Result<(), SandboxError> {
        self.sandbox
            .conn()
            .remove(
                pb::RemoveRequest {
                    path: path.to_owned(),
                    recursive: true,
                    user: None,
                },
                self.timeout(),
            )
            .await
    }

    /// Moves `old` to `new`; returns the entry at its new path.
    ///
    /// # Errors
    /// `FileNotFound`; `InvalidArgument` (destination conflict); transport
    /// failures.
    pub async fn rename(&self, old: &str, new: &str) -> Result<EntryInfo, SandboxError> {
        let response = self
            .sandbox
            .conn()
            .move_path(
                pb::MoveRequest {
                    source: old.to_owned(),
                    destination: new.to_owned(),
                    user: None,
                },
                self.timeout(),
            )
            .await?;
        response.entry.map(EntryInfo::from).ok_or_else(|| {
            SandboxError::protocol_violation("files.rename", "move answered no entry")
        })
    }

    /// Creates a directory and its parents; `false` when it already existed.
    ///
    /// # Errors
    /// `InvalidArgument` when something else is already there; transport
    /// failures.
    pub async fn make_dir(&self, path: &str) -> Result<bool, SandboxError> {
        let outcome = self
            .sandbox
            .conn()
            .make_dir(
                pb::MakeDirRequest {
                    path: path.to_owned(),
                    user: None,
                },
                self.timeout(),
            )
            .await;
        match outcome {
            Ok(_) => Ok(true),
            Err(err) if err.meta().grpc_code() == Some(GrpcCode::AlreadyExists) => Ok(false),
            Err(err) => Err(err),
        }
    }
}
