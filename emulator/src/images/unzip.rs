//! Unpacks a code artifact into a build's directory. The zip comes from
//! whoever can write the artifact bucket: hostile input. Bounded (entry
//! count, total size, checked as bytes are written, never trusting the
//! sizes the archive declares), no entry may leave the directory, and
//! symbolic links are refused.

use std::io::{Cursor, Read as _};
use std::path::Path;

use zip::ZipArchive;

/// The most entries an artifact may hold.
pub(crate) const MAX_ENTRIES: usize = 10_000;
/// The most bytes an artifact may unpack to.
pub(crate) const MAX_BYTES: u64 = 1024 * 1024 * 1024;

/// Why an artifact was refused: the version's `stateReason` carries it (it
/// names no entry: entry names are the uploader's).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UnzipError {
    #[error("the code artifact is not a zip archive")]
    NotZip,
    #[error("the code artifact has more than {MAX_ENTRIES} entries")]
    TooManyEntries,
    #[error("the code artifact unpacks to more than {MAX_BYTES} bytes")]
    TooLarge,
    #[error("the code artifact has an entry whose path leaves the archive")]
    PathEscape,
    #[error("the code artifact has a symbolic link, which builds do not take")]
    Symlink,
    #[error("the code artifact has no Dockerfile at its root")]
    NoDockerfile,
    #[error("the code artifact could not be unpacked")]
    Io,
}

/// Unpacks `zip` into `dest` (created; must not exist or be empty).
/// Blocking: call it from `spawn_blocking`.
///
/// # Errors
/// [`UnzipError`] for an archive that breaks a rule; `dest` may then hold
/// part of it.
pub(crate) fn unpack(zip: &[u8], dest: &Path) -> Result<(), UnzipError> {
    unpack_within(zip, dest, MAX_ENTRIES, MAX_BYTES)
}

/// [`unpack`] with its bounds given (tests use small ones).
fn unpack_within(
    zip: &[u8],
    dest: &Path,
    max_entries: usize,
    max_bytes: u64,
) -> Result<(), UnzipError> {
    let mut archive = ZipArchive::new(Cursor::new(zip)).map_err(|_| UnzipError::NotZip)?;
    if archive.len() > max_entries {
        return Err(UnzipError::TooManyEntries);
    }
    std::fs::create_dir_all(dest).map_err(|_| UnzipError::Io)?;
    let mut total: u64 = 0;
    let mut has_dockerfile = false;
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).map_err(|_| UnzipError::NotZip)?;
        if entry.is_symlink() {
            return Err(UnzipError::Symlink);
        }
        let relative = entry.enclosed_name().ok_or(UnzipError::PathEscape)?;
        if relative.as_os_str().is_empty() {
            continue;
        }
        let path = dest.join(&relative);
        if entry.is_dir() {
            std::fs::create_dir_all(&path).map_err(|_| UnzipError::Io)?;
            continue;
        }
        if relative == Path::new("Dockerfile") {
            has_dockerfile = true;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|_| UnzipError::Io)?;
        }
        // Never follow a link planted by an earlier step, never overwrite.
        let mut out = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|_| UnzipError::Io)?;
        let left = max_bytes.saturating_sub(total);
        let mut limited = (&mut entry).take(left.saturating_add(1));
        let written = std::io::copy(&mut limited, &mut out).map_err(|_| UnzipError::NotZip)?;
        if written > left {
            return Err(UnzipError::TooLarge);
        }
        total += written;
        if let Some(mode) = entry.unix_mode() {
            use std::os::unix::fs::PermissionsExt as _;
            // Permission bits only: no setuid, setgid or sticky from a zip.
            let perms = std::fs::Permissions::from_mode(mode & 0o777);
            std::fs::set_permissions(&path, perms).map_err(|_| UnzipError::Io)?;
        }
    }
    if !has_dockerfile {
        return Err(UnzipError::NoDockerfile);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use zip::write::SimpleFileOptions;

    use super::*;

    fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for (name, bytes) in entries {
            w.start_file(*name, SimpleFileOptions::default()).unwrap();
            w.write_all(bytes).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    #[test]
    fn a_plain_artifact_unpacks() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("a");
        unpack(
            &zip_of(&[("Dockerfile", b"CMD x\n"), ("ctx/f.txt", b"hi")]),
            &dest,
        )
        .unwrap();
        assert_eq!(std::fs::read(dest.join("ctx/f.txt")).unwrap(), b"hi");
    }

    #[test]
    fn hostile_artifacts_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cases: Vec<(Vec<u8>, UnzipError)> = vec![
            (b"not a zip".to_vec(), UnzipError::NotZip),
            (
                zip_of(&[("Dockerfile", b""), ("../escape", b"x")]),
                UnzipError::PathEscape,
            ),
            (zip_of(&[("other", b"")]), UnzipError::NoDockerfile),
        ];
        for (i, (bytes, want)) in cases.into_iter().enumerate() {
            assert_eq!(unpack(&bytes, &dir.path().join(i.to_string())), Err(want));
        }
        let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
        w.add_symlink("Dockerfile", "/etc/passwd", SimpleFileOptions::default())
            .unwrap();
        let link = w.finish().unwrap().into_inner();
        assert_eq!(
            unpack(&link, &dir.path().join("link")),
            Err(UnzipError::Symlink)
        );
        assert!(!dir.path().join("escape").exists());
    }

    #[test]
    fn bounds_count_entries_and_written_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let three = zip_of(&[("Dockerfile", b"12345"), ("a", b"12345"), ("b", b"1")]);
        assert_eq!(
            unpack_within(&three, &dir.path().join("n"), 2, 1 << 20),
            Err(UnzipError::TooManyEntries)
        );
        assert_eq!(
            unpack_within(&three, &dir.path().join("s"), 10, 10),
            Err(UnzipError::TooLarge)
        );
        assert_eq!(unpack_within(&three, &dir.path().join("ok"), 3, 11), Ok(()));
    }
}
