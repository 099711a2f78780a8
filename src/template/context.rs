//! The build context: the files the template's `copy` steps take from
//! the context directory, after `.dockerignore`.
//!
//! Each `copy` source must resolve inside the context
//! (`context_path_outside`) and exist (`context_path_missing`; a source
//! `.dockerignore` excludes is missing, as for Docker). Directories are
//! walked in name order; symbolic links are skipped (a source whose path
//! goes through one is missing, or outside when it leads out). Files are
//! read later without following links and re-checked against what the
//! walk saw. Secret-looking paths are warned about, not excluded.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::builder::Spec;
use super::dockerignore::DockerIgnore;
use super::step::Step;
use crate::SandboxError;

/// The most bytes of context files an artifact carries.
pub(crate) const MAX_CONTEXT_BYTES: u64 = 512 * 1024 * 1024;
/// The most context files an artifact carries.
pub(crate) const MAX_CONTEXT_FILES: usize = 100_000;

/// Paths that usually hold secrets: a warning names them when the context
/// holds them (Docker's cases: they are copied unless `.dockerignore`
/// excludes them).
const SECRET_LOOKING: &[&str] = &[
    "**/.env",
    "**/.env.*",
    "**/.git",
    "**/.aws",
    "**/.ssh",
    "**/*.pem",
    "**/*.key",
];

/// One file of the context.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ContextFile {
    /// `/`-separated, relative to the context root.
    pub(crate) relative: String,
    pub(crate) path: PathBuf,
    pub(crate) size: u64,
    /// Device and inode the walk saw, checked again when the file is read.
    identity: (u64, u64),
}

fn unreadable(_: io::Error) -> SandboxError {
    SandboxError::invalid_argument(
        "context_dir",
        "cannot be read (it must be an existing directory this process may read)",
    )
}

fn too_large() -> SandboxError {
    SandboxError::invalid_argument(
        "context_dir",
        format!(
            "holds more than {} MiB or {} files to copy; exclude what the image does not need with .dockerignore",
            MAX_CONTEXT_BYTES / (1024 * 1024),
            crate::error::group(MAX_CONTEXT_FILES as u64)
        ),
    )
}

/// What the walk gathers, bounded.
struct Gathered {
    files: BTreeMap<String, ContextFile>,
    bytes: u64,
}

impl Gathered {
    fn add(&mut self, file: ContextFile) -> Result<(), SandboxError> {
        if self.files.contains_key(&file.relative) {
            return Ok(());
        }
        self.bytes = self.bytes.saturating_add(file.size);
        if self.bytes > MAX_CONTEXT_BYTES || self.files.len() >= MAX_CONTEXT_FILES {
            return Err(too_large());
        }
        self.files.insert(file.relative.clone(), file);
        Ok(())
    }
}

fn join(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}/{name}")
    }
}

fn file_entry(relative: String, path: PathBuf, meta: &fs::Metadata) -> ContextFile {
    ContextFile {
        relative,
        path,
        size: meta.len(),
        identity: (meta.dev(), meta.ino()),
    }
}

/// Walks `dir` (whose relative path is `relative`) in name order.
fn walk(
    dir: &Path,
    relative: &str,
    ignore: &DockerIgnore,
    out: &mut Gathered,
) -> Result<(), SandboxError> {
    let mut entries: Vec<(String, PathBuf)> = Vec::new();
    for entry in fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        match entry.file_name().into_string() {
            Ok(name) => entries.push((name, entry.path())),
            Err(_) => tracing::warn!(
                target: "rayito::template",
                "skipped a build context entry whose name is not UTF-8"
            ),
        }
    }
    entries.sort();
    for (name, path) in entries {
        let rel = join(relative, &name);
        let meta = fs::symlink_metadata(&path).map_err(unreadable)?;
        let kind = meta.file_type();
        if kind.is_symlink() {
            continue;
        }
        let is_excluded = ignore.is_excluded(&rel);
        if kind.is_dir() {
            if is_excluded && !ignore.has_exceptions() {
                continue;
            }
            walk(&path, &rel, ignore, out)?;
        } else if kind.is_file() && !is_excluded {
            out.add(file_entry(rel, path, &meta))?;
        }
    }
    Ok(())
}

