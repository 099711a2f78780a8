//! `rayito-agent emulator [--addr 127.0.0.1:4566] [--root DIR] [--region R]
//! [--account-id ID] [--image NAME]...`: serves the emulator until SIGTERM or
//! Ctrl-C, after printing the endpoint and the environment a client needs.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::{Emulator, EmulatorConfig};

const USAGE: &str = "usage: rayito-agent emulator [--addr 127.0.0.1:4566] [--root DIR] [--region REGION] [--account-id ID] [--image NAME]...";

/// Parses `args` (after the `emulator` word).
fn parse(args: &[String]) -> Result<EmulatorConfig, String> {
    let mut config = EmulatorConfig {
        addr: SocketAddr::from(([127, 0, 0, 1], 4566)),
        ..EmulatorConfig::default()
    };
    let mut images = Vec::new();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--addr" => {
                config.addr = value()?
                    .parse()
                    .map_err(|_| "--addr must be IP:PORT".to_string())?;
            }
            "--root" => config.root = PathBuf::from(value()?),
            "--region" => config.region = value()?,
            "--account-id" => config.account_id = value()?,
            "--image" => images.push(value()?),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if !images.is_empty() {
        config.images = images;
    }
    Ok(config)
}

/// The lines printed at start: the endpoint, then `export` lines for a shell.
pub(crate) fn banner(emulator: &Emulator, region: &str, image: &str) -> String {
    format!(
        "rayito emulator listening on {url}\n\
         export AWS_ENDPOINT_URL={url}\n\
         export AWS_ACCESS_KEY_ID=test\n\
         export AWS_SECRET_ACCESS_KEY=test\n\
         export AWS_REGION={region}\n\
         export RAYITO_TEMPLATE={arn}\n",
        url = emulator.endpoint_url(),
        arn = emulator.image_arn(image),
    )
}

async fn stop_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = ctrl_c.await;
        }
    }
}

/// Runs the `emulator` subcommand (`args` are the words after it) on its own
/// runtime; returns the process exit code (0 after a clean stop, 2 for bad
/// arguments, 1 when the emulator cannot start).
pub fn run(args: &[String]) -> i32 {
    match tokio::runtime::Runtime::new() {
        Ok(rt) => rt.block_on(run_async(args)),
        Err(e) => {
            eprintln!("rayito-agent emulator: cannot start a runtime: {e}");
            1
        }
    }
}

async fn run_async(args: &[String]) -> i32 {
    let config = match parse(args) {
        Ok(c) => c,
        Err(msg) => {
            if !msg.is_empty() {
                eprintln!("rayito-agent emulator: {msg}");
            }
            eprintln!("{USAGE}");
            return 2;
        }
    };
    let region = config.region.clone();
    let image = config.images.first().cloned().unwrap_or_default();
    let emulator = match Emulator::start(config).await {
        Ok(e) => e,
        Err(e) => {
            eprintln!("rayito-agent emulator: cannot start: {e}");
            return 1;
        }
    };
    print!("{}", banner(&emulator, &region, &image));
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    stop_signal().await;
    emulator.shutdown().await;
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_flags_and_refuses_unknown_ones() {
        let c = parse(&args(
            "--addr 127.0.0.1:5000 --region eu-west-1 --image a --image b",
        ))
        .unwrap();
        assert_eq!(c.addr.to_string(), "127.0.0.1:5000");
        assert_eq!(c.region, "eu-west-1");
        assert_eq!(c.images, ["a", "b"]);
        assert_eq!(parse(&args("")).unwrap().addr.to_string(), "127.0.0.1:4566");
        assert_eq!(
            parse(&args("--bogus")).unwrap_err(),
            "unknown argument --bogus"
        );
        assert_eq!(parse(&args("--addr")).unwrap_err(), "--addr needs a value");
    }
}
