//! The FUSE operations of one mount.
//!
//! The session's thread only decides what it can from the inode table and
//! hands everything that needs S3 to a task on the agent's runtime, with
//! the reply (fuser's replies may be sent from any thread): a slow or
//! stalled S3 never holds the session. An open file's reads and writes go
//! to a task of their own ([`super::reader`], [`super::writer`]) through a
//! queue, so they are served in the order the kernel sent them.
//!
//! Semantics: see the module's documentation ([`super`]). No errno's
//! cause (a key, a bucket, an S3 message) is logged; every operation that
//! carries a name is implemented here, so fuser's own "not implemented"
//! warnings (which print the name) never fire.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::OsStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use fuser::{
    AccessFlags, BsdFileFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags,
    Generation, INodeNo, InitFlags, KernelConfig, LockOwner, OpenAccMode, OpenFlags, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyLseek,
    ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, WriteFlags,
};
use tokio::sync::mpsc;

use super::FuseMountSpec;
use super::client::{Client, Fail, ObjectMeta};
use super::inodes::{Inodes, Kind, Node};
use super::listing::Merge;
use super::reader::{Read, Reader};
use super::writer::{WriteOp, Writer};

/// How long the kernel may keep an entry or attributes (mount-s3's
/// default metadata TTL: a change by another client shows within it).
const TTL: Duration = Duration::from_secs(1);
/// Keys per listing page.
const PAGE_KEYS: u32 = 1000;
/// The kernel's readahead window asked for.
const READAHEAD: u32 = 1024 * 1024;
/// `st_blksize`: what `cp` and friends size their buffers by.
const BLKSIZE: u32 = 1024 * 1024;

/// An open file or directory.
#[derive(Debug)]
enum Handle {
    Read(mpsc::UnboundedSender<Read>),
    Write(mpsc::UnboundedSender<WriteOp>),
    Dir(Arc<tokio::sync::Mutex<DirCursor>>),
}

/// What every operation of the mount shares.
#[derive(Debug)]
pub(super) struct Shared {
    pub client: Client,
    pub spec: FuseMountSpec,
    inodes: Mutex<Inodes>,
    handles: Mutex<HashMap<u64, Handle>>,
    next_fh: AtomicU64,
    rt: tokio::runtime::Handle,
    stopped: AtomicBool,
    mounted_at: SystemTime,
}

impl Shared {
    pub(super) fn new(client: Client, spec: FuseMountSpec, rt: tokio::runtime::Handle) -> Self {
        let now = SystemTime::now();
        Self {
            client,
            spec,
            inodes: Mutex::new(Inodes::new(now)),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            rt,
            stopped: AtomicBool::new(false),
            mounted_at: now,
        }
    }

    pub(super) fn inodes(&self) -> MutexGuard<'_, Inodes> {
        self.inodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn handles(&self) -> MutexGuard<'_, HashMap<u64, Handle>> {
        self.handles.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ends every open file's task (nothing more is uploaded) and makes
    /// every later operation EIO.
    pub(super) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.handles().clear();
    }

    pub(super) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    fn add_handle(&self, handle: Handle) -> u64 {
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.handles().insert(fh, handle);
        fh
    }

    fn attr(&self, ino: u64, node: &Node) -> FileAttr {
        let (kind, perm, nlink) = match node.kind {
            Kind::File => (FileType::RegularFile, 0o644, 1),
            Kind::Dir => (FileType::Directory, 0o755, 2),
        };
        let mtime = if node.kind == Kind::Dir {
            self.mounted_at
        } else {
            node.mtime
        };
        FileAttr {
            ino: INodeNo(ino),
            size: node.size,
            blocks: node.size.div_ceil(512),
            atime: mtime,
            mtime,
            ctime: mtime,
            crtime: mtime,
            kind,
            perm,
            nlink,
            uid: self.spec.uid,
            gid: self.spec.gid,
            rdev: 0,
            blksize: BLKSIZE,
            flags: 0,
        }
    }

    /// Records `name` under `parent` and answers the entry (one lookup).
    fn entry(
        &self,
        parent: u64,
        name: &str,
        kind: Kind,
        meta: Option<&ObjectMeta>,
        reply: ReplyEntry,
    ) {
        let mut inodes = self.inodes();
        let found = inodes
            .upsert(parent, name, kind, meta, SystemTime::now())
            .and_then(|ino| Some((ino, inodes.get(ino)?.clone())));
        drop(inodes);
        match found {
            Some((ino, node)) => reply.entry(&TTL, &self.attr(ino, &node), Generation(0)),
            None => reply.error(Errno::ENOENT),
        }
    }

    /// What S3 holds at `key` (a file key; `key/` for a directory): a
    /// directory wins over a file of the same name.
    async fn probe(&self, key: &str) -> Result<Option<(Kind, Option<ObjectMeta>)>, Fail> {
        let dir = format!("{key}/");
        let (head, list) = tokio::join!(
            self.client.head(key),
            self.client.list(&dir, false, None, 1, None)
        );
        let list = list?;
        if !list.objects.is_empty() || !list.prefixes.is_empty() {
            return Ok(Some((Kind::Dir, None)));
        }
        Ok(head?.map(|m| (Kind::File, Some(m))))
    }
}

