//! The base image's artifact (`rayito image zip`): a directory packed as
//! the zip `rayito image publish` uploads, with what it lacks filled in:
//! the `Dockerfile` that installs our agent as the MicroVM's main process,
//! the agent binary as `rayd`, the kernel driver's requirement files and
//! the licence files.
//!
//! The agent binary is one the user built (or the installation's own
//! `rayito-agent`); its ELF header must name the image's CPU architecture,
//! checked before anything is uploaded (docs/aws.md, "The base image").
//!
//! Entries: files only, sorted by name, dated 1980-01-01 00:00:00,
//! deflated at level 6, `rayd` 0755 and every other file 0644. Excluded:
//! `*.zip`, `*.pyc`, `uv.lock`, `.gitignore`, `requirements.in` and the
//! directories `__pycache__`, `tests`, `.venv`, `.pytest_cache`,
//! `.ruff_cache`, `.mypy_cache`. A symbolic link aborts the packing.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read as _;
use std::path::Path;
use std::str::FromStr;

use super::artifact::{Artifact, read_base, write_zip_modes};
pub use super::base_dockerfile::DEFAULT_DOCKERFILE;
use super::base_dockerfile::default_dockerfile;
use super::variant::Variant;
use crate::SandboxError;

/// The agent's name inside the artifact (and the reference's).
pub const AGENT_ENTRY: &str = "rayd";

/// The kernel driver's requirement files, written when the directory has
/// no `kernel-sidecar/`: the driver is in the agent's binary and needs
/// only Python's standard library.
const REQUIREMENTS: &str = "\
# The rayito agent's Python kernel driver is embedded in its binary (rayd)
# and runs on python3's standard library: nothing to install.
";

/// `licenses/LICENSE`, written when the directory has no `licenses/`.
const LICENSE: &str = "\
rayito agent (rayd)
SPDX-License-Identifier: Apache-2.0
Licensed under the Apache License, Version 2.0:
https://www.apache.org/licenses/LICENSE-2.0
";

/// `licenses/NOTICE`, written when the directory has no `licenses/`.
const NOTICE: &str = "\
This image ships the rayito agent (rayd), licensed under Apache-2.0
(see LICENSE), and the third-party crates it is built from (see
THIRD_PARTY_LICENSES.md).
";

/// `licenses/THIRD_PARTY_LICENSES.md`, written when the directory has no
/// `licenses/`.
const THIRD_PARTY: &str = "\
# Third-party licences

rayd is built from the crates of the `rayito-agent` package's
dependency graph (`cargo tree -p rayito-agent -e normal`), each under its
own licence (MIT, Apache-2.0, BSD, ISC, Unicode, Zlib). To ship the full
texts, put them in this file of the directory passed to `rayito image zip`
(e.g. the output of `cargo about generate`).
";

/// Names never packed.
const EXCLUDED_FILES: [&str; 3] = ["uv.lock", ".gitignore", "requirements.in"];
/// Directories never packed.
const EXCLUDED_DIRS: [&str; 6] = [
    "__pycache__",
    "tests",
    ".venv",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
];
/// The most files a base directory may hold.
const MAX_FILES: usize = 10_000;
/// The most bytes a base directory's files may hold together.
const MAX_BYTES: u64 = 512 * 1024 * 1024;

/// The CPU architecture of an image (its `cpuConfigurations`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Arch {
    /// `ARM_64` (aarch64), the default.
    #[default]
    Arm64,
    /// `X86_64`.
    X86_64,
}

impl Arch {
    /// The API's name: `ARM_64` or `X86_64`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Arm64 => "ARM_64",
            Self::X86_64 => "X86_64",
        }
    }

    /// The ELF `e_machine` of binaries for it.
    fn elf_machine(self) -> u16 {
        match self {
            Self::Arm64 => 0xB7,
            Self::X86_64 => 0x3E,
        }
    }

    /// The architecture this program runs on, if it is one of them.
    pub fn host() -> Option<Self> {
        match std::env::consts::ARCH {
            "aarch64" => Some(Self::Arm64),
            "x86_64" => Some(Self::X86_64),
            _ => None,
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Arch {
    type Err = SandboxError;

    /// `ARM_64`/`arm64`/`aarch64` or `X86_64`/`x86_64`/`amd64`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "arm_64" | "arm64" | "aarch64" => Ok(Self::Arm64),
            "x86_64" | "amd64" => Ok(Self::X86_64),
            _ => Err(SandboxError::invalid_argument(
                "arch",
                "an image's architecture is ARM_64 or X86_64; pass one of them",
            )),
        }
    }
}

