//! One open file's reads, served in the order the kernel sent them by a
//! task of their own.
//!
//! A read that starts the file or continues the previous one is served
//! from one streaming GET kept open from that offset to the end (read
//! ahead by a task into a bounded queue, [`PREFETCH_CHUNKS`] chunks of
//! about [`CHUNK`] bytes: at most a few MiB per open file whatever the
//! object's size); a short skip forward reads through the stream; any
//! other read is a ranged GET of just its bytes. Every GET is conditional
//! on the ETag the open saw (`If-Match`), so a read never mixes two
//! versions of an object: a changed object is EIO, as with mount-s3.

use std::time::Duration;

use bytes::{Buf as _, Bytes, BytesMut};
use fuser::{Errno, ReplyData};
use http_body_util::BodyExt as _;
use tokio::sync::mpsc;

use super::client::Client;

/// Bytes the prefetch task gathers before queueing them (less when the
/// reader is waiting).
pub(super) const CHUNK: usize = 256 * 1024;
/// Chunks queued ahead of the reader.
pub(super) const PREFETCH_CHUNKS: usize = 32;
/// The longest forward jump served by reading through the stream.
const SKIP_MAX: u64 = 2 * 1024 * 1024;
/// How long the stream may stall.
const STALL: Duration = Duration::from_secs(30);

/// A read the kernel asked for.
#[derive(Debug)]
pub(super) struct Read {
    pub offset: u64,
    pub size: u32,
    pub reply: ReplyData,
}

/// Aborts its task when dropped.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A streaming GET from `pos` on, read ahead.
#[derive(Debug)]
struct Prefetch {
    /// The offset of the next byte handed out.
    pos: u64,
    leftover: Bytes,
    rx: mpsc::Receiver<Result<Bytes, Errno>>,
    _task: AbortOnDrop,
}

impl Prefetch {
    async fn start(
        client: &Client,
        key: &str,
        etag: Option<&str>,
        from: u64,
        to: u64,
    ) -> Result<Self, Errno> {
        let mut body = client
            .get_range(key, from, to, etag)
            .await
            .map_err(|f| f.errno())?;
        let (tx, rx) = mpsc::channel(PREFETCH_CHUNKS);
        let task = tokio::spawn(async move {
            let mut buf = BytesMut::new();
            loop {
                match tokio::time::timeout(STALL, body.frame()).await {
                    Ok(Some(Ok(frame))) => {
                        if let Ok(data) = frame.into_data() {
                            buf.extend_from_slice(&data);
                        }
                        // Gather while the reader has enough queued; hand
                        // over at once when it may be waiting.
                        let waiting = tx.capacity() == tx.max_capacity();
                        if (buf.len() >= CHUNK || (waiting && !buf.is_empty()))
                            && tx.send(Ok(buf.split().freeze())).await.is_err()
                        {
                            return;
                        }
                    }
                    Ok(None) => {
                        if !buf.is_empty() {
                            let _ = tx.send(Ok(buf.split().freeze())).await;
                        }
                        return;
                    }
                    Ok(Some(Err(_))) | Err(_) => {
                        let _ = tx.send(Err(Errno::EIO)).await;
                        return;
                    }
                }
            }
        });
        Ok(Self {
            pos: from,
            leftover: Bytes::new(),
            rx,
            _task: AbortOnDrop(task),
        })
    }

    /// The next `n` bytes (fewer at the end), copied into `out` unless
    /// skipping.
    async fn take(&mut self, n: u64, mut out: Option<&mut Vec<u8>>) -> Result<(), Errno> {
        let mut left = n;
        while left > 0 {
            if self.leftover.is_empty() {
                match self.rx.recv().await {
                    Some(Ok(b)) => self.leftover = b,
                    Some(Err(e)) => return Err(e),
                    None => break,
                }
            }
            let k = left.min(self.leftover.len() as u64) as usize;
            if let Some(out) = out.as_deref_mut() {
                out.extend_from_slice(&self.leftover[..k]);
            }
            self.leftover.advance(k);
            self.pos += k as u64;
            left -= k as u64;
        }
        Ok(())
    }
}

/// The reads of one open file.
#[derive(Debug)]
pub(super) struct Reader {
    client: Client,
    key: String,
    size: u64,
    etag: Option<String>,
    stream: Option<Prefetch>,
    /// Where the previous read ended.
    last_end: u64,
}

/// The most one FUSE read asks for that a buffer is made for (FUSE's own
/// ceiling for a request; the kernel asks for at most 1 MiB here).
const MAX_READ: u64 = 16 * 1024 * 1024;

impl Reader {
    pub(super) fn new(client: Client, key: String, size: u64, etag: Option<String>) -> Self {
        Self {
            client,
            key,
            size,
            etag,
            stream: None,
            last_end: 0,
        }
    }

    /// Serves reads until the handle is released.
    pub(super) async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Read>) {
        while let Some(r) = rx.recv().await {
            match self.read(r.offset, r.size).await {
                Ok(data) => r.reply.data(&data),
                Err(e) => r.reply.error(e),
            }
        }
    }

    async fn read(&mut self, offset: u64, size: u32) -> Result<Vec<u8>, Errno> {
        if offset >= self.size || size == 0 {
            return Ok(Vec::new());
        }
        // The kernel's size is bounded by the mount's max_read, the
        // object's by S3's answer: neither sizes a buffer unchecked.
        let len = u64::from(size).min(self.size - offset).min(MAX_READ);
        let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        let reusable = self
            .stream
            .as_ref()
            .is_some_and(|s| offset >= s.pos && offset - s.pos <= SKIP_MAX);
        if !reusable {
            self.stream = None;
        }
        if reusable || offset == 0 || offset == self.last_end {
            if self.stream.is_none() {
                self.stream = Some(
                    Prefetch::start(
                        &self.client,
                        &self.key,
                        self.etag.as_deref(),
                        offset,
                        self.size,
                    )
                    .await?,
                );
            }
            let stream = self.stream.as_mut().ok_or(Errno::EIO)?;
            let result = async {
                let skip = offset - stream.pos;
                stream.take(skip, None).await?;
                stream.take(len, Some(&mut out)).await
            }
            .await;
            if let Err(e) = result {
                self.stream = None;
                return Err(e);
            }
        } else {
            let body = self
                .client
                .get_range(&self.key, offset, offset + len, self.etag.as_deref())
                .await
                .map_err(|f| f.errno())?;
            let bytes = http_body_util::Limited::new(body, len as usize)
                .collect()
                .await
                .map_err(|_| Errno::EIO)?
                .to_bytes();
            out.extend_from_slice(&bytes);
        }
        self.last_end = offset + out.len() as u64;
        Ok(out)
    }
}
