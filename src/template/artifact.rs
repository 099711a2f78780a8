//! The build artifact: the base image's zip with the composed Dockerfile,
//! the build context and the agent's JSON files, packed so that identical
//! inputs give identical bytes (and so the same content-addressed key).
//!
//! Entries: the base's files (directories dropped, `Dockerfile`
//! replaced), each context file as `__rayito_context/<path>`, and
//! `__rayito_template.json` / `__rayito_template_env.json` at the root;
//! sorted by name, all dated 1980-01-01 00:00:00, mode 0644, deflated at
//! level 6, no extra fields.

use std::collections::BTreeMap;
use std::io::{Cursor, Read, Write};
use std::path::Path;

use sha2::{Digest, Sha256};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipArchive, ZipWriter};

use super::agent_files::{template_env_json, template_json};
use super::builder::Template;
use super::context;
use super::dockerfile::{CONTEXT_DIR, TEMPLATE_ENV_JSON, TEMPLATE_JSON, compose, layer};
use crate::SandboxError;

/// The most entries a base artifact may hold.
const MAX_BASE_ENTRIES: usize = 10_000;
/// The most bytes a base artifact may unpack to.
const MAX_BASE_BYTES: u64 = 512 * 1024 * 1024;
/// The key prefix of template artifacts in the artifact bucket.
const KEY_PREFIX: &str = "rayito/templates/";
/// The key prefix of base image artifacts in the artifact bucket.
const IMAGE_KEY_PREFIX: &str = "rayito/images/";

/// A packed template artifact and its SHA-256.
#[derive(Clone, PartialEq, Eq)]
pub struct Artifact {
    bytes: Vec<u8>,
    sha256: [u8; 32],
}

impl Artifact {
    /// The artifact of a zip packed earlier (read back from a file, say).
    pub fn from_zip(bytes: Vec<u8>) -> Self {
        let sha256 = Sha256::digest(&bytes).into();
        Self { bytes, sha256 }
    }

