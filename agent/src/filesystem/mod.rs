//! `rayito.v1.FilesystemService`: Read, Write, Stat, ListDir, MakeDir,
//! Remove and Move on the sandbox's view (`/home/user/**`, `/tmp/**`), and
//! WatchDir (inotify, `watch`), Checkpoint and Restore (`crate::persist`),
//! and the S3-staged transfers ([`crate::transfer`]).
//! Status messages never echo a path or file contents.

pub(crate) mod beneath;
pub(crate) mod disk;
mod info;
mod path;
mod target;
mod watch;
mod write;
mod xattrs;

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

pub(crate) use self::info::{entry_info, file_entry_info, io_status};
pub(crate) use self::path::check_working_dir;
pub(crate) use self::path::{Resolved, resolve};
pub(crate) use self::target::TargetDir;
pub(crate) use self::write::{known_user, owner_and_mode};
use crate::pb;
use crate::phase::Phase;
use crate::sandbox::SandboxEnv;

/// Bytes per ReadResponse.
const READ_CHUNK: usize = 256 * 1024;
/// Most entries one ListDir returns.
const MAX_LIST_ENTRIES: usize = 10_000;

/// `rayito.v1.FilesystemService`.
#[derive(Clone, Debug)]
pub(crate) struct FilesystemServiceImpl {
    pub(crate) env: SandboxEnv,
    pub(crate) phase: crate::phase::PhaseCell,
    /// Bytes a Write leaves free on the disk.
    pub(crate) disk_reserve: Arc<std::sync::atomic::AtomicU64>,
    /// Checkpoint and Restore: the one-at-a-time guard and the access.
    pub(crate) persist: Arc<crate::persist::Persist>,
    /// The S3-staged transfers and what they write with.
    pub(crate) transfer: crate::transfer::Context,
    /// Serves the persistence and transfer RPCs (`AgentConfig::transfers`);
    /// `false` answers them UNIMPLEMENTED, as an agent built before them.
    pub(crate) transfers: bool,
}

impl FilesystemServiceImpl {
    /// What Checkpoint and Restore use of this service's state.
    fn persist_scope(&self) -> crate::persist::Scope<'_> {
        crate::persist::Scope {
            persist: &self.persist,
            env: &self.env,
            phase: &self.phase,
            disk_reserve: &self.disk_reserve,
        }
    }
}

/// What an agent without transfers answers for each of their seven RPCs:
/// a bare UNIMPLEMENTED, as tonic answers a method its service lacks.
fn without_transfers(transfers: bool) -> Result<(), Status> {
    if transfers {
        Ok(())
    } else {
        Err(Status::unimplemented(""))
    }
}

type BoxStream<T> = std::pin::Pin<Box<dyn futures_util::Stream<Item = Result<T, Status>> + Send>>;

fn io(e: std::io::Error) -> Status {
    io_status(&e)
}

/// Opens a regular file for reading without following a final symlink, as
/// the sandbox user, by descriptor from its directory ([`TargetDir`]): a
/// directory on the way that sandbox code swapped for a symlink since the
/// check leads nowhere outside the view.
#[allow(clippy::result_large_err)]
pub(crate) async fn open_regular(
    env: &SandboxEnv,
    host: &std::path::Path,
) -> Result<tokio::fs::File, Status> {
    let file = env.as_user(|| TargetDir::existing(env, host)?.open_file().map_err(io))?;
    let file = tokio::fs::File::from_std(file);
    let md = file.metadata().await.map_err(io)?;
    if md.is_dir() {
        return Err(Status::invalid_argument("is a directory"));
    }
    if !md.is_file() {
        return Err(Status::invalid_argument("not a regular file"));
    }
    Ok(file)
}

/// Lists `host` (guest `guest`) down to `depth` levels, never following symlinks.
#[allow(clippy::result_large_err)]
fn list(
    guest: &str,
    host: &std::path::Path,
    depth: u32,
    out: &mut Vec<pb::EntryInfo>,
) -> Result<(), Status> {
    let mut names: Vec<_> = std::fs::read_dir(host)
        .map_err(io)?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    names.sort();
    for name in names {
        let name = name.to_string_lossy().into_owned();
        let child_guest = format!("{}/{name}", guest.trim_end_matches('/'));
        let child_host = host.join(&name);
        let Ok(entry) = entry_info(&child_guest, &child_host) else {
            continue;
        };
        let is_dir = entry.r#type == pb::FileType::Directory as i32;
        out.push(entry);
        if out.len() > MAX_LIST_ENTRIES {
            return Err(Status::resource_exhausted("too many entries"));
        }
        if is_dir && depth > 1 {
            list(&child_guest, &child_host, depth - 1, out)?;
        }
    }
    Ok(())
}

