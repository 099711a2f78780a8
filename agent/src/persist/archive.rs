//! The archive of a home directory: written as tar + gzip while walking
//! HOME, read back into HOME without ever leaving it. Both run on a
//! blocking thread, as the sandbox's user (`SandboxEnv::as_user`), so they
//! can read and write nothing the user could not.
//!
//! Writing never follows a symlink (it is archived as a symlink): it walks
//! from a descriptor of HOME, opening each directory one component at a
//! time with `O_NOFOLLOW` and each name relative to its directory's
//! descriptor, so sandbox code swapping a directory for a symlink during
//! the walk gets nothing outside HOME into the archive. Files,
//! directories and symlinks are archived with their mode and mtime (in
//! seconds), anything else (sockets, FIFOs, devices) is skipped and
//! counted; a file's second path (same device and inode) is a hard-link
//! entry naming its first, and a file with holes a GNU sparse entry of
//! its data ranges only ([`sparse`]). Always skipped: `.cache` and the
//! Jupyter runtime directory (`.local/share/jupyter/runtime`) at the top,
//! and every `__pycache__` and `.ipynb_checkpoints`, plus the request's
//! excludes. A file that shrinks while it is read is padded with zeros to
//! the size its header announced (a file written meanwhile may be archived
//! truncated).
//!
//! Reading resolves every entry from a descriptor of HOME, one component
//! at a time with `O_NOFOLLOW`: an entry whose path is absolute or holds
//! `..`, or whose parent is a symlink (or not a directory), is skipped, as
//! are devices and FIFOs, and hard links to anything but a file this
//! extraction wrote; files and symlinks replace what is there (with their
//! times, a sparse file's holes kept), directories merge and get their
//! mode and time last, once their contents are written.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags};

use super::{sparse, tar_read};

/// Counters shared with the task that reports progress.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub files_done: AtomicU64,
    pub bytes_read: AtomicU64,
    pub bytes_moved: AtomicU64,
    pub skipped: AtomicU64,
}

/// What a home holds, counted before archiving it.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Tally {
    pub files: u64,
    pub bytes: u64,
}

/// What is always left out, HOME-relative.
const TOP_SKIPS: [&str; 2] = [".cache", ".local/share/jupyter/runtime"];
/// What is left out wherever it is.
const ANY_SKIPS: [&str; 2] = ["__pycache__", ".ipynb_checkpoints"];

/// Whether `rel` (HOME-relative) is left out of the archive.
pub(crate) fn skipped(rel: &Path, excludes: &[PathBuf]) -> bool {
    TOP_SKIPS.iter().any(|s| rel == Path::new(s))
        || rel
            .file_name()
            .is_some_and(|n| ANY_SKIPS.iter().any(|s| n == *s))
        || excludes.iter().any(|e| rel == e)
}

// HOME itself (`open_home`) and its directories (`open_beneath`) are
// opened with `O_NOFOLLOW` one component at a time: a directory that
// sandbox code swapped for a symlink after it was listed fails there
// instead of leading the walk out of HOME.
use crate::filesystem::beneath::{DIR_FLAGS, open_beneath, open_dir as open_home};

