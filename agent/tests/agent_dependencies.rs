//! The in-VM agent links none of the emulator: `rayito-agent`'s normal
//! dependency graph (what its binary, the `rayd` of every sandbox image, is
//! built from) holds no S3 server, no CA generator and no emulator crate.
//! The emulator is crate `rayito-emulator`, which depends on the agent, never
//! the other way round.

use std::process::Command;

/// Crates that only the emulator may bring in.
const EMULATOR_ONLY: [&str; 4] = ["s3s", "s3s-fs", "rcgen", "rayito-emulator"];

#[test]
fn the_agent_links_none_of_the_emulator() {
    // Cargo runs the tests with CARGO set to itself; PATH's otherwise.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "rayito-agent",
            "-e",
            "normal",
            "--offline",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cargo tree failed: {stderr}");
    let tree = String::from_utf8(out.stdout).expect("cargo tree prints UTF-8");
    let names: Vec<&str> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert!(
        names.contains(&"rayito-agent") && names.contains(&"tonic"),
        "not the agent's tree: {tree}"
    );
    let found: Vec<&str> = EMULATOR_ONLY
        .into_iter()
        .filter(|krate| names.contains(krate))
        .collect();
    assert!(
        found.is_empty(),
        "rayito-agent's normal dependencies include {found:?}, which only the emulator may use; \
         `cargo tree -p rayito-agent -e normal -i <crate>` shows the path"
    );
}

/// The local S3 mounts' FUSE server (`s3fuse`) is fuser without its
/// `libfuse` features: pure Rust, nothing linked against libfuse and no
/// `fusermount` run (the section mounts `/dev/fuse` itself).
#[test]
fn fuser_is_pure_rust() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "rayito-agent",
            "-e",
            "normal,features",
            "-i",
            "fuser",
            "--offline",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cargo tree failed: {stderr}");
    let tree = String::from_utf8(out.stdout).expect("cargo tree prints UTF-8");
    assert!(
        tree.contains("fuser v0."),
        "fuser is not in the agent's tree: {tree}"
    );
    assert!(
        !tree.contains("libfuse") && !tree.contains("pkg-config"),
        "fuser links libfuse: {tree}"
    );
}
