//! Restore: the manifest, then the archive downloaded into an unnamed
//! file, its length and sha256 checked, the tar stream read through once
//! within the limits without writing, and only then extracted into HOME.
//! A tampered, truncated or hostile archive is refused before any file of
//! it lands in HOME (see docs/persistence.md: the sha256 is an integrity
//! check, not authentication).
//!
//! What bounds the work: the download is at most the manifest's
//! `archive_bytes`, which must fit the disk beyond the reserve and be no
//! more than a checkpoint can write; the tar stream is read with the caps
//! of [`tar_read`] (64 KiB per extension header, 500,000 header blocks,
//! bodies adding up to the free disk beyond the reserve, measured, not
//! taken from the manifest).

use std::fs::File;
use std::io::{self, Read, Seek as _};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http_body_util::BodyExt as _;
use rayito_proto::tokens::{detail, stream_code};
use rustix::fs::{Mode, OFlags};
use sha2::{Digest as _, Sha256};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use super::archive::{self, Counters, ExtractError};
use super::s3::S3Failure;
use super::tar_read::{self, ReadError};
use super::{
    EventStream, Failure, Job, MAX_MANIFEST_BYTES, MAX_PARTS, PART_BYTES, Scope, StopOnDrop, ev_r,
    hex, internal, manifest, messages, phase_gate, progress_interval, s3_failure, validate,
};
use crate::pb;
use crate::sandbox::GUEST_HOME;

/// The largest archive a checkpoint can write (S3's most parts of ours).
const MAX_ARCHIVE_BYTES: u64 = MAX_PARTS as u64 * PART_BYTES as u64;
/// Decompressed bytes accepted after the end-of-archive block (tar's
/// padding to its record size).
const MAX_TRAILER_BYTES: u64 = 1024 * 1024;

/// Restore: checks the request, takes the guard, finds credentials, reads
/// the manifest (NOT_FOUND without one), checks its archive's size against
/// the limits and the disk, then streams the download and the extraction.
///
/// # Errors
/// As [`super::checkpoint`], plus NOT_FOUND (no checkpoint),
/// PERMISSION_DENIED (S3 refused the manifest), RESOURCE_EXHAUSTED
/// `disk_reserve` (the archive and its files would not fit and leave the
/// agent's disk reserve) or [`messages::TOO_LARGE`] (a larger archive than
/// a checkpoint writes), and INTERNAL (a manifest not understood, S3
/// failing).
pub(crate) async fn restore(
    scope: &Scope<'_>,
    req: pb::RestoreRequest,
) -> Result<EventStream<pb::RestoreEvent>, Status> {
    let loc = validate::location("source", req.source.as_ref())?;
    validate::user(req.user.as_ref())?;
    let busy = scope.persist.acquire()?;
    let bucket = scope.persist.bucket(&loc).await?;
    let manifest = match bucket
        .get_small(&loc.manifest_key(), MAX_MANIFEST_BYTES)
        .await
    {
        Ok(body) => manifest::Manifest::parse(&body)
            .ok_or_else(|| Status::internal(messages::BAD_MANIFEST))?,
        Err(S3Failure::NoSuchKey | S3Failure::NoSuchBucket) => {
            return Err(Status::not_found(messages::NO_CHECKPOINT));
        }
        Err(S3Failure::Denied) => return Err(Status::permission_denied(messages::DENIED)),
        Err(S3Failure::Failed) => return Err(Status::internal(messages::S3_FAILED)),
    };
    if manifest.archive_bytes > MAX_ARCHIVE_BYTES {
        return Err(Status::resource_exhausted(messages::TOO_LARGE));
    }
    // The archive is staged on HOME's disk, then its files written there:
    // both must fit and leave the reserve a Write leaves. (The manifest's
    // `bytes` is only a first guess: the extraction measures again.)
    let reserve = scope.disk_reserve.load(Ordering::Relaxed);
    let home = scope.env.to_host(GUEST_HOME);
    let free = crate::filesystem::disk::available_bytes(&home)
        .map_err(|_| Status::internal(messages::EXTRACT_FAILED))?;
    let needed = reserve
        .saturating_add(manifest.archive_bytes)
        .saturating_add(manifest.bytes);
    if free < needed {
        return Err(Status::resource_exhausted(detail::DISK_RESERVE));
    }
    let job = Job {
        env: scope.env.clone(),
        phase: scope.phase.subscribe(),
        bucket,
        loc,
        _busy: busy,
    };
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        let started = Instant::now();
        let mut out = super::Emitter::new(tx);
        match run_restore(&job, &manifest, reserve, &mut out).await {
            Ok(done) => {
                let done = pb::RestoreDone {
                    duration_ms: super::duration_ms(started),
                    ..done
                };
                tracing::info!(files = done.files, "restore done");
                let _ = out.send(ev_r(pb::restore_event::Event::Done(done))).await;
            }
            Err(f) => out.fail(f, "Restore").await,
        }
        drop(job);
    });
    Ok(ReceiverStream::new(rx))
}

