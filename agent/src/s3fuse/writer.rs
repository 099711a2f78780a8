//! One file being written, by a task of its own (writes in the kernel's
//! order).
//!
//! As with mount-s3: writes start at 0 and go on sequentially (any other
//! offset is EINVAL); the bytes go out as a multipart upload of
//! [`PART_BYTES`] parts as they come (at most [`PARTS_IN_FLIGHT`]
//! uploading: bounded memory whatever the file's size), or as one
//! PutObject when the file is smaller than a part; the object appears when
//! the upload completes. That is on `close` by the process that opened
//! the file once it wrote something, or on `fsync`: either reports a
//! failed upload. Other closes (a shell's `dup2` dance, an empty `touch`)
//! defer it to the last release of the file. After that the handle takes
//! no more writes (EBADF).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use fuser::{Errno, ReplyEmpty, ReplyWrite};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::client::{Client, Fail};
use super::fs::Shared;

/// Bytes per part (the last may be smaller).
pub(super) const PART_BYTES: usize = 8 * 1024 * 1024;
/// Parts uploading at once, besides the one being filled.
pub(super) const PARTS_IN_FLIGHT: usize = 2;

/// What the kernel asks of a file being written.
#[derive(Debug)]
pub(super) enum WriteOp {
    Write {
        offset: u64,
        data: Vec<u8>,
        reply: ReplyWrite,
    },
    /// `close` by `pid`.
    Flush {
        pid: u32,
        reply: ReplyEmpty,
    },
    Fsync {
        reply: ReplyEmpty,
    },
    Release {
        reply: ReplyEmpty,
    },
}

#[derive(Debug, PartialEq, Eq)]
enum State {
    Open,
    Done,
    Failed(Errno),
}

#[derive(Debug)]
struct Upload {
    id: String,
    parts: Vec<(u32, String)>,
    inflight: JoinSet<Result<(u32, String), Fail>>,
    next: u32,
}

/// The writes of one open file.
#[derive(Debug)]
pub(super) struct Writer {
    shared: Arc<Shared>,
    client: Client,
    ino: u64,
    key: String,
    opener: u32,
    written: u64,
    buf: BytesMut,
    upload: Option<Upload>,
    state: State,
}

impl Writer {
    pub(super) fn new(shared: Arc<Shared>, ino: u64, key: String, opener: u32) -> Self {
        Self {
            client: shared.client.clone(),
            shared,
            ino,
            key,
            opener,
            written: 0,
            buf: BytesMut::new(),
            upload: None,
            state: State::Open,
        }
    }

    /// Serves the handle until its release.
    pub(super) async fn run(mut self, mut rx: mpsc::UnboundedReceiver<WriteOp>) {
        while let Some(op) = rx.recv().await {
            match op {
                WriteOp::Write {
                    offset,
                    data,
                    reply,
                } => match self.write(offset, data).await {
                    Ok(n) => reply.written(n),
                    Err(e) => reply.error(e),
                },
                WriteOp::Flush { pid, reply } => {
                    if pid == self.opener && self.written > 0 {
                        answer(reply, self.complete().await);
                    } else {
                        reply.ok();
                    }
                }
                WriteOp::Fsync { reply } => answer(reply, self.complete().await),
                WriteOp::Release { reply } => {
                    let _ = self.complete().await;
                    self.released();
                    reply.ok();
                    return;
                }
            }
        }
        // The mount stopped: nothing is uploaded.
        self.abort().await;
        self.released();
    }

    async fn write(&mut self, offset: u64, data: Vec<u8>) -> Result<u32, Errno> {
        match self.state {
            State::Open => {}
            State::Done => return Err(Errno::EBADF),
            State::Failed(e) => return Err(e),
        }
        if offset != self.written {
            return Err(Errno::EINVAL);
        }
        let n = u32::try_from(data.len()).map_err(|_| Errno::EINVAL)?;
        self.buf.extend_from_slice(&data);
        self.written += u64::from(n);
        if let Some(node) = self.shared.inodes().get_mut(self.ino) {
            node.size = self.written;
            node.mtime = SystemTime::now();
        }
        while self.buf.len() >= PART_BYTES {
            let part = self.buf.split_to(PART_BYTES).freeze();
            if let Err(f) = self.send_part(part).await {
                let e = f.errno();
                self.abort().await;
                self.state = State::Failed(e);
                return Err(e);
            }
        }
        Ok(n)
    }

