//! The checked-in generated code (`src/generated/`) must be exactly what the
//! `.proto` files produce today. Run with `RAYITO_PROTO_BLESS=1` to rewrite it
//! after changing a `.proto` file; without it, a stale file fails the test.

use std::path::{Path, PathBuf};

/// The contract's files, in dependency order.
const PROTOS: &[&str] = &[
    "rayito/v1/common.proto",
    "rayito/v1/features.proto",
    "rayito/v1/network.proto",
    "rayito/v1/lifecycle.proto",
    "rayito/v1/health.proto",
    "rayito/v1/process.proto",
    "rayito/v1/filesystem.proto",
    "rayito/v1/code.proto",
    "rayito/v1/pty.proto",
    "rayito/v1/s3_mounts.proto",
    "rayito/v1/efs_volumes.proto",
    "rayito/v1/lifecycle_events.proto",
    "rayito/v1/telemetry_export.proto",
    "rayito/v1/secret_gateway.proto",
    "rayito/v1/configure.proto",
];

/// Payload fields generated as `bytes::Bytes` instead of `Vec<u8>`: a file's
/// chunks are slices of one buffer (no copy per chunk), and a retried write
/// re-sends clones of them (a reference count each, never the bytes).
const BYTES_FIELDS: &[&str] = &[
    ".rayito.v1.ReadResponse.chunk",
    ".rayito.v1.WriteRequest.chunk",
];

/// Where generated code refers to the messages from the client and server
/// files, which are included into the same `v1` module.
const MESSAGES_PATH: &str = "crate::v1";

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// One generation pass: `which` is the checked-in file name it produces.
struct Pass {
    file: &'static str,
    client: bool,
    server: bool,
}

const PASSES: &[Pass] = &[
    Pass {
        file: "rayito.v1.rs",
        client: false,
        server: false,
    },
    Pass {
        file: "rayito.v1.client.rs",
        client: true,
        server: false,
    },
    Pass {
        file: "rayito.v1.server.rs",
        client: false,
        server: true,
    },
];

fn generate(pass: &Pass, out: &Path) -> String {
    let fds = protox::compile(PROTOS, [manifest_dir()]).expect("the .proto files compile");
    let mut config = tonic_prost_build::configure()
        .build_client(pass.client)
        .build_server(pass.server)
        // ProcessService has a `Connect` RPC, which clashes with the generated
        // `connect` constructor; clients are built from a Channel instead.
        .build_transport(false)
        .out_dir(out);
    for field in BYTES_FIELDS {
        config = config.bytes(field);
    }
    if pass.client || pass.server {
        // Services only: the messages come from the first pass.
        config = config.extern_path(".rayito.v1", MESSAGES_PATH);
    }
    config.compile_fds(fds).expect("code generation succeeds");
    std::fs::read_to_string(out.join("rayito.v1.rs")).expect("generated file exists")
}

#[test]
fn generated_code_is_fresh() {
    let bless = std::env::var_os("RAYITO_PROTO_BLESS").is_some();
    let mut stale = Vec::new();
    for pass in PASSES {
        let dir = tempfile::tempdir().expect("temp dir");
        let fresh = generate(pass, dir.path());
        let checked_in = manifest_dir().join("src/generated").join(pass.file);
        let current = std::fs::read_to_string(&checked_in).unwrap_or_default();
        if current != fresh {
            if bless {
                std::fs::write(&checked_in, fresh).expect("write generated file");
            } else {
                stale.push(pass.file);
            }
        }
    }
    assert!(
        stale.is_empty(),
        "stale generated code in proto/src/generated: {stale:?}; \
         rerun with RAYITO_PROTO_BLESS=1 cargo test -p rayito-proto --test proto generated::"
    );
}

#[test]
fn client_and_server_files_hold_services_only() {
    // A pass that emitted messages twice would define each type twice and fail
    // to compile with both features; this names the cause instead.
    for pass in &PASSES[1..] {
        let text = std::fs::read_to_string(manifest_dir().join("src/generated").join(pass.file))
            .expect("generated file");
        assert!(
            !text.contains("pub struct HealthRequest"),
            "{} defines messages",
            pass.file
        );
        assert!(
            text.contains("HealthService"),
            "{} has no services",
            pass.file
        );
    }
}
