//! `rayito sandbox files put|get|ls`: files and directories in and out,
//! streamed (a few chunks in memory, never a whole file), with a progress
//! bar on a terminal; through S3 at or above the staging threshold when
//! RAYITO_TRANSFER_BUCKET configures one (the SDK's automatic staging).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use clap::Subcommand;
use futures_util::StreamExt as _;
use rayito::{EntryInfo, FileType, Sandbox};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::Format;
use crate::commands::{Backend, Failure};
use crate::output;
use crate::progress::Progress;

/// Bytes read from a local file per chunk sent.
const CHUNK: usize = 256 * 1024;
/// How deep `get --recursive` lists (symlinks are never followed).
const MAX_DEPTH: u32 = 64;

/// The file subcommands.
#[derive(Debug, Subcommand)]
pub enum FilesCommand {
    /// Uploads a local file (or, with --recursive, a directory), streamed;
    /// parents are created, an existing file is replaced.
    Put {
        /// The sandbox id.
        id: String,
        /// The file (or directory) on this machine.
        #[arg(value_name = "LOCAL_PATH")]
        host_path: PathBuf,
        /// Its path in the sandbox.
        remote: String,
        /// Upload a directory: its files and subdirectories under REMOTE
        /// (symlinks and special files are skipped, with a note).
        #[arg(short, long)]
        recursive: bool,
    },
    /// Downloads a file, streamed (to stdout when no local path is given),
    /// or with --recursive a directory.
    Get {
        /// The sandbox id.
        id: String,
        /// Its path in the sandbox.
        remote: String,
        /// The file (or directory) on this machine; a file appears only
        /// once it is complete.
        #[arg(value_name = "LOCAL_PATH", required_if_eq("recursive", "true"))]
        host_path: Option<PathBuf>,
        /// Download a directory: its files and subdirectories under
        /// LOCAL_PATH (symlinks and special files are skipped, with a note).
        #[arg(short, long)]
        recursive: bool,
    },
    /// Lists a directory.
    Ls {
        /// The sandbox id.
        id: String,
        /// The directory in the sandbox.
        #[arg(default_value = "/home/user")]
        path: String,
    },
}

impl FilesCommand {
    /// The sandbox the files are in or go to.
    pub fn sandbox_id(&self) -> Option<String> {
        match self {
            FilesCommand::Put { id, .. }
            | FilesCommand::Get { id, .. }
            | FilesCommand::Ls { id, .. } => {
                Some(crate::ids::complete(id).unwrap_or_else(|_| id.clone()))
            }
        }
    }
}

/// An entry as JSON.
pub(crate) fn entry_json(entry: &EntryInfo) -> Value {
    json!({
        "name": entry.name,
        "path": entry.path,
        "type": format!("{:?}", entry.file_type).to_lowercase(),
        "size": entry.size,
        "permissions": entry.permissions,
        "modified_time": output::unix(entry.modified_time),
    })
}

fn local_failure(action: &str, path: &Path, err: &std::io::Error) -> Failure {
    Failure::Cli(format!("cannot {action} {}: {err}", path.display()))
}

impl FilesCommand {
    /// The path in the sandbox the command is about.
    fn remote_path(&self) -> &str {
        match self {
            FilesCommand::Put { remote, .. } | FilesCommand::Get { remote, .. } => remote,
            FilesCommand::Ls { path, .. } => path,
        }
    }
}

/// Runs one files subcommand; an SDK error about its file names the path
/// in the sandbox (the SDK's messages never do).
pub(crate) async fn run(
    backend: &Backend,
    format: Format,
    command: FilesCommand,
) -> Result<i32, Failure> {
    let remote = command.remote_path().to_owned();
    run_command(backend, format, command)
        .await
        .map_err(|failure| match failure {
            Failure::Sdk(err) if err.kind() != rayito::ErrorKind::SandboxNotFound => {
                Failure::SdkAt(err, remote)
            }
            other => other,
        })
}