/// What an ELF header says about a file: `Ok(machine)` for a 64-bit
/// little-endian executable or shared object.
fn elf_machine(bytes: &[u8]) -> Result<u16, &'static str> {
    let header = bytes
        .get(..20)
        .ok_or("is not an ELF executable (too short)")?;
    if header[..4] != *b"\x7fELF" {
        return Err("is not an ELF executable");
    }
    if header[4] != 2 || header[5] != 1 {
        return Err("is not a 64-bit little-endian ELF executable");
    }
    let kind = u16::from_le_bytes([header[16], header[17]]);
    if kind != 2 && kind != 3 {
        return Err("is an ELF file but not an executable");
    }
    Ok(u16::from_le_bytes([header[18], header[19]]))
}

/// Checks that `binary` is an executable for `arch` (its ELF header: 64
/// bits, little-endian, executable or position-independent, `e_machine`)
/// that needs no glibc newer than the base image's
/// ([`BASE_GLIBC_MINOR`], from its version-needed section).
///
/// # Errors
/// `InvalidArgument` (`agent_binary`) saying what the binary is and what
/// the image needs.
pub fn check_agent_binary(binary: &[u8], arch: Arch) -> Result<(), SandboxError> {
    let machine = elf_machine(binary).map_err(|what| {
        SandboxError::invalid_argument(
            "agent_binary",
            format!(
                "the agent binary {what}; pass a rayito-agent built for {}",
                arch.as_str()
            ),
        )
    })?;
    if machine == arch.elf_machine() {
        return match glibc_needed(binary) {
            Some(minor) if minor > BASE_GLIBC_MINOR => Err(SandboxError::invalid_argument(
                "agent_binary",
                format!(
                    "the agent binary needs glibc 2.{minor} but the base image has glibc 2.{BASE_GLIBC_MINOR}; build it on a system with glibc 2.{BASE_GLIBC_MINOR} or older, or for a musl target"
                ),
            )),
            _ => Ok(()),
        };
    }
    let found = [Arch::Arm64, Arch::X86_64]
        .into_iter()
        .find(|a| a.elf_machine() == machine)
        .map_or_else(|| format!("ELF machine {machine:#x}"), |a| a.to_string());
    Err(SandboxError::invalid_argument(
        "agent_binary",
        format!(
            "the agent binary is built for {found} but the image's architecture is {}; pass a rayito-agent built for {} (cargo build --release -p rayito-agent --target {}) or choose the architecture it is built for",
            arch.as_str(),
            arch.as_str(),
            match arch {
                Arch::Arm64 => "aarch64-unknown-linux-gnu",
                Arch::X86_64 => "x86_64-unknown-linux-gnu",
            }
        ),
    ))
}

/// The newest glibc of the managed base image (Amazon Linux 2023: 2.34).
pub const BASE_GLIBC_MINOR: u32 = 34;
/// The most version-needed entries read from a binary (peer-sized loops
/// stay bounded).
const MAX_VERNEED_ENTRIES: usize = 4096;

fn read_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn read_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

fn read_u64(b: &[u8], at: usize) -> Option<usize> {
    let v = u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?);
    usize::try_from(v).ok()
}

