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
//! directories and symlinks are archived, anything else (sockets, FIFOs,
//! devices) is skipped and counted. Always skipped: `.cache` and the
//! Jupyter runtime directory (`.local/share/jupyter/runtime`) at the top,
//! and every `__pycache__` and `.ipynb_checkpoints`, plus the request's
//! excludes. A file that shrinks while it is read is padded with zeros to
//! the size its header announced (a file written meanwhile may be archived
//! truncated).
//!
//! Reading resolves every entry from a descriptor of HOME, one component
//! at a time with `O_NOFOLLOW`: an entry whose path is absolute or holds
//! `..`, or whose parent is a symlink (or not a directory), is skipped, as
//! are hard links, devices and FIFOs; files and symlinks replace what is
//! there, directories merge.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use rustix::fs::{AtFlags, Mode, OFlags};

use super::tar_read;

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
use crate::filesystem::beneath::{open_beneath, open_dir as open_home};

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
                    t.bytes = t
                        .bytes
                        .saturating_add(u64::try_from(st.st_size).unwrap_or(0));
                }
                FileType::Symlink => t.files += 1,
                _ => {}
            }
        }
    }
    Ok(t)
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
            match append(&mut tar, &dir, &name, &child, counters)? {
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
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            let Ok(fd) = rustix::fs::openat(dir, name, flags, Mode::empty()) else {
                return Ok(Appended::Skipped);
            };
            let file = std::fs::File::from(fd);
            let fmd = file.metadata()?;
            if !fmd.is_file() {
                return Ok(Appended::Skipped);
            }
            header.set_entry_type(tar::EntryType::Regular);
            header.set_size(fmd.len());
            header.set_mode(fmd.mode() & 0o7777);
            let reader = Exact {
                inner: file,
                left: fmd.len(),
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
    while let Some(entry) = tar.next_entry()? {
        if stop.load(Ordering::Relaxed) {
            return Err(io::Error::from(io::ErrorKind::Interrupted).into());
        }
        match place(&root, &entry, &mut tar.body())? {
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
    Ok(tar.into_inner())
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

/// Whether an error means "this component is a symlink or not a directory".
fn not_a_dir(e: &rustix::io::Errno) -> bool {
    matches!(
        *e,
        rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR | rustix::io::Errno::MLINK
    )
}

fn place(root: &OwnedFd, entry: &tar_read::Entry, body: &mut impl Read) -> io::Result<Placed> {
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
            // The user must keep being able to enter and fill it.
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode | 0o700))?;
            Ok(Placed::Dir)
        }
        tar::EntryType::Regular | tar::EntryType::Continuous => {
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
            let n = io::copy(body, &mut file)?;
            rustix::fs::fchmod(&file, Mode::from_raw_mode(mode))?;
            if let Some(mtime) = entry.mtime {
                let t = rustix::fs::Timespec {
                    tv_sec: i64::try_from(mtime).unwrap_or(0),
                    tv_nsec: 0,
                };
                let _ = rustix::fs::futimens(
                    &file,
                    &rustix::fs::Timestamps {
                        last_access: t,
                        last_modification: t,
                    },
                );
            }
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
            Ok(Placed::File(0))
        }
        // Hard links, devices, FIFOs and the rest.
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
}
