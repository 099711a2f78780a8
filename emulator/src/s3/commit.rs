//! An object's bytes and its sidecars (user metadata, ETag, checksums)
//! change together, as S3's do: a reader sees the old object or the new
//! one, never the new bytes without their metadata.
//!
//! s3s-fs renames a PutObject's file into place first and writes the
//! metadata and ETag files after it, so a GET between the two answered the
//! new bytes with no metadata (or the old object's ETag). A chunked staged
//! write on the local backend names its last chunk in that metadata: an
//! agent that read the last chunk in the window took it for an ordinary
//! one and waited for a chunk that never came, until the import's URLs
//! expired. Here a reader (HeadObject, GetObject) holds its key's lock
//! shared while it opens the object; a writer holds it exclusively from
//! the end of the body (PutObject) or for the whole call (DeleteObject,
//! CompleteMultipartUpload) until the store is consistent again. A writer
//! does not hold it while a client is still sending: a GET meanwhile gets
//! the old object at once, as on S3.

use std::hash::{BuildHasher as _, Hasher as _};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use s3s::dto::StreamingBlob;
use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};
use tokio_stream::Stream;

/// Locks per key, striped: keys that share a stripe wait for each other's
/// commits, which take a rename and two small writes.
const STRIPES: usize = 64;

/// The longest a reader waits for a change of its key (or of another key
/// of its stripe) to end, after which it reads what is there. A PutObject's
/// or DeleteObject's change is a rename and two small writes; only a
/// CompleteMultipartUpload holds the lock longer, while s3s-fs copies
/// every part into the object (seconds per GiB), and a reader held that
/// long would time out instead: an agent polls for a chunked write's
/// overflow object while the SDK completes it, and gives a GET 30 s.
const READ_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The commit locks of every key of the store.
pub(super) struct KeyLocks {
    stripes: Vec<Arc<RwLock<()>>>,
    hasher: std::collections::hash_map::RandomState,
}

impl Default for KeyLocks {
    fn default() -> Self {
        Self {
            stripes: (0..STRIPES).map(|_| Arc::new(RwLock::new(()))).collect(),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }
}

/// An exclusive hold on a key, taken at the end of a PutObject's body.
pub(super) type CommitSlot = Arc<Mutex<Option<OwnedRwLockWriteGuard<()>>>>;

impl KeyLocks {
    fn stripe(&self, bucket: &str, key: &str) -> Arc<RwLock<()>> {
        let mut h = self.hasher.build_hasher();
        h.write(bucket.as_bytes());
        h.write_u8(0);
        h.write(key.as_bytes());
        // The remainder is below STRIPES, so the cast cannot truncate.
        let index = (h.finish() % STRIPES as u64) as usize;
        Arc::clone(&self.stripes[index])
    }

    /// A reader's hold: the object is not in the middle of a change; `None`
    /// when a change held it for [`READ_WAIT`] (see there).
    pub(super) async fn read(&self, bucket: &str, key: &str) -> Option<OwnedRwLockReadGuard<()>> {
        tokio::time::timeout(READ_WAIT, self.stripe(bucket, key).read_owned())
            .await
            .ok()
    }

    /// A writer's hold for a whole call.
    pub(super) async fn write(&self, bucket: &str, key: &str) -> OwnedRwLockWriteGuard<()> {
        self.stripe(bucket, key).write_owned().await
    }

    /// `body`, which takes the key's exclusive hold into `slot` once its
    /// last byte was read (before it says it ended); the caller drops the
    /// slot's hold when the write is done.
    pub(super) fn commit_on_end(
        &self,
        bucket: &str,
        key: &str,
        body: StreamingBlob,
        slot: CommitSlot,
    ) -> StreamingBlob {
        StreamingBlob::new(CommitOnEnd {
            inner: body,
            lock: Some(self.stripe(bucket, key)),
            acquiring: None,
            slot,
        })
    }
}

/// Releases a [`CommitSlot`]'s hold.
pub(super) fn release(slot: &CommitSlot) {
    slot.lock().unwrap_or_else(PoisonError::into_inner).take();
}

type Acquiring = Pin<Box<dyn Future<Output = OwnedRwLockWriteGuard<()>> + Send + Sync>>;

/// A body that takes the write hold when its inner body ends.
struct CommitOnEnd {
    inner: StreamingBlob,
    lock: Option<Arc<RwLock<()>>>,
    acquiring: Option<Acquiring>,
    slot: CommitSlot,
}

impl Stream for CommitOnEnd {
    type Item = Result<Bytes, s3s::StdError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.acquiring.is_none() {
            match ready!(Pin::new(&mut this.inner).poll_next(cx)) {
                Some(item) => return Poll::Ready(Some(item)),
                None => match this.lock.take() {
                    Some(lock) => this.acquiring = Some(Box::pin(lock.write_owned())),
                    // Polled again after it ended: it stays ended.
                    None => return Poll::Ready(None),
                },
            }
        }
        if let Some(acquiring) = this.acquiring.as_mut() {
            let guard = ready!(acquiring.as_mut().poll(cx));
            this.acquiring = None;
            *this.slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(guard);
        }
        Poll::Ready(None)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl s3s::stream::ByteStream for CommitOnEnd {
    fn remaining_length(&self) -> s3s::stream::RemainingLength {
        self.inner.remaining_length()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader waits for a change of its key, and for at most
    /// [`READ_WAIT`] (virtual time: the clock only moves while every task
    /// waits).
    #[tokio::test(start_paused = true)]
    async fn a_reader_waits_for_a_change_and_at_most_read_wait() {
        let locks = KeyLocks::default();
        // A short change: the reader gets its hold once it ended.
        let change = locks.write("b", "k").await;
        let release = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            drop(change);
        });
        let started = tokio::time::Instant::now();
        assert!(locks.read("b", "k").await.is_some());
        assert_eq!(started.elapsed(), std::time::Duration::from_millis(50));
        release.await.expect("released");
        // A change held longer: the reader goes on without a hold.
        let _long = locks.write("b", "k").await;
        let started = tokio::time::Instant::now();
        assert!(locks.read("b", "k").await.is_none());
        assert_eq!(started.elapsed(), READ_WAIT);
    }
}