/// The newest `GLIBC_2.N` an ELF64 little-endian binary needs (its
/// `SHT_GNU_verneed` section), `None` when it needs none (a static or
/// musl binary) or has no readable section table.
fn glibc_needed(b: &[u8]) -> Option<u32> {
    const SHT_GNU_VERNEED: u32 = 0x6fff_fffe;
    let shoff = read_u64(b, 0x28)?;
    let shentsize = usize::from(read_u16(b, 0x3A)?);
    let shnum = usize::from(read_u16(b, 0x3C)?);
    if shentsize < 64 {
        return None;
    }
    let section = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
    let mut newest: Option<u32> = None;
    for i in 0..shnum {
        let at = section(i)?;
        if read_u32(b, at.checked_add(4)?)? != SHT_GNU_VERNEED {
            continue;
        }
        let offset = read_u64(b, at.checked_add(24)?)?;
        let link = usize::try_from(read_u32(b, at.checked_add(40)?)?).ok()?;
        let entries = usize::try_from(read_u32(b, at.checked_add(44)?)?).ok()?;
        let strtab = read_u64(b, section(link)?.checked_add(24)?)?;
        let mut need = offset;
        let mut read = 0usize;
        for _ in 0..entries.min(MAX_VERNEED_ENTRIES) {
            let count = usize::from(read_u16(b, need.checked_add(2)?)?);
            let mut aux =
                need.checked_add(usize::try_from(read_u32(b, need.checked_add(8)?)?).ok()?)?;
            for _ in 0..count {
                read += 1;
                if read > MAX_VERNEED_ENTRIES {
                    return newest;
                }
                let name_at =
                    strtab.checked_add(usize::try_from(read_u32(b, aux.checked_add(8)?)?).ok()?)?;
                let name = b.get(name_at..)?;
                let name = &name[..name.iter().position(|&c| c == 0)?];
                if let Some(minor) = name
                    .strip_prefix(b"GLIBC_2.")
                    .and_then(|m| std::str::from_utf8(m).ok())
                    .and_then(|m| m.split('.').next()?.parse::<u32>().ok())
                {
                    newest = Some(newest.map_or(minor, |n| n.max(minor)));
                }
                let next = usize::try_from(read_u32(b, aux.checked_add(12)?)?).ok()?;
                if next == 0 {
                    break;
                }
                aux = aux.checked_add(next)?;
            }
            let next = usize::try_from(read_u32(b, need.checked_add(12)?)?).ok()?;
            if next == 0 {
                break;
            }
            need = need.checked_add(next)?;
        }
    }
    newest
}

fn bad_dir(reason: String) -> SandboxError {
    SandboxError::invalid_argument("dir", reason)
}

/// Whether an entry (a file or directory name) is left out.
fn excluded(name: &str, is_dir: bool) -> bool {
    if is_dir {
        EXCLUDED_DIRS.contains(&name)
    } else {
        EXCLUDED_FILES.contains(&name) || name.ends_with(".zip") || name.ends_with(".pyc")
    }
}

/// Every packed file under `dir`, by its `/`-separated relative name.
fn gather(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, SandboxError> {
    let mut files = BTreeMap::new();
    let mut budget = MAX_BYTES;
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((path, prefix)) = pending.pop() {
        let entries = std::fs::read_dir(&path)
            .map_err(|e| bad_dir(format!("cannot read a directory of it ({})", e.kind())))?;
        for entry in entries {
            let entry = entry
                .map_err(|e| bad_dir(format!("cannot read a directory of it ({})", e.kind())))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                return Err(bad_dir("holds a name that is not UTF-8".to_owned()));
            };
            let relative = format!("{prefix}{name}");
            let meta = std::fs::symlink_metadata(entry.path())
                .map_err(|e| bad_dir(format!("cannot read {relative} ({})", e.kind())))?;
            if meta.file_type().is_symlink() {
                return Err(bad_dir(format!(
                    "holds the symbolic link {relative}; replace it with the file it points to"
                )));
            }
            if excluded(&name, meta.is_dir()) {
                continue;
            }
            if meta.is_dir() {
                pending.push((entry.path(), format!("{relative}/")));
                continue;
            }
            if !meta.is_file() {
                return Err(bad_dir(format!(
                    "holds {relative}, which is not a regular file"
                )));
            }
            if files.len() >= MAX_FILES {
                return Err(bad_dir("holds more than 10,000 files".to_owned()));
            }
            let mut bytes = Vec::new();
            std::fs::File::open(entry.path())
                .and_then(|f| f.take(budget + 1).read_to_end(&mut bytes))
                .map_err(|e| bad_dir(format!("cannot read {relative} ({})", e.kind())))?;
            let len = bytes.len() as u64;
            if len > budget {
                return Err(bad_dir("holds more than 512 MiB of files".to_owned()));
            }
            budget -= len;
            files.insert(relative, bytes);
        }
    }
    Ok(files)
}