/// A directory being read: its entries numbered from 1 (the offsets the
/// kernel resumes from), at most one listing page held at a time.
#[derive(Debug)]
struct DirCursor {
    ino: u64,
    key: String,
    parent: u64,
    /// Entries handed out or ready, from `buffer.front()`'s number on.
    buffer: VecDeque<(u64, String, FileType, u64)>,
    next_number: u64,
    locals: HashSet<String>,
    merge: Merge,
    token: Option<String>,
    started: bool,
    listed: bool,
}

impl DirCursor {
    fn new(ino: u64, key: String, parent: u64) -> Self {
        Self {
            ino,
            key,
            parent,
            buffer: VecDeque::new(),
            next_number: 1,
            locals: HashSet::new(),
            merge: Merge::default(),
            token: None,
            started: false,
            listed: false,
        }
    }

    fn push(&mut self, name: String, kind: FileType, ino: u64) {
        self.buffer.push_back((self.next_number, name, kind, ino));
        self.next_number += 1;
    }

    /// From the start again: `.`, `..`, what only this mount knows, then
    /// S3's listing.
    fn restart(&mut self, shared: &Shared) {
        *self = Self::new(self.ino, self.key.clone(), self.parent);
        self.started = true;
        self.push(".".into(), FileType::Directory, self.ino);
        self.push("..".into(), FileType::Directory, self.parent);
        let locals = shared.inodes().local_children(self.ino);
        for (name, kind, ino) in locals {
            self.locals.insert(name.clone());
            self.push(name, file_type(kind), ino);
        }
    }

    /// Moves the next entries into the buffer; false once there are none.
    async fn fill(&mut self, shared: &Shared) -> Result<bool, Fail> {
        let before = self.next_number;
        loop {
            if !self.merge.ready.is_empty() {
                let ready: Vec<_> = self.merge.ready.drain(..).collect();
                let inodes = shared.inodes();
                let entries: Vec<_> = ready
                    .into_iter()
                    .filter(|e| !self.locals.contains(&e.name))
                    .map(|e| {
                        let ino = inodes
                            .child(self.ino, &e.name)
                            .unwrap_or_else(|| unknown_ino(&self.key, &e.name));
                        (e.name, file_type(e.kind), ino)
                    })
                    .collect();
                drop(inodes);
                for (name, kind, ino) in entries {
                    self.push(name, kind, ino);
                }
                if self.next_number > before {
                    return Ok(true);
                }
            }
            if self.listed {
                return Ok(false);
            }
            let page = shared
                .client
                .list(&self.key, true, self.token.as_deref(), PAGE_KEYS, None)
                .await?;
            self.token = page.next.clone();
            self.merge.push(&self.key, page);
            if self.token.is_none() {
                self.merge.finish();
                self.listed = true;
            }
        }
    }

    async fn read(&mut self, shared: &Shared, offset: u64, mut reply: ReplyDirectory) {
        let behind = self.buffer.front().is_some_and(|(n, ..)| *n > offset + 1);
        if !self.started || offset == 0 || behind {
            self.restart(shared);
        }
        // Skip to `offset` (a rewound cursor lists again from the start).
        loop {
            while self.buffer.front().is_some_and(|(n, ..)| *n <= offset) {
                self.buffer.pop_front();
            }
            if !self.buffer.is_empty() {
                break;
            }
            match self.fill(shared).await {
                Ok(true) => {}
                Ok(false) => return reply.ok(),
                Err(f) => return reply.error(f.errno()),
            }
        }
        let mut index = 0;
        loop {
            if index == self.buffer.len() {
                match self.fill(shared).await {
                    Ok(true) => continue,
                    Ok(false) => break,
                    Err(f) => return reply.error(f.errno()),
                }
            }
            let (n, name, kind, ino) = &self.buffer[index];
            if reply.add(INodeNo(*ino), *n, *kind, name) {
                break;
            }
            index += 1;
        }
        reply.ok();
    }
}

