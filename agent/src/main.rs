//! The `rayito-agent` binary: `serve` runs one agent (see
//! `rayito-agent --help`). The MicroVMs emulator is `rayito-emulator`.

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(rayito_agent::cli::log_filter(
            std::env::var("RUST_LOG").ok().as_deref(),
        ))
        .with_writer(std::io::stderr)
        .init();
    let code = match rayito_agent::cli::parse(std::env::args_os()) {
        Ok(cli) => rayito_agent::cli::run(cli),
        Err(code) => code,
    };
    std::process::exit(code);
}