/// Whether the Dockerfile's last `CMD`/`ENTRYPOINT` runs the agent.
fn ends_with_agent(dockerfile: &str) -> bool {
    dockerfile
        .lines()
        .map(str::trim)
        .rfind(|l| {
            let upper = l.to_ascii_uppercase();
            upper.starts_with("CMD") || upper.starts_with("ENTRYPOINT")
        })
        .is_some_and(|l| l.contains(AGENT_ENTRY))
}

/// Packs the base image's artifact from `dir`, filling in what it lacks:
/// `Dockerfile` ([`DEFAULT_DOCKERFILE`]), `rayd` (`agent_binary`),
/// `kernel-sidecar/requirements.txt` and `requirements-poly.txt`, and
/// `licenses/{LICENSE,NOTICE,THIRD_PARTY_LICENSES.md}`. `agent_binary`
/// replaces a `rayd` the directory holds. Identical inputs give identical
/// bytes; [`Artifact::image_key`] names them.
///
/// Blocking: it reads `dir` (call it from `tokio::task::spawn_blocking` in
/// async code).
///
/// # Errors
/// `InvalidArgument` (`dir`) for a directory that cannot be read, holds a
/// symbolic link, more than 10,000 files or 512 MiB, or a `Dockerfile`
/// whose last `CMD`/`ENTRYPOINT` does not run `rayd`; `InvalidArgument`
/// (`agent_binary`) when there is no agent or it is not an executable for
/// `arch`.
pub fn pack_base_image(
    dir: &Path,
    agent_binary: Option<&[u8]>,
    arch: Arch,
) -> Result<Artifact, SandboxError> {
    pack_base_image_variant(dir, agent_binary, arch, None)
}

/// [`pack_base_image`] for `variant`: its marker written
/// ([`Variant::marker`]; `rayito image zip --with-efs` asks for
/// [`Variant::CapsEfs`]) and, when the directory has no `Dockerfile`, the
/// variant's ([`default_dockerfile`](crate::template::default_dockerfile):
/// amazon-efs-utils for caps-efs). `None` packs what the directory's own
/// markers say.
///
/// # Errors
/// As [`pack_base_image`]; `InvalidArgument` (`variant`) when the
/// directory holds another variant's marker.
pub fn pack_base_image_variant(
    dir: &Path,
    agent_binary: Option<&[u8]>,
    arch: Arch,
    variant: Option<Variant>,
) -> Result<Artifact, SandboxError> {
    let mut files = gather(dir)?;
    let variant = match variant {
        Some(variant) => match Variant::of_markers(&files) {
            Some(found) if found == variant.marker_family() || found == Variant::Full => variant,
            _ => {
                return Err(SandboxError::invalid_argument(
                    "variant",
                    format!(
                        "the directory holds another variant's marker file, but the {variant} variant was asked for; remove the marker, or pack that variant"
                    ),
                ));
            }
        },
        None => Variant::of_markers(&files).unwrap_or_default(),
    };
    if let Some(binary) = agent_binary {
        files.insert(AGENT_ENTRY.to_owned(), binary.to_vec());
    }
    let agent = files.get(AGENT_ENTRY).ok_or_else(|| {
        SandboxError::invalid_argument(
            "agent_binary",
            "no agent to ship: the directory has no rayd and no agent binary was given; pass the path of a rayito-agent",
        )
    })?;
    check_agent_binary(agent, arch)?;
    let dockerfile = files
        .entry("Dockerfile".to_owned())
        .or_insert_with(|| default_dockerfile(arch, variant.has_efs()).into_bytes());
    if !ends_with_agent(&String::from_utf8_lossy(dockerfile)) {
        return Err(bad_dir(
            "has a Dockerfile whose last CMD or ENTRYPOINT does not run rayd; end it with a CMD running rayd as the main process".to_owned(),
        ));
    }
    if !files.keys().any(|k| k.starts_with("kernel-sidecar/")) {
        for name in ["requirements.txt", "requirements-poly.txt"] {
            files.insert(
                format!("kernel-sidecar/{name}"),
                REQUIREMENTS.as_bytes().to_vec(),
            );
        }
    }
    if !files.keys().any(|k| k.starts_with("licenses/")) {
        for (name, text) in [
            ("LICENSE", LICENSE),
            ("NOTICE", NOTICE),
            ("THIRD_PARTY_LICENSES.md", THIRD_PARTY),
        ] {
            files.insert(format!("licenses/{name}"), text.as_bytes().to_vec());
        }
    }
    // After the requirement files, which a marker's directory would hide.
    if let Some((marker, text)) = variant.marker() {
        files.insert(marker.to_owned(), text.as_bytes().to_vec());
    }
    Ok(Artifact::from_zip(write_zip_modes(&files, |name| {
        if name == AGENT_ENTRY { 0o755 } else { 0o644 }
    })?))
}