/// The names in the directory `dir` (not `.` and `..`), sorted.
fn names_in(dir: &OwnedFd) -> io::Result<Vec<std::ffi::OsString>> {
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(std::ffi::OsStr::from_bytes(name).to_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// The file type of a `stat`.
fn kind_of(st: &rustix::fs::Stat) -> rustix::fs::FileType {
    rustix::fs::FileType::from_raw_mode(st.st_mode)
}

/// Walks HOME and counts what the archive will hold (files and symlinks;
/// the bytes of regular files).
pub(crate) fn tally(home: &Path, excludes: &[PathBuf], stop: &AtomicBool) -> io::Result<Tally> {
    use rustix::fs::FileType;
    let root = open_home(home)?;
    let mut t = Tally::default();
    let mut links = Links::default();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        if stop.load(Ordering::Relaxed) {
            return Err(io::Error::from(io::ErrorKind::Interrupted));
        }
        let Ok(dir) = open_beneath(&root, &rel) else {
            continue;
        };
        let Ok(names) = names_in(&dir) else { continue };
        for name in names {
            let child = rel.join(&name);
            if skipped(&child, excludes) {
                continue;
            }
            let Ok(st) = rustix::fs::statat(&dir, &name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            match kind_of(&st) {
                FileType::Directory => stack.push(child),
                FileType::RegularFile => {
                    t.files += 1;
                    // A second path of a file is a link in the archive,
                    // and a sparse file's holes are not read.
                    if links.first_path(&st, &child).is_some() {
                        continue;
                    }
                    let size = u64::try_from(st.st_size).unwrap_or(0);
                    let data = if allocated(&st) < size {
                        open_file(&dir, &name)
                            .and_then(|f| sparse::data_map(&f, size, allocated(&st) / 512))
                            .map_or(size, |m| m.data_bytes())
                    } else {
                        size
                    };
                    t.bytes = t.bytes.saturating_add(data);
                }
                FileType::Symlink => t.files += 1,
                _ => {}
            }
        }
    }
    Ok(t)
}

/// The bytes allocated to a file (its blocks, in bytes).
fn allocated(st: &rustix::fs::Stat) -> u64 {
    u64::try_from(st.st_blocks).unwrap_or(0).saturating_mul(512)
}

/// Opens `name` of `dir` for reading, never through a symlink (nor
/// blocking on a FIFO swapped in).
fn open_file(dir: &OwnedFd, name: &std::ffi::OsStr) -> Option<std::fs::File> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let fd = rustix::fs::openat(dir, name, flags, Mode::empty()).ok()?;
    Some(std::fs::File::from(fd))
}

/// The first archived path of each file with more than one link, by
/// device and inode: its other paths are archived as hard links to it.
#[derive(Default)]
struct Links(std::collections::HashMap<(u64, u64), PathBuf>);

impl Links {
    /// The path `st` was first archived under, or `None` (and `rel`
    /// remembered as its first path when it has other links).
    fn first_path(&mut self, st: &rustix::fs::Stat, rel: &Path) -> Option<PathBuf> {
        if st.st_nlink < 2 {
            return None;
        }
        let key = (st.st_dev, st.st_ino);
        if let Some(first) = self.0.get(&key) {
            return Some(first.clone());
        }
        self.0.insert(key, rel.to_path_buf());
        None
    }
}

/// Reads exactly `left` bytes of a file: zeros once the file ends early.
struct Exact<R> {
    inner: R,
    left: u64,
    eof: bool,
    counters: Arc<Counters>,
}

impl<R: Read> Read for Exact<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let want = usize::try_from(self.left)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = if self.eof {
            0
        } else {
            self.inner.read(&mut buf[..want])?
        };
        let n = if n == 0 {
            self.eof = true;
            buf[..want].fill(0);
            want
        } else {
            self.counters
                .bytes_read
                .fetch_add(n as u64, Ordering::Relaxed);
            n
        };
        self.left -= n as u64;
        Ok(n)
    }
}

