//! `COPY`: files and directories of the code artifact into the image, as
//! Docker copies them: a directory's contents go into the destination; a
//! file goes to the destination, or into it when it ends with `/`, is an
//! existing directory, or several sources are given. Everything copied is
//! root's, with its mode kept; symlinks are copied as symlinks.

use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use super::image;

/// How deep a copied directory may go.
const MAX_DEPTH: usize = 64;

/// Copies `sources` (paths relative to `artifact_dir`) to `dest` (relative
/// ones below `workdir`) in the image.
///
/// # Errors
/// BuildKit-like text: a source missing or outside the artifact, a
/// destination that cannot be written.
pub(crate) fn copy(
    root: &OwnedFd,
    artifact_dir: &Path,
    sources: &[String],
    dest: &str,
    workdir: &str,
) -> Result<(), String> {
    let dest = if dest.starts_with('/') {
        dest.to_owned()
    } else {
        format!("{}/{dest}", workdir.trim_end_matches('/'))
    };
    let into = dest.ends_with('/') || sources.len() > 1 || image::is_dir(root, &dest);
    for source in sources {
        let host = source_path(artifact_dir, source)?;
        let md = std::fs::symlink_metadata(&host).map_err(|_| {
            format!(
                "failed to compute cache key: \"/{}\": not found",
                source.trim_start_matches('/')
            )
        })?;
        let failed = |err: std::io::Error| format!("failed to copy \"{source}\": {err}");
        if md.is_dir() {
            image::create_dir_all(root, &dest).map_err(failed)?;
            copy_dir(root, &host, &dest, 0).map_err(failed)?;
        } else {
            let target = if into {
                let name = host
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                format!("{}/{name}", dest.trim_end_matches('/'))
            } else {
                dest.clone()
            };
            copy_entry(root, &host, &md, &target, 0).map_err(failed)?;
        }
    }
    Ok(())
}

/// The artifact's file behind a `COPY` source: relative to the artifact,
/// never above it.
fn source_path(artifact_dir: &Path, source: &str) -> Result<PathBuf, String> {
    let mut path = artifact_dir.to_path_buf();
    for component in Path::new(source.trim_start_matches('/')).components() {
        match component {
            Component::Normal(part) => path.push(part),
            Component::CurDir => {}
            _ => {
                return Err(format!(
                    "failed to compute cache key: \"{source}\": outside the build context"
                ));
            }
        }
    }
    Ok(path)
}

fn copy_dir(root: &OwnedFd, from: &Path, dest: &str, depth: usize) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(std::io::Error::other("the directory is nested too deep"));
    }
    let mut entries: Vec<_> = std::fs::read_dir(from)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let md = std::fs::symlink_metadata(entry.path())?;
        let target = format!(
            "{}/{}",
            dest.trim_end_matches('/'),
            entry.file_name().to_string_lossy()
        );
        copy_entry(root, &entry.path(), &md, &target, depth + 1)?;
    }
    Ok(())
}

fn copy_entry(
    root: &OwnedFd,
    from: &Path,
    md: &std::fs::Metadata,
    target: &str,
    depth: usize,
) -> std::io::Result<()> {
    let mode = md.permissions().mode() & 0o7777;
    if md.is_dir() {
        let dir = image::create_dir_all(root, target)?;
        drop(dir);
        copy_dir(root, from, target, depth)?;
        let made = rustix::fs::openat2(
            root,
            image::relative(target),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            rustix::fs::ResolveFlags::IN_ROOT | rustix::fs::ResolveFlags::NO_MAGICLINKS,
        )?;
        rustix::fs::fchmod(&made, Mode::from_raw_mode(mode))?;
        return Ok(());
    }
    let (parent, name) = match target.rsplit_once('/') {
        Some((parent, name)) if !name.is_empty() => (parent, name),
        _ => return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput)),
    };
    let dir = image::create_dir_all(root, parent)?;
    image::remove_non_dir(&dir, name)?;
    if md.file_type().is_symlink() {
        let link = std::fs::read_link(from)?;
        rustix::fs::symlinkat(link.as_path(), &dir, name)?;
        return Ok(());
    }
    if !md.is_file() {
        // Sockets, devices: nothing an artifact should hold; skipped.
        return Ok(());
    }
    let mut source = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(from)?;
    let fd = rustix::fs::openat(
        &dir,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )?;
    let mut out = std::fs::File::from(fd);
    std::io::copy(&mut source, &mut out)?;
    rustix::fs::fchmod(&out, Mode::from_raw_mode(mode))?;
    Ok(())
}

use std::os::unix::fs::OpenOptionsExt as _;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_stay_in_the_artifact() {
        let dir = Path::new("/artifact");
        assert_eq!(
            source_path(dir, "__rayito_context/app/x").unwrap(),
            Path::new("/artifact/__rayito_context/app/x")
        );
        assert_eq!(
            source_path(dir, "/a/./b").unwrap(),
            Path::new("/artifact/a/b")
        );
        assert_eq!(
            source_path(dir, "a/../../etc/shadow").unwrap_err(),
            "failed to compute cache key: \"a/../../etc/shadow\": outside the build context"
        );
    }
}
