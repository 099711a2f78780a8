//! Compiles the rayito.v1 wire contract with protox (pure Rust, no system protoc).
//! The SDK only needs clients; the generated code stays private to the crate.

use std::{env, fs, path::PathBuf};

const PROTOS: &[&str] = &[
    "rayito/v1/common.proto",
    "rayito/v1/features.proto",
    "rayito/v1/network.proto",
    "rayito/v1/lifecycle.proto",
    "rayito/v1/health.proto",
    "rayito/v1/process.proto",
    "rayito/v1/filesystem.proto",
    "rayito/v1/code.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    let fds = protox::compile(PROTOS, ["proto"])?;
    // Kept for the wire-contract test, which compares it with the reference set.
    let out = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(
        out.join("rayito_v1.fds.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        // ProcessService has a `Connect` RPC, which clashes with the generated
        // `connect` constructor; clients are built from a Channel instead.
        .build_transport(false)
        .build_server(false)
        .compile_fds(fds)?;
    Ok(())
}