/// Writes the archive of `home` into `out` (the gzip encoder's sink);
/// returns the sink once the archive is complete.
pub(crate) fn write<W: Write>(
    home: &Path,
    excludes: &[PathBuf],
    out: W,
    counters: &Arc<Counters>,
    stop: &AtomicBool,
) -> io::Result<W> {
    let gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Complete);
    let root = open_home(home)?;
    let mut links = Links::default();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let listed = open_beneath(&root, &rel).and_then(|dir| Ok((names_in(&dir)?, dir)));
        let Ok((names, dir)) = listed else {
            counters.skipped.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        // Reversed onto the stack: directories are visited in name order.
        let mut subdirs = Vec::new();
        for name in names {
            if stop.load(Ordering::Relaxed) {
                return Err(io::Error::from(io::ErrorKind::Interrupted));
            }
            let child = rel.join(&name);
            if skipped(&child, excludes) {
                counters.skipped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            match append(&mut tar, &dir, &name, &child, &mut links, counters)? {
                Appended::Dir => subdirs.push(child),
                Appended::Entry => {
                    counters.files_done.fetch_add(1, Ordering::Relaxed);
                }
                Appended::Skipped => {
                    counters.skipped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
    let gz = tar.into_inner()?;
    gz.finish()
}

/// What [`append`] did with one name.
enum Appended {
    /// A directory: its entry is written, its content is to be walked.
    Dir,
    /// A file or symlink written.
    Entry,
    /// Gone, unreadable or not archived (sockets, FIFOs, devices).
    Skipped,
}

/// Appends `name` of the directory `dir` (HOME-relative `child`) to the
/// archive, by descriptor: nothing is reached through a symlink.
fn append<W: Write>(
    tar: &mut tar::Builder<W>,
    dir: &OwnedFd,
    name: &std::ffi::OsStr,
    child: &Path,
    links: &mut Links,
    counters: &Arc<Counters>,
) -> io::Result<Appended> {
    use rustix::fs::FileType;
    let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
        return Ok(Appended::Skipped);
    };
    let mut header = tar::Header::new_gnu();
    header.set_mode(st.st_mode & 0o7777);
    header.set_mtime(u64::try_from(st.st_mtime).unwrap_or(0));
    header.set_uid(0);
    header.set_gid(0);
    match kind_of(&st) {
        FileType::Directory => {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_size(0);
            tar.append_data(&mut header, child, io::empty())?;
            Ok(Appended::Dir)
        }
        FileType::Symlink => {
            let Ok(target) = rustix::fs::readlinkat(dir, name, Vec::new()) else {
                return Ok(Appended::Skipped);
            };
            let target = std::ffi::OsStr::from_bytes(target.as_bytes());
            header.set_entry_type(tar::EntryType::Symlink);
            header.set_size(0);
            tar.append_link(&mut header, child, target)?;
            Ok(Appended::Entry)
        }
        FileType::RegularFile => {
            let Some(file) = open_file(dir, name) else {
                return Ok(Appended::Skipped);
            };
            let fst = rustix::fs::fstat(&file)?;
            if kind_of(&fst) != FileType::RegularFile {
                return Ok(Appended::Skipped);
            }
            header.set_mode(fst.st_mode & 0o7777);
            if let Some(first) = links.first_path(&fst, child) {
                header.set_entry_type(tar::EntryType::Link);
                header.set_size(0);
                tar.append_link(&mut header, child, first)?;
                return Ok(Appended::Entry);
            }
            let size = u64::try_from(fst.st_size).unwrap_or(0);
            if let Some(map) = sparse::data_map(&file, size, allocated(&fst) / 512) {
                header.set_entry_type(tar::EntryType::GNUSparse);
                header.set_size(map.data_bytes());
                let extensions = sparse::encode(&mut header, &map);
                let body = sparse::DataReader::new(file, map, counters.clone());
                // The extension blocks come between the header and the
                // data (whole blocks: the padding is the data's).
                tar.append_data(&mut header, child, io::Cursor::new(extensions).chain(body))?;
                return Ok(Appended::Entry);
            }
            header.set_entry_type(tar::EntryType::Regular);
            header.set_size(size);
            let reader = Exact {
                inner: file,
                left: size,
                eof: false,
                counters: counters.clone(),
            };
            tar.append_data(&mut header, child, reader)?;
            Ok(Appended::Entry)
        }
        _ => Ok(Appended::Skipped),
    }
}

/// What extracting one entry did.
#[derive(Debug, PartialEq, Eq)]
enum Placed {
    /// A file or symlink written (with its bytes).
    File(u64),
    /// A directory made or merged.
    Dir,
    /// Left out (hostile or unsupported).
    Skipped,
}

/// Why an archive was not extracted.
#[derive(Debug)]
pub(crate) enum ExtractError {
    /// The stream broke a limit or is not a tar stream (see [`tar_read`]).
    Read(tar_read::ReadError),
    /// Writing into HOME failed.
    Write(io::Error),
}

impl From<tar_read::ReadError> for ExtractError {
    fn from(e: tar_read::ReadError) -> Self {
        Self::Read(e)
    }
}

impl From<io::Error> for ExtractError {
    fn from(e: io::Error) -> Self {
        Self::Write(e)
    }
}

/// Reads the whole tar stream `input` (already un-gzipped) within
/// `limits` without writing anything: a stream refused here never reaches
/// HOME. Returns the stream after its end-of-archive block.
pub(crate) fn check<R: Read>(
    input: R,
    limits: tar_read::Limits,
    stop: &AtomicBool,
) -> Result<R, ExtractError> {
    let mut tar = tar_read::Reader::new(input, limits);
    while tar.next_entry()?.is_some() {
        if stop.load(Ordering::Relaxed) {
            return Err(io::Error::from(io::ErrorKind::Interrupted).into());
        }
        // Read, not skipped: a body cut short is found here too.
        io::copy(&mut tar.body(), &mut io::sink()).map_err(tar_read::ReadError::Io)?;
    }
    Ok(tar.into_inner())
}

/// Extracts the tar stream `input` (already un-gzipped) into the directory
/// `home`, within `limits`; counts files, bytes written and skipped
/// entries in `counters`. Returns the stream after its end-of-archive
/// block.
pub(crate) fn extract<R: Read>(
    home: &Path,
    input: R,
    limits: tar_read::Limits,
    counters: &Counters,
    stop: &AtomicBool,
) -> Result<R, ExtractError> {
    let root = rustix::fs::open(
        home,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)?;
    let mut tar = tar_read::Reader::new(input, limits);
    let mut done = Extracted::default();
    while let Some(entry) = tar.next_entry()? {
        if stop.load(Ordering::Relaxed) {
            return Err(io::Error::from(io::ErrorKind::Interrupted).into());
        }
        match place(&root, &entry, &mut tar.body(), &mut done)? {
            Placed::File(n) => {
                counters.files_done.fetch_add(1, Ordering::Relaxed);
                counters.bytes_moved.fetch_add(n, Ordering::Relaxed);
            }
            Placed::Dir => {}
            Placed::Skipped => {
                counters.skipped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    done.finish_dirs(&root);
    Ok(tar.into_inner())
}

/// Most bytes of directory paths remembered for their modes and times
/// (set once their contents are written); directories past it keep the
/// restore's time.
const MAX_DIR_PATH_BYTES: usize = 16 << 20;

/// What an extraction remembers between entries.
#[derive(Default)]
struct Extracted {
    /// The files this extraction wrote, by a digest of their path: the
    /// only targets a hard-link entry may name.
    files: std::collections::HashSet<[u8; 16]>,
    /// Directories with their mode and time, set last (writing into a
    /// directory changes its time).
    dirs: Vec<(Vec<u8>, u32, Option<u64>)>,
    dir_bytes: usize,
}

/// A digest of an entry's path, in components (fixed size whatever the
/// path's length: an archive cannot make the set large).
fn path_key(parts: &[&[u8]]) -> [u8; 16] {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    for p in parts {
        h.update(p);
        h.update([0]);
    }
    let mut key = [0u8; 16];
    key.copy_from_slice(&h.finalize()[..16]);
    key
}

/// Timestamps of `mtime` (seconds) for both times.
fn times(mtime: u64) -> rustix::fs::Timestamps {
    let t = rustix::fs::Timespec {
        tv_sec: i64::try_from(mtime).unwrap_or(0),
        tv_nsec: 0,
    };
    rustix::fs::Timestamps {
        last_access: t,
        last_modification: t,
    }
}

impl Extracted {
    fn remember_dir(&mut self, path: &[u8], mode: u32, mtime: Option<u64>) {
        if self.dir_bytes + path.len() <= MAX_DIR_PATH_BYTES {
            self.dir_bytes += path.len();
            self.dirs.push((path.to_vec(), mode, mtime));
        }
    }

    /// Sets each directory's mode and time, deepest first (a directory
    /// made unwritable or unsearchable no longer matters to what is
    /// below it); best effort: a directory gone or replaced meanwhile is
    /// passed over.
    fn finish_dirs(&mut self, root: &OwnedFd) {
        let depth = |p: &[u8]| p.iter().filter(|b| **b == b'/').count();
        self.dirs.sort_by_key(|d| std::cmp::Reverse(depth(&d.0)));
        for (path, mode, mtime) in &self.dirs {
            let Some(parts) = components(path) else {
                continue;
            };
            let Ok(fd) = open_parts(root, &parts) else {
                continue;
            };
            let _ = rustix::fs::fchmod(&fd, Mode::from_raw_mode(*mode));
            if let Some(t) = mtime {
                let _ = rustix::fs::futimens(&fd, &times(*t));
            }
        }
    }
}

/// Longest path Linux takes (`PATH_MAX` less its NUL).
const MAX_PATH_BYTES: usize = 4095;
/// Longest name Linux takes (`NAME_MAX`).
const MAX_NAME_BYTES: usize = 255;

/// The components of an entry's path, or `None` when it may not be placed
/// (absolute, `..`, empty, or longer than Linux takes: skipped, rather
/// than failing the restore halfway).
fn components(path: &[u8]) -> Option<Vec<&[u8]>> {
    if path.first() == Some(&b'/') || path.len() > MAX_PATH_BYTES {
        return None;
    }
    let parts: Vec<&[u8]> = path
        .split(|b| *b == b'/')
        .filter(|p| !p.is_empty() && *p != b".")
        .collect();
    if parts.is_empty()
        || parts
            .iter()
            .any(|p| *p == b".." || p.len() > MAX_NAME_BYTES)
    {
        return None;
    }
    Some(parts)
}

/// Opens the directory `parts` beneath `root`, one component at a time
/// with `O_NOFOLLOW` (never making one).
fn open_parts(root: &OwnedFd, parts: &[&[u8]]) -> rustix::io::Result<OwnedFd> {
    let mut fd = rustix::fs::openat(root, ".", DIR_FLAGS, Mode::empty())?;
    for p in parts {
        fd = rustix::fs::openat(
            &fd,
            std::ffi::OsStr::from_bytes(p),
            DIR_FLAGS,
            Mode::empty(),
        )?;
    }
    Ok(fd)
}

/// Whether an error means "this component is a symlink or not a directory".
fn not_a_dir(e: &rustix::io::Errno) -> bool {
    matches!(
        *e,
        rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR | rustix::io::Errno::MLINK
    )
}

fn place(
    root: &OwnedFd,
    entry: &tar_read::Entry,
    body: &mut impl Read,
    done: &mut Extracted,
) -> io::Result<Placed> {
    let kind = entry.kind;
    let Some(parts) = components(&entry.path) else {
        return Ok(Placed::Skipped);
    };
    let (name, parents) = parts.split_last().expect("non-empty");
    let name = std::ffi::OsStr::from_bytes(name);
    // Walk to the parent, making missing directories, never through a
    // symlink.
    let mut dir: Option<OwnedFd> = None;
    for p in parents {
        let p = std::ffi::OsStr::from_bytes(p);
        let at = dir.as_ref().unwrap_or(root).as_fd();
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let next = match rustix::fs::openat(at, p, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => {
                match rustix::fs::mkdirat(at, p, Mode::from_raw_mode(0o755)) {
                    Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                match rustix::fs::openat(at, p, flags, Mode::empty()) {
                    Ok(fd) => fd,
                    Err(e) if not_a_dir(&e) => return Ok(Placed::Skipped),
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) if not_a_dir(&e) => return Ok(Placed::Skipped),
            Err(e) => return Err(e.into()),
        };
        dir = Some(next);
    }
    let parent = dir.as_ref().unwrap_or(root).as_fd();
    let mode = entry.mode & 0o777;
    let existing = rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW).ok();
    let existing_is_dir = existing.as_ref().is_some_and(|st| {
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory
    });
    match kind {
        tar::EntryType::Directory => {
            if existing.is_some() && !existing_is_dir {
                rustix::fs::unlinkat(parent, name, AtFlags::empty())?;
            }
            if !existing_is_dir {
                rustix::fs::mkdirat(parent, name, Mode::from_raw_mode(mode))?;
            }
            let fd = rustix::fs::openat(
                parent,
                name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )?;
            // The user must keep being able to enter and fill it; its own
            // mode and time come last.
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode | 0o700))?;
            done.remember_dir(&parts.join(&b'/'), mode, entry.mtime);
            Ok(Placed::Dir)
        }
        tar::EntryType::Regular | tar::EntryType::Continuous | tar::EntryType::GNUSparse => {
            if existing_is_dir {
                return Ok(Placed::Skipped);
            }
            if existing.is_some() {
                rustix::fs::unlinkat(parent, name, AtFlags::empty())?;
            }
            let fd = rustix::fs::openat(
                parent,
                name,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )?;
            let mut file = std::fs::File::from(fd);
            let n = match &entry.sparse {
                Some(map) => sparse::write_into(&file, map, body)?,
                None => io::copy(body, &mut file)?,
            };
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
            if let Some(mtime) = entry.mtime {
                let _ = rustix::fs::futimens(&file, &times(mtime));
            }
            done.files.insert(path_key(&parts));
            Ok(Placed::File(n))
        }
        tar::EntryType::Symlink => {
            let Some(target) = entry
                .link
                .as_deref()
                .filter(|t| !t.is_empty() && t.len() <= MAX_PATH_BYTES)
            else {
                return Ok(Placed::Skipped);
            };
            let target = std::ffi::OsStr::from_bytes(target);
            if existing_is_dir {
                return Ok(Placed::Skipped);
            }
            if existing.is_some() {
                rustix::fs::unlinkat(parent, name, AtFlags::empty())?;
            }
            rustix::fs::symlinkat(target, parent, name)?;
            if let Some(mtime) = entry.mtime {
                let _ =
                    rustix::fs::utimensat(parent, name, &times(mtime), AtFlags::SYMLINK_NOFOLLOW);
            }
            Ok(Placed::File(0))
        }
        tar::EntryType::Link => {
            // Only to a file this extraction wrote (so inside HOME, and
            // never to what was there before or outside).
            let Some(target) = entry.link.as_deref().and_then(components) else {
                return Ok(Placed::Skipped);
            };
            if !done.files.contains(&path_key(&target)) || existing_is_dir {
                return Ok(Placed::Skipped);
            }
            let (target_name, target_parents) = target.split_last().expect("non-empty");
            let Ok(target_dir) = open_parts(root, target_parents) else {
                return Ok(Placed::Skipped);
            };
            if existing.is_some() {
                rustix::fs::unlinkat(parent, name, AtFlags::empty())?;
            }
            // Without AT_SYMLINK_FOLLOW: a symlink put there meanwhile is
            // linked itself, never followed.
            match rustix::fs::linkat(
                &target_dir,
                std::ffi::OsStr::from_bytes(target_name),
                parent,
                name,
                AtFlags::empty(),
            ) {
                Ok(()) => {
                    done.files.insert(path_key(&parts));
                    Ok(Placed::File(0))
                }
                Err(_) => Ok(Placed::Skipped),
            }
        }
        // Devices, FIFOs and the rest.
        _ => Ok(Placed::Skipped),
    }
}

/// Reads the chunks a channel delivers, as one stream (the downloaded
/// archive, fed by the async side).
pub(crate) struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<bytes::Bytes>,
    current: bytes::Bytes,
}

impl ChannelReader {
    pub(crate) fn new(rx: tokio::sync::mpsc::Receiver<bytes::Bytes>) -> Self {
        Self {
            rx,
            current: bytes::Bytes::new(),
        }
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(chunk) => self.current = chunk,
                // The sender is gone: the download ended (or failed, which
                // the async side reports).
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt as _;

    #[test]
    fn entry_paths_that_leave_home_are_refused() {
        assert_eq!(components(b"a/./b//c"), Some(vec![&b"a"[..], b"b", b"c"]));
        for bad in [&b"/etc/passwd"[..], b"../x", b"a/../../x", b"", b".", b"./"] {
            assert_eq!(components(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        // Longer than Linux takes: skipped, not an error halfway through.
        assert_eq!(components(&[b'n'; 256]), None);
        assert!(components(&[b'n'; 255]).is_some());
        let deep = b"d/".repeat(2048);
        assert_eq!(components(&deep), None);
    }

    #[test]
    fn the_always_skipped_directories_and_excludes() {
        let ex = vec![PathBuf::from("data/big")];
        for s in [
            ".cache",
            ".local/share/jupyter/runtime",
            "x/__pycache__",
            "__pycache__",
            "a/b/.ipynb_checkpoints",
            "data/big",
        ] {
            assert!(skipped(Path::new(s), &ex), "{s}");
        }
        for k in ["x/.cache", "data", "data/big2", ".local/share/jupyter"] {
            assert!(!skipped(Path::new(k), &ex), "{k}");
        }
    }

    /// A hard-link entry links only to a file this extraction wrote:
    /// never outside HOME, never to what was there before, never ahead of
    /// its target.
    #[test]
    fn hard_links_reach_only_files_the_extraction_wrote() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("before"), b"was here").unwrap();
        let mut b = tar::Builder::new(Vec::new());
        let link = |b: &mut tar::Builder<Vec<u8>>, name: &str, target: &str| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Link);
            h.set_size(0);
            b.append_link(&mut h, name, target).unwrap();
        };
        link(&mut b, "early", "file");
        let mut h = tar::Header::new_gnu();
        h.set_size(4);
        h.set_mode(0o600);
        b.append_data(&mut h, "file", &b"body"[..]).unwrap();
        link(&mut b, "ok", "file");
        link(&mut b, "abs", "/etc/passwd");
        link(&mut b, "up", "../file");
        link(&mut b, "old", "before");
        let data = b.into_inner().unwrap();
        let limits = tar_read::Limits {
            max_entries: 100,
            max_data: 1 << 20,
        };
        let counters = Counters::default();
        extract(
            home.path(),
            &data[..],
            limits,
            &counters,
            &AtomicBool::new(false),
        )
        .unwrap();
        assert_eq!(counters.skipped.load(Ordering::Relaxed), 4);
        let ino = |n: &str| std::fs::metadata(home.path().join(n)).unwrap().ino();
        assert_eq!(ino("ok"), ino("file"));
        for gone in ["early", "abs", "up", "old"] {
            assert!(!home.path().join(gone).exists(), "{gone}");
        }
    }
}