async fn run_command(
    backend: &Backend,
    format: Format,
    command: FilesCommand,
) -> Result<i32, Failure> {
    match command {
        FilesCommand::Put {
            id,
            host_path,
            remote,
            recursive,
        } => {
            let meta = tokio::fs::metadata(&host_path)
                .await
                .map_err(|err| local_failure("read", &host_path, &err))?;
            if meta.is_dir() && !recursive {
                return Err(Failure::Cli(format!(
                    "{} is a directory: pass --recursive to upload it",
                    host_path.display()
                )));
            }
            let sandbox = backend.connect(&id).await?;
            if meta.is_dir() {
                put_tree(&sandbox, format, &host_path, &remote).await
            } else {
                let progress = Progress::new(format, meta.len());
                let entry = put_file(&sandbox, &host_path, &remote, &progress).await;
                progress.finish();
                let entry = entry?;
                match format {
                    Format::Json => output::json(&entry_json(&entry)),
                    Format::Text => outln!("{} ({} bytes)", entry.path, entry.size),
                }
                Ok(0)
            }
        }
        FilesCommand::Get {
            id,
            remote,
            host_path,
            recursive,
        } => {
            let sandbox = backend.connect(&id).await?;
            match host_path {
                Some(local) if recursive => get_tree(&sandbox, format, &remote, &local).await,
                Some(local) => {
                    let info = sandbox.files().get_info(&remote).await?;
                    let progress = Progress::new(format, info.size);
                    let size = get_file(&sandbox, &remote, &local, &progress).await;
                    progress.finish();
                    let size = size?;
                    match format {
                        Format::Json => output::json(&json!({ "path": remote, "size": size })),
                        Format::Text => outln!("{} ({size} bytes)", local.display()),
                    }
                    Ok(0)
                }
                None if format == Format::Json => {
                    // One JSON document holds the content: it is read whole.
                    let data = sandbox.files().read(&remote).await?;
                    let (content, encoding) = output::bytes_json(&data);
                    output::json(&json!({
                        "path": remote,
                        "size": data.len(),
                        "content": content,
                        "encoding": encoding,
                    }));
                    Ok(0)
                }
                None => {
                    let mut chunks = sandbox.files().read_stream(&remote).await?;
                    while let Some(chunk) = chunks.next().await {
                        // A reader that went away (`| head`) stops it
                        // quietly (0); any other failure is said (1).
                        if let Err(err) = output::write_bytes(&chunk?) {
                            return Ok(output::stdout_failed(&err));
                        }
                    }
                    Ok(0)
                }
            }
        }
        FilesCommand::Ls { id, path } => {
            let sandbox = backend.connect(&id).await?;
            let entries = sandbox.files().list(&path).await?;
            match format {
                Format::Json => {
                    output::json(&Value::Array(entries.iter().map(entry_json).collect()));
                }
                Format::Text => {
                    for e in &entries {
                        outln!("{}\t{}\t{}", e.permissions, e.size, e.path);
                    }
                }
            }
            Ok(0)
        }
    }
}

/// Uploads one local file to `remote`. Below the staging threshold (when
/// staging is on) it is sent in one write; otherwise as a stream, which
/// staging sends through S3. A local read that fails midway ends the
/// stream: the partial file is then removed and the failure returned.
async fn put_file(
    sandbox: &Sandbox,
    host: &Path,
    remote: &str,
    progress: &Progress,
) -> Result<EntryInfo, Failure> {
    let mut file = tokio::fs::File::open(host)
        .await
        .map_err(|err| local_failure("read", host, &err))?;
    let size = file
        .metadata()
        .await
        .map_err(|err| local_failure("read", host, &err))?
        .len();
    progress.file(&host.display().to_string());
    if let Some(staging) = sandbox.staging()
        && size < staging.threshold_bytes
    {
        // Small enough to hold (at most the threshold, 1 MiB to 5 GiB as
        // configured); the SDK sends it without S3. A file that grows
        // while it is read is taken at the size it had, never more.
        let mut data = Vec::new();
        (&mut file)
            .take(size)
            .read_to_end(&mut data)
            .await
            .map_err(|err| local_failure("read", host, &err))?;
        progress.add(data.len());
        return Ok(sandbox.files().write(remote, data).await?);
    }
    let failed: Arc<Mutex<Option<std::io::Error>>> = Arc::default();
    let chunks = futures_util::stream::unfold(
        (file, progress.clone(), failed.clone()),
        |(mut file, progress, failed)| async move {
            let mut buf = vec![0u8; CHUNK];
            match file.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    progress.add(n);
                    Some((buf, (file, progress, failed)))
                }
                Err(err) => {
                    *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(err);
                    None
                }
            }
        },
    );
    let written = sandbox.files().write_stream(remote, chunks).await;
    let read_error = failed.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(err) = read_error {
        if written.is_ok() {
            let _ = sandbox.files().remove(remote).await;
        }
        return Err(local_failure("read", host, &err));
    }
    Ok(written?)
}

/// Downloads `remote` to `local` through a sibling `.<name>.rayito-part`
/// renamed over it once complete (removed on failure); returns the size.
async fn get_file(
    sandbox: &Sandbox,
    remote: &str,
    local: &Path,
    progress: &Progress,
) -> Result<u64, Failure> {
    let name = local
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "download".to_owned());
    let part = local.with_file_name(format!(".{name}.rayito-part"));
    progress.file(remote);
    let outcome = async {
        let mut chunks = sandbox.files().read_stream(remote).await?;
        let mut out = tokio::fs::File::create(&part)
            .await
            .map_err(|err| local_failure("write", local, &err))?;
        let mut size = 0u64;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk?;
            out.write_all(&chunk)
                .await
                .map_err(|err| local_failure("write", local, &err))?;
            progress.add(chunk.len());
            size += chunk.len() as u64;
        }
        out.flush()
            .await
            .map_err(|err| local_failure("write", local, &err))?;
        drop(out);
        tokio::fs::rename(&part, local)
            .await
            .map_err(|err| local_failure("write", local, &err))?;
        Ok::<u64, Failure>(size)
    }
    .await;
    if outcome.is_err() {
        let _ = tokio::fs::remove_file(&part).await;
    }
    outcome
}