/// An unnamed file for the download on HOME's filesystem (else in the
/// temporary directory): no path reaches it, so sandbox code can neither
/// read nor swap it between the check and the extraction.
fn staging_file(home: &Path) -> io::Result<File> {
    let flags = OFlags::TMPFILE | OFlags::RDWR | OFlags::CLOEXEC;
    let mode = Mode::from_raw_mode(0o600);
    let fd = rustix::fs::open(home, flags, mode)
        .or_else(|_| rustix::fs::open(std::env::temp_dir(), flags, mode))?;
    Ok(File::from(fd))
}

/// The failure of a refused or failed extraction.
fn extract_failure(e: &ExtractError) -> Failure {
    let io = match e {
        ExtractError::Read(ReadError::HeaderTooLong) => {
            return internal(messages::HEADER_TOO_LONG);
        }
        ExtractError::Read(ReadError::TooManyEntries) => {
            return Failure::Stream(stream_code::RESOURCE_EXHAUSTED, messages::TOO_MANY_ENTRIES);
        }
        ExtractError::Read(ReadError::TooMuchData) => {
            return Failure::Stream(stream_code::RESOURCE_EXHAUSTED, messages::NO_ROOM);
        }
        ExtractError::Read(ReadError::Io(e)) | ExtractError::Write(e) => e,
    };
    if io.raw_os_error() == Some(libc::ENOSPC) {
        internal(messages::DISK_FULL)
    } else {
        internal(messages::EXTRACT_FAILED)
    }
}

/// Reads what follows the end-of-archive block to the gzip trailer (whose
/// CRC and length flate2 checks), at most [`MAX_TRAILER_BYTES`].
fn finish_gzip(rest: impl Read) -> Result<(), ExtractError> {
    let n =
        io::copy(&mut rest.take(MAX_TRAILER_BYTES + 1), &mut io::sink()).map_err(ReadError::Io)?;
    if n > MAX_TRAILER_BYTES {
        let e = io::Error::new(io::ErrorKind::InvalidData, "data after the archive");
        return Err(ReadError::Io(e).into());
    }
    Ok(())
}

/// Reads the verified archive in `file` through once within `limits`,
/// writing nothing, then extracts it into `home`.
fn unpack(
    home: &Path,
    mut file: File,
    limits: tar_read::Limits,
    counters: &Counters,
    stop: &AtomicBool,
) -> Result<(), ExtractError> {
    file.rewind()?;
    let rest = archive::check(flate2::read::GzDecoder::new(&file), limits, stop)?;
    finish_gzip(rest)?;
    file.rewind()?;
    let rest = archive::extract(
        home,
        flate2::read::GzDecoder::new(&file),
        limits,
        counters,
        stop,
    )?;
    finish_gzip(rest)
}