    /// Starts uploading `part`, after one of the parts in flight when
    /// [`PARTS_IN_FLIGHT`] are.
    async fn send_part(&mut self, part: Bytes) -> Result<(), Fail> {
        if self.upload.is_none() {
            let id = self.client.create_multipart(&self.key).await?;
            self.upload = Some(Upload {
                id,
                parts: Vec::new(),
                inflight: JoinSet::new(),
                next: 1,
            });
        }
        let up = self.upload.as_mut().ok_or(Fail::Other)?;
        while up.inflight.len() >= PARTS_IN_FLIGHT {
            match up.inflight.join_next().await {
                Some(Ok(done)) => up.parts.push(done?),
                Some(Err(_)) => return Err(Fail::Other),
                None => break,
            }
        }
        let (client, key, id, number) = (
            self.client.clone(),
            self.key.clone(),
            up.id.clone(),
            up.next,
        );
        up.next += 1;
        up.inflight.spawn(async move {
            let etag = client.upload_part(&key, &id, number, part).await?;
            Ok((number, etag))
        });
        Ok(())
    }

    /// Uploads what is left and makes the object; once.
    async fn complete(&mut self) -> Result<(), Errno> {
        match self.state {
            State::Open => {}
            State::Done => return Ok(()),
            State::Failed(e) => return Err(e),
        }
        let result = self.finish_upload().await;
        match result {
            Ok(()) => {
                self.state = State::Done;
                if let Some(node) = self.shared.inodes().get_mut(self.ino) {
                    node.writing = false;
                    node.size = self.written;
                    node.mtime = SystemTime::now();
                    node.etag = None;
                    node.checked = Instant::now();
                }
                Ok(())
            }
            Err(f) => {
                self.abort().await;
                let e = f.errno();
                self.state = State::Failed(e);
                Err(e)
            }
        }
    }

    async fn finish_upload(&mut self) -> Result<(), Fail> {
        let rest = self.buf.split().freeze();
        if self.upload.is_none() {
            return self.client.put(&self.key, rest).await;
        }
        if !rest.is_empty() {
            self.send_part(rest).await?;
        }
        let up = self.upload.as_mut().ok_or(Fail::Other)?;
        while let Some(done) = up.inflight.join_next().await {
            up.parts.push(done.map_err(|_| Fail::Other)??);
        }
        up.parts.sort_by_key(|(n, _)| *n);
        let (id, parts) = (up.id.clone(), std::mem::take(&mut up.parts));
        self.client
            .complete_multipart(&self.key, &id, &parts)
            .await?;
        self.upload = None;
        Ok(())
    }

    /// Drops what was not uploaded (an open multipart upload is aborted).
    async fn abort(&mut self) {
        self.buf = BytesMut::new();
        if let Some(mut up) = self.upload.take() {
            up.inflight.abort_all();
            self.client.abort_multipart(&self.key, &up.id).await;
        }
    }

    /// The handle is gone: the file is no longer being written; one that
    /// never made it to S3 disappears.
    fn released(&mut self) {
        let mut inodes = self.shared.inodes();
        let Some(node) = inodes.get_mut(self.ino) else {
            return;
        };
        node.writing = false;
        if self.state != State::Done {
            let (parent, name) = (node.parent, node.name.clone());
            inodes.unlink(parent, &name);
        }
    }
}

fn answer(reply: ReplyEmpty, result: Result<(), Errno>) {
    match result {
        Ok(()) => reply.ok(),
        Err(e) => reply.error(e),
    }
}
