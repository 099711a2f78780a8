//! A staged read in pieces, so that the agent's upload and the SDK's
//! download overlap instead of running one after the other
//! (docs/performance.md, "Staged transfers").
//!
//! An object cannot be read before its upload completes, so the file is
//! exported as a run of pieces, each the one part of a multipart upload of
//! its own on the same key: the export is an ordinary multipart
//! StartExport whose part URLs name one upload each (the agent checks only
//! that every URL names the request's object). As soon as the agent has
//! uploaded piece `i` (ListParts shows it), the SDK completes that upload,
//! which makes the object piece `i`, downloads it, and goes on to the next,
//! while the agent uploads the pieces after it. The SDK hashes every byte
//! it hands out and compares with the agent's sha256 at the end, as a
//! whole-object read does; each piece must also have exactly its length.
//!
//! Without `s3:ListMultipartUploadParts` (ListParts refused) the pieces are
//! completed once the export is done, with the agent's part ETags: today's
//! sequential speed, nothing lost.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt as _;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::auto::{UPLOAD_PART, s3_unavailable};
use super::sign::{Request, Signer};
use super::{TransferPhase, WATCH_REOPENS, phase, state_error};
use crate::aws::s3::objects::Objects;
use crate::error::SandboxError;
use crate::error::map::s3::s3_failure;
use crate::pb;
use crate::sandbox::Sandbox;

const MIB: u64 = 1 << 20;
/// Pieces of one read, at most: enough to overlap the hops, few enough
/// that the uploads created before the export stay cheap.
const MAX_PIECES: u64 = 64;
/// Uploads created at once before the export starts.
const CREATES_AT_ONCE: usize = 16;
/// Without news from the agent, ListParts is asked again after this long.
const LIST_EVERY: Duration = Duration::from_millis(200);
/// Chunks downloaded ahead of the caller, at most.
const AHEAD: usize = 4;

/// The piece size of a read of `size` bytes: `size / 64` rounded up to a
/// MiB, at least 8 MiB.
pub(crate) fn piece_size(size: u64) -> u64 {
    size.div_ceil(MAX_PIECES)
        .div_ceil(MIB)
        .saturating_mul(MIB)
        .max(UPLOAD_PART)
}

/// Whether a staged read of `size` bytes goes in pieces: more than one,
/// and below the multipart threshold (at or above it, the one multipart
/// upload the options ask for).
pub(crate) fn applies(size: u64, staging: &super::S3Staging) -> bool {
    size > UPLOAD_PART && size < staging.multipart_threshold_bytes
}

