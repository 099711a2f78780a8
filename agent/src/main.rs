//! The `rayito-agent` binary: `serve` runs one agent; other subcommands
//! (the emulator) plug in below.

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().collect();
    let rest = args.get(2..).unwrap_or_default();
    let code = match args.get(1).map(String::as_str) {
        Some("serve") => rayito_agent::cli::serve(rest),
        // --- other subcommands (the emulator helper adds `emulator` here) ---
        Some("emulator") => rayito_agent::emulator::cli::run(rest),
        _ => {
            eprintln!("usage: rayito-agent serve [--grpc-addr A] [--hooks-addr A] [--root DIR]");
            2
        }
    };
    std::process::exit(code);
}
