//! The `rayito-emulator` binary: serves the Lambda MicroVMs emulator until
//! SIGTERM or Ctrl-C (see `rayito-emulator --help` and docs/local.md).

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(rayito_agent::cli::log_filter(
            std::env::var("RUST_LOG").ok().as_deref(),
        ))
        .with_writer(std::io::stderr)
        .init();
    let code = match rayito_agent::cli::parse_as(std::env::args_os()) {
        Ok(args) => rayito_emulator::cli::run(args),
        Err(code) => code,
    };
    std::process::exit(code);
}