/// The download's task, aborted when dropped.
pub(crate) struct Task(tokio::task::JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What the download hands the reader.
pub(crate) enum Fed {
    /// The next bytes.
    Data(Bytes),
    /// Every piece arrived: the agent's sha256 and size.
    End { sha256: String, size: u64 },
    /// The read failed.
    Failed(SandboxError),
}

/// The uploads of a read still open (to abort when it ends early).
pub(crate) type OpenUploads = Arc<Mutex<Vec<String>>>;

fn lock(open: &OpenUploads) -> std::sync::MutexGuard<'_, Vec<String>> {
    open.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Creates the pieces' uploads and signs one UploadPart URL per piece:
/// the export's multipart target. Every created upload is in `open`.
pub(crate) async fn target(
    signer: &Signer,
    key: &str,
    size: u64,
    url_life: Duration,
    feature: &'static str,
    open: &OpenUploads,
) -> Result<(pb::PresignedMultipart, Vec<String>), SandboxError> {
    let part_size = piece_size(size);
    let count = size.div_ceil(part_size).max(1);
    let client = signer.client();
    let created: Vec<Result<String, SandboxError>> = futures_util::stream::iter(0..count)
        .map(|_| async {
            let id = super::auto::create_upload(client, &signer.bucket, key, feature).await?;
            lock(open).push(id.clone());
            Ok(id)
        })
        .buffered(CREATES_AT_ONCE)
        .collect()
        .await;
    let ids = created.into_iter().collect::<Result<Vec<_>, _>>()?;
    let mut parts = Vec::with_capacity(ids.len());
    for id in &ids {
        let request = Request::UploadPart {
            upload_id: id,
            number: 1,
        };
        parts.push(signer.sign(key, request, url_life, feature).await?);
    }
    Ok((pb::PresignedMultipart { part_size, parts }, ids))
}

/// The transfer's latest state as the watch reports it.
#[derive(Clone)]
enum Watched {
    Pending,
    State(pb::TransferState),
    Failed(SandboxError),
}

/// Follows the transfer's states (reopening a watch that ended without a
/// final one, at most [`WATCH_REOPENS`] times).
async fn follow(sandbox: Sandbox, id: String, feature: &'static str, tx: watch::Sender<Watched>) {
    let mut reopened = 0;
    loop {
        let run = async {
            let mut stream = sandbox.conn().watch_transfer(&id, feature, None).await?;
            while let Some(event) = stream.message().await? {
                if let Some(pb::transfer_event::Event::State(s)) = event.event {
                    let end = !matches!(
                        phase(s.phase),
                        TransferPhase::Waiting | TransferPhase::Running
                    );
                    tx.send_replace(Watched::State(s));
                    if end {
                        return Ok(true);
                    }
                }
            }
            Ok::<_, SandboxError>(false)
        };
        match run.await {
            Ok(true) => return,
            Ok(false) if reopened < WATCH_REOPENS => reopened += 1,
            Ok(false) => {
                tx.send_replace(Watched::Failed(SandboxError::protocol_violation(
                    feature,
                    "the transfer's watch ended without a final state",
                )));
                return;
            }
            Err(e) => {
                tx.send_replace(Watched::Failed(e));
                return;
            }
        }
    }
}

/// One read's download of its pieces.
pub(crate) struct Download {
    pub sandbox: Sandbox,
    pub client: Objects,
    pub bucket: String,
    pub key: String,
    pub transfer_id: String,
    pub uploads: Vec<String>,
    pub open: OpenUploads,
    pub part_size: u64,
    pub size: u64,
    pub feature: &'static str,
    pub until: Instant,
    pub after: Duration,
}

/// Starts the download: its chunks (then its end, or its failure) on the
/// returned channel; the task stops when the channel's receiver is
/// dropped, and is aborted with the returned handle.
pub(crate) fn start(download: Download) -> (mpsc::Receiver<Fed>, Task) {
    let (tx, rx) = mpsc::channel(AHEAD);
    let task = tokio::spawn(async move {
        let (feature, after, until) = (download.feature, download.after, download.until);
        let sandbox = download.sandbox.clone();
        let id = download.transfer_id.clone();
        let outcome = tokio::time::timeout_at(until, run(download, &tx)).await;
        let failure = match outcome {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e,
            Err(_) => {
                SandboxError::timeout(crate::error::TimeoutScope::Request, feature, Some(after))
            }
        };
        super::auto::cancel(&sandbox, &id, feature).await;
        let _ = tx.send(Fed::Failed(failure)).await;
    });
    (rx, Task(task))
}

/// Whether a failed ListParts means "not allowed here" (refused, or not
/// served by this S3): the pieces then wait for the export's end.
fn listing_refused(failure: &crate::error::map::aws::AwsFailure) -> bool {
    matches!(failure.http_status, Some(403 | 405 | 501))
}

/// The ETag of the piece of `upload_id` once ListParts shows it; `None`
/// before, or for good once ListParts is refused (`listing` turns false).
async fn listed(
    d: &Download,
    upload_id: &str,
    listing: &mut bool,
) -> Result<Option<String>, SandboxError> {
    if !*listing {
        return Ok(None);
    }
    match d.client.part_etag(&d.bucket, &d.key, upload_id, 1).await {
        Ok(etag) => Ok(etag),
        Err(failure) if listing_refused(&failure) => {
            *listing = false;
            Ok(None)
        }
        Err(failure) => Err(s3_failure(failure)),
    }
}

async fn run(d: Download, tx: &mpsc::Sender<Fed>) -> Result<(), SandboxError> {
    let (states_tx, mut states) = watch::channel(Watched::Pending);
    let follower = tokio::spawn(follow(
        d.sandbox.clone(),
        d.transfer_id.clone(),
        d.feature,
        states_tx,
    ));
    struct AbortOnDrop(tokio::task::JoinHandle<()>);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let _follower = AbortOnDrop(follower);
    // The size the agent measured when it accepted the export (the
    // stat's, unless the file changed in between).
    let total = loop {
        let current = states.borrow_and_update().clone();
        match current {
            Watched::Failed(e) => return Err(e),
            Watched::State(s) if s.bytes_total > 0 => break s.bytes_total,
            Watched::State(_) => break d.size,
            Watched::Pending => {}
        }
        if states.changed().await.is_err() {
            return Err(s3_unavailable());
        }
    };
    let mut listing = true;
    let last = d.uploads.len().saturating_sub(1);
    for (i, upload_id) in d.uploads.iter().enumerate() {
        let start = d.part_size.saturating_mul(i as u64);
        let len = if i == last {
            total.saturating_sub(start)
        } else {
            d.part_size
        };
        let etag = loop {
            let current = states.borrow_and_update().clone();
            let moved_past = match &current {
                Watched::Failed(e) => return Err(e.clone()),
                Watched::State(s) => match phase(s.phase) {
                    TransferPhase::Done => {
                        // Every piece is up: the agent's ETags name them.
                        break s.part_etags.get(i).cloned().ok_or_else(|| {
                            SandboxError::protocol_violation(
                                d.feature,
                                "a done export named fewer parts than it had",
                            )
                        })?;
                    }
                    TransferPhase::Failed | TransferPhase::Cancelled => {
                        return Err(state_error(s));
                    }
                    _ => s.bytes_done > start.saturating_add(len),
                },
                Watched::Pending => false,
            };
            if moved_past && let Some(etag) = listed(&d, upload_id, &mut listing).await? {
                break etag;
            }
            // Not listed yet: the next state, or (listing) a look after a
            // pause, for an agent that reports its progress otherwise.
            let pause = if listing && !moved_past {
                LIST_EVERY
            } else {
                Duration::from_secs(3600)
            };
            tokio::select! {
                changed = states.changed() => {
                    if changed.is_err() {
                        return Err(s3_unavailable());
                    }
                }
                () = tokio::time::sleep(pause) => {
                    if let Some(etag) = listed(&d, upload_id, &mut listing).await? {
                        break etag;
                    }
                }
            }
        };
        d.client
            .complete_multipart_upload(&d.bucket, &d.key, upload_id, [(1, Some(etag))])
            .await
            .map_err(s3_failure)?;
        lock(&d.open).retain(|open| open != upload_id);
        let mut body = d
            .client
            .get_object(&d.bucket, &d.key)
            .await
            .map_err(s3_failure)?;
        let mut got: u64 = 0;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|()| s3_unavailable())?;
            got = got.saturating_add(chunk.len() as u64);
            if got > len {
                return Err(super::auto::checksum_mismatch());
            }
            if tx.send(Fed::Data(chunk)).await.is_err() {
                // The reader is gone.
                return Ok(());
            }
        }
        if got != len {
            return Err(super::auto::checksum_mismatch());
        }
    }
    // Every piece was read: the agent's sha256 for the reader's check.
    let state = loop {
        let current = states.borrow_and_update().clone();
        match current {
            Watched::Failed(e) => return Err(e),
            Watched::State(s) if phase(s.phase) == TransferPhase::Done => break s,
            Watched::State(s)
                if matches!(
                    phase(s.phase),
                    TransferPhase::Failed | TransferPhase::Cancelled
                ) =>
            {
                return Err(state_error(&s));
            }
            _ => {}
        }
        if states.changed().await.is_err() {
            return Err(s3_unavailable());
        }
    };
    let _ = tx
        .send(Fed::End {
            sha256: state.sha256,
            size: state.bytes_total,
        })
        .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_at_least_8_mib_and_at_most_64() {
        assert_eq!(piece_size(9 * MIB), 8 * MIB);
        assert_eq!(piece_size(512 * MIB), 8 * MIB);
        assert_eq!(piece_size(1024 * MIB), 16 * MIB);
        assert_eq!(piece_size(1024 * MIB + 1), 17 * MIB);
        let five = 5u64 << 30;
        assert!(five.div_ceil(piece_size(five)) <= MAX_PIECES);
    }
}