#[tonic::async_trait]
impl pb::filesystem_service_server::FilesystemService for FilesystemServiceImpl {
    type ReadStream = BoxStream<pb::ReadResponse>;
    type WatchDirStream = BoxStream<pb::WatchDirResponse>;
    type CheckpointStream = BoxStream<pb::CheckpointEvent>;
    type RestoreStream = BoxStream<pb::RestoreEvent>;
    type WatchTransferStream = BoxStream<pb::TransferEvent>;

    async fn read(
        &self,
        r: Request<pb::ReadRequest>,
    ) -> Result<Response<Self::ReadStream>, Status> {
        let req = r.into_inner();
        known_user(req.user.as_ref().map(|u| u.username.as_str()))?;
        let target = resolve(&self.env, &req.path)?;
        let file = open_regular(&self.env, &target.host).await?;
        let mut file = file.into_std().await;
        let (tx, rx) = mpsc::channel(4);
        let phase = self.phase.subscribe();
        // One blocking thread reads the whole file straight into the buffer
        // each chunk is frozen out of (no copy through an async file's own
        // buffer, no hop to the blocking pool per chunk); the channel keeps
        // at most four chunks ahead of the client.
        tokio::task::spawn_blocking(move || {
            use std::io::Read as _;
            let mut buf = bytes::BytesMut::new();
            loop {
                let gate = *phase.borrow();
                if matches!(gate, Phase::Suspending | Phase::Expired) {
                    let _ = tx.blocking_send(Err(gate.gate_status().expect("gated")));
                    return;
                }
                buf.resize(READ_CHUNK, 0);
                match file.read(&mut buf) {
                    Ok(0) => return,
                    Ok(n) => {
                        buf.truncate(n);
                        let msg = pb::ReadResponse {
                            chunk: buf.split().freeze(),
                        };
                        if tx.blocking_send(Ok(msg)).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let _ = tx.blocking_send(Err(io(e)));
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn write(
        &self,
        r: Request<Streaming<pb::WriteRequest>>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        write::write(self, r.into_inner()).await.map(Response::new)
    }

    async fn stat(
        &self,
        r: Request<pb::StatRequest>,
    ) -> Result<Response<pb::StatResponse>, Status> {
        let req = r.into_inner();
        known_user(req.user.as_ref().map(|u| u.username.as_str()))?;
        let target = resolve(&self.env, &req.path)?;
        let entry = self
            .env
            .as_user(|| entry_info(&target.guest, &target.host))
            .map_err(io)?;
        Ok(Response::new(pb::StatResponse { entry: Some(entry) }))
    }

    async fn list_dir(
        &self,
        r: Request<pb::ListDirRequest>,
    ) -> Result<Response<pb::ListDirResponse>, Status> {
        let req = r.into_inner();
        known_user(req.user.as_ref().map(|u| u.username.as_str()))?;
        let target = resolve(&self.env, &req.path)?;
        let env = self.env.clone();
        let depth = req.depth.max(1);
        let entries = tokio::task::spawn_blocking(move || {
            env.as_user(|| {
                let md = std::fs::symlink_metadata(&target.host).map_err(io)?;
                if !md.is_dir() {
                    return Err(Status::invalid_argument("not a directory"));
                }
                let mut out = Vec::new();
                list(&target.guest, &target.host, depth, &mut out).map(|()| out)
            })
        })
        .await
        .map_err(|_| Status::internal("listing failed"))??;
        Ok(Response::new(pb::ListDirResponse { entries }))
    }

    async fn make_dir(
        &self,
        r: Request<pb::MakeDirRequest>,
    ) -> Result<Response<pb::MakeDirResponse>, Status> {
        let req = r.into_inner();
        known_user(req.user.as_ref().map(|u| u.username.as_str()))?;
        let target = resolve(&self.env, &req.path)?;
        let entry = self.env.as_user(|| {
            if let Ok(md) = std::fs::symlink_metadata(&target.host) {
                return Err(if md.is_dir() {
                    Status::already_exists("directory already exists")
                } else {
                    Status::invalid_argument("something else exists at the path")
                });
            }
            std::fs::create_dir_all(&target.host).map_err(|e| match e.raw_os_error() {
                Some(libc::EEXIST) => Status::invalid_argument("not a directory"),
                _ => io(e),
            })?;
            entry_info(&target.guest, &target.host).map_err(io)
        })?;
        Ok(Response::new(pb::MakeDirResponse { entry: Some(entry) }))
    }

    async fn r#move(
        &self,
        r: Request<pb::MoveRequest>,
    ) -> Result<Response<pb::MoveResponse>, Status> {
        let req = r.into_inner();
        known_user(req.user.as_ref().map(|u| u.username.as_str()))?;
        let source = resolve(&self.env, &req.source)?;
        let destination = resolve(&self.env, &req.destination)?;
        if source.is_view_root() || destination.is_view_root() {
            return Err(Status::permission_denied("path not allowed"));
        }
        let entry = self.env.as_user(|| {
            std::fs::symlink_metadata(&source.host).map_err(io)?;
            if let Some(parent) = destination.host.parent() {
                std::fs::create_dir_all(parent).map_err(io)?;
            }
            std::fs::rename(&source.host, &destination.host).map_err(io)?;
            entry_info(&destination.guest, &destination.host).map_err(io)
        })?;
        Ok(Response::new(pb::MoveResponse { entry: Some(entry) }))
    }

    async fn remove(
        &self,
        r: Request<pb::RemoveRequest>,
    ) -> Result<Response<pb::RemoveResponse>, Status> {
        let req = r.into_inner();
        known_user(req.user.as_ref().map(|u| u.username.as_str()))?;
        let target = resolve(&self.env, &req.path)?;
        if target.is_view_root() {
            return Err(Status::permission_denied("path not allowed"));
        }
        let env = self.env.clone();
        let recursive = req.recursive;
        // A recursive removal can take a while: off the runtime's threads.
        tokio::task::spawn_blocking(move || {
            env.as_user(|| {
                let md = std::fs::symlink_metadata(&target.host).map_err(io)?;
                let result = if !md.is_dir() {
                    std::fs::remove_file(&target.host)
                } else if recursive {
                    std::fs::remove_dir_all(&target.host)
                } else {
                    std::fs::remove_dir(&target.host)
                };
                result.map_err(|e| match e.raw_os_error() {
                    Some(libc::ENOTEMPTY) => Status::failed_precondition("directory not empty"),
                    _ => io(e),
                })
            })
        })
        .await
        .map_err(|_| Status::internal("removal failed"))??;
        Ok(Response::new(pb::RemoveResponse {}))
    }

    async fn watch_dir(
        &self,
        r: Request<pb::WatchDirRequest>,
    ) -> Result<Response<Self::WatchDirStream>, Status> {
        let req = r.into_inner();
        known_user(req.user.as_ref().map(|u| u.username.as_str()))?;
        let target = resolve(&self.env, &req.path)?;
        let rx = watch::start(
            self.env.clone(),
            self.phase.clone(),
            target,
            req.recursive,
            req.include_entry,
        )?;
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
    async fn checkpoint(
        &self,
        r: Request<pb::CheckpointRequest>,
    ) -> Result<Response<Self::CheckpointStream>, Status> {
        without_transfers(self.transfers)?;
        let stream = crate::persist::checkpoint(&self.persist_scope(), r.into_inner()).await?;
        Ok(Response::new(Box::pin(stream)))
    }
    async fn restore(
        &self,
        r: Request<pb::RestoreRequest>,
    ) -> Result<Response<Self::RestoreStream>, Status> {
        without_transfers(self.transfers)?;
        let stream = crate::persist::restore(&self.persist_scope(), r.into_inner()).await?;
        Ok(Response::new(Box::pin(stream)))
    }
    async fn start_import(
        &self,
        r: Request<pb::StartImportRequest>,
    ) -> Result<Response<pb::StartTransferResponse>, Status> {
        without_transfers(self.transfers)?;
        let transfer_id = crate::transfer::start_import(&self.transfer, r.into_inner()).await?;
        Ok(Response::new(pb::StartTransferResponse { transfer_id }))
    }
    async fn start_export(
        &self,
        r: Request<pb::StartExportRequest>,
    ) -> Result<Response<pb::StartTransferResponse>, Status> {
        without_transfers(self.transfers)?;
        let transfer_id = crate::transfer::start_export(&self.transfer, r.into_inner()).await?;
        Ok(Response::new(pb::StartTransferResponse { transfer_id }))
    }
    async fn get_transfer(
        &self,
        r: Request<pb::GetTransferRequest>,
    ) -> Result<Response<pb::TransferState>, Status> {
        without_transfers(self.transfers)?;
        crate::transfer::get(&self.transfer, &r.into_inner().transfer_id).map(Response::new)
    }
    async fn watch_transfer(
        &self,
        r: Request<pb::WatchTransferRequest>,
    ) -> Result<Response<Self::WatchTransferStream>, Status> {
        without_transfers(self.transfers)?;
        let rx = crate::transfer::watch(&self.transfer, &r.into_inner().transfer_id)?;
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
    async fn cancel_transfer(
        &self,
        r: Request<pb::CancelTransferRequest>,
    ) -> Result<Response<pb::CancelTransferResponse>, Status> {
        without_transfers(self.transfers)?;
        crate::transfer::cancel(&self.transfer, &r.into_inner().transfer_id)?;
        Ok(Response::new(pb::CancelTransferResponse {}))
    }
}

/// A sandbox view rooted in a fresh temporary directory (removed with the
/// guard), for the unit tests of this folder.
#[cfg(test)]
fn test_env() -> (tempfile::TempDir, SandboxEnv) {
    let dir = tempfile::tempdir().unwrap();
    let env = SandboxEnv::new(dir.path()).unwrap();
    (dir, env)
}
