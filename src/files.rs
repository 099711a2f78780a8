//! `sandbox.files()`: the sandbox's filesystem; directory watches in `watch`.

mod options;
mod read;
pub(crate) mod staging;
mod watch;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use crate::error::{ErrorKind, GrpcCode, SandboxError};
use crate::pb;
use crate::sandbox::Sandbox;

pub use self::options::WriteOptions;
pub use self::watch::{
    ExitCallback, FilesystemEvent, FilesystemEventKind, WatchHandle, WatchOptions, WatchStopper,
};

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

/// The SDK's view of a generated `EntryInfo` (a private conversion: no
/// generated type appears in the public API, not even in a `From` impl).
pub(crate) fn entry_info(e: pb::EntryInfo) -> EntryInfo {
    let file_type = match pb::FileType::try_from(e.r#type) {
        Ok(pb::FileType::File) => FileType::File,
        Ok(pb::FileType::Directory) => FileType::Directory,
        Ok(pb::FileType::Symlink) => FileType::Symlink,
        _ => FileType::Other,
    };
    let modified_time = u64::try_from(e.modified_time_unix_ms)
        .ok()
        .and_then(|ms| SystemTime::UNIX_EPOCH.checked_add(Duration::from_millis(ms)));
    EntryInfo {
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

/// One file of [`Files::write_files`].
#[derive(Clone, PartialEq, Eq)]
pub struct WriteEntry {
    path: String,
    /// Held as `Bytes` so the Write messages are slices of it, and a retried
    /// write re-sends reference-counted views instead of copying the payload.
    data: Bytes,
}

// File contents never go to a log.
crate::secret::redacted_debug! {
    WriteEntry |o| path, bytes = o.data.len()
}

impl WriteEntry {
    /// A file to write at `path` with `data` (bytes or a string).
    pub fn new(path: impl Into<String>, data: impl Into<Vec<u8>>) -> Self {
        Self {
            path: path.into(),
            // Takes the Vec's buffer over; no copy.
            data: Bytes::from(data.into()),
        }
    }
}

/// The sandbox's filesystem (a borrowed view: `sandbox.files()`). Relative
/// paths are relative to `/home/user`.
///
/// Every path is checked before any I/O: an empty path or one holding a NUL
/// is `InvalidArgument` naming it (`path`, `source`, `destination`), and so
/// is a path to write that ends with `/`. A path the sandbox user may not
/// touch is `Sandbox { code: PermissionDenied }` (not `Authentication`:
/// the caller's credentials are fine).
///
/// Every call runs as the sandbox's default user; [`Files::as_user`] gives
/// a view whose calls run as another (E2B's `user=` argument).
#[derive(Debug, Clone, Copy)]
pub struct Files<'a> {
    sandbox: &'a Sandbox,
    /// The user every call names; `None`: the sandbox's default.
    user: Option<&'a str>,
}

/// `data` cut into views of at most [`WRITE_CHUNK_BYTES`] (reference counted,
/// never copied); nothing for empty data.
fn slices(data: Bytes) -> impl Iterator<Item = Bytes> + Send {
    let len = data.len();
    (0..len)
        .step_by(WRITE_CHUNK_BYTES)
        .map(move |at| data.slice(at..(at + WRITE_CHUNK_BYTES).min(len)))
}

/// The data messages of one stream item: 1 MiB views of its buffer.
fn data_messages(data: Bytes) -> futures_util::stream::Iter<std::vec::IntoIter<pb::WriteRequest>> {
    let pieces: Vec<pb::WriteRequest> = slices(data)
        .map(|piece| pb::WriteRequest {
            path: None,
            user: None,
            mode: None,
            chunk: piece,
            metadata: Default::default(),
        })
        .collect();
    futures_util::stream::iter(pieces)
}

fn deadline_for(base: Duration, bytes: u64) -> Duration {
    crate::checks::size_deadline(base, PER_MIB, bytes)
}

impl<'a> Files<'a> {
    pub(crate) fn new(sandbox: &'a Sandbox) -> Self {
        Self {
            sandbox,
            user: None,
        }
    }

    /// The same view, each call of which names `user` to the agent (whose
    /// permissions the paths then need, and who owns what a write or
    /// `make_dir` creates); empty means the sandbox's default user. A
    /// write's own [`WriteOptions::user`] comes first. The local backend
    /// has one account, `user`: its agent refuses any other
    /// (`InvalidArgument`, `unknown user`). Reads and writes of a view with
    /// a user travel over gRPC, never through a staging (as a write with
    /// options does).
    ///
    /// A user holding a NUL is `InvalidArgument` naming `user`, at each
    /// call, before any I/O.
    #[must_use]
    pub fn as_user(self, user: &'a str) -> Files<'a> {
        Files {
            user: (!user.is_empty()).then_some(user),
            ..self
        }
    }

    /// The user this view's calls name, checked.
    pub(crate) fn user_checked(&self) -> Result<Option<pb::User>, SandboxError> {
        Ok(crate::checks::user(self.user)?.map(|username| pb::User { username }))
    }

    fn timeout(&self) -> Duration {
        self.sandbox.request_timeout()
    }

    /// The span of the file operation `name` on this sandbox (never its
    /// paths).
    fn op(&self, name: crate::otel::Name) -> crate::otel::Op {
        crate::otel::Op::new(name).on(self.sandbox)
    }

    /// The sandbox of this view (the S3-staged transfers).
    #[cfg_attr(not(feature = "s3"), allow(dead_code))]
    pub(crate) fn sandbox(&self) -> &'a Sandbox {
        self.sandbox
    }

    /// Reads a regular file.
    ///
    /// A read cut by the network or a suspension waits until the sandbox is
    /// back (wire contract 2.7) and reads on: the file is read again and
    /// the bytes already received are skipped, so every byte arrives once,
    /// in order. If the file changed meanwhile (size or modification
    /// time), the read ends with the cut's error instead.
    ///
    /// With a staging (`s3` feature) and a file of at least its threshold,
    /// the agent exports the file to S3 and the SDK downloads it, checking
    /// its sha256 (docs/transfers.md, "Automatic staging"); a mismatch is
    /// `Transfer { failed_precondition, checksum_mismatch }`.
    ///
    /// # Errors
    /// `FileNotFound`; `InvalidArgument` (`path`) when it is not a regular
    /// file; `Sandbox { code: PermissionDenied }` for a path the sandbox user may not touch; transport failures;
    /// after a cut, what the reconnect found (`SandboxNotFound`,
    /// `SandboxLifetime`, `SandboxState`, `Sandbox { connection_lost }`).
    pub async fn read(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        boxed!(Result<Vec<u8>, SandboxError>, {
            self.op(crate::otel::Name::FilesRead)
                .run(self.read_inner(path), |data| one_file(data.len()))
                .await
        })
    }

    /// Inside its span (see the public method).
    async fn read_inner(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        boxed!(Result<Vec<u8>, SandboxError>, {
            let (mut feed, size) = self.open_read(path, "files.read").await?;
            // The size is the agent's word (and a sparse file's is anything):
            // it is only a hint. Memory is reserved as the bytes come, and a
            // file this process cannot hold is refused, never an abort.
            let fits = |bytes: u64| {
                usize::try_from(bytes)
                    .ok()
                    .is_some_and(|bytes| Vec::<u8>::new().try_reserve_exact(bytes).is_ok())
            };
            if !fits(size) {
                return Err(too_large_to_hold(size));
            }
            let mut data = Vec::new();
            let _ =
                data.try_reserve_exact(usize::try_from(size.min(MAX_READ_PREALLOC)).unwrap_or(0));
            while let Some(chunk) = feed.next().await {
                let chunk = chunk?;
                if data.try_reserve(chunk.len()).is_err() {
                    let held = u64::try_from(data.len()).unwrap_or(u64::MAX);
                    return Err(too_large_to_hold(held.saturating_add(chunk.len() as u64)));
                }
                data.extend_from_slice(&chunk);
            }
            Ok(data)
        })
    }

    /// Reads a regular file as a stream of chunks (at most 256 KiB each, as
    /// the agent sends them; each a view of the received frame, not a copy),
    /// for files too large to hold in memory: at most a few chunks are
    /// buffered, as HTTP/2 flow control holds the agent back. The
    /// stream ends after the last chunk, or with the error that cut it;
    /// dropping it cancels the read. A cut is survived as by
    /// [`Files::read`]: every byte arrives once, in order.
    ///
    /// # Errors
    /// As [`Files::read`], before the first chunk or as the stream's item.
    pub async fn read_stream(&self, path: &str) -> Result<FileChunks, SandboxError> {
        // The span covers opening the read; the chunks come after it.
        boxed!(Result<FileChunks, SandboxError>, {
            self.op(crate::otel::Name::FilesRead)
                .run(self.read_stream_inner(path), |_| {
                    vec![crate::otel::Attr::FilesCount(1)]
                })
                .await
        })
    }

    /// Inside its span (see the public method).
    async fn read_stream_inner(&self, path: &str) -> Result<FileChunks, SandboxError> {
        boxed!(Result<FileChunks, SandboxError>, {
            let (feed, _) = self.open_read(path, "files.read_stream").await?;
            let chunks = futures_util::stream::unfold(feed, |mut feed| async move {
                let item = feed.next().await?;
                Some((item, feed))
            });
            Ok(FileChunks {
                inner: Box::pin(chunks),
            })
        })
    }

    /// `path` for the staging of `feature`.
    fn file<'p>(&self, path: &'p str, feature: &'static str) -> staging::StagedFile<'p>
    where
        'a: 'p,
    {
        staging::StagedFile {
            sandbox: self.sandbox,
            path,
            feature,
        }
    }

    /// Checks that `path` is a regular file, then opens its Read stream,
    /// bounded by the request timeout plus one second per MiB.
    async fn open_read(
        &self,
        path: &str,
        feature: &'static str,
    ) -> Result<(Feed, u64), SandboxError> {
        let entry = self.stat(path, feature).await?;
        if entry.file_type != FileType::File {
            return Err(SandboxError::invalid_argument(
                "path",
                "the path is not a regular file; pass the path of a file",
            ));
        }
        let user = self.user_checked()?;
        if user.is_none()
            && let Some(staging) = staging::of(self.sandbox)
            && let Some(staged) = staging
                .open_read(self.file(path, feature), entry.size)
                .await?
        {
            return Ok((Feed::Staged(staged), entry.size));
        }
        let total = Some(deadline_for(self.timeout(), entry.size));
        let opened_at = tokio::time::Instant::now();
        let epoch = self.sandbox.conn().reconnect_epoch();
        let stream = self
            .sandbox
            .conn()
            .read_file(
                pb::ReadRequest {
                    path: path.to_owned(),
                    user: user.clone(),
                },
                total,
            )
            .await?;
        let size = entry.size;
        let feed = read::ReadFeed::new(
            self.sandbox,
            (path, feature, user),
            entry,
            (stream, epoch, opened_at),
            total,
        );
        Ok((Feed::Grpc(feed), size))
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
    /// With a staging (`s3` feature, [`crate::SandboxBuilder::staging`])
    /// and data of at least its threshold, the bytes go through S3
    /// (docs/transfers.md, "Automatic staging"); an agent without
    /// transfers gets them over gRPC as always.
    ///
    /// # Errors
    /// `DiskFull` (the agent's disk reserve or ENOSPC); `InvalidArgument`
    /// (bad path); `Sandbox { code: PermissionDenied }` for a path the sandbox user may not touch; transport failures.
    /// Staged: the SDK's own S3 failures (`Authentication`,
    /// `InvalidArgument` naming `bucket` or `region`, `Sandbox { aws_code }`)
    /// and the import's (spec C4: `FileUpload { code, reason }`, `Timeout`,
    /// `DiskFull`).
    pub async fn write(
        &self,
        path: &str,
        data: impl Into<Vec<u8>>,
    ) -> Result<EntryInfo, SandboxError> {
        self.write_with(path, data, WriteOptions::default()).await
    }

    /// Writes one file as [`Files::write`] does, with `options`: its owner,
    /// mode, metadata, and a gzip-compressed stream ([`WriteOptions`]).
    /// Returns the written file's entry (with its mode, owner and
    /// metadata as the agent stored them).
    ///
    /// A write with any option set always goes over gRPC, never through a
    /// staging's S3 (so that every option applies).
    ///
    /// # Errors
    /// As [`Files::write`]; before any I/O, `InvalidArgument` naming
    /// `mode` (above 0o7777), `user` (a NUL) or `metadata` (its rules,
    /// docs/errors.md); `Unimplemented { feature: files.write(gzip) |
    /// files.write(metadata) }` when the sandbox's agent predates them
    /// (probed before the bytes move); the agent's refusal of a `user` it
    /// does not know (`InvalidArgument`).
    pub async fn write_with(
        &self,
        path: &str,
        data: impl Into<Vec<u8>>,
        options: WriteOptions,
    ) -> Result<EntryInfo, SandboxError> {
        // Converted before the boxed part: `impl Into` need not be `Send`.
        let data: Vec<u8> = data.into();
        let bytes = data.len();
        boxed!(Result<EntryInfo, SandboxError>, {
            self.op(crate::otel::Name::FilesWrite)
                .with(crate::otel::Attr::FilesCount(1))
                .with(crate::otel::Attr::FilesBytes(bytes as u64))
                .run(self.write_inner(path, data, options), crate::otel::nothing)
                .await
        })
    }

    /// Inside its span (see the public method).
    async fn write_inner(
        &self,
        path: &str,
        data: Vec<u8>,
        options: WriteOptions,
    ) -> Result<EntryInfo, SandboxError> {
        let options = options.or_user(self.user);
        if options.is_default()
            && let Some(staging) = staging::of(self.sandbox)
        {
            crate::checks::file_path(path)?;
            let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
            if staging.stages_write(self.sandbox, Some(len)).await? {
                let once = Box::pin(futures_util::stream::iter([Bytes::from(data)]));
                return staging.write(self.file(path, "files.write"), once).await;
            }
        }
        let mut entries = self
            .write_files_inner(vec![WriteEntry::new(path, data)], options)
            .await?;
        entries.pop().ok_or_else(|| {
            SandboxError::protocol_violation("files.write", "the write answered no entry")
        })
    }

    /// Writes one file from a stream of chunks the caller produces (parents
    /// are created; mode 0644), for data too large to hold in memory. Chunks
    /// of any size are accepted (they are cut to the agent's 1 MiB limit, as
    /// views of the caller's buffer, not copies); `Vec<u8>`, `Bytes`,
    /// `String` and `&'static [u8]` items all work.
    /// The file appears at `path` only once the stream has ended: the agent
    /// writes a temporary file and renames it.
    ///
    /// The stream is consumed as it is sent, so this call is never retried:
    /// a proxy 403 ends it with `Authentication { proxy_rejected: true }`,
    /// a cut with `Sandbox { connection_lost }` (the file left untouched).
    /// It has no deadline of its own (its size is unknown); wrap it in
    /// `tokio::time::timeout` to bound it.
    ///
    /// With a staging (`s3` feature) and an agent that serves transfers,
    /// every stream goes through S3: 8 MiB parts uploaded up to 4 at once
    /// (about 40 MiB held at most), hashed on the way, then imported by the
    /// agent, which checks the sha256 and size (docs/transfers.md,
    /// "Automatic staging").
    ///
    /// # Errors
    /// As [`Files::write`].
    pub async fn write_stream<S>(&self, path: &str, chunks: S) -> Result<EntryInfo, SandboxError>
    where
        S: futures_util::Stream + Send + 'static,
        S::Item: Into<Bytes>,
    {
        self.write_stream_with(path, chunks, WriteOptions::default())
            .await
    }

    /// Writes one file from a stream as [`Files::write_stream`] does, with
    /// `options` ([`WriteOptions`]); with any option set it goes over
    /// gRPC, never through a staging's S3.
    ///
    /// # Errors
    /// As [`Files::write_with`].
    pub async fn write_stream_with<S>(
        &self,
        path: &str,
        chunks: S,
        options: WriteOptions,
    ) -> Result<EntryInfo, SandboxError>
    where
        S: futures_util::Stream + Send + 'static,
        S::Item: Into<Bytes>,
    {
        // The bytes of a stream are not counted: the stream is the caller's.
        boxed!(Result<EntryInfo, SandboxError>, {
            self.op(crate::otel::Name::FilesWrite)
                .with(crate::otel::Attr::FilesCount(1))
                .run(
                    self.write_stream_inner(path, chunks, options),
                    crate::otel::nothing,
                )
                .await
        })
    }

    /// Inside its span (see the public method).
    async fn write_stream_inner<S>(
        &self,
        path: &str,
        chunks: S,
        options: WriteOptions,
    ) -> Result<EntryInfo, SandboxError>
    where
        S: futures_util::Stream + Send + 'static,
        S::Item: Into<Bytes>,
    {
        use futures_util::StreamExt as _;
        crate::checks::file_path(path)?;
        let options = options.or_user(self.user);
        let checked = options.checked()?;
        if options.is_default()
            && let Some(staging) = staging::of(self.sandbox)
            && staging.stages_write(self.sandbox, None).await?
        {
            let chunks = Box::pin(chunks.map(Into::<Bytes>::into));
            return staging
                .write(self.file(path, "files.write_stream"), chunks)
                .await;
        }
        options::require_agent_for(self.sandbox, options.gzipped(), &checked).await?;
        // The first message names the file with an empty chunk; the others
        // carry only data.
        let header = checked.first(path.to_owned(), Bytes::new());
        // A named function, not a closure over an opaque iterator: the
        // future stays `Send` for any stream (a closure here trips the
        // compiler's higher-ranked lifetime check).
        let body = chunks.map(Into::<Bytes>::into).flat_map(data_messages);
        let messages = futures_util::stream::iter([header]).chain(body);
        let response = self
            .sandbox
            .conn()
            .write_stream(messages, options.gzipped())
            .await?;
        let mut entries = response.entries.into_iter();
        match (entries.next(), entries.next()) {
            (Some(entry), None) => Ok(entry_info(entry)),
            _ => Err(SandboxError::protocol_violation(
                "files.write",
                "the write answered a different number of entries than files sent",
            )),
        }
    }

    /// Writes several files in one stream; one entry per file, in order.
    ///
    /// Each file is written to a temporary sibling and renamed over its
    /// path when complete, so a file is never half-written. A write cut by
    /// the network (a reset, a proxy 429/502/503/504) is sent again, whole,
    /// once the sandbox is back (wire contract 2.7): writing the same bytes
    /// twice leaves the same files. If it still fails, each file is whole
    /// or untouched, but the files before the one being sent may have been
    /// written.
    ///
    /// The files always travel over gRPC, whatever their size and any
    /// staging: write a large file alone with [`Files::write`] or
    /// [`Files::write_stream`] to stage it through S3.
    ///
    /// # Errors
    /// As [`Files::write`]; `InvalidArgument` (`files`) for an empty list.
    pub async fn write_files(
        &self,
        files: Vec<WriteEntry>,
    ) -> Result<Vec<EntryInfo>, SandboxError> {
        self.write_files_with(files, WriteOptions::default()).await
    }

    /// Writes several files in one stream as [`Files::write_files`] does,
    /// each with `options` ([`WriteOptions`]: owner, mode, metadata in each
    /// file's first message; the whole stream gzip-compressed).
    ///
    /// # Errors
    /// As [`Files::write_files`] and [`Files::write_with`].
    pub async fn write_files_with(
        &self,
        files: Vec<WriteEntry>,
        options: WriteOptions,
    ) -> Result<Vec<EntryInfo>, SandboxError> {
        let count = files.len() as u64;
        let bytes: u64 = files.iter().map(|f| f.data.len() as u64).sum();
        boxed!(Result<Vec<EntryInfo>, SandboxError>, {
            self.op(crate::otel::Name::FilesWriteFiles)
                .with(crate::otel::Attr::FilesCount(count))
                .with(crate::otel::Attr::FilesBytes(bytes))
                .run(self.write_files_inner(files, options), crate::otel::nothing)
                .await
        })
    }

    /// Inside its span (see the public method).
    async fn write_files_inner(
        &self,
        files: Vec<WriteEntry>,
        options: WriteOptions,
    ) -> Result<Vec<EntryInfo>, SandboxError> {
        if files.is_empty() {
            return Err(SandboxError::invalid_argument(
                "files",
                "no files to write; pass at least one file",
            ));
        }
        for file in &files {
            crate::checks::file_path(&file.path)?;
        }
        let options = options.or_user(self.user);
        let checked = options.checked()?;
        options::require_agent_for(self.sandbox, options.gzipped(), &checked).await?;
        let count = files.len();
        let total: usize = files.iter().map(|f| f.data.len()).sum();
        let mut messages = Vec::new();
        for file in files {
            let mut chunks = slices(file.data);
            // The first message names the file and carries its first chunk
            // (possibly empty); the rest carry only chunks.
            messages.push(checked.first(file.path, chunks.next().unwrap_or_default()));
            messages.extend(chunks.map(|chunk| pb::WriteRequest {
                path: None,
                user: None,
                mode: None,
                chunk,
                metadata: Default::default(),
            }));
        }
        let response = self
            .sandbox
            .conn()
            .write_files(
                messages,
                deadline_for(self.timeout(), u64::try_from(total).unwrap_or(u64::MAX)),
                options.gzipped(),
            )
            .await?;
        if response.entries.len() != count {
            return Err(SandboxError::protocol_violation(
                "files.write",
                "the write answered a different number of entries than files sent",
            ));
        }
        Ok(response.entries.into_iter().map(entry_info).collect())
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
        boxed!(Result<Vec<EntryInfo>, SandboxError>, {
            self.op(crate::otel::Name::FilesList)
                .run(self.list_with_depth_inner(path, depth), |entries| {
                    vec![crate::otel::Attr::FilesCount(entries.len() as u64)]
                })
                .await
        })
    }

    /// Inside its span (see the public method).
    async fn list_with_depth_inner(
        &self,
        path: &str,
        depth: u32,
    ) -> Result<Vec<EntryInfo>, SandboxError> {
        crate::checks::path(path)?;
        let user = self.user_checked()?;
        let response = self
            .sandbox
            .conn()
            .list_dir(
                pb::ListDirRequest {
                    path: path.to_owned(),
                    depth: depth.max(1),
                    user,
                },
                self.timeout(),
            )
            .await?;
        Ok(response.entries.into_iter().map(entry_info).collect())
    }

    /// Whether something exists at `path`.
    ///
    /// # Errors
    /// Failures other than not-found.
    pub async fn exists(&self, path: &str) -> Result<bool, SandboxError> {
        boxed!(Result<bool, SandboxError>, {
            self.op(crate::otel::Name::FilesExists)
                .run(self.exists_inner(path), crate::otel::nothing)
                .await
        })
    }

    /// Inside its span (see the public method).
    async fn exists_inner(&self, path: &str) -> Result<bool, SandboxError> {
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
        boxed!(Result<EntryInfo, SandboxError>, {
            self.op(crate::otel::Name::FilesGetInfo)
                .run(self.get_info_inner(path), crate::otel::nothing)
                .await
        })
    }

    /// Inside its span (see the public method).
    async fn get_info_inner(&self, path: &str) -> Result<EntryInfo, SandboxError> {
        self.stat(path, "files.get_info").await
    }

    pub(crate) async fn stat(
        &self,
        path: &str,
        feature: &'static str,
    ) -> Result<EntryInfo, SandboxError> {
        crate::checks::path(path)?;
        let user = self.user_checked()?;
        let response = self
            .sandbox
            .conn()
            .stat(
                pb::StatRequest {
                    path: path.to_owned(),
                    user,
                },
                feature,
                self.timeout(),
            )
            .await?;
        response.entry.map(entry_info).ok_or_else(|| {
            SandboxError::protocol_violation("files.get_info", "stat answered no entry")
        })
    }

    /// Removes a file or a directory with everything in it.
    ///
    /// # Errors
    /// `FileNotFound`; transport failures.
    pub async fn remove(&self, path: &str) -> Result<(), SandboxError> {
        boxed!(Result<(), SandboxError>, {
            self.op(crate::otel::Name::FilesRemove)
                .run(self.remove_inner(path), crate::otel::nothing)
                .await
        })
    }

    /// Inside its span (see the public method).
    async fn remove_inner(&self, path: &str) -> Result<(), SandboxError> {
        crate::checks::path(path)?;
        let user = self.user_checked()?;
        self.sandbox
            .conn()
            .remove(
                pb::RemoveRequest {
                    path: path.to_owned(),
                    recursive: true,
                    user,
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
        boxed!(Result<EntryInfo, SandboxError>, {
            self.op(crate::otel::Name::FilesRename)
                .run(self.rename_inner(old, new), crate::otel::nothing)
                .await
        })
    }

    /// Inside its span (see the public method).
    async fn rename_inner(&self, old: &str, new: &str) -> Result<EntryInfo, SandboxError> {
        crate::checks::rename(old, new)?;
        let user = self.user_checked()?;
        let response = self
            .sandbox
            .conn()
            .move_path(
                pb::MoveRequest {
                    source: old.to_owned(),
                    destination: new.to_owned(),
                    user,
                },
                self.timeout(),
            )
            .await?;
        response.entry.map(entry_info).ok_or_else(|| {
            SandboxError::protocol_violation("files.rename", "move answered no entry")
        })
    }

    /// Creates a directory and its parents; `false` when it already existed.
    ///
    /// # Errors
    /// `InvalidArgument` when something else is already there; transport
    /// failures.
    pub async fn make_dir(&self, path: &str) -> Result<bool, SandboxError> {
        boxed!(Result<bool, SandboxError>, {
            self.op(crate::otel::Name::FilesMakeDir)
                .run(self.make_dir_inner(path), crate::otel::nothing)
                .await
        })
    }

    /// Inside its span (see the public method).
    async fn make_dir_inner(&self, path: &str) -> Result<bool, SandboxError> {
        crate::checks::path(path)?;
        let user = self.user_checked()?;
        let outcome = self
            .sandbox
            .conn()
            .make_dir(
                pb::MakeDirRequest {
                    path: path.to_owned(),
                    user,
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

/// What a whole read adds to its span: one file and its bytes.
fn one_file(bytes: usize) -> crate::otel::Learned {
    vec![
        crate::otel::Attr::FilesCount(1),
        crate::otel::Attr::FilesBytes(bytes as u64),
    ]
}

/// Where a read's bytes come from: the agent's Read stream, or a staged
/// object in S3.
#[allow(
    clippy::large_enum_variant,
    reason = "one per read, held in the read's boxed future or stream"
)]
enum Feed {
    Grpc(read::ReadFeed),
    Staged(Box<dyn staging::ChunkFeed>),
}

impl Feed {
    async fn next(&mut self) -> Option<Result<Bytes, SandboxError>> {
        match self {
            Self::Grpc(feed) => feed.next().await,
            Self::Staged(staged) => staged.next().await.transpose(),
        }
    }
}

/// The chunks of a file being read (from [`Files::read_stream`]). Dropping it
/// cancels the read.
pub struct FileChunks {
    inner: std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<Bytes, SandboxError>> + Send>>,
}

crate::secret::redacted_debug!(non_exhaustive FileChunks);

inner_stream!(FileChunks => Result<Bytes, SandboxError>);

/// The most [`Files::read`] reserves before the first byte arrives.
const MAX_READ_PREALLOC: u64 = 64 * 1024 * 1024;

/// A file larger than this process can hold in memory.
fn too_large_to_hold(size: u64) -> SandboxError {
    SandboxError::invalid_argument(
        "path",
        format!(
            "the file is {} bytes, more than this process can hold in memory; read it with files().read_stream",
            crate::error::group(size)
        ),
    )
}

/// The view's entry on the sandbox core (the core does not know the feature).
impl crate::sandbox::Sandbox {
    /// The sandbox's filesystem.
    pub fn files(&self) -> Files<'_> {
        Files::new(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_chunks_are_views_of_the_payload_and_clones_share_them() {
        let data = Bytes::from(vec![7u8; 2 * WRITE_CHUNK_BYTES + 5]);
        let base = data.as_ptr() as usize;
        let pieces: Vec<Bytes> = slices(data.clone()).collect();
        let lens: Vec<usize> = pieces.iter().map(Bytes::len).collect();
        assert_eq!(lens, [WRITE_CHUNK_BYTES, WRITE_CHUNK_BYTES, 5]);
        for (i, piece) in pieces.iter().enumerate() {
            // A view into the caller's buffer, not a copy of it.
            assert_eq!(piece.as_ptr() as usize, base + i * WRITE_CHUNK_BYTES);
        }
        // What a retry re-sends: the same bytes, not new ones.
        let again = pieces.clone();
        for (a, b) in pieces.iter().zip(&again) {
            assert_eq!(a.as_ptr(), b.as_ptr());
        }
        assert_eq!(slices(Bytes::new()).count(), 0);
    }
}