/// Checks that `artifact` is a base image's: a zip (as the SDK reads
/// one) whose `Dockerfile` ends by running `rayd` and whose `rayd` is an
/// executable for `arch`.
///
/// # Errors
/// `InvalidArgument` (`artifact`) for anything else; `InvalidArgument`
/// (`agent_binary`) for an agent built for another architecture.
pub fn check_base_artifact(artifact: &Artifact, arch: Arch) -> Result<(), SandboxError> {
    let bad = |reason: &str| SandboxError::invalid_argument("artifact", reason);
    let files = read_base(artifact.bytes()).map_err(|_| {
        bad("is not a base image artifact (a zip this SDK reads); make one with rayito image zip")
    })?;
    let dockerfile = files
        .get("Dockerfile")
        .ok_or_else(|| bad("has no Dockerfile at its root; make it with rayito image zip"))?;
    if !ends_with_agent(&String::from_utf8_lossy(dockerfile)) {
        return Err(bad(
            "has a Dockerfile whose last CMD or ENTRYPOINT does not run rayd; make it with rayito image zip",
        ));
    }
    let agent = files
        .get(AGENT_ENTRY)
        .ok_or_else(|| bad("holds no rayd; make it with rayito image zip"))?;
    check_agent_binary(agent, arch)
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use zip::ZipArchive;

    use super::*;
    use crate::template::variant::{EFS_MARKER, SLIM_MARKER, check_artifact_variant};

    /// The first 20 bytes of an ELF executable for `machine`.
    fn elf(machine: u16) -> Vec<u8> {
        let mut bytes = b"\x7fELF\x02\x01\x01\x00".to_vec();
        bytes.resize(16, 0);
        bytes.extend_from_slice(&3u16.to_le_bytes());
        bytes.extend_from_slice(&machine.to_le_bytes());
        bytes.extend_from_slice(b"rest of the binary");
        bytes
    }

    fn names_and_modes(artifact: &Artifact) -> Vec<(String, u32)> {
        let mut archive = ZipArchive::new(Cursor::new(artifact.bytes())).unwrap();
        (0..archive.len())
            .map(|i| {
                let entry = archive.by_index(i).unwrap();
                (
                    entry.name().unwrap().into_owned(),
                    entry.unix_mode().unwrap() & 0o7777,
                )
            })
            .collect()
    }

    #[test]
    fn the_elf_header_names_the_architecture_and_a_mismatch_is_refused() {
        check_agent_binary(&elf(0xB7), Arch::Arm64).unwrap();
        check_agent_binary(&elf(0x3E), Arch::X86_64).unwrap();
        let err = check_agent_binary(&elf(0x3E), Arch::Arm64).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("the agent binary is built for X86_64 but the image's architecture is ARM_64; pass a rayito-agent built for ARM_64"),
            "{text}"
        );
        for (bytes, what) in [
            (
                b"#!/bin/sh\n echo not an agent".to_vec(),
                "is not an ELF executable",
            ),
            (b"\x7fELF".to_vec(), "is not an ELF executable (too short)"),
            (
                {
                    let mut b = elf(0xB7);
                    b[4] = 1;
                    b
                },
                "is not a 64-bit little-endian ELF executable",
            ),
            (
                {
                    let mut b = elf(0xB7);
                    b[16] = 1;
                    b
                },
                "is an ELF file but not an executable",
            ),
        ] {
            let text = check_agent_binary(&bytes, Arch::Arm64)
                .unwrap_err()
                .to_string();
            assert!(
                text.contains(&format!(
                    "the agent binary {what}; pass a rayito-agent built for ARM_64"
                )),
                "{text}"
            );
        }
        assert_eq!("x86_64".parse::<Arch>().unwrap(), Arch::X86_64);
        assert_eq!("ARM_64".parse::<Arch>().unwrap(), Arch::Arm64);
        assert!("riscv".parse::<Arch>().is_err());
    }

    /// An ELF64 executable for aarch64 whose version-needed section asks
    /// for `GLIBC_2.<minor>` (and `GLIBC_2.17`).
    fn elf_needing(minor: u32) -> Vec<u8> {
        let mut b = elf(0xB7);
        b.resize(64, 0);
        // Strings at 64.
        let strtab = b.len();
        b.extend_from_slice(b"\0libc.so.6\0GLIBC_2.17\0");
        let late = b.len() - strtab;
        b.extend_from_slice(format!("GLIBC_2.{minor}\0").as_bytes());
        while !b.len().is_multiple_of(8) {
            b.push(0);
        }
        // One Verneed with two Vernaux.
        let verneed = b.len();
        let word = |b: &mut Vec<u8>, v: u32| b.extend_from_slice(&v.to_le_bytes());
        let half = |b: &mut Vec<u8>, v: u16| b.extend_from_slice(&v.to_le_bytes());
        half(&mut b, 1);
        half(&mut b, 2);
        word(&mut b, 1);
        word(&mut b, 16);
        word(&mut b, 0);
        for (name, next) in [(12u32, 16u32), (late as u32, 0)] {
            word(&mut b, 0);
            half(&mut b, 0);
            half(&mut b, 0);
            word(&mut b, name);
            word(&mut b, next);
        }
        // Section headers: null, .dynstr, .gnu.version_r.
        let shoff = b.len();
        b.extend_from_slice(&[0; 64]);
        for (kind, offset, link, info) in [(3u32, strtab, 0u32, 0u32), (0x6fff_fffe, verneed, 1, 1)]
        {
            let mut h = [0u8; 64];
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[24..32].copy_from_slice(&(offset as u64).to_le_bytes());
            h[40..44].copy_from_slice(&link.to_le_bytes());
            h[44..48].copy_from_slice(&info.to_le_bytes());
            b.extend_from_slice(&h);
        }
        b[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        b[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        b[0x3C..0x3E].copy_from_slice(&3u16.to_le_bytes());
        b
    }

    #[test]
    fn a_binary_needing_a_newer_glibc_than_the_base_is_refused() {
        assert_eq!(glibc_needed(&elf_needing(34)), Some(34));
        check_agent_binary(&elf_needing(34), Arch::Arm64).unwrap();
        let err = check_agent_binary(&elf_needing(39), Arch::Arm64).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid agent_binary: the agent binary needs glibc 2.39 but the base image has glibc 2.34; build it on a system with glibc 2.34 or older, or for a musl target"
        );
        // The parser reads a real binary: this test program links glibc.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert!(glibc_needed(&me).is_some_and(|m| m >= 2));
        // No section table (a stand-in, a static binary): nothing needed.
        assert_eq!(glibc_needed(&elf(0xB7)), None);
    }

    #[test]
    fn the_variant_markers_must_match_the_variant_asked_for() {
        let full = tempfile::tempdir().unwrap();
        let slim = tempfile::tempdir().unwrap();
        let marker = slim.path().join(SLIM_MARKER);
        std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
        std::fs::write(&marker, "slim\n").unwrap();
        let full = pack_base_image(full.path(), Some(&elf(0xB7)), Arch::Arm64).unwrap();
        let slim = pack_base_image(slim.path(), Some(&elf(0xB7)), Arch::Arm64).unwrap();
        check_artifact_variant(&full, Variant::Full).unwrap();
        check_artifact_variant(&slim, Variant::Slim).unwrap();
        let wrong = check_artifact_variant(&slim, Variant::Full).unwrap_err();
        assert_eq!(
            wrong.to_string(),
            "invalid variant: the artifact's variant markers do not match the variant asked for; pack the artifact for that variant, or pass the artifact's variant"
        );
        assert!(check_artifact_variant(&full, Variant::Poly).is_err());
        let names: Vec<&str> = [Variant::Full, Variant::Slim, Variant::Poly]
            .iter()
            .map(|v| v.image_name())
            .collect();
        assert_eq!(
            names,
            ["rayito-base", "rayito-base-slim", "rayito-base-poly"]
        );
        assert_eq!("poly".parse::<Variant>().unwrap(), Variant::Poly);
        assert!("caps".parse::<Variant>().is_err());
    }

    #[test]
    fn an_empty_directory_and_an_agent_pack_deterministically_with_every_default() {
        let one = tempfile::tempdir().unwrap();
        let two = tempfile::tempdir().unwrap();
        let a = pack_base_image(one.path(), Some(&elf(0xB7)), Arch::Arm64).unwrap();
        let b = pack_base_image(two.path(), Some(&elf(0xB7)), Arch::Arm64).unwrap();
        assert_eq!(a, b);
        assert_eq!(
            a.image_key(),
            format!("rayito/images/rayd-{}.zip", &a.sha256_hex()[..12])
        );
        assert_eq!(
            names_and_modes(&a),
            [
                ("Dockerfile".to_owned(), 0o644),
                ("kernel-sidecar/requirements-poly.txt".to_owned(), 0o644),
                ("kernel-sidecar/requirements.txt".to_owned(), 0o644),
                ("licenses/LICENSE".to_owned(), 0o644),
                ("licenses/NOTICE".to_owned(), 0o644),
                ("licenses/THIRD_PARTY_LICENSES.md".to_owned(), 0o644),
                ("rayd".to_owned(), 0o755),
            ]
        );
        assert!(ends_with_agent(DEFAULT_DOCKERFILE));
        check_base_artifact(&a, Arch::Arm64).unwrap();
        let err = check_base_artifact(&a, Arch::X86_64).unwrap_err();
        assert!(err.to_string().contains("built for ARM_64"), "{err}");
        let err =
            check_base_artifact(&Artifact::from_zip(b"no zip".to_vec()), Arch::Arm64).unwrap_err();
        assert!(
            err.to_string().contains("is not a base image artifact"),
            "{err}"
        );
        // Another agent, another key.
        let c = pack_base_image(two.path(), Some(&elf(0x3E)), Arch::X86_64).unwrap();
        assert_ne!(c.image_key(), a.image_key());
    }

    #[test]
    fn excludes_apply_and_a_symlink_or_a_dockerfile_without_rayd_aborts() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (path, text) in [
            (
                "Dockerfile",
                "COPY rayd /opt/rayd\nENTRYPOINT [\"/opt/rayd\"]\n",
            ),
            ("kernel-sidecar/requirements.txt", "ipykernel\n"),
            ("kernel-sidecar/__pycache__/x.pyc", "x"),
            ("kernel-sidecar/tests/test_x.py", "x"),
            ("kernel-sidecar/a.pyc", "x"),
            ("old.zip", "x"),
            ("uv.lock", "x"),
            (".gitignore", "x"),
            ("licenses/LICENSE", "mine"),
        ] {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        std::fs::write(root.join("rayd"), elf(0xB7)).unwrap();
        let packed = pack_base_image(root, None, Arch::Arm64).unwrap();
        let names: Vec<String> = names_and_modes(&packed)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            names,
            [
                "Dockerfile",
                "kernel-sidecar/requirements.txt",
                "licenses/LICENSE",
                "rayd"
            ]
        );
        // The directory's rayd is checked too.
        let err = pack_base_image(root, None, Arch::X86_64).unwrap_err();
        assert!(err.to_string().contains("built for ARM_64"), "{err}");

        std::fs::write(
            root.join("Dockerfile"),
            "COPY rayd /opt/rayd\nCMD [\"sleep\", \"1\"]\n",
        )
        .unwrap();
        let err = pack_base_image(root, None, Arch::Arm64).unwrap_err();
        assert!(
            err.to_string()
                .contains("has a Dockerfile whose last CMD or ENTRYPOINT does not run rayd"),
            "{err}"
        );

        std::fs::remove_file(root.join("Dockerfile")).unwrap();
        std::os::unix::fs::symlink("rayd", root.join("link")).unwrap();
        let err = pack_base_image(root, None, Arch::Arm64).unwrap_err();
        assert!(
            err.to_string().contains("holds the symbolic link link"),
            "{err}"
        );

        let empty = tempfile::tempdir().unwrap();
        let err = pack_base_image(empty.path(), None, Arch::Arm64).unwrap_err();
        assert!(err.to_string().contains("no agent to ship"), "{err}");
    }

    #[test]
    fn the_efs_variant_packs_its_marker_and_its_dockerfile_and_publishes_only_as_caps_efs() {
        let dir = tempfile::tempdir().unwrap();
        let efs = pack_base_image_variant(
            dir.path(),
            Some(&elf(0xB7)),
            Arch::Arm64,
            Some(Variant::CapsEfs),
        )
        .unwrap();
        let files = read_base(efs.bytes()).unwrap();
        assert_eq!(files[EFS_MARKER], b"efs\n");
        assert_eq!(
            String::from_utf8_lossy(&files["Dockerfile"]),
            crate::template::default_dockerfile(Arch::Arm64, true)
        );
        // The requirement files are still written beside the marker.
        assert!(files.contains_key("kernel-sidecar/requirements.txt"));
        check_artifact_variant(&efs, Variant::CapsEfs).unwrap();
        assert_eq!(
            check_artifact_variant(&efs, Variant::Caps)
                .unwrap_err()
                .to_string(),
            "invalid variant: the artifact carries the efs marker (kernel-sidecar/efs_variant): it is rayito-base-caps-efs's; publish it as the caps-efs variant (--with-efs --os-capabilities ALL), or pack it again without --with-efs"
        );
        // The full artifact is the caps image's, and never the caps-efs one's.
        let full = pack_base_image(dir.path(), Some(&elf(0xB7)), Arch::Arm64).unwrap();
        check_artifact_variant(&full, Variant::Caps).unwrap();
        assert_eq!(
            check_artifact_variant(&full, Variant::CapsEfs)
                .unwrap_err()
                .to_string(),
            "invalid variant: the caps-efs variant needs an artifact with the efs marker (kernel-sidecar/efs_variant); pack it with rayito image zip --with-efs"
        );
        // Packing the x86 efs variant writes its own Dockerfile.
        let x86 = pack_base_image_variant(
            dir.path(),
            Some(&elf(0x3E)),
            Arch::X86_64,
            Some(Variant::CapsEfs),
        )
        .unwrap();
        let dockerfile = read_base(x86.bytes()).unwrap()["Dockerfile"].clone();
        assert!(String::from_utf8_lossy(&dockerfile).contains("/x86_64/mount-s3-"));
        // A directory with the slim marker is not the efs variant.
        let marker = dir.path().join(SLIM_MARKER);
        std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
        std::fs::write(&marker, "slim\n").unwrap();
        assert_eq!(
            pack_base_image_variant(
                dir.path(),
                Some(&elf(0xB7)),
                Arch::Arm64,
                Some(Variant::CapsEfs)
            )
            .unwrap_err()
            .to_string(),
            "invalid variant: the directory holds another variant's marker file, but the caps-efs variant was asked for; remove the marker, or pack that variant"
        );
    }
}
