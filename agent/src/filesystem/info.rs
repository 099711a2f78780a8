//! `EntryInfo` from file metadata, and I/O errors as status codes with
//! fixed messages (never a path).

use std::fs::Metadata;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use rayito_proto::tokens::detail;
use tonic::Status;

use crate::pb;

/// The status for an I/O error; the message never names the path.
pub(crate) fn io_status(e: &std::io::Error) -> Status {
    match e.raw_os_error() {
        Some(libc::ENOENT) => Status::not_found("path not found"),
        Some(libc::EACCES) | Some(libc::EPERM) => Status::permission_denied("permission denied"),
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => Status::resource_exhausted(detail::DISK_FULL),
        Some(libc::ENOTDIR) => Status::invalid_argument("not a directory"),
        Some(libc::EISDIR) => Status::invalid_argument("is a directory"),
        Some(libc::ELOOP) => Status::invalid_argument("is a symlink"),
        Some(libc::EXDEV) => Status::failed_precondition("cross-device move"),
        Some(libc::ENOTEMPTY) | Some(libc::EEXIST) => {
            Status::failed_precondition("destination conflict")
        }
        Some(n) => Status::internal(format!("i/o error (errno {n})")),
        None => Status::internal("i/o error"),
    }
}

fn name_of(id: u32, file: &str) -> String {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|text| {
            text.lines().find_map(|line| {
                let mut f = line.split(':');
                let name = f.next()?;
                let _pw = f.next()?;
                (f.next()?.parse::<u32>().ok()? == id).then(|| name.to_owned())
            })
        })
        .unwrap_or_else(|| id.to_string())
}

fn file_type(md: &Metadata) -> pb::FileType {
    let ft = md.file_type();
    if ft.is_symlink() {
        pb::FileType::Symlink
    } else if ft.is_dir() {
        pb::FileType::Directory
    } else if ft.is_file() {
        pb::FileType::File
    } else {
        pb::FileType::Unspecified
    }
}

/// `ls -l` form of a mode, e.g. `drwxr-xr-x`.
pub(crate) fn permissions(md: &Metadata) -> String {
    let kind = match file_type(md) {
        pb::FileType::Directory => 'd',
        pb::FileType::Symlink => 'l',
        pb::FileType::File => '-',
        pb::FileType::Unspecified => '?',
    };
    let mode = md.permissions().mode();
    let mut s = String::with_capacity(10);
    s.push(kind);
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

/// Milliseconds since the epoch of a file time, saturated: a filesystem
/// such as tmpfs keeps any 64-bit second count a guest sets (`touch -d`,
/// `os.utime`), which times 1000 would overflow.
fn unix_ms(secs: i64, nanos: i64) -> i64 {
    secs.saturating_mul(1000).saturating_add(nanos / 1_000_000)
}

/// The EntryInfo of `host` (not following a final symlink), named by `guest`.
pub(crate) fn entry_info(guest: &str, host: &Path) -> Result<pb::EntryInfo, std::io::Error> {
    let md = std::fs::symlink_metadata(host)?;
    let symlink_target = if md.file_type().is_symlink() {
        std::fs::read_link(host)
            .ok()
            .map(|t| t.to_string_lossy().into_owned())
    } else {
        None
    };
    let mut info = info_of(guest, &md, symlink_target);
    info.metadata = super::xattrs::Of::Path(host).read().into_iter().collect();
    Ok(info)
}

/// The EntryInfo of the open `file`, named by `guest` (what a Write or an
/// import just renamed into place: no path is looked up again).
pub(crate) fn file_entry_info(
    guest: &str,
    file: &std::fs::File,
) -> Result<pb::EntryInfo, std::io::Error> {
    let mut info = info_of(guest, &file.metadata()?, None);
    info.metadata = super::xattrs::Of::File(file).read().into_iter().collect();
    Ok(info)
}

fn info_of(guest: &str, md: &Metadata, symlink_target: Option<String>) -> pb::EntryInfo {
    let name = guest.rsplit('/').next().unwrap_or_default().to_owned();
    pb::EntryInfo {
        name,
        r#type: file_type(md) as i32,
        path: guest.to_owned(),
        size: md.len(),
        mode: md.mode() & 0o7777,
        permissions: permissions(md),
        owner: name_of(md.uid(), "/etc/passwd"),
        group: name_of(md.gid(), "/etc/group"),
        modified_time_unix_ms: unix_ms(md.mtime(), md.mtime_nsec()),
        symlink_target,
        metadata: Default::default(),
    }
}
