//! `Write`: a client stream of one or more files. Each file is written to a
//! `.rayito-tmp-*` sibling, fsynced, chmodded and renamed over the target,
//! so a failed or interrupted write leaves the target intact.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::AsyncWriteExt as _;
use tonic::{Status, Streaming};

use super::info::{entry_info, io_status};
use super::path::{Resolved, resolve};
use crate::pb;
use crate::phase::Phase;
use crate::state::Shared;

/// Largest chunk in one message.
const MAX_CHUNK: usize = 1 << 20;
/// Mode of a new file when the first message gives none.
const DEFAULT_MODE: u32 = 0o644;
/// How long the rest of an aborted stream is drained.
const ABORT_DRAIN: Duration = Duration::from_millis(200);

/// The file being written.
struct Open {
    target: Resolved,
    temp: PathBuf,
    file: tokio::fs::File,
    mode: u32,
}

impl Open {
    async fn commit(mut self) -> Result<pb::EntryInfo, Status> {
        let result = async {
            self.file.flush().await?;
            self.file.sync_all().await?;
            use std::os::unix::fs::PermissionsExt as _;
            tokio::fs::set_permissions(&self.temp, std::fs::Permissions::from_mode(self.mode))
                .await?;
            tokio::fs::rename(&self.temp, &self.target.host).await
        }
        .await;
        if let Err(e) = result {
            let _ = tokio::fs::remove_file(&self.temp).await;
            return Err(io_status(&e));
        }
        entry_info(&self.target.guest, &self.target.host).map_err(|e| io_status(&e))
    }

    async fn abort(self) {
        drop(self.file);
        let _ = tokio::fs::remove_file(&self.temp).await;
    }
}

/// Runs one Write stream to its response.
pub(crate) async fn write(
    shared: &Shared,
    mut stream: Streaming<pb::WriteRequest>,
) -> Result<pb::WriteResponse, Status> {
    let mut phase = shared.phase.subscribe();
    let mut open: Option<Open> = None;
    let mut entries = Vec::new();
    let outcome: Result<(), Status> = loop {
        let msg = tokio::select! {
            m = stream.message() => m,
            _ = phase.changed() => {
                let now = *phase.borrow_and_update();
                match now {
                    Phase::Suspending | Phase::Expired => {
                        break Err(now.gate_status().expect("gated phase"));
                    }
                    Phase::Running | Phase::Terminating => continue,
                }
            }
        };
        let msg = match msg {
            Ok(Some(m)) => m,
            Ok(None) => break Ok(()),
            Err(status) => break Err(status),
        };
        if let Err(e) = handle(shared, msg, &mut open, &mut entries).await {
            break Err(e);
        }
    };
    match outcome {
        Ok(()) => {
            if let Some(file) = open.take() {
                entries.push(file.commit().await?);
            }
            if entries.is_empty() {
                return Err(Status::invalid_argument("no files in the stream"));
            }
            Ok(pb::WriteResponse { entries })
        }
        Err(status) => {
            if let Some(file) = open.take() {
                file.abort().await;
            }
            // Drain a little so that the refusal reaches the client as a status.
            let _ = tokio::time::timeout(ABORT_DRAIN, async {
                while let Ok(Some(_)) = stream.message().await {}
            })
            .await;
            Err(status)
        }
    }
}

async fn handle(
    shared: &Shared,
    msg: pb::WriteRequest,
    open: &mut Option<Open>,
    entries: &mut Vec<pb::EntryInfo>,
) -> Result<(), Status> {
    if msg.chunk.len() > MAX_CHUNK {
        return Err(Status::invalid_argument("chunk larger than 1 MiB"));
    }
    match msg.path {
        Some(path) => {
            if let Some(prev) = open.take() {
                entries.push(prev.commit().await?);
            }
            if !msg.metadata.is_empty() {
                return Err(Status::failed_precondition(
                    "file metadata is not supported by the local agent",
                ));
            }
            if let Some(user) = &msg.user
                && !matches!(user.username.as_str(), "" | "user")
            {
                return Err(Status::invalid_argument("unknown user"));
            }
            let mode = msg.mode.unwrap_or(DEFAULT_MODE);
            if mode > 0o7777 {
                return Err(Status::invalid_argument("invalid mode"));
            }
            let target = resolve(&shared.env, &path)?;
            *open = Some(begin(shared, target, mode).await?);
        }
        None => {
            if msg.mode.is_some() || msg.user.is_some() || !msg.metadata.is_empty() {
                return Err(Status::invalid_argument(
                    "mode, user or metadata without a path",
                ));
            }
        }
    }
    let Some(file) = open.as_mut() else {
        return Err(Status::invalid_argument("first message has no path"));
    };
    if !msg.chunk.is_empty() {
        file.file
            .write_all(&msg.chunk)
            .await
            .map_err(|e| io_status(&e))?;
    }
    Ok(())
}

/// Creates parents, checks the reserve and opens the temp file.
async fn begin(shared: &Shared, target: Resolved, mode: u32) -> Result<Open, Status> {
    if target.is_view_root() {
        return Err(Status::invalid_argument("is a directory"));
    }
    let parent = target
        .host
        .parent()
        .ok_or_else(|| Status::invalid_argument("invalid path"))?
        .to_path_buf();
    if let Err(e) = shared.env.create_dirs(&parent).await {
        return Err(match e.raw_os_error() {
            Some(libc::EEXIST) | Some(libc::ENOTDIR) => Status::invalid_argument("not a directory"),
            _ => io_status(&e),
        });
    }
    if let Ok(md) = tokio::fs::symlink_metadata(&target.host).await
        && md.is_dir()
    {
        return Err(Status::invalid_argument("is a directory"));
    }
    let reserve = shared.disk_reserve.load(Ordering::Relaxed);
    let free = super::disk::available_bytes(&parent).map_err(|e| io_status(&e))?;
    if free < reserve {
        return Err(Status::resource_exhausted("disk_reserve"));
    }
    let temp = parent.join(format!(".rayito-tmp-{:016x}", rand::random::<u64>()));
    let file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .await
        .map_err(|e| io_status(&e))?;
    // Commands and kernels run under the sandbox's uid: they must be able
    // to rewrite what a file RPC wrote.
    if let Err(e) = shared.env.adopt(&temp) {
        let _ = tokio::fs::remove_file(&temp).await;
        return Err(io_status(&e));
    }
    Ok(Open {
        target,
        temp,
        file,
        mode,
    })
}