async fn run_restore(
    job: &Job,
    manifest: &manifest::Manifest,
    reserve: u64,
    out: &mut super::Emitter<pb::RestoreEvent>,
) -> Result<pb::RestoreDone, Failure> {
    let gate = phase_gate(job.phase.clone());
    tokio::pin!(gate);
    out.send(ev_r(pb::restore_event::Event::Started(
        pb::RestoreStarted {
            archive_bytes: manifest.archive_bytes,
            files: manifest.files,
        },
    )))
    .await?;
    let archive_key = job.loc.archive_key();
    // A length other than the manifest's is a mismatch before a byte is
    // downloaded.
    let len = tokio::select! {
        f = &mut gate => return Err(f),
        r = job.bucket.head_object(&archive_key) => r.map_err(s3_failure)?,
    };
    if len != manifest.archive_bytes {
        return Err(internal(messages::CHECKSUM));
    }
    let (mut body, _) = tokio::select! {
        f = &mut gate => return Err(f),
        () = out.tx.closed() => return Err(Failure::Gone),
        r = job.bucket.get_stream(&archive_key) => r.map_err(s3_failure)?,
    };
    let home = job.env.to_host(GUEST_HOME);
    let staged = staging_file(&home).map_err(|_| internal(messages::EXTRACT_FAILED))?;
    let (data_tx, data_rx) = mpsc::channel::<Bytes>(4);
    let writer = tokio::task::spawn_blocking(move || -> io::Result<File> {
        let mut file = staged;
        io::copy(&mut archive::ChannelReader::new(data_rx), &mut file)?;
        Ok(file)
    });
    let mut data_tx = Some(data_tx);
    let mut hasher = Sha256::new();
    let mut downloaded: u64 = 0;
    let mut tick = progress_interval();
    loop {
        let frame = tokio::select! {
            biased;
            f = &mut gate => return Err(f),
            () = out.tx.closed() => return Err(Failure::Gone),
            frame = body.frame() => frame,
            _ = tick.tick() => {
                out.tick((0, downloaded, 0)).await?;
                continue;
            }
        };
        let data = match frame {
            None => break,
            Some(Err(_)) => return Err(internal(messages::S3_FAILED)),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue,
            },
        };
        downloaded = downloaded.saturating_add(data.len() as u64);
        if downloaded > manifest.archive_bytes {
            return Err(internal(messages::CHECKSUM));
        }
        hasher.update(&data);
        let Some(tx) = &data_tx else { break };
        let sent = tokio::select! {
            f = &mut gate => return Err(f),
            r = tx.send(data) => r.is_ok(),
        };
        if !sent {
            // The writer failed: its error says why.
            data_tx = None;
        }
    }
    drop(data_tx);
    let written = tokio::select! {
        f = &mut gate => return Err(f),
        r = writer => r.unwrap_or_else(|_| Err(io::Error::other("writer panicked"))),
    };
    let file = written.map_err(|e| {
        if e.raw_os_error() == Some(libc::ENOSPC) {
            internal(messages::DISK_FULL)
        } else {
            internal(messages::EXTRACT_FAILED)
        }
    })?;
    let sha256 = hex(&hasher.finalize());
    if downloaded != manifest.archive_bytes || sha256 != manifest.sha256 {
        return Err(internal(messages::CHECKSUM));
    }
    // What the files may take: the disk now free (the staged archive
    // already counted) beyond the reserve.
    let free = crate::filesystem::disk::available_bytes(&home)
        .map_err(|_| internal(messages::EXTRACT_FAILED))?;
    let limits = tar_read::Limits {
        max_entries: tar_read::MAX_ENTRIES,
        max_data: free.saturating_sub(reserve),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let _stop = StopOnDrop(stop.clone());
    let counters = Arc::new(Counters::default());
    let extractor = {
        let (env, counters, stop) = (job.env.clone(), counters.clone(), stop.clone());
        tokio::task::spawn_blocking(move || {
            env.as_user(|| unpack(&home, file, limits, &counters, &stop))
        })
    };
    tokio::pin!(extractor);
    let extracted = loop {
        tokio::select! {
            biased;
            f = &mut gate => return Err(f),
            () = out.tx.closed() => return Err(Failure::Gone),
            r = &mut extractor => break r,
            _ = tick.tick() => {
                out.tick((counters.files_done.load(Ordering::Relaxed), downloaded, 0)).await?;
            }
        }
    };
    match extracted {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(extract_failure(&e)),
        Err(_) => return Err(internal(messages::EXTRACT_FAILED)),
    }
    Ok(pb::RestoreDone {
        files: counters.files_done.load(Ordering::Relaxed),
        bytes_written: counters.bytes_moved.load(Ordering::Relaxed),
        archive_bytes: downloaded,
        sha256,
        skipped: counters.skipped.load(Ordering::Relaxed),
        duration_ms: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_messages_state_the_limits() {
        assert_eq!(tar_read::MAX_EXT_BYTES, 64 * 1024);
        assert!(messages::HEADER_TOO_LONG.ends_with("over 64 KiB"));
        assert_eq!(
            messages::TOO_MANY_ENTRIES,
            format!(
                "the archive holds more than {} entries",
                tar_read::MAX_ENTRIES
            )
        );
    }
}