/// The files of every `copy` source of a checked spec, keyed by their path
/// relative to `root`.
///
/// # Errors
///
/// `InvalidArgument` (`context_dir`) when the root cannot be read or the
/// files are above the bounds; `InvalidArgument` (`.dockerignore`) for a
/// bad pattern; `Build { context_path_outside | context_path_missing }`
/// naming the step.
pub(crate) fn gather(spec: &Spec, root: &Path) -> Result<Vec<ContextFile>, SandboxError> {
    let root = fs::canonicalize(root).map_err(unreadable)?;
    if !fs::metadata(&root).map_err(unreadable)?.is_dir() {
        return Err(unreadable(io::Error::from(io::ErrorKind::NotADirectory)));
    }
    let ignore = match fs::read_to_string(root.join(".dockerignore")) {
        Ok(text) => DockerIgnore::parse(&text)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => DockerIgnore::default(),
        Err(e) => return Err(unreadable(e)),
    };
    let mut out = Gathered {
        files: BTreeMap::new(),
        bytes: 0,
    };
    for (index, step) in spec.steps.iter().enumerate() {
        let Step::Copy { src, .. } = step else {
            continue;
        };
        let number = index + 1;
        if src.starts_with('/') || src == ".." || src.starts_with("../") {
            return Err(SandboxError::context_path_outside(number));
        }
        let relative = if src == "." { "" } else { src.as_str() };
        let lexical = root.join(relative);
        let resolved = match fs::canonicalize(&lexical) {
            Ok(resolved) => resolved,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(SandboxError::context_path_missing(number));
            }
            Err(e) => return Err(unreadable(e)),
        };
        if !resolved.starts_with(&root) {
            return Err(SandboxError::context_path_outside(number));
        }
        // A path through a symbolic link is skipped, as links are.
        if resolved != lexical || (!relative.is_empty() && ignore.is_excluded(relative)) {
            return Err(SandboxError::context_path_missing(number));
        }
        let meta = fs::symlink_metadata(&resolved).map_err(unreadable)?;
        if meta.is_dir() {
            walk(&resolved, relative, &ignore, &mut out)?;
        } else if meta.is_file() {
            out.add(file_entry(relative.to_owned(), resolved, &meta))?;
        } else {
            return Err(SandboxError::context_path_missing(number));
        }
    }
    warn_about_secrets(out.files.keys());
    Ok(out.files.into_values().collect())
}

/// One warning per secret-looking pattern the context matches, with the
/// first such path and how many there are (never their contents).
fn warn_about_secrets<'a>(paths: impl Iterator<Item = &'a String> + Clone) {
    for pattern in SECRET_LOOKING {
        let Ok(rule) = DockerIgnore::parse(pattern) else {
            continue;
        };
        let mut hits = paths.clone().filter(|p| rule.is_excluded(p));
        if let Some(first) = hits.next() {
            tracing::warn!(
                target: "rayito::template",
                pattern,
                path = %first,
                files = 1 + hits.count(),
                "the build context holds secret-looking files; exclude them with .dockerignore unless the image needs them"
            );
        }
    }
}