fn file_type(kind: Kind) -> FileType {
    match kind {
        Kind::File => FileType::RegularFile,
        Kind::Dir => FileType::Directory,
    }
}

/// The process (thread group) of the thread `pid` the kernel names in a
/// request: a program may open a file on one thread and close it on
/// another, and it is the process that decides when the upload completes
/// ([`super::writer`]). The thread's own id when /proc does not tell.
fn process_of(pid: u32) -> u32 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(pid)
}

/// An inode number for a listed name the kernel has not looked up (only
/// shown by `readdir`; never one of the table's, which count up from 1).
fn unknown_ino(dir: &str, name: &str) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (dir, name).hash(&mut h);
    h.finish() | (1 << 63)
}

/// The file system handed to fuser.
#[derive(Debug)]
pub(super) struct S3Fs {
    shared: Arc<Shared>,
}

impl S3Fs {
    pub(super) fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    /// Runs `work` on the agent's runtime, unless the mount has stopped.
    fn spawn<F>(&self, work: impl FnOnce(Arc<Shared>) -> F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let fut = work(self.shared.clone());
        self.shared.rt.spawn(fut);
    }

    /// The directory `parent` and the UTF-8 `name` under it, or the errno.
    fn dir_and_name<'a>(&self, parent: INodeNo, name: &'a OsStr) -> Result<(Node, &'a str), Errno> {
        let name = name.to_str().ok_or(Errno::ENOENT)?;
        if self.shared.stopped() {
            return Err(Errno::EIO);
        }
        let node = self
            .shared
            .inodes()
            .get(parent.0)
            .cloned()
            .ok_or(Errno::ENOENT)?;
        if node.kind != Kind::Dir {
            return Err(Errno::ENOTDIR);
        }
        Ok((node, name))
    }

    /// A child this mount knows only locally (not in S3), if any.
    fn local_child(&self, parent: u64, name: &str) -> Option<(u64, Node)> {
        let inodes = self.shared.inodes();
        let ino = inodes.child(parent, name)?;
        let node = inodes.get(ino)?;
        (node.local_dir || node.writing).then(|| (ino, node.clone()))
    }

    fn refuse_write(&self) -> Result<(), Errno> {
        if self.shared.spec.read_only {
            Err(Errno::EROFS)
        } else if self.shared.stopped() {
            Err(Errno::EIO)
        } else {
            Ok(())
        }
    }

    fn open_read(&self, ino: u64, node: Node, reply: ReplyOpen) {
        self.spawn(move |shared| async move {
            let meta = match shared.client.head(&node.key).await {
                Ok(Some(meta)) => meta,
                Ok(None) => return reply.error(Errno::ENOENT),
                Err(f) => return reply.error(f.errno()),
            };
            if let Some(n) = shared.inodes().get_mut(ino)
                && !n.writing
            {
                n.size = meta.size;
                n.mtime = meta.mtime;
                n.etag = meta.etag.clone();
                n.checked = std::time::Instant::now();
            }
            let (tx, rx) = mpsc::unbounded_channel();
            let reader = Reader::new(shared.client.clone(), node.key, meta.size, meta.etag);
            tokio::spawn(reader.run(rx));
            let fh = shared.add_handle(Handle::Read(tx));
            reply.opened(FileHandle(fh), FopenFlags::empty());
        });
    }

    fn start_writer(&self, ino: u64, key: String, pid: u32) -> u64 {
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = Writer::new(self.shared.clone(), ino, key, pid);
        self.shared.rt.spawn(writer.run(rx));
        self.shared.add_handle(Handle::Write(tx))
    }

    fn handle_write_op(&self, fh: FileHandle) -> Option<mpsc::UnboundedSender<WriteOp>> {
        match self.shared.handles().get(&fh.0) {
            Some(Handle::Write(tx)) => Some(tx.clone()),
            _ => None,
        }
    }
}