/// What `put --recursive` uploads: paths relative to the root,
/// '/'-joined.
struct LocalTree {
    /// Every directory, parents before children.
    dirs: Vec<String>,
    /// Every regular file and its size.
    files: Vec<(String, u64)>,
}

/// The files and directories under `root`; symlinks and special files are
/// noted and skipped.
fn local_tree(root: &Path) -> Result<LocalTree, Failure> {
    let mut dirs = Vec::new();
    let mut files = Vec::new();
    let mut todo = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = todo.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|err| local_failure("read", &dir, &err))?;
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let child_rel = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|err| local_failure("read", &path, &err))?;
            if meta.is_dir() {
                dirs.push(child_rel.clone());
                todo.push((path, child_rel));
            } else if meta.is_file() {
                files.push((child_rel, meta.len()));
            } else {
                output::note(&format!("skipped {} (not a regular file)", path.display()));
            }
        }
    }
    Ok(LocalTree { dirs, files })
}

fn join_remote(root: &str, rel: &str) -> String {
    format!("{}/{rel}", root.trim_end_matches('/'))
}

/// `put --recursive`: the directories, then each file, streamed.
async fn put_tree(
    sandbox: &Sandbox,
    format: Format,
    root: &Path,
    remote: &str,
) -> Result<i32, Failure> {
    let LocalTree { dirs, files } = local_tree(root)?;
    let total: u64 = files.iter().map(|(_, size)| size).sum();
    sandbox.files().make_dir(remote).await?;
    for dir in &dirs {
        sandbox.files().make_dir(&join_remote(remote, dir)).await?;
    }
    let progress = Progress::new(format, total);
    let mut entries = Vec::new();
    for (rel, _) in &files {
        let host = root.join(rel);
        let entry = put_file(sandbox, &host, &join_remote(remote, rel), &progress).await;
        let entry = match entry {
            Ok(entry) => entry,
            Err(err) => {
                progress.finish();
                return Err(err);
            }
        };
        if format == Format::Text {
            progress.finish_line(&format!("{} ({} bytes)", entry.path, entry.size));
        }
        entries.push(entry);
    }
    progress.finish();
    if format == Format::Json {
        output::json(&json!({
            "path": remote,
            "directories": dirs.len(),
            "files": entries.iter().map(entry_json).collect::<Vec<_>>(),
            "bytes": total,
        }));
    }
    Ok(0)
}

/// `get --recursive`: the directory's tree, then each file, streamed.
async fn get_tree(
    sandbox: &Sandbox,
    format: Format,
    remote: &str,
    local: &Path,
) -> Result<i32, Failure> {
    let entries = sandbox.files().list_with_depth(remote, MAX_DEPTH).await?;
    let prefix = format!("{}/", remote.trim_end_matches('/'));
    std::fs::create_dir_all(local).map_err(|err| local_failure("write", local, &err))?;
    let mut files = Vec::new();
    let mut dirs = 0usize;
    let mut total = 0u64;
    for entry in &entries {
        // Only what lies under REMOTE, as a relative path without `..`.
        let Some(rel) = entry.path.strip_prefix(&prefix) else {
            continue;
        };
        if rel
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
        {
            continue;
        }
        match entry.file_type {
            FileType::Directory => {
                let dir = local.join(rel);
                std::fs::create_dir_all(&dir).map_err(|err| local_failure("write", &dir, &err))?;
                dirs += 1;
            }
            FileType::File => {
                total += entry.size;
                files.push((entry.path.clone(), local.join(rel)));
            }
            _ => output::note(&format!("skipped {} (not a regular file)", entry.path)),
        }
    }
    let progress = Progress::new(format, total);
    let mut got = Vec::new();
    for (path, host) in &files {
        if let Some(parent) = host.parent() {
            std::fs::create_dir_all(parent).map_err(|err| local_failure("write", parent, &err))?;
        }
        let size = match get_file(sandbox, path, host, &progress).await {
            Ok(size) => size,
            Err(err) => {
                progress.finish();
                return Err(err);
            }
        };
        if format == Format::Text {
            progress.finish_line(&format!("{} ({size} bytes)", host.display()));
        }
        got.push(json!({ "path": path, "local_path": host.display().to_string(), "size": size }));
    }
    progress.finish();
    if format == Format::Json {
        output::json(&json!({
            "path": remote,
            "directories": dirs,
            "files": got,
            "bytes": total,
        }));
    }
    Ok(0)
}