/// The bytes of `file`, read without following a link, and only if it is
/// still the regular file the walk saw.
///
/// # Errors
///
/// `InvalidArgument` (`context_dir`) when the file cannot be read or
/// changed since the walk.
pub(crate) fn read(file: &ContextFile) -> Result<Vec<u8>, SandboxError> {
    let changed = || {
        SandboxError::invalid_argument(
            "context_dir",
            "a file changed while the build context was read; read it again",
        )
    };
    let before = fs::symlink_metadata(&file.path).map_err(unreadable)?;
    if !before.is_file() || (before.dev(), before.ino()) != file.identity {
        return Err(changed());
    }
    let mut handle = fs::File::open(&file.path).map_err(unreadable)?;
    let opened = handle.metadata().map_err(unreadable)?;
    if !opened.is_file() || (opened.dev(), opened.ino()) != file.identity {
        return Err(changed());
    }
    let mut bytes = Vec::new();
    handle
        .by_ref()
        .take(MAX_CONTEXT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(unreadable)?;
    if bytes.len() as u64 > MAX_CONTEXT_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BuildReason;
    use crate::template::Template;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    fn gathered(t: &Template, root: &Path) -> Result<Vec<String>, SandboxError> {
        Ok(gather(t.spec()?, root)?
            .into_iter()
            .map(|f| f.relative)
            .collect())
    }

    fn reason(r: Result<Vec<String>, SandboxError>) -> (BuildReason, u32) {
        match r {
            Err(SandboxError::Build {
                reason: Some(reason),
                meta,
                ..
            }) => {
                let step = meta
                    .message()
                    .split("copy step ")
                    .nth(1)
                    .and_then(|s| s.split(' ').next())
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                (reason, step)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn gathers_sorted_files_after_dockerignore_and_skips_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            ".dockerignore",
            "# build output\napp/target\n**/*.pyc\n!app/keep.pyc\n",
        );
        write(root, "app/main.py", "print(1)");
        write(root, "app/b/z.txt", "z");
        write(root, "app/a.txt", "a");
        write(root, "app/x.pyc", "");
        write(root, "app/keep.pyc", "");
        write(root, "app/target/big.bin", "x");
        write(root, "other/o.txt", "o");
        write(root, "top.txt", "t");
        std::os::unix::fs::symlink(root.join("top.txt"), root.join("app/link.txt")).unwrap();
        std::os::unix::fs::symlink("/etc", root.join("app/etc")).unwrap();
        let t = Template::new()
            .copy("app", "/a")
            .copy("./top.txt", "/t")
            .copy("app/main.py", "/m");
        assert_eq!(
            gathered(&t, root).unwrap(),
            [
                "app/a.txt",
                "app/b/z.txt",
                "app/keep.pyc",
                "app/main.py",
                "top.txt"
            ]
        );
        let all = gathered(&Template::new().copy(".", "/w"), root).unwrap();
        assert_eq!(
            all,
            [
                ".dockerignore",
                "app/a.txt",
                "app/b/z.txt",
                "app/keep.pyc",
                "app/main.py",
                "other/o.txt",
                "top.txt"
            ]
        );
    }

    #[test]
    fn sources_outside_or_missing_name_their_step() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ctx");
        write(&root, "in.txt", "x");
        write(&root, ".dockerignore", "secret.txt\n");
        write(&root, "secret.txt", "x");
        write(dir.path(), "outside.txt", "x");
        std::os::unix::fs::symlink(dir.path().join("outside.txt"), root.join("out-link")).unwrap();
        std::os::unix::fs::symlink(root.join("in.txt"), root.join("in-link")).unwrap();
        let at = |src: &str| gathered(&Template::new().run_cmd("true").copy(src, "/d"), &root);
        assert_eq!(
            reason(at("../outside.txt")),
            (BuildReason::ContextPathOutside, 2)
        );
        assert_eq!(
            reason(at("/etc/passwd")),
            (BuildReason::ContextPathOutside, 2)
        );
        assert_eq!(reason(at("out-link")), (BuildReason::ContextPathOutside, 2));
        assert_eq!(reason(at("nope.txt")), (BuildReason::ContextPathMissing, 2));
        assert_eq!(reason(at("in-link")), (BuildReason::ContextPathMissing, 2));
        assert_eq!(
            reason(at("secret.txt")),
            (BuildReason::ContextPathMissing, 2)
        );
        assert_eq!(at("in.txt").unwrap(), ["in.txt"]);
        match gathered(&Template::new().copy("a", "/d"), &dir.path().join("nope")) {
            Err(SandboxError::InvalidArgument {
                argument: Some(a), ..
            }) => {
                assert_eq!(a, "context_dir");
            }
            other => panic!("{other:?}"),
        }
    }

    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn secret_looking_files_are_copied_with_one_warning_per_pattern() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "app/.env", "TOKEN=CANARYsecretVALUE");
        write(root, "app/.git/config", "x");
        write(root, "app/.git/HEAD", "x");
        write(root, "app/tls/server.pem", "x");
        write(root, "app/main.py", "x");
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let files = tracing::subscriber::with_default(subscriber, || {
            gathered(&Template::new().copy("app", "/app"), root).unwrap()
        });
        assert_eq!(files.len(), 5, "{files:?}");
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let warnings: Vec<&str> = log.lines().filter(|l| l.contains("WARN")).collect();
        assert_eq!(warnings.len(), 3, "{log}");
        assert!(
            warnings[0].contains("pattern=\"**/.env\"") && warnings[0].contains("path=app/.env"),
            "{log}"
        );
        assert!(
            warnings[1].contains("**/.git") && warnings[1].contains("files=2"),
            "{log}"
        );
        assert!(
            warnings[2].contains("**/*.pem") && warnings[2].contains("path=app/tls/server.pem"),
            "{log}"
        );
        assert!(!log.contains("CANARYsecretVALUE"), "{log}");
    }

    #[test]
    fn reads_refuse_a_file_swapped_after_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "f.txt", "before");
        let files = gather(Template::new().copy("f.txt", "/f").spec().unwrap(), root).unwrap();
        assert_eq!(read(&files[0]).unwrap(), b"before");
        fs::remove_file(root.join("f.txt")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("f.txt")).unwrap();
        assert!(matches!(
            read(&files[0]),
            Err(SandboxError::InvalidArgument { .. })
        ));
    }
}
