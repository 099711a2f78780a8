//! The `rayito-agent` binary: `serve` runs one agent, `emulator` runs the
//! MicroVMs emulator (see `rayito-agent --help`).

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let code = match rayito_agent::cli::parse(std::env::args_os()) {
        Ok(cli) => rayito_agent::cli::run(cli),
        Err(code) => code,
    };
    std::process::exit(code);
}