impl Filesystem for S3Fs {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        // O_TRUNC reaches `open` (an overwrite is asked for there, not
        // through a separate truncate).
        let _ = config.add_capabilities(InitFlags::FUSE_ATOMIC_O_TRUNC);
        if let Err(max) = config.set_max_readahead(READAHEAD) {
            let _ = config.set_max_readahead(max);
        }
        Ok(())
    }

    fn destroy(&mut self) {
        self.shared.stop();
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let (dir, name) = match self.dir_and_name(parent, name) {
            Ok(x) => x,
            Err(e) => return reply.error(e),
        };
        if let Some((_, node)) = self.local_child(parent.0, name) {
            return self.shared.entry(parent.0, name, node.kind, None, reply);
        }
        let (name, key) = (name.to_owned(), format!("{}{name}", dir.key));
        self.spawn(move |shared| async move {
            match shared.probe(&key).await {
                Ok(Some((kind, meta))) => shared.entry(parent.0, &name, kind, meta.as_ref(), reply),
                Ok(None) => {
                    shared.inodes().unlink(parent.0, &name);
                    reply.error(Errno::ENOENT);
                }
                Err(f) => reply.error(f.errno()),
            }
        });
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        self.shared.inodes().forget(ino.0, nlookup);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let Some(node) = self.shared.inodes().get(ino.0).cloned() else {
            return reply.error(Errno::ENOENT);
        };
        if node.kind == Kind::Dir || node.writing || node.checked.elapsed() < TTL {
            return reply.attr(&TTL, &self.shared.attr(ino.0, &node));
        }
        self.spawn(move |shared| async move {
            match shared.client.head(&node.key).await {
                Ok(Some(meta)) => {
                    let mut inodes = shared.inodes();
                    let Some(n) = inodes.get_mut(ino.0) else {
                        return reply.error(Errno::ENOENT);
                    };
                    if !n.writing {
                        n.size = meta.size;
                        n.mtime = meta.mtime;
                        n.etag = meta.etag;
                        n.checked = std::time::Instant::now();
                    }
                    let node = n.clone();
                    drop(inodes);
                    reply.attr(&TTL, &shared.attr(ino.0, &node));
                }
                Ok(None) => reply.error(Errno::ENOENT),
                Err(f) => reply.error(f.errno()),
            }
        });
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let Some(node) = self.shared.inodes().get(ino.0).cloned() else {
            return reply.error(Errno::ENOENT);
        };
        if let Err(e) = self.refuse_write() {
            return reply.error(e);
        }
        // Owners and modes are fixed; times and a size that changes
        // nothing are accepted only on a file being written.
        if mode.is_some() || uid.is_some() || gid.is_some() || !node.writing {
            return reply.error(Errno::EPERM);
        }
        if size.is_some_and(|s| s != node.size) {
            return reply.error(Errno::EINVAL);
        }
        reply.attr(&TTL, &self.shared.attr(ino.0, &node));
    }

    fn mknod(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(self.refuse_write().err().unwrap_or(Errno::EPERM));
    }

    fn mkdir(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        if let Err(e) = self.refuse_write() {
            return reply.error(e);
        }
        let (dir, name) = match self.dir_and_name(parent, name) {
            Ok(x) => x,
            Err(e) => return reply.error(if e == Errno::ENOENT { Errno::EINVAL } else { e }),
        };
        if self.local_child(parent.0, name).is_some() {
            return reply.error(Errno::EEXIST);
        }
        let (name, key) = (name.to_owned(), format!("{}{name}", dir.key));
        self.spawn(move |shared| async move {
            match shared.probe(&key).await {
                Ok(Some(_)) => reply.error(Errno::EEXIST),
                Ok(None) => {
                    let mut inodes = shared.inodes();
                    let Some(ino) =
                        inodes.upsert(parent.0, &name, Kind::Dir, None, SystemTime::now())
                    else {
                        return reply.error(Errno::ENOENT);
                    };
                    let Some(node) = inodes.get_mut(ino) else {
                        return reply.error(Errno::ENOENT);
                    };
                    node.local_dir = true;
                    let node = node.clone();
                    drop(inodes);
                    reply.entry(&TTL, &shared.attr(ino, &node), Generation(0));
                }
                Err(f) => reply.error(f.errno()),
            }
        });
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if let Err(e) = self.refuse_write() {
            return reply.error(e);
        }
        if !self.shared.spec.allow_delete {
            return reply.error(Errno::EPERM);
        }
        let (dir, name) = match self.dir_and_name(parent, name) {
            Ok(x) => x,
            Err(e) => return reply.error(e),
        };
        if let Some((_, node)) = self.local_child(parent.0, name) {
            // A file is not deleted while it is written (mount-s3).
            return reply.error(if node.kind == Kind::Dir {
                Errno::EISDIR
            } else {
                Errno::EPERM
            });
        }
        let (name, key) = (name.to_owned(), format!("{}{name}", dir.key));
        self.spawn(move |shared| async move {
            match shared.probe(&key).await {
                Ok(Some((Kind::File, _))) => match shared.client.delete(&key).await {
                    Ok(()) => {
                        shared.inodes().unlink(parent.0, &name);
                        reply.ok();
                    }
                    Err(f) => reply.error(f.errno()),
                },
                Ok(Some((Kind::Dir, _))) => reply.error(Errno::EISDIR),
                Ok(None) => reply.error(Errno::ENOENT),
                Err(f) => reply.error(f.errno()),
            }
        });
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        if let Err(e) = self.refuse_write() {
            return reply.error(e);
        }
        let (dir, name) = match self.dir_and_name(parent, name) {
            Ok(x) => x,
            Err(e) => return reply.error(e),
        };
        let local = self.local_child(parent.0, name);
        let (name, key) = (name.to_owned(), format!("{}{name}/", dir.key));
        self.spawn(move |shared| async move {
            let page = match shared.client.list(&key, false, None, 1, None).await {
                Ok(page) => page,
                Err(f) => return reply.error(f.errno()),
            };
            if !page.objects.is_empty() || !page.prefixes.is_empty() {
                // Only a directory made here and still empty goes.
                return reply.error(Errno::ENOTEMPTY);
            }
            match local {
                Some((ino, node)) if node.kind == Kind::Dir => {
                    let mut inodes = shared.inodes();
                    if !inodes.local_children(ino).is_empty() {
                        return reply.error(Errno::ENOTEMPTY);
                    }
                    if let Some(n) = inodes.get_mut(ino) {
                        n.local_dir = false;
                    }
                    inodes.unlink(parent.0, &name);
                    reply.ok();
                }
                Some(_) => reply.error(Errno::ENOTDIR),
                None => reply.error(Errno::ENOENT),
            }
        });
    }

    fn symlink(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _link_name: &OsStr,
        _target: &std::path::Path,
        reply: ReplyEntry,
    ) {
        reply.error(self.refuse_write().err().unwrap_or(Errno::EPERM));
    }

    fn rename(
        &self,
        _req: &Request,
        _parent: INodeNo,
        _name: &OsStr,
        _newparent: INodeNo,
        _newname: &OsStr,
        _flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        // S3 has no rename: mount-s3 answers "function not implemented".
        reply.error(self.refuse_write().err().unwrap_or(Errno::ENOSYS));
    }

    fn link(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _newparent: INodeNo,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(self.refuse_write().err().unwrap_or(Errno::EPERM));
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if self.shared.stopped() {
            return reply.error(Errno::EIO);
        }
        let Some(node) = self.shared.inodes().get(ino.0).cloned() else {
            return reply.error(Errno::ENOENT);
        };
        if node.kind == Kind::Dir {
            return reply.error(Errno::EISDIR);
        }
        let access = flags.acc_mode();
        let truncate = flags.0 & libc::O_TRUNC != 0;
        // O_RDWR without O_TRUNC reads (the handle then refuses writes).
        if access == OpenAccMode::O_WRONLY || (access == OpenAccMode::O_RDWR && truncate) {
            if let Err(e) = self.refuse_write() {
                return reply.error(e);
            }
            // One writer at a time; an existing object is replaced only
            // when truncated and allowed.
            if node.writing || !truncate || !self.shared.spec.allow_overwrite {
                return reply.error(Errno::EPERM);
            }
            if let Some(n) = self.shared.inodes().get_mut(ino.0) {
                n.writing = true;
                n.size = 0;
            }
            let fh = self.start_writer(ino.0, node.key, process_of(req.pid()));
            return reply.opened(FileHandle(fh), FopenFlags::empty());
        }
        if node.writing {
            // Not readable until it is uploaded (mount-s3).
            return reply.error(Errno::EPERM);
        }
        self.open_read(ino.0, node, reply);
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let tx = match self.shared.handles().get(&fh.0) {
            Some(Handle::Read(tx)) => tx.clone(),
            _ => return reply.error(Errno::EBADF),
        };
        if let Err(mpsc::error::SendError(r)) = tx.send(Read {
            offset,
            size,
            reply,
        }) {
            r.reply.error(Errno::EIO);
        }
    }

    fn write(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let Some(tx) = self.handle_write_op(fh) else {
            return reply.error(Errno::EBADF);
        };
        let op = WriteOp::Write {
            offset,
            data: data.to_vec(),
            reply,
        };
        if let Err(mpsc::error::SendError(WriteOp::Write { reply, .. })) = tx.send(op) {
            reply.error(Errno::EIO);
        }
    }

    fn flush(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        let Some(tx) = self.handle_write_op(fh) else {
            return reply.ok();
        };
        let op = WriteOp::Flush {
            pid: process_of(req.pid()),
            reply,
        };
        if let Err(mpsc::error::SendError(WriteOp::Flush { reply, .. })) = tx.send(op) {
            reply.error(Errno::EIO);
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let handle = self.shared.handles().remove(&fh.0);
        match handle {
            Some(Handle::Write(tx)) => {
                if let Err(mpsc::error::SendError(WriteOp::Release { reply })) =
                    tx.send(WriteOp::Release { reply })
                {
                    reply.ok();
                }
            }
            // Dropping a reader's queue ends its task and its GET.
            _ => reply.ok(),
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        let Some(tx) = self.handle_write_op(fh) else {
            return reply.ok();
        };
        if let Err(mpsc::error::SendError(WriteOp::Fsync { reply })) =
            tx.send(WriteOp::Fsync { reply })
        {
            reply.error(Errno::EIO);
        }
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        if self.shared.stopped() {
            return reply.error(Errno::EIO);
        }
        let Some(node) = self.shared.inodes().get(ino.0).cloned() else {
            return reply.error(Errno::ENOENT);
        };
        if node.kind != Kind::Dir {
            return reply.error(Errno::ENOTDIR);
        }
        let cursor = DirCursor::new(ino.0, node.key, node.parent);
        let fh = self
            .shared
            .add_handle(Handle::Dir(Arc::new(tokio::sync::Mutex::new(cursor))));
        reply.opened(FileHandle(fh), FopenFlags::empty());
    }

    fn readdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        let cursor = match self.shared.handles().get(&fh.0) {
            Some(Handle::Dir(c)) => c.clone(),
            _ => return reply.error(Errno::EBADF),
        };
        self.spawn(move |shared| async move {
            cursor.lock().await.read(&shared, offset, reply).await;
        });
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.shared.handles().remove(&fh.0);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _datasync: bool,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        // S3 has no size: plenty free, so that tools checking for room
        // write (as mount-s3 reports).
        const BLOCKS: u64 = 1 << 40;
        reply.statfs(BLOCKS, BLOCKS, BLOCKS, 1 << 32, 1 << 32, 4096, 255, 4096);
    }

    fn setxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _value: &[u8],
        _flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn getxattr(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _name: &OsStr,
        _size: u32,
        reply: ReplyXattr,
    ) {
        reply.error(Errno::ENOSYS);
    }

    fn listxattr(&self, _req: &Request, _ino: INodeNo, _size: u32, reply: ReplyXattr) {
        reply.error(Errno::ENOSYS);
    }

    fn removexattr(&self, _req: &Request, _ino: INodeNo, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(Errno::ENOSYS);
    }

    fn access(&self, _req: &Request, _ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        if mask.contains(AccessFlags::W_OK) && self.shared.spec.read_only {
            return reply.error(Errno::EROFS);
        }
        reply.ok();
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        if let Err(e) = self.refuse_write() {
            return reply.error(e);
        }
        let name = match self.dir_and_name(parent, name) {
            Ok((_, name)) => name,
            Err(e) => return reply.error(if e == Errno::ENOENT { Errno::EINVAL } else { e }),
        };
        if self.local_child(parent.0, name).is_some() {
            return reply.error(Errno::EEXIST);
        }
        let mut inodes = self.shared.inodes();
        let Some(ino) = inodes.upsert(parent.0, name, Kind::File, None, SystemTime::now()) else {
            return reply.error(Errno::ENOENT);
        };
        let Some(node) = inodes.get_mut(ino) else {
            return reply.error(Errno::ENOENT);
        };
        node.writing = true;
        node.size = 0;
        node.mtime = SystemTime::now();
        let node = node.clone();
        drop(inodes);
        let fh = self.start_writer(ino, node.key.clone(), process_of(req.pid()));
        reply.created(
            &TTL,
            &self.shared.attr(ino, &node),
            Generation(0),
            FileHandle(fh),
            FopenFlags::empty(),
        );
    }

    fn fallocate(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: u64,
        _length: u64,
        _mode: i32,
        reply: ReplyEmpty,
    ) {
        reply.error(Errno::EOPNOTSUPP);
    }

    fn lseek(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _offset: i64,
        _whence: i32,
        reply: ReplyLseek,
    ) {
        reply.error(Errno::ENOSYS);
    }
}
