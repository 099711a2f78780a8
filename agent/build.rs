//! Compiles the rayito.v1 wire contract (servers for the agent, clients for
//! its tests) with protox: no system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=../proto");
    let fds = protox::compile(
        [
            "rayito/v1/common.proto",
            "rayito/v1/features.proto",
            "rayito/v1/network.proto",
            "rayito/v1/lifecycle.proto",
            "rayito/v1/health.proto",
            "rayito/v1/process.proto",
            "rayito/v1/filesystem.proto",
            "rayito/v1/code.proto",
        ],
        ["../proto"],
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        // ProcessService has a `Connect` RPC, which clashes with the generated
        // `connect` constructor; clients are built from a Channel instead.
        .build_transport(false)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