    /// The zip's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The zip's bytes, taken out.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The SHA-256 of the bytes, 64 lower-case hex digits.
    pub fn sha256_hex(&self) -> String {
        self.sha256.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The content-addressed S3 key: `rayito/templates/<sha256>.zip`.
    pub fn key(&self) -> String {
        format!("{KEY_PREFIX}{}.zip", self.sha256_hex())
    }

    /// The key of a base image's artifact (`rayito image publish`):
    /// `rayito/images/rayd-<first 12 hex digits of the sha256>.zip`.
    pub fn image_key(&self) -> String {
        format!("{IMAGE_KEY_PREFIX}rayd-{}.zip", &self.sha256_hex()[..12])
    }
}

// The bytes are not shown: only their length and hash.
crate::secret::redacted_debug! {
    Artifact |o| len = o.bytes.len(), sha256 = o.sha256_hex()
}

fn bad_base(reason: &'static str) -> SandboxError {
    SandboxError::invalid_argument("base_artifact", reason)
}

/// The files of a base artifact (directories dropped), bounded: the base
/// comes from S3 and is read as untrusted.
pub(crate) fn read_base(zip_bytes: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, SandboxError> {
    let mut archive =
        ZipArchive::new(Cursor::new(zip_bytes)).map_err(|_| bad_base("is not a zip archive"))?;
    if archive.len() > MAX_BASE_ENTRIES {
        return Err(bad_base("holds more than 10,000 entries"));
    }
    let mut files = BTreeMap::new();
    let mut budget = MAX_BASE_BYTES;
    for index in 0..archive.len() {
        let mut entry = archive
            .by_index(index)
            .map_err(|_| bad_base("has an entry that cannot be read"))?;
        if entry.is_dir() {
            continue;
        }
        if entry.is_symlink() {
            return Err(bad_base("holds a symbolic link"));
        }
        if entry.enclosed_name().is_none() {
            return Err(bad_base(
                "holds an entry whose name leaves the archive root",
            ));
        }
        let name = entry
            .name()
            .map_err(|_| bad_base("has an entry name that is not UTF-8"))?
            .into_owned();
        let mut bytes = Vec::new();
        entry
            .by_ref()
            .take(budget + 1)
            .read_to_end(&mut bytes)
            .map_err(|_| bad_base("has an entry that cannot be unpacked"))?;
        let len = bytes.len() as u64;
        if len > budget {
            return Err(bad_base("unpacks to more than 512 MiB"));
        }
        budget -= len;
        files.insert(name, bytes);
    }
    Ok(files)
}

/// The deterministic zip of `entries` (already sorted by name), all 0644.
pub(crate) fn write_zip(entries: &BTreeMap<String, Vec<u8>>) -> Result<Vec<u8>, SandboxError> {
    write_zip_modes(entries, |_| 0o644)
}

/// The deterministic zip of `entries` (already sorted by name), each with
/// the permissions `mode` gives its name.
pub(crate) fn write_zip_modes(
    entries: &BTreeMap<String, Vec<u8>>,
    mode: impl Fn(&str) -> u32,
) -> Result<Vec<u8>, SandboxError> {
    let failed = |_| SandboxError::internal("template.pack", "the zip writer failed");
    let options = SimpleFileOptions::default()
        .compression_method(CompressionMethod::Deflated)
        .compression_level(Some(6))
        .last_modified_time(DateTime::default());
    let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
    for (name, bytes) in entries {
        zip.start_file(name.as_str(), options.unix_permissions(mode(name)))
            .map_err(failed)?;
        zip.write_all(bytes)
            .map_err(|_| SandboxError::internal("template.pack", "the zip writer failed"))?;
    }
    Ok(zip.finish().map_err(failed)?.into_inner())
}

impl Template {
    /// Packs the build artifact: the base image's artifact (`base_zip`)
    /// with its `Dockerfile` composed with the template's layer, the
    /// files the `copy` steps take from `context_dir` (after its
    /// `.dockerignore`), and the agent's JSON files. Identical inputs give
    /// identical bytes, so [`Artifact::key`] names the content.
    ///
    /// Blocking: it reads the context from disk (call it from
    /// `tokio::task::spawn_blocking` in async code). Warns (`tracing`,
    /// target `rayito::template`) when the context holds secret-looking
    /// files (`.env`, `.git`, `.aws`, `.ssh`, `*.pem`, `*.key`).
    ///
    /// # Errors
    ///
    /// The first refusal of a builder call; `InvalidArgument`
    /// (`base_artifact`) when `base_zip` is not a zip this SDK accepts
    /// (at most 10,000 entries and 512 MiB unpacked, no links, no names
    /// leaving the root); `Build { base_image_missing_entrypoint }` when
    /// its `Dockerfile` is missing or has no `CMD`/`ENTRYPOINT`;
    /// `InvalidArgument` (`context_dir`, `.dockerignore`) and `Build {
    /// context_path_outside | context_path_missing }` from the context.
    pub fn pack(&self, base_zip: &[u8], context_dir: &Path) -> Result<Artifact, SandboxError> {
        let spec = self.spec()?;
        let mut entries = read_base(base_zip)?;
        let base_dockerfile = entries
            .get("Dockerfile")
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .ok_or_else(SandboxError::base_image_missing_entrypoint)?;
        let dockerfile = compose(&base_dockerfile, &layer(spec))?;
        entries.insert("Dockerfile".to_owned(), dockerfile.into_bytes());
        for file in context::gather(spec, context_dir)? {
            let bytes = context::read(&file)?;
            entries.insert(format!("{CONTEXT_DIR}/{}", file.relative), bytes);
        }
        if let Some(text) = template_json(spec) {
            entries.insert(TEMPLATE_JSON.0.to_owned(), text.into_bytes());
        }
        if let Some(text) = template_env_json(spec) {
            entries.insert(TEMPLATE_ENV_JSON.0.to_owned(), text.into_bytes());
        }
        Ok(Artifact::from_zip(write_zip(&entries)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BuildReason;
    use crate::template::{ReadyCmd, StartCmd};

    const BASE_DOCKERFILE: &str = "FROM public.ecr.aws/amazonlinux/amazonlinux:2023\nCOPY rayd /usr/local/bin/rayd\nCMD [\"/usr/local/bin/rayd\"]\n";

    /// A base artifact as `rayito image zip` makes one: with a directory
    /// entry and a 0755 file, in another order, with another date.
    fn base_zip() -> Vec<u8> {
        let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
        let when = DateTime::from_date_and_time(2024, 5, 6, 7, 8, 10).unwrap();
        let opts = SimpleFileOptions::default().last_modified_time(when);
        zip.start_file("rayd", opts.unix_permissions(0o755))
            .unwrap();
        zip.write_all(b"\x7fELF fake agent").unwrap();
        zip.add_directory("licenses/", opts).unwrap();
        zip.start_file("licenses/LICENSE", opts).unwrap();
        zip.write_all(b"Apache-2.0").unwrap();
        zip.start_file("Dockerfile", opts).unwrap();
        zip.write_all(BASE_DOCKERFILE.as_bytes()).unwrap();
        zip.finish().unwrap().into_inner()
    }

    fn context() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("app")).unwrap();
        std::fs::write(dir.path().join("app/main.py"), "print('hi')\n").unwrap();
        std::fs::write(dir.path().join("app/.env"), "TOKEN=x\n").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not copied\n").unwrap();
        dir
    }

    fn template() -> Template {
        Template::new()
            .copy("app", "/home/user/app")
            .set_envs([("MODE", "prod")])
            .set_start_cmd(
                StartCmd::new("python3 /home/user/app/main.py").ready(ReadyCmd::file("/tmp/up")),
            )
    }

    #[test]
    fn the_artifact_is_deterministic_and_its_hash_is_pinned() {
        let ctx = context();
        let one = template().pack(&base_zip(), ctx.path()).unwrap();
        // The same inputs, another directory and a later mtime: same bytes.
        let ctx2 = context();
        let two = template().pack(&base_zip(), ctx2.path()).unwrap();
        assert_eq!(one, two);
        assert_eq!(
            one.key(),
            format!("rayito/templates/{}.zip", one.sha256_hex())
        );
        assert_eq!(one.key().len(), "rayito/templates/".len() + 64 + 4);
        // Pinned: a change of layout, order, dates, modes or codec settings
        // changes it (deflate output is the one of the locked miniz_oxide).
        assert_eq!(
            one.sha256_hex(),
            "3664714486012c0e7f66356f9488287c556b04285d71d503cc243462a7545fea"
        );

        let mut archive = ZipArchive::new(Cursor::new(one.bytes())).unwrap();
        let mut names = Vec::new();
        for i in 0..archive.len() {
            let entry = archive.by_index(i).unwrap();
            assert_eq!(entry.compression(), CompressionMethod::Deflated);
            assert_eq!(entry.last_modified(), Some(DateTime::default()));
            assert_eq!(entry.unix_mode().map(|m| m & 0o7777), Some(0o644));
            names.push(entry.name().unwrap().into_owned());
        }
        assert_eq!(
            names,
            [
                "Dockerfile",
                "__rayito_context/app/.env",
                "__rayito_context/app/main.py",
                "__rayito_template.json",
                "__rayito_template_env.json",
                "licenses/LICENSE",
                "rayd",
            ]
        );
        let mut dockerfile = String::new();
        archive
            .by_name("Dockerfile")
            .unwrap()
            .read_to_string(&mut dockerfile)
            .unwrap();
        assert_eq!(
            dockerfile,
            template().to_dockerfile_over(BASE_DOCKERFILE).unwrap()
        );
        let mut json = String::new();
        archive
            .by_name("__rayito_template_env.json")
            .unwrap()
            .read_to_string(&mut json)
            .unwrap();
        assert_eq!(json, template().template_env_json().unwrap().unwrap());
        // A different context file gives a different key.
        std::fs::write(ctx2.path().join("app/main.py"), "print('bye')\n").unwrap();
        let three = template().pack(&base_zip(), ctx2.path()).unwrap();
        assert_ne!(three.key(), one.key());
    }

    #[test]
    fn bad_bases_are_refused() {
        let ctx = context();
        let refusal = |bytes: &[u8]| template().pack(bytes, ctx.path()).unwrap_err();
        assert!(matches!(
            refusal(b"not a zip"),
            SandboxError::InvalidArgument { argument: Some(a), .. } if a == "base_artifact"
        ));
        let no_dockerfile =
            write_zip(&BTreeMap::from([("rayd".to_owned(), b"x".to_vec())])).unwrap();
        assert!(matches!(
            refusal(&no_dockerfile),
            SandboxError::Build {
                reason: Some(BuildReason::BaseImageMissingEntrypoint),
                ..
            }
        ));
        let no_cmd = write_zip(&BTreeMap::from([(
            "Dockerfile".to_owned(),
            b"FROM x\n".to_vec(),
        )]))
        .unwrap();
        assert!(matches!(
            refusal(&no_cmd),
            SandboxError::Build {
                reason: Some(BuildReason::BaseImageMissingEntrypoint),
                ..
            }
        ));
        let mut zip = ZipWriter::new(Cursor::new(Vec::new()));
        zip.start_file("../escape", SimpleFileOptions::default())
            .unwrap();
        zip.write_all(b"x").unwrap();
        let escaping = zip.finish().unwrap().into_inner();
        assert!(matches!(
            refusal(&escaping),
            SandboxError::InvalidArgument { argument: Some(a), .. } if a == "base_artifact"
        ));
    }
}
